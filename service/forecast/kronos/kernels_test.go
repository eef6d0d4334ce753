package kronos

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKernels: the kernels in use (AVX2/FMA on an amd64 CPU that has
// them, NEON on arm64, else the portable ones) agree with the portable
// kernels, their oracle, on random lengths and values, the tails past a
// multiple of 8 (4 on arm64) included.
func TestKernels(t *testing.T) {
	t.Parallel()
	vec := normals(rand.New(rand.NewPCG(7, 8)))
	close := func(got, want float32, n int) bool {
		// Other summation orders and fused roundings: within a few ulps
		// of the sum's magnitude.
		return math.Abs(float64(got-want)) <= 1e-5*math.Sqrt(float64(n))*max(1, math.Abs(float64(want)))
	}
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 64, 100, 255, 256, 257, 832, 2048, 2049} {
		w, x0, x1, x2, x3 := vec(n), vec(n), vec(n), vec(n), vec(n)
		if got, want := dot(w, x0), dotGo(w, x0); !close(got, want, n) {
			t.Errorf("n=%d: dot %v, portable %v", n, got, want)
		}
		g0, g1, g2, g3 := dot4(w, x0, x1, x2, x3)
		w0, w1, w2, w3 := dot4Go(w, x0, x1, x2, x3)
		for i, p := range [][2]float32{{g0, w0}, {g1, w1}, {g2, w2}, {g3, w3}} {
			if !close(p[0], p[1], n) {
				t.Errorf("n=%d: dot4[%d] %v, portable %v", n, i, p[0], p[1])
			}
		}
	}
	// The linear layers' register-blocked kernel: four input rows
	// against three weight rows.
	for _, n := range []int{1, 6, 8, 12, 64, 256, 832, 1024} {
		w, x := vec(3*n), vec(4*n)
		var got, want [12]float32
		dot4x3(w, x, n, &got)
		dot4x3Rows(w, x, n, &want)
		for i := range got {
			if !close(got[i], want[i], n) {
				t.Errorf("n=%d: dot4x3[%d] %v, three dot4 %v", n, i, got[i], want[i])
			}
		}
	}
	// Attention's weighted sum of value rows: one head's columns of rows
	// of the model's width, the heads' widths of the published models
	// (64, and 52 for Kronos-base) and others (124 runs each of the NEON
	// kernel's column blocks, 64+32+16+8+4; 6 and 67 leave a tail).
	for _, n := range []int{1, 4, 6, 8, 12, 32, 40, 52, 64, 67, 72, 100, 124, 136} {
		for _, rows := range []int{1, 3, 17, 464} {
			stride := n + 3*rows%5
			v, p := vec((rows-1)*stride+n), vec(rows)
			got, want := vec(n), make([]float32, n)
			copy(want, got)
			weightedRows(got, v, p, stride)
			weightedRowsGo(want, v, p, stride)
			for i := range got {
				if !close(got[i], want[i], rows) {
					t.Errorf("n=%d rows=%d: weightedRows[%d] %v, portable %v", n, rows, i, got[i], want[i])
					break
				}
			}
		}
	}
	// Softmax's exponentials and SwiGLU: random values over the range
	// they see, and the edges where the exponential underflows or
	// overflows.
	edges := []float32{0, -1e-8, 1e-8, -1, 1, -10, -50, -87, -88.3, -88.4, -88.8, -100, -1e30, 20, 87, 88.3, 88.8, 100}
	for _, n := range []int{1, 7, 8, 9, 24, 100, 1024, 1025} {
		x := vec(n)
		for i := range x {
			x[i] *= 20
		}
		copy(x, edges)
		got, want := append([]float32(nil), x...), append([]float32(nil), x...)
		// Shift by 0: the edges are what the kernel sees.
		gs, ws := expShift(got, 0), expShiftGo(want, 0)
		for i := range got {
			if !nearExp(got[i], want[i]) {
				t.Errorf("n=%d: e^%v: kernel %v, math.Exp %v", n, x[i], got[i], want[i])
			}
		}
		if !nearExp(gs, ws) && !(math.IsInf(float64(gs), 1) && math.IsInf(float64(ws), 1)) {
			t.Errorf("n=%d: sum of exponentials %v, portable %v", n, gs, ws)
		}
		b := vec(n)
		got, want = append([]float32(nil), x...), append([]float32(nil), x...)
		swiglu(got, b)
		swigluGo(want, b)
		for i := range got {
			if !nearExp(got[i], want[i]) {
				t.Errorf("n=%d: silu(%v)·%v: kernel %v, portable %v", n, x[i], b[i], got[i], want[i])
			}
		}
	}
	t.Logf("assembly kernels (%s) in use: %v", asmKernels, useAsm)
}

// nearExp: within 4 ulps (relative 5e-7), or both below 1e-36 (where
// the kernel's clamped exponential parts from math.Exp's), or the same
// infinity.
func nearExp(got, want float32) bool {
	g, w := float64(got), float64(want)
	if math.Abs(g) < 1e-36 && math.Abs(w) < 1e-36 {
		return true
	}
	if math.IsInf(w, 0) || math.IsInf(g, 0) {
		return g == w || math.Abs(g) > 1e38 && math.Abs(w) > 1e38 && (g > 0) == (w > 0)
	}
	return math.Abs(g-w) <= 5e-7*math.Abs(w)
}

// TestKernelsAgreeBitwise: dot, dot4 (either way round) and dot4x3 give
// a product the same bits, on every length: a row's result must not
// depend on how many rows run with it, or on which of them it is (the
// linear layers take rows four at a time, the leftovers one by one, and
// TestKronosHorizonPrefix in package service relies on it).
func TestKernelsAgreeBitwise(t *testing.T) {
	t.Parallel()
	vec := normals(rand.New(rand.NewPCG(9, 10)))
	for n := 1; n <= 70; n++ {
		w, x := vec(3*n), vec(4*n)
		var res [12]float32
		dot4x3(w, x, n, &res)
		for k := range 3 {
			wk := w[k*n : (k+1)*n]
			s0, s1, s2, s3 := dot4(wk, x[:n], x[n:2*n], x[2*n:3*n], x[3*n:])
			for r, s := range []float32{s0, s1, s2, s3} {
				xr := x[r*n : (r+1)*n]
				alone := dot(wk, xr)
				swapped, _, _, _ := dot4(xr, wk, wk, wk, wk)
				if s != alone || s != swapped || s != res[3*r+k] {
					t.Fatalf("n=%d row %d weight %d: dot4 %v, dot %v, dot4 swapped %v, dot4x3 %v", n, r, k, s, alone, swapped, res[3*r+k])
				}
			}
		}
	}
}

// normals returns a maker of vectors of n standard normal float32s drawn
// from rng.
func normals(rng *rand.Rand) func(n int) []float32 {
	return func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
}
