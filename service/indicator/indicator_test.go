package indicator_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	talib "github.com/markcheno/go-talib"

	"github.com/tollgate/tollgate/service/indicator"
)

// fixtures are the series the indicators are checked on: a realistic random
// walk, the edge cases of the issue (flat, monotone, short, gappy) and a few
// more (alternating, a spike, tiny prices).
func fixtures() map[string][]float64 {
	rng := rand.New(rand.NewPCG(8453, 720))
	walk := make([]float64, 720)
	walk[0] = 3400
	for i := 1; i < len(walk); i++ {
		walk[i] = walk[i-1] * math.Exp(rng.NormFloat64()*0.006)
	}
	up := make([]float64, 100)
	down := make([]float64, 100)
	alt := make([]float64, 60)
	for i := range up {
		up[i] = 100 + float64(i)*0.5
		down[i] = 200 - float64(i)*0.75
	}
	for i := range alt {
		alt[i] = 50 + float64(i%2)
	}
	// Gappy: a walk where missing buckets were filled with the last close
	// (runs of equal values) followed by a jump when trading resumed.
	gappy := slices.Clone(walk[:200])
	for _, gap := range [][2]int{{20, 27}, {90, 91}, {150, 180}} {
		for i := gap[0]; i < gap[1]; i++ {
			gappy[i] = gappy[gap[0]-1]
		}
		gappy[gap[1]] = gappy[gap[0]-1] * 1.03
	}
	spike := slices.Repeat([]float64{10}, 50)
	spike[25] = 1000
	tiny := make([]float64, 80)
	for i := range tiny {
		tiny[i] = 1e-6 * (1 + 0.01*math.Sin(float64(i)))
	}
	return map[string][]float64{
		"walk720": walk,
		"flat":    slices.Repeat([]float64{3400.5}, 100),
		"up":      up,
		"down":    down,
		"alt":     alt,
		"gappy":   gappy,
		"spike":   spike,
		"tiny":    tiny,
		"short9":  walk[:9],
		"short10": walk[:10],
		"short14": walk[:14],
		"short15": walk[:15],
		"short30": walk[:30],
		"one":     walk[:1],
		"empty":   nil,
	}
}

// TestAgainstTALib compares EMA(10), EMA(30) and RSI(14) with go-talib,
// an independent implementation of TA-Lib, to 1e-9 wherever TA-Lib defines
// a value; where it does not (the lookback) ours is NaN.
func TestAgainstTALib(t *testing.T) {
	t.Parallel()
	for name, x := range fixtures() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, n := range []int{10, 30} {
				compare(t, "EMA", n, x, indicator.EMA(x, n), talib.Ema, n-1)
			}
			compare(t, "RSI", 14, x, indicator.RSI(x, 14), talib.Rsi, 14)
		})
	}
}

func compare(t *testing.T, name string, n int, x, got []float64, ref func([]float64, int) []float64, lookback int) {
	t.Helper()
	if len(got) != len(x) {
		t.Fatalf("%s(%d): len %d, want %d", name, n, len(got), len(x))
	}
	var want []float64
	if len(x) > lookback {
		want = ref(x, n)
	}
	for i := range x {
		if i < lookback || len(x) <= lookback {
			if !math.IsNaN(got[i]) {
				t.Errorf("%s(%d)[%d] = %v inside the lookback, want NaN", name, n, i, got[i])
			}
			continue
		}
		if d := math.Abs(got[i] - want[i]); d > 1e-9*math.Max(1, math.Abs(want[i])) {
			t.Errorf("%s(%d)[%d] = %.15g, TA-Lib %.15g (diff %g)", name, n, i, got[i], want[i], d)
		}
	}
}

// TestTails: the tail variants are the last values of the full series.
func TestTails(t *testing.T) {
	t.Parallel()
	for name, x := range fixtures() {
		for _, k := range []int{1, 4, 25} {
			for _, n := range []int{10, 30} {
				full, tail := indicator.EMA(x, n), indicator.EMATail(x, n, k)
				sameTail(t, name+" EMA", full, tail)
			}
			sameTail(t, name+" RSI", indicator.RSI(x, 14), indicator.RSITail(x, 14, k))
		}
	}
}

func sameTail(t *testing.T, name string, full, tail []float64) {
	t.Helper()
	for j := range tail {
		i := len(full) - len(tail) + j
		want := math.NaN()
		if i >= 0 {
			want = full[i]
		}
		if !(tail[j] == want || math.IsNaN(tail[j]) && math.IsNaN(want)) {
			t.Errorf("%s: tail[%d] = %v, full[%d] = %v", name, j, tail[j], i, want)
		}
	}
}

func TestRSIFlatIsZeroAsTALib(t *testing.T) {
	t.Parallel()
	r := indicator.RSI(slices.Repeat([]float64{7}, 30), 14)
	if r[29] != 0 {
		t.Errorf("RSI of a flat series = %v, want 0 (TA-Lib)", r[29])
	}
	if up := indicator.RSI(fixtures()["up"], 14); up[99] != 100 {
		t.Errorf("RSI of a rising series = %v, want 100", up[99])
	}
	if down := indicator.RSI(fixtures()["down"], 14); down[99] != 0 {
		t.Errorf("RSI of a falling series = %v, want 0", down[99])
	}
}

func TestRealizedVol(t *testing.T) {
	t.Parallel()
	x := fixtures()["walk720"]
	r := indicator.LogReturns(x)
	if len(r) != len(x)-1 || math.Abs(r[5]-math.Log(x[6]/x[5])) > 1e-14 {
		t.Fatalf("LogReturns: len %d r[5] %v", len(r), r[5])
	}
	if indicator.LogReturns(x[:1]) != nil {
		t.Error("LogReturns of one close is not nil")
	}
	// Hand-checked value: returns of +10% and -10% in log terms.
	if got, want := indicator.RealizedVol([]float64{math.Log(1.1), math.Log(1 / 1.1)}), math.Sqrt(2)*math.Log(1.1); math.Abs(got-want) > 1e-15 {
		t.Errorf("RealizedVol = %v, want %v", got, want)
	}
	roll := indicator.RollingRealizedVol(r, 24)
	if len(roll) != len(r)-23 {
		t.Fatalf("rolling: len %d", len(roll))
	}
	for i, v := range roll {
		want := indicator.RealizedVol(r[i : i+24])
		if math.Abs(v-want) > 1e-12*want {
			t.Fatalf("rolling[%d] = %.17g, direct %.17g", i, v, want)
		}
	}
	if indicator.RollingRealizedVol(r[:23], 24) != nil {
		t.Error("rolling over too few returns is not nil")
	}
	flat := indicator.RollingRealizedVol(make([]float64, 30), 24)
	if flat[6] != 0 {
		t.Errorf("flat rolling vol = %v", flat[6])
	}
}

func TestMedian(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n < 200; n++ {
		x := make([]float64, n)
		for i := range x {
			x[i] = math.Round(rng.NormFloat64()*5) / 2 // many ties
		}
		orig := slices.Clone(x)
		s := slices.Sorted(slices.Values(x))
		want := s[n/2]
		if n%2 == 0 {
			want = (s[n/2-1] + s[n/2]) / 2
		}
		if got := indicator.Median(x); got != want {
			t.Fatalf("Median of %v = %v, want %v", orig, got, want)
		}
		if !slices.Equal(x, orig) {
			t.Fatal("Median modified its input")
		}
	}
	if !math.IsNaN(indicator.Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

func BenchmarkIndicators720(b *testing.B) {
	x := fixtures()["walk720"]
	b.ReportAllocs()
	for b.Loop() {
		indicator.EMA(x, 10)
		indicator.EMA(x, 30)
		indicator.RSI(x, 14)
		r := indicator.LogReturns(x)
		indicator.MedianRealizedVol(r, 24)
	}
}

func TestMedianRealizedVol(t *testing.T) {
	t.Parallel()
	r := indicator.LogReturns(fixtures()["walk720"])
	for _, n := range []int{24, 25, 100, 719} {
		want := indicator.Median(indicator.RollingRealizedVol(r[:n], 24))
		if got := indicator.MedianRealizedVol(r[:n], 24); math.Abs(got-want) > 1e-15 {
			t.Errorf("n=%d: %v, want %v", n, got, want)
		}
	}
	if !math.IsNaN(indicator.MedianRealizedVol(r[:23], 24)) {
		t.Error("too few returns: not NaN")
	}
}
