//go:build (!amd64 && !arm64) || purego

package kronos

// useAsm is false: this build has the portable kernels only.
const useAsm = false

// asmKernels names the assembly kernels, for the tests' log: none.
const asmKernels = "none"

// dot returns a·b over len(a) (the portable kernel).
func dot(a, b []float32) float32 { return dotGo(a, b) }

// dot4 returns w·x0, w·x1, w·x2, w·x3 (the portable kernel).
func dot4(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) { return dot4Go(w, x0, x1, x2, x3) }

// weightedRows adds Σ_j p[j]·v[j·stride : j·stride+len(out)] into out
// (the portable kernel).
func weightedRows(out, v, p []float32, stride int) { weightedRowsGo(out, v, p, stride) }

// expShift replaces each x[i] with e^(x[i]−shift) and returns their sum
// (the portable kernel).
func expShift(x []float32, shift float32) float32 { return expShiftGo(x, shift) }

// swiglu writes silu(a)·b into a (the portable kernel).
func swiglu(a, b []float32) { swigluGo(a, b) }

// dot4x3 sets res[3r+k] = x_r·w_k for the four rows x_r of x and the
// three rows w_k of w, each n long and consecutive (the portable kernel).
func dot4x3(w, x []float32, n int, res *[12]float32) { dot4x3Rows(w, x, n, res) }
