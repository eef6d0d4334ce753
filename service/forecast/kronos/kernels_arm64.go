//go:build arm64 && !purego

package kronos

import "golang.org/x/sys/cpu"

// useNEON selects the NEON kernels (kernels_arm64.s), which every arm64
// CPU can run (ASIMD is part of the base architecture); under the purego
// build tag the portable ones run. The exponential of softmax and SwiGLU
// stay portable here: Go's arm64 assembler has no mnemonics for the
// float arithmetic they need beyond the multiply-add.
var useNEON = cpu.ARM64.HasASIMD

// useAVX2 is false: AVX2/FMA is amd64's.
const useAVX2 = false

//go:noescape
func dotNEON(a, b *float32, n int) float32

//go:noescape
func dot4NEON(w, x0, x1, x2, x3 *float32, n int) (s0, s1, s2, s3 float32)

//go:noescape
func weightedRowsNEON(out, v, p *float32, rows, stride, n int)

//go:noescape
func dot4x3NEON(w, x *float32, n int, res *[12]float32)

// dot returns a·b over len(a): four lanes of fused multiply-adds for the
// multiples of 4, the rest one by one.
func dot(a, b []float32) float32 {
	n := len(a)
	if !useNEON || n < 4 {
		return dotGo(a, b)
	}
	b = b[:n]
	n4 := n &^ 3
	s := dotNEON(&a[0], &b[0], n4)
	for i := n4; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// dot4 returns w·x0, w·x1, w·x2, w·x3: one pass over w for four rows.
func dot4(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	n := len(w)
	if !useNEON || n < 4 {
		return dot4Go(w, x0, x1, x2, x3)
	}
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	n4 := n &^ 3
	s0, s1, s2, s3 = dot4NEON(&w[0], &x0[0], &x1[0], &x2[0], &x3[0], n4)
	for i := n4; i < n; i++ {
		a := w[i]
		s0 += a * x0[i]
		s1 += a * x1[i]
		s2 += a * x2[i]
		s3 += a * x3[i]
	}
	return s0, s1, s2, s3
}

// weightedRows adds Σ_j p[j]·v[j·stride : j·stride+len(out)] into out:
// the multiples of 4 columns in registers across all rows, the rest one
// by one.
func weightedRows(out, v, p []float32, stride int) {
	n, rows := len(out), len(p)
	if !useNEON || n < 4 || rows == 0 {
		weightedRowsGo(out, v, p, stride)
		return
	}
	_ = v[(rows-1)*stride+n-1]
	n4 := n &^ 3
	weightedRowsNEON(&out[0], &v[0], &p[0], rows, stride, n4)
	for j, pj := range p {
		vj := v[j*stride+n4 : j*stride+n]
		for i, x := range vj {
			out[n4+i] += pj * x
		}
	}
}

// expShift replaces each x[i] with e^(x[i]−shift) and returns their sum
// (the portable kernel).
func expShift(x []float32, shift float32) float32 { return expShiftGo(x, shift) }

// swiglu writes silu(a)·b into a (the portable kernel).
func swiglu(a, b []float32) { swigluGo(a, b) }

// dot4x3 sets res[3r+k] = x_r·w_k for the four rows x_r of x and the
// three rows w_k of w, each n long and consecutive: a register-blocked
// kernel when n is a multiple of 4, else three passes of dot4.
func dot4x3(w, x []float32, n int, res *[12]float32) {
	if !useNEON || n%4 != 0 || n == 0 {
		dot4x3Go(w, x, n, res)
		return
	}
	_, _ = w[3*n-1], x[4*n-1]
	dot4x3NEON(&w[0], &x[0], n, res)
}
