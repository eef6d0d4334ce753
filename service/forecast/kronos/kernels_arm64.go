//go:build arm64 && !purego

package kronos

import "golang.org/x/sys/cpu"

// useAsm selects the NEON kernels (kernels_arm64.s), which every arm64
// CPU can run (ASIMD is part of the base architecture); under the purego
// build tag the portable ones run.
var useAsm = cpu.ARM64.HasASIMD

// lanes is how many float32 one NEON register holds.
const lanes = 4

// asmKernels names the assembly kernels, for the tests' log.
const asmKernels = "NEON"

// expShift replaces each x[i] with e^(x[i]−shift) and returns their sum
// (the portable kernel: Go's arm64 assembler has no mnemonics for the
// float arithmetic an exponential needs beyond the multiply-add).
func expShift(x []float32, shift float32) float32 { return expShiftGo(x, shift) }

// swiglu writes silu(a)·b into a (the portable kernel, for the same
// reason).
func swiglu(a, b []float32) { swigluGo(a, b) }
