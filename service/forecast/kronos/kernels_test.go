package kronos

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestKernels: the kernels in use (AVX2/FMA on a CPU that has them,
// else the portable ones) agree with the portable kernels, their oracle,
// on random lengths and values, the tails past a multiple of 8 included.
func TestKernels(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
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
	// Attention's weighted sum of value rows: one head's columns of rows
	// of the model's width, the heads' widths of the published models
	// (64, and 52 for Kronos-base) and others.
	for _, n := range []int{1, 4, 8, 12, 32, 40, 52, 64, 72, 100, 136} {
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
	t.Logf("AVX2/FMA kernels in use: %v", useAVX2)
}
