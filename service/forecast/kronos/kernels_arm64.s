//go:build arm64 && !purego

#include "textflag.h"

// Go's arm64 assembler has fused multiply-add (VFMLA) but no float
// addition, so the lane sums use these encodings of FADDP.
//
// FADDP4(d, n, m) is FADDP Vd.4S, Vn.4S, Vm.4S:
// Vd = [n0+n1, n2+n3, m0+m1, m2+m3].
#define FADDP4(d, n, m) WORD $(0x6e20d400 | (m)<<16 | (n)<<5 | (d))

// FADDP2(d, n) is FADDP Sd, Vn.2S: Sd = n0+n1.
#define FADDP2(d, n) WORD $(0x7e30d800 | (n)<<5 | (d))

// func dotAsm(a, b *float32, n int) float32
// n is a multiple of 4. One accumulator of four lanes, summed
// (l0+l1)+(l2+l3): the order of dot4Asm and dot4x3Asm, so a product has
// the same bits whichever kernel computes it, and a row's result does
// not depend on how many rows run with it.
TEXT ·dotAsm(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	VEOR V0.B16, V0.B16, V0.B16

loop4:
	VLD1.P 16(R0), [V4.S4]
	VLD1.P 16(R1), [V16.S4]
	VFMLA  V4.S4, V16.S4, V0.S4
	SUBS   $4, R2, R2
	BNE    loop4

	FADDP4(4, 0, 0) // FADDP V4.4S, V0.4S, V0.4S: [l0+l1, l2+l3, …]
	FADDP2(4, 4)    // FADDP S4, V4.2S
	FMOVS F4, ret+24(FP)
	RET

// func dot4Asm(w, x0, x1, x2, x3 *float32, n int) (s0, s1, s2, s3 float32)
// n is a multiple of 4. One load of w feeds four rows, one accumulator
// each, summed as dotAsm sums.
TEXT ·dot4Asm(SB), NOSPLIT, $0-64
	MOVD w+0(FP), R0
	MOVD x0+8(FP), R1
	MOVD x1+16(FP), R2
	MOVD x2+24(FP), R3
	MOVD x3+32(FP), R4
	MOVD n+40(FP), R5
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16

loop4x4:
	VLD1.P 16(R0), [V16.S4]
	VLD1.P 16(R1), [V18.S4]
	VLD1.P 16(R2), [V20.S4]
	VLD1.P 16(R3), [V22.S4]
	VLD1.P 16(R4), [V24.S4]
	VFMLA  V16.S4, V18.S4, V0.S4
	VFMLA  V16.S4, V20.S4, V1.S4
	VFMLA  V16.S4, V22.S4, V2.S4
	VFMLA  V16.S4, V24.S4, V3.S4
	SUBS   $4, R5, R5
	BNE    loop4x4

	FADDP4(8, 0, 1)    // FADDP V8.4S, V0.4S, V1.4S
	FADDP4(9, 2, 3)    // FADDP V9.4S, V2.4S, V3.4S
	FADDP4(14, 8, 9)   // FADDP V14.4S, V8.4S, V9.4S: [s0, s1, s2, s3]
	MOVD $s0+48(FP), R7
	VST1 [V14.S4], (R7)
	RET

// func weightedRowsAsm(out, v, p *float32, rows, stride, n int)
// out[0:n] += Σ_j p[j]·v[j·stride : j·stride+n], n a multiple of 4,
// stride in floats, rows > 0. Columns go in blocks of 64 (sixteen
// accumulators), then what is left below 64 in one block each of 32,
// 16, 8 and 4 as its bits say; each block's sums stay in registers over
// all rows, p[j] broadcast to V31.
TEXT ·weightedRowsAsm(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD v+8(FP), R1
	MOVD p+16(FP), R2
	MOVD rows+24(FP), R3
	MOVD stride+32(FP), R4
	LSL  $2, R4, R4
	MOVD n+40(FP), R5

block64:
	CMP    $64, R5
	BLT    block32
	MOVD   R0, R6
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R6), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1   (R6), [V12.S4, V13.S4, V14.S4, V15.S4]
	MOVD   R1, R7
	MOVD   R2, R8
	MOVD   R3, R9

rows64:
	VLD1R.P 4(R8), [V31.S4]
	MOVD    R7, R10
	VLD1.P  64(R10), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P  64(R10), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA   V31.S4, V16.S4, V0.S4
	VFMLA   V31.S4, V17.S4, V1.S4
	VFMLA   V31.S4, V18.S4, V2.S4
	VFMLA   V31.S4, V19.S4, V3.S4
	VLD1.P  64(R10), [V24.S4, V25.S4, V26.S4, V27.S4]
	VFMLA   V31.S4, V20.S4, V4.S4
	VFMLA   V31.S4, V21.S4, V5.S4
	VFMLA   V31.S4, V22.S4, V6.S4
	VFMLA   V31.S4, V23.S4, V7.S4
	VLD1    (R10), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA   V31.S4, V24.S4, V8.S4
	VFMLA   V31.S4, V25.S4, V9.S4
	VFMLA   V31.S4, V26.S4, V10.S4
	VFMLA   V31.S4, V27.S4, V11.S4
	VFMLA   V31.S4, V16.S4, V12.S4
	VFMLA   V31.S4, V17.S4, V13.S4
	VFMLA   V31.S4, V18.S4, V14.S4
	VFMLA   V31.S4, V19.S4, V15.S4
	ADD     R4, R7
	SUBS    $1, R9
	BNE     rows64
	VST1.P  [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST1.P  [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	VST1.P  [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)
	VST1.P  [V12.S4, V13.S4, V14.S4, V15.S4], 64(R0)
	ADD     $256, R1
	SUB     $64, R5
	B       block64

block32:
	TBZ    $5, R5, block16
	MOVD   R0, R6
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1   (R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	MOVD   R1, R7
	MOVD   R2, R8
	MOVD   R3, R9

rows32:
	VLD1R.P 4(R8), [V31.S4]
	MOVD    R7, R10
	VLD1.P  64(R10), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1    (R10), [V20.S4, V21.S4, V22.S4, V23.S4]
	VFMLA   V31.S4, V16.S4, V0.S4
	VFMLA   V31.S4, V17.S4, V1.S4
	VFMLA   V31.S4, V18.S4, V2.S4
	VFMLA   V31.S4, V19.S4, V3.S4
	VFMLA   V31.S4, V20.S4, V4.S4
	VFMLA   V31.S4, V21.S4, V5.S4
	VFMLA   V31.S4, V22.S4, V6.S4
	VFMLA   V31.S4, V23.S4, V7.S4
	ADD     R4, R7
	SUBS    $1, R9
	BNE     rows32
	VST1.P  [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST1.P  [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	ADD     $128, R1

block16:
	TBZ  $4, R5, block8
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	MOVD R1, R7
	MOVD R2, R8
	MOVD R3, R9

rows16:
	VLD1R.P 4(R8), [V31.S4]
	VLD1    (R7), [V16.S4, V17.S4, V18.S4, V19.S4]
	VFMLA   V31.S4, V16.S4, V0.S4
	VFMLA   V31.S4, V17.S4, V1.S4
	VFMLA   V31.S4, V18.S4, V2.S4
	VFMLA   V31.S4, V19.S4, V3.S4
	ADD     R4, R7
	SUBS    $1, R9
	BNE     rows16
	VST1.P  [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	ADD     $64, R1

block8:
	TBZ  $3, R5, block4
	VLD1 (R0), [V0.S4, V1.S4]
	MOVD R1, R7
	MOVD R2, R8
	MOVD R3, R9

rows8:
	VLD1R.P 4(R8), [V31.S4]
	VLD1    (R7), [V16.S4, V17.S4]
	VFMLA   V31.S4, V16.S4, V0.S4
	VFMLA   V31.S4, V17.S4, V1.S4
	ADD     R4, R7
	SUBS    $1, R9
	BNE     rows8
	VST1.P  [V0.S4, V1.S4], 32(R0)
	ADD     $32, R1

block4:
	TBZ  $2, R5, done
	VLD1 (R0), [V0.S4]
	MOVD R1, R7
	MOVD R2, R8
	MOVD R3, R9

rows4:
	VLD1R.P 4(R8), [V31.S4]
	VLD1    (R7), [V16.S4]
	VFMLA   V31.S4, V16.S4, V0.S4
	ADD     R4, R7
	SUBS    $1, R9
	BNE     rows4
	VST1    [V0.S4], (R0)

done:
	RET

// func dot4x3Asm(w, x *float32, n int, res *[12]float32)
// res[3r+k] = x_r·w_k for four rows x_r of x and three rows w_k of w,
// each n long (a multiple of 4, not 0) and consecutive: twelve
// accumulators, V(3r+k) for res[3r+k], so the multiply-adds do not wait
// on each other, and seven loads for twelve of them.
TEXT ·dot4x3Asm(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R0
	MOVD x+8(FP), R4
	MOVD n+16(FP), R8
	MOVD res+24(FP), R9
	LSL  $2, R8, R10
	ADD  R10, R0, R1
	ADD  R10, R1, R2
	ADD  R10, R4, R5
	ADD  R10, R5, R6
	ADD  R10, R6, R7
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16

gemmLoop:
	VLD1.P 16(R0), [V12.S4]
	VLD1.P 16(R1), [V13.S4]
	VLD1.P 16(R2), [V14.S4]
	VLD1.P 16(R4), [V15.S4]
	VFMLA  V15.S4, V12.S4, V0.S4
	VFMLA  V15.S4, V13.S4, V1.S4
	VFMLA  V15.S4, V14.S4, V2.S4
	VLD1.P 16(R5), [V16.S4]
	VFMLA  V16.S4, V12.S4, V3.S4
	VFMLA  V16.S4, V13.S4, V4.S4
	VFMLA  V16.S4, V14.S4, V5.S4
	VLD1.P 16(R6), [V17.S4]
	VFMLA  V17.S4, V12.S4, V6.S4
	VFMLA  V17.S4, V13.S4, V7.S4
	VFMLA  V17.S4, V14.S4, V8.S4
	VLD1.P 16(R7), [V18.S4]
	VFMLA  V18.S4, V12.S4, V9.S4
	VFMLA  V18.S4, V13.S4, V10.S4
	VFMLA  V18.S4, V14.S4, V11.S4
	SUBS   $4, R8
	BNE    gemmLoop

	FADDP4(12, 0, 1)   // FADDP V12.4S, V0.4S, V1.4S
	FADDP4(13, 2, 3)   // FADDP V13.4S, V2.4S, V3.4S
	FADDP4(20, 12, 13) // FADDP V20.4S, V12.4S, V13.4S: res[0:4]
	FADDP4(14, 4, 5)   // FADDP V14.4S, V4.4S, V5.4S
	FADDP4(15, 6, 7)   // FADDP V15.4S, V6.4S, V7.4S
	FADDP4(21, 14, 15) // FADDP V21.4S, V14.4S, V15.4S: res[4:8]
	FADDP4(16, 8, 9)   // FADDP V16.4S, V8.4S, V9.4S
	FADDP4(17, 10, 11) // FADDP V17.4S, V10.4S, V11.4S
	FADDP4(22, 16, 17) // FADDP V22.4S, V16.4S, V17.4S: res[8:12]
	VST1 [V20.S4, V21.S4, V22.S4], (R9)
	RET
