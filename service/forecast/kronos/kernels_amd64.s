//go:build amd64 && !purego

#include "textflag.h"

// HSUM stores the sum of the eight lanes of Y (X its low half) at
// off(DX), using T.
#define HSUM(Y, X, T, off) \
	VEXTRACTF128 $1, Y, T \
	VADDPS T, X, X \
	VHADDPS X, X, X \
	VHADDPS X, X, X \
	MOVSS X, off(DX)

// func dotAsm(a, b *float32, n int) float32
// n is a multiple of 8. One accumulator of eight lanes and the same
// lane sum as dot4Asm and dot4x3Asm: a product has the same bits
// whichever kernel computes it, so a row's result does not depend on
// how many rows run with it.
TEXT ·dotAsm(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	XORQ AX, AX

loop8:
	CMPQ AX, CX
	JGE  sum
	VMOVUPS (SI)(AX*4), Y2
	VFMADD231PS (DI)(AX*4), Y2, Y0
	ADDQ $8, AX
	JMP  loop8

sum:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dot4Asm(w, x0, x1, x2, x3 *float32, n int) (s0, s1, s2, s3 float32)
// n is a multiple of 8. One load of w feeds four rows, one accumulator
// each, summed as dotAsm sums.
TEXT ·dot4Asm(SB), NOSPLIT, $0-64
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

// func weightedRowsAsm(out, v, p *float32, rows, stride, n int)
// out[0:n] += Σ_j p[j]·v[j·stride : j·stride+n], n a multiple of 8, stride
// in floats. Columns go in blocks of 64, 32, then 8, each block's sums
// held in registers over all rows.
TEXT ·weightedRowsAsm(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ p+16(FP), DX
	MOVQ rows+24(FP), R8
	MOVQ stride+32(FP), R9
	SHLQ $2, R9
	MOVQ n+40(FP), CX
	XORQ AX, AX

block64:
	MOVQ CX, R10
	SUBQ AX, R10
	CMPQ R10, $64
	JLT  block32
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	VMOVUPS 128(DI)(AX*4), Y4
	VMOVUPS 160(DI)(AX*4), Y5
	VMOVUPS 192(DI)(AX*4), Y6
	VMOVUPS 224(DI)(AX*4), Y7
	LEAQ (SI)(AX*4), R11
	XORQ BX, BX

rows64:
	CMPQ BX, R8
	JGE  store64
	VBROADCASTSS (DX)(BX*4), Y8
	VFMADD231PS (R11), Y8, Y0
	VFMADD231PS 32(R11), Y8, Y1
	VFMADD231PS 64(R11), Y8, Y2
	VFMADD231PS 96(R11), Y8, Y3
	VFMADD231PS 128(R11), Y8, Y4
	VFMADD231PS 160(R11), Y8, Y5
	VFMADD231PS 192(R11), Y8, Y6
	VFMADD231PS 224(R11), Y8, Y7
	ADDQ R9, R11
	INCQ BX
	JMP  rows64

store64:
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	VMOVUPS Y4, 128(DI)(AX*4)
	VMOVUPS Y5, 160(DI)(AX*4)
	VMOVUPS Y6, 192(DI)(AX*4)
	VMOVUPS Y7, 224(DI)(AX*4)
	ADDQ $64, AX
	JMP  block64

block32:
	CMPQ R10, $32
	JLT  block8
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	LEAQ (SI)(AX*4), R11
	XORQ BX, BX

rows32:
	CMPQ BX, R8
	JGE  store32
	VBROADCASTSS (DX)(BX*4), Y8
	VFMADD231PS (R11), Y8, Y0
	VFMADD231PS 32(R11), Y8, Y1
	VFMADD231PS 64(R11), Y8, Y2
	VFMADD231PS 96(R11), Y8, Y3
	ADDQ R9, R11
	INCQ BX
	JMP  rows32

store32:
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	ADDQ $32, AX
	MOVQ CX, R10
	SUBQ AX, R10

block8:
	CMPQ R10, $8
	JLT  done
	VMOVUPS (DI)(AX*4), Y0
	LEAQ (SI)(AX*4), R11
	XORQ BX, BX

rows8:
	CMPQ BX, R8
	JGE  store8
	VBROADCASTSS (DX)(BX*4), Y8
	VFMADD231PS (R11), Y8, Y0
	ADDQ R9, R11
	INCQ BX
	JMP  rows8

store8:
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	MOVQ CX, R10
	SUBQ AX, R10
	JMP  block8

done:
	VZEROUPPER
	RET

// The float32 exponential of eight lanes: e^x = 2^n · e^r with
// n = round(x·log2 e) and r = x − n·ln 2 (ln 2 in two parts, so r is
// exact), e^r by a degree-7 polynomial (1 + r + r²·p(r), the Cephes
// coefficients), 2^n built in the exponent bits. x is clamped to ±88.376
// first; about 1 ulp from the true value over that range.
DATA expHi<>+0(SB)/4, $0x42b0c0a5
DATA expHi<>+4(SB)/4, $0x42b0c0a5
DATA expHi<>+8(SB)/4, $0x42b0c0a5
DATA expHi<>+12(SB)/4, $0x42b0c0a5
DATA expHi<>+16(SB)/4, $0x42b0c0a5
DATA expHi<>+20(SB)/4, $0x42b0c0a5
DATA expHi<>+24(SB)/4, $0x42b0c0a5
DATA expHi<>+28(SB)/4, $0x42b0c0a5
GLOBL expHi<>(SB), RODATA|NOPTR, $32
DATA expLo<>+0(SB)/4, $0xc2b0c0a5
DATA expLo<>+4(SB)/4, $0xc2b0c0a5
DATA expLo<>+8(SB)/4, $0xc2b0c0a5
DATA expLo<>+12(SB)/4, $0xc2b0c0a5
DATA expLo<>+16(SB)/4, $0xc2b0c0a5
DATA expLo<>+20(SB)/4, $0xc2b0c0a5
DATA expLo<>+24(SB)/4, $0xc2b0c0a5
DATA expLo<>+28(SB)/4, $0xc2b0c0a5
GLOBL expLo<>(SB), RODATA|NOPTR, $32
DATA log2e<>+0(SB)/4, $0x3fb8aa3b
DATA log2e<>+4(SB)/4, $0x3fb8aa3b
DATA log2e<>+8(SB)/4, $0x3fb8aa3b
DATA log2e<>+12(SB)/4, $0x3fb8aa3b
DATA log2e<>+16(SB)/4, $0x3fb8aa3b
DATA log2e<>+20(SB)/4, $0x3fb8aa3b
DATA log2e<>+24(SB)/4, $0x3fb8aa3b
DATA log2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL log2e<>(SB), RODATA|NOPTR, $32
DATA half<>+0(SB)/4, $0x3f000000
DATA half<>+4(SB)/4, $0x3f000000
DATA half<>+8(SB)/4, $0x3f000000
DATA half<>+12(SB)/4, $0x3f000000
DATA half<>+16(SB)/4, $0x3f000000
DATA half<>+20(SB)/4, $0x3f000000
DATA half<>+24(SB)/4, $0x3f000000
DATA half<>+28(SB)/4, $0x3f000000
GLOBL half<>(SB), RODATA|NOPTR, $32
DATA one<>+0(SB)/4, $0x3f800000
DATA one<>+4(SB)/4, $0x3f800000
DATA one<>+8(SB)/4, $0x3f800000
DATA one<>+12(SB)/4, $0x3f800000
DATA one<>+16(SB)/4, $0x3f800000
DATA one<>+20(SB)/4, $0x3f800000
DATA one<>+24(SB)/4, $0x3f800000
DATA one<>+28(SB)/4, $0x3f800000
GLOBL one<>(SB), RODATA|NOPTR, $32
DATA ln2hi<>+0(SB)/4, $0x3f318000
DATA ln2hi<>+4(SB)/4, $0x3f318000
DATA ln2hi<>+8(SB)/4, $0x3f318000
DATA ln2hi<>+12(SB)/4, $0x3f318000
DATA ln2hi<>+16(SB)/4, $0x3f318000
DATA ln2hi<>+20(SB)/4, $0x3f318000
DATA ln2hi<>+24(SB)/4, $0x3f318000
DATA ln2hi<>+28(SB)/4, $0x3f318000
GLOBL ln2hi<>(SB), RODATA|NOPTR, $32
DATA ln2lo<>+0(SB)/4, $0xb95e8083
DATA ln2lo<>+4(SB)/4, $0xb95e8083
DATA ln2lo<>+8(SB)/4, $0xb95e8083
DATA ln2lo<>+12(SB)/4, $0xb95e8083
DATA ln2lo<>+16(SB)/4, $0xb95e8083
DATA ln2lo<>+20(SB)/4, $0xb95e8083
DATA ln2lo<>+24(SB)/4, $0xb95e8083
DATA ln2lo<>+28(SB)/4, $0xb95e8083
GLOBL ln2lo<>(SB), RODATA|NOPTR, $32
DATA p0<>+0(SB)/4, $0x39506967
DATA p0<>+4(SB)/4, $0x39506967
DATA p0<>+8(SB)/4, $0x39506967
DATA p0<>+12(SB)/4, $0x39506967
DATA p0<>+16(SB)/4, $0x39506967
DATA p0<>+20(SB)/4, $0x39506967
DATA p0<>+24(SB)/4, $0x39506967
DATA p0<>+28(SB)/4, $0x39506967
GLOBL p0<>(SB), RODATA|NOPTR, $32
DATA p1<>+0(SB)/4, $0x3ab743ce
DATA p1<>+4(SB)/4, $0x3ab743ce
DATA p1<>+8(SB)/4, $0x3ab743ce
DATA p1<>+12(SB)/4, $0x3ab743ce
DATA p1<>+16(SB)/4, $0x3ab743ce
DATA p1<>+20(SB)/4, $0x3ab743ce
DATA p1<>+24(SB)/4, $0x3ab743ce
DATA p1<>+28(SB)/4, $0x3ab743ce
GLOBL p1<>(SB), RODATA|NOPTR, $32
DATA p2<>+0(SB)/4, $0x3c088908
DATA p2<>+4(SB)/4, $0x3c088908
DATA p2<>+8(SB)/4, $0x3c088908
DATA p2<>+12(SB)/4, $0x3c088908
DATA p2<>+16(SB)/4, $0x3c088908
DATA p2<>+20(SB)/4, $0x3c088908
DATA p2<>+24(SB)/4, $0x3c088908
DATA p2<>+28(SB)/4, $0x3c088908
GLOBL p2<>(SB), RODATA|NOPTR, $32
DATA p3<>+0(SB)/4, $0x3d2aa9c1
DATA p3<>+4(SB)/4, $0x3d2aa9c1
DATA p3<>+8(SB)/4, $0x3d2aa9c1
DATA p3<>+12(SB)/4, $0x3d2aa9c1
DATA p3<>+16(SB)/4, $0x3d2aa9c1
DATA p3<>+20(SB)/4, $0x3d2aa9c1
DATA p3<>+24(SB)/4, $0x3d2aa9c1
DATA p3<>+28(SB)/4, $0x3d2aa9c1
GLOBL p3<>(SB), RODATA|NOPTR, $32
DATA p4<>+0(SB)/4, $0x3e2aaaaa
DATA p4<>+4(SB)/4, $0x3e2aaaaa
DATA p4<>+8(SB)/4, $0x3e2aaaaa
DATA p4<>+12(SB)/4, $0x3e2aaaaa
DATA p4<>+16(SB)/4, $0x3e2aaaaa
DATA p4<>+20(SB)/4, $0x3e2aaaaa
DATA p4<>+24(SB)/4, $0x3e2aaaaa
DATA p4<>+28(SB)/4, $0x3e2aaaaa
GLOBL p4<>(SB), RODATA|NOPTR, $32
DATA p5<>+0(SB)/4, $0x3f000000
DATA p5<>+4(SB)/4, $0x3f000000
DATA p5<>+8(SB)/4, $0x3f000000
DATA p5<>+12(SB)/4, $0x3f000000
DATA p5<>+16(SB)/4, $0x3f000000
DATA p5<>+20(SB)/4, $0x3f000000
DATA p5<>+24(SB)/4, $0x3f000000
DATA p5<>+28(SB)/4, $0x3f000000
GLOBL p5<>(SB), RODATA|NOPTR, $32
DATA bias<>+0(SB)/4, $0x0000007f
DATA bias<>+4(SB)/4, $0x0000007f
DATA bias<>+8(SB)/4, $0x0000007f
DATA bias<>+12(SB)/4, $0x0000007f
DATA bias<>+16(SB)/4, $0x0000007f
DATA bias<>+20(SB)/4, $0x0000007f
DATA bias<>+24(SB)/4, $0x0000007f
DATA bias<>+28(SB)/4, $0x0000007f
GLOBL bias<>(SB), RODATA|NOPTR, $32

// EXP8 replaces the eight lanes of Y0 with their exponentials, using
// Y1, Y2 and Y3.
#define EXP8 \
	VMINPS expHi<>(SB), Y0, Y0 \
	VMAXPS expLo<>(SB), Y0, Y0 \
	VMULPS log2e<>(SB), Y0, Y1 \
	VADDPS half<>(SB), Y1, Y1 \
	VROUNDPS $1, Y1, Y1 \
	VFNMADD231PS ln2hi<>(SB), Y1, Y0 \
	VFNMADD231PS ln2lo<>(SB), Y1, Y0 \
	VMULPS Y0, Y0, Y3 \
	VMOVUPS p0<>(SB), Y2 \
	VFMADD213PS p1<>(SB), Y0, Y2 \
	VFMADD213PS p2<>(SB), Y0, Y2 \
	VFMADD213PS p3<>(SB), Y0, Y2 \
	VFMADD213PS p4<>(SB), Y0, Y2 \
	VFMADD213PS p5<>(SB), Y0, Y2 \
	VFMADD213PS Y0, Y3, Y2 \
	VADDPS one<>(SB), Y2, Y2 \
	VCVTTPS2DQ Y1, Y1 \
	VPADDD bias<>(SB), Y1, Y1 \
	VPSLLD $23, Y1, Y1 \
	VMULPS Y1, Y2, Y0

// func expShiftAVX2(x *float32, n int, shift float32) float32
// x[i] = e^(x[i]−shift) for i < n, n a multiple of 8; returns their sum.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS shift+16(FP), Y5
	VXORPS Y6, Y6, Y6
	XORQ AX, AX

expLoop:
	CMPQ AX, CX
	JGE  expDone
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS Y5, Y0, Y0
	EXP8
	VMOVUPS Y0, (SI)(AX*4)
	VADDPS Y0, Y6, Y6
	ADDQ $8, AX
	JMP  expLoop

expDone:
	VEXTRACTF128 $1, Y6, X1
	VADDPS       X1, X6, X6
	VHADDPS      X6, X6, X6
	VHADDPS      X6, X6, X6
	VZEROUPPER
	MOVSS X6, ret+24(FP)
	RET

// func swigluAVX2(a, b *float32, n int)
// a[i] = a[i]/(1+e^(−a[i]))·b[i] (silu(a)·b) for i < n, n a multiple of 8;
// 0 where a[i] < −88.376, past which e^(−a[i]) overflows.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-24
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	XORQ AX, AX

swiLoop:
	CMPQ AX, CX
	JGE  swiDone
	VMOVUPS (SI)(AX*4), Y4
	VXORPS Y0, Y0, Y0
	VSUBPS Y4, Y0, Y0
	EXP8
	VADDPS one<>(SB), Y0, Y0
	VCMPPS $1, expLo<>(SB), Y4, Y5
	VDIVPS Y0, Y4, Y4
	VANDNPS Y4, Y5, Y4
	VMULPS (DI)(AX*4), Y4, Y4
	VMOVUPS Y4, (SI)(AX*4)
	ADDQ $8, AX
	JMP  swiLoop

swiDone:
	VZEROUPPER
	RET

// func dot4x3Asm(w, x *float32, n int, res *[12]float32)
// res[3r+k] = x_r·w_k for four rows x_r of x and three rows w_k of w,
// each n long (a multiple of 8) and consecutive: twelve accumulators, so
// the fused multiply-adds do not wait on each other, and seven loads for
// twelve of them.
TEXT ·dot4x3Asm(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), R8
	MOVQ n+16(FP), CX
	MOVQ res+24(FP), DX
	MOVQ CX, BX
	SHLQ $2, BX
	LEAQ (SI)(BX*1), R12
	LEAQ (R12)(BX*1), R13
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	LEAQ (R10)(BX*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	XORQ AX, AX

gemmLoop:
	CMPQ AX, CX
	JGE  gemmDone
	VMOVUPS (SI)(AX*4), Y12
	VMOVUPS (R12)(AX*4), Y13
	VMOVUPS (R13)(AX*4), Y14
	VMOVUPS (R8)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y1
	VFMADD231PS Y15, Y14, Y2
	VMOVUPS (R9)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y5
	VMOVUPS (R10)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y6
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS (R11)(AX*4), Y15
	VFMADD231PS Y15, Y12, Y9
	VFMADD231PS Y15, Y13, Y10
	VFMADD231PS Y15, Y14, Y11
	ADDQ $8, AX
	JMP  gemmLoop

gemmDone:
	HSUM(Y0, X0, X12, 0)
	HSUM(Y1, X1, X12, 4)
	HSUM(Y2, X2, X12, 8)
	HSUM(Y3, X3, X12, 12)
	HSUM(Y4, X4, X12, 16)
	HSUM(Y5, X5, X12, 20)
	HSUM(Y6, X6, X12, 24)
	HSUM(Y7, X7, X12, 28)
	HSUM(Y8, X8, X12, 32)
	HSUM(Y9, X9, X12, 36)
	HSUM(Y10, X10, X12, 40)
	HSUM(Y11, X11, X12, 44)
	VZEROUPPER
	RET
