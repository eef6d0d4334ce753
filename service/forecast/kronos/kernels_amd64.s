//go:build amd64 && !purego

#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
// n is a multiple of 8. Two accumulators of eight lanes.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-16, DX

loop16:
	CMPQ AX, DX
	JGE  tail8
	VMOVUPS (SI)(AX*4), Y2
	VMOVUPS 32(SI)(AX*4), Y3
	VFMADD231PS (DI)(AX*4), Y2, Y0
	VFMADD231PS 32(DI)(AX*4), Y3, Y1
	ADDQ $16, AX
	JMP  loop16

tail8:
	CMPQ AX, CX
	JGE  sum
	VMOVUPS (SI)(AX*4), Y2
	VFMADD231PS (DI)(AX*4), Y2, Y0
	ADDQ $8, AX

sum:
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dot4AVX2(w, x0, x1, x2, x3 *float32, n int) (s0, s1, s2, s3 float32)
// n is a multiple of 8. One load of w feeds four rows.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ n+40(FP), CX
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE  done
	VMOVUPS (SI)(AX*4), Y0
	VFMADD231PS (R8)(AX*4), Y0, Y1
	VFMADD231PS (R9)(AX*4), Y0, Y2
	VFMADD231PS (R10)(AX*4), Y0, Y3
	VFMADD231PS (R11)(AX*4), Y0, Y4
	ADDQ $8, AX
	JMP  loop

done:
	VEXTRACTF128 $1, Y1, X5
	VADDPS       X5, X1, X1
	VHADDPS      X1, X1, X1
	VHADDPS      X1, X1, X1
	VEXTRACTF128 $1, Y2, X5
	VADDPS       X5, X2, X2
	VHADDPS      X2, X2, X2
	VHADDPS      X2, X2, X2
	VEXTRACTF128 $1, Y3, X5
	VADDPS       X5, X3, X3
	VHADDPS      X3, X3, X3
	VHADDPS      X3, X3, X3
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VHADDPS      X4, X4, X4
	VHADDPS      X4, X4, X4
	VZEROUPPER
	MOVSS X1, s0+48(FP)
	MOVSS X2, s1+52(FP)
	MOVSS X3, s2+56(FP)
	MOVSS X4, s3+60(FP)
	RET
