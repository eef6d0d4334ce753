//go:build amd64 && !purego

package kronos

import "golang.org/x/sys/cpu"

// useAVX2 selects the AVX2/FMA kernels (kernels_amd64.s) on a CPU that
// has both; elsewhere, and under the purego build tag, the portable ones
// run.
var useAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// useNEON is false: NEON is arm64's.
const useNEON = false

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func dot4AVX2(w, x0, x1, x2, x3 *float32, n int) (s0, s1, s2, s3 float32)

//go:noescape
func weightedRowsAVX2(out, v, p *float32, rows, stride, n int)

//go:noescape
func dot4x3AVX2(w, x *float32, n int, res *[12]float32)

//go:noescape
func expShiftAVX2(x *float32, n int, shift float32) float32

//go:noescape
func swigluAVX2(a, b *float32, n int)

// dot returns a·b over len(a): eight lanes of fused multiply-adds for
// the multiples of 8, the rest one by one.
func dot(a, b []float32) float32 {
	n := len(a)
	if !useAVX2 || n < 8 {
		return dotGo(a, b)
	}
	b = b[:n]
	n8 := n &^ 7
	s := dotAVX2(&a[0], &b[0], n8)
	for i := n8; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// dot4 returns w·x0, w·x1, w·x2, w·x3: one pass over w for four rows.
func dot4(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	n := len(w)
	if !useAVX2 || n < 8 {
		return dot4Go(w, x0, x1, x2, x3)
	}
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	n8 := n &^ 7
	s0, s1, s2, s3 = dot4AVX2(&w[0], &x0[0], &x1[0], &x2[0], &x3[0], n8)
	for i := n8; i < n; i++ {
		a := w[i]
		s0 += a * x0[i]
		s1 += a * x1[i]
		s2 += a * x2[i]
		s3 += a * x3[i]
	}
	return s0, s1, s2, s3
}

// weightedRows adds Σ_j p[j]·v[j·stride : j·stride+len(out)] into out:
// the multiples of 8 columns in registers across all rows, the rest one
// by one.
func weightedRows(out, v, p []float32, stride int) {
	n, rows := len(out), len(p)
	if !useAVX2 || n < 8 || rows == 0 {
		weightedRowsGo(out, v, p, stride)
		return
	}
	_ = v[(rows-1)*stride+n-1]
	n8 := n &^ 7
	weightedRowsAVX2(&out[0], &v[0], &p[0], rows, stride, n8)
	for j, pj := range p {
		vj := v[j*stride+n8 : j*stride+n]
		for i, x := range vj {
			out[n8+i] += pj * x
		}
	}
}

// expShift replaces each x[i] with e^(x[i]−shift) and returns their sum:
// eight lanes at a time by a polynomial within about an ulp of the true
// exponential, the rest by math.Exp.
func expShift(x []float32, shift float32) float32 {
	if !useAVX2 || len(x) < 8 {
		return expShiftGo(x, shift)
	}
	n8 := len(x) &^ 7
	return expShiftAVX2(&x[0], n8, shift) + expShiftGo(x[n8:], shift)
}

// swiglu writes silu(a)·b into a, eight lanes at a time with expShift's
// exponential.
func swiglu(a, b []float32) {
	if !useAVX2 || len(a) < 8 {
		swigluGo(a, b)
		return
	}
	b = b[:len(a)]
	n8 := len(a) &^ 7
	swigluAVX2(&a[0], &b[0], n8)
	swigluGo(a[n8:], b[n8:])
}

// dot4x3 sets res[3r+k] = x_r·w_k for the four rows x_r of x and the
// three rows w_k of w, each n long and consecutive: a register-blocked
// kernel when n is a multiple of 8, else three passes of dot4.
func dot4x3(w, x []float32, n int, res *[12]float32) {
	if !useAVX2 || n%8 != 0 || n == 0 {
		dot4x3Go(w, x, n, res)
		return
	}
	_, _ = w[3*n-1], x[4*n-1]
	dot4x3AVX2(&w[0], &x[0], n, res)
}
