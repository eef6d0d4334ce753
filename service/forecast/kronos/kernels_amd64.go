//go:build amd64 && !purego

package kronos

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2/FMA kernels (kernels_amd64.s) on a CPU that
// has both; elsewhere, and under the purego build tag, the portable ones
// run.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// lanes is how many float32 one AVX2 register holds.
const lanes = 8

// asmKernels names the assembly kernels, for the tests' log.
const asmKernels = "AVX2/FMA"

//go:noescape
func expShiftAVX2(x *float32, n int, shift float32) float32

//go:noescape
func swigluAVX2(a, b *float32, n int)

// expShift replaces each x[i] with e^(x[i]−shift) and returns their sum:
// eight lanes at a time by a polynomial within about an ulp of the true
// exponential, the rest by math.Exp.
func expShift(x []float32, shift float32) float32 {
	if !useAsm || len(x) < 8 {
		return expShiftGo(x, shift)
	}
	n8 := len(x) &^ 7
	return expShiftAVX2(&x[0], n8, shift) + expShiftGo(x[n8:], shift)
}

// swiglu writes silu(a)·b into a, eight lanes at a time with expShift's
// exponential.
func swiglu(a, b []float32) {
	if !useAsm || len(a) < 8 {
		swigluGo(a, b)
		return
	}
	b = b[:len(a)]
	n8 := len(a) &^ 7
	swigluAVX2(&a[0], &b[0], n8)
	swigluGo(a[n8:], b[n8:])
}
