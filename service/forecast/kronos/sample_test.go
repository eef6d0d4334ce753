package kronos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSampleDistribution draws many tokens with a fixed seed and compares
// their frequencies with the softmax of the filtered, tempered logits by a
// chi-square test (deterministic, as the seed is fixed).
func TestSampleDistribution(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "filters.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Logits []float32 `json:"logits"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	// The first 256 of the fixture's logits: enough tokens with useful
	// counts for a quick test.
	base := rows[0].Logits[:256]
	tests := []struct {
		name string
		o    Options
	}{
		{"plain", Options{Temperature: 1, TopP: 1, Samples: 1, Seed: 1}},
		{"temperature 0.6", Options{Temperature: 0.6, TopP: 1, Samples: 1, Seed: 2}},
		{"top-p 0.9", Options{Temperature: 1, TopP: 0.9, Samples: 1, Seed: 3}},
		{"top-k 5", Options{Temperature: 1.5, TopK: 5, TopP: 0.5, Samples: 1, Seed: 4}},
	}
	const draws = 60_000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSampler(tc.o, len(base), 0)
			filtered := append([]float32(nil), base...)
			s.filter(filtered)
			var m float64 = math.Inf(-1)
			for _, l := range filtered {
				m = math.Max(m, float64(l))
			}
			p := make([]float64, len(base))
			var z float64
			for i, l := range filtered {
				if !math.IsInf(float64(l), -1) {
					p[i] = math.Exp(float64(l) - m)
					z += p[i]
				}
			}
			counts := make([]int, len(base))
			logits := make([]float32, len(base))
			for range draws {
				copy(logits, base)
				counts[s.sample(logits)]++
			}
			// Pool tokens whose expected count is under 5 into one bin.
			var chi2, poolExp float64
			var poolObs, bins int
			for i := range p {
				exp := draws * p[i] / z
				if exp == 0 {
					if counts[i] != 0 {
						t.Fatalf("token %d was filtered out but drawn %d times", i, counts[i])
					}
					continue
				}
				if exp < 5 {
					poolExp += exp
					poolObs += counts[i]
					continue
				}
				chi2 += sq(float64(counts[i])-exp) / exp
				bins++
			}
			if poolExp > 0 {
				chi2 += sq(float64(poolObs)-poolExp) / poolExp
				bins++
			}
			df := float64(bins - 1)
			// Mean df, standard deviation sqrt(2 df): 5 deviations is far out.
			if limit := df + 5*math.Sqrt(2*df); chi2 > limit {
				t.Errorf("chi-square %.1f over %d bins exceeds %.1f", chi2, bins, limit)
			}
		})
	}
}

func sq(x float64) float64 { return x * x }

// TestForecastSampling runs several sample paths: the same seed gives the
// same forecast, another seed another, and the paths are averaged (the
// mean of 3 paths lies between their extremes).
func TestForecastSampling(t *testing.T) {
	m := fixtureModel(t, "tiny")
	c := loadCase(t, "tiny-ctx100-pred8")
	o := DefaultOptions()
	o.Samples, o.Seed = 3, 42
	a, err := m.Forecast(context.Background(), c.candles, c.future, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Forecast(context.Background(), c.candles, c.future, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Seed = 43
	other, err := m.Forecast(context.Background(), c.candles, c.future, o)
	if err != nil {
		t.Fatal(err)
	}
	same, differ := true, false
	for i := range a {
		same = same && a[i] == b[i]
		differ = differ || a[i] != other[i]
	}
	if !same {
		t.Error("the same seed gave different forecasts")
	}
	if !differ {
		t.Error("another seed gave the same forecast")
	}

	// Averaging: the forecast equals the mean of the single paths, each
	// drawn with that path's stream of the seed.
	o.Seed, o.Workers = 42, 1
	var gens [][]token
	o.trace = nil
	x, mean, std, _ := normalize(c.candles)
	toks := m.tok.encode(x, len(c.candles), 2)
	var stamps []stamp
	for _, cd := range c.candles {
		stamps = append(stamps, timeFeatures(cd.Time))
	}
	for _, ft := range c.future {
		stamps = append(stamps, timeFeatures(ft))
	}
	gens, err = m.pred.generate(context.Background(), toks, stamps, len(c.future), DefaultMaxContext, o, 2)
	if err != nil {
		t.Fatal(err)
	}
	paths := m.tok.decode(toks, gens, 2)
	var singles [][]Candle
	for _, p := range paths {
		singles = append(singles, denormalize([][]float32{p}, mean, std, c.future))
	}
	for i := range a {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range singles {
			lo, hi = math.Min(lo, s[i].Close), math.Max(hi, s[i].Close)
		}
		if a[i].Close < lo-1e-6*hi || a[i].Close > hi+1e-6*hi {
			t.Errorf("step %d: averaged close %v outside the paths' [%v, %v]", i, a[i].Close, lo, hi)
		}
	}
}

// TestForecastRejects checks the input errors.
func TestForecastRejects(t *testing.T) {
	m := fixtureModel(t, "tiny")
	candles, future := syntheticCandles(20, 3)
	nan := append([]Candle(nil), candles...)
	nan[4].High = math.NaN()
	long := make([]time.Time, DefaultMaxContext+1)
	tests := []struct {
		name    string
		candles []Candle
		future  []time.Time
		o       Options
	}{
		{"no candles", nil, future, Greedy()},
		{"no future", candles, nil, Greedy()},
		{"NaN", nan, future, Greedy()},
		{"zero options", candles, future, Options{}},
		{"zero temperature", candles, future, Options{TopP: 1, Samples: 1}},
		{"top-p above 1", candles, future, Options{Temperature: 1, TopP: 1.5, Samples: 1}},
		{"negative top-k", candles, future, Options{Temperature: 1, TopK: -1, TopP: 1, Samples: 1}},
		{"no samples", candles, future, Options{Temperature: 1, TopP: 1}},
		{"more steps than the window", candles, long, Greedy()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := m.Forecast(context.Background(), tc.candles, tc.future, tc.o)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("Forecast: %v, want ErrInvalidInput", err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := m.Forecast(ctx, candles, future, Greedy()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Forecast: %v, want context.Canceled", err)
		}
	})
}

// TestAmountFill: a zero Amount is filled as volume × mean(OHLC), so
// giving that value explicitly changes nothing.
func TestAmountFill(t *testing.T) {
	candles, _ := syntheticCandles(10, 1)
	filled := append([]Candle(nil), candles...)
	for i, c := range filled {
		filled[i].Amount = c.Volume * (c.Open + c.High + c.Low + c.Close) / 4
	}
	a, _, _, err := normalize(candles)
	if err != nil {
		t.Fatal(err)
	}
	b, _, _, err := normalize(filled)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("value %d: %v with the fill, %v given", i, a[i], b[i])
		}
	}
}

// TestTimeFeatures: pandas' minute, hour, weekday (Monday 0), day, month.
func TestTimeFeatures(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want stamp
	}{
		{time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), stamp{0, 0, 0, 5, 1}},       // a Monday
		{time.Date(2026, 1, 11, 23, 59, 0, 0, time.UTC), stamp{59, 23, 6, 11, 1}}, // a Sunday
		{time.Date(2024, 2, 29, 12, 30, 0, 0, time.UTC), stamp{30, 12, 3, 29, 2}}, // a Thursday
	} {
		if got := timeFeatures(tc.t); got != tc.want {
			t.Errorf("timeFeatures(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}

// TestCacheMatchesRecompute: running one new row per step against cached
// keys and values gives what recomputing the window every step (the
// reference's way) gives, with and without a sliding window, over several
// sample paths.
func TestCacheMatchesRecompute(t *testing.T) {
	m := fixtureModel(t, "tiny")
	for _, name := range []string{"tiny-ctx100-pred8", "tiny-ctx500-pred24"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := loadCase(t, name)
			run := func(recompute bool) ([]Candle, []stepTrace) {
				o := DefaultOptions()
				o.Samples, o.Seed, o.recompute = 3, 7, recompute
				var steps []stepTrace
				o.trace = func(s stepTrace) { steps = append(steps, s) }
				got, err := m.Forecast(context.Background(), c.candles, c.future, o)
				if err != nil {
					t.Fatal(err)
				}
				return got, steps
			}
			cached, cs := run(false)
			full, fs := run(true)
			for i := range cs {
				if cs[i].s1 != fs[i].s1 || cs[i].s2 != fs[i].s2 {
					t.Fatalf("step %d: tokens %d/%d cached, %d/%d recomputed", i, cs[i].s1, cs[i].s2, fs[i].s1, fs[i].s2)
				}
				for k := range cs[i].s1Logits {
					if d := math.Abs(float64(cs[i].s1Logits[k] - fs[i].s1Logits[k])); d > 1e-4 {
						t.Fatalf("step %d: s1 logit %d differs by %g", i, k, d)
					}
				}
			}
			for i := range cached {
				if !closeRel(cached[i].Close, full[i].Close, 1e-6) {
					t.Errorf("close %d: %v cached, %v recomputed", i, cached[i].Close, full[i].Close)
				}
			}
		})
	}
}

// TestTopPOrder: byFallingLogit, the top-p filter's key sort, orders tokens as a stable
// sort by falling logit does (cmp.Compare: −0 equals +0, NaN last), ties
// in id order, on logits with many ties and the special values.
func TestTopPOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	nan := float32(math.NaN())
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), nan, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32}
	for trial := range 50 {
		n := 1 + rng.IntN(1100)
		logits := make([]float32, n)
		for i := range logits {
			switch {
			case rng.IntN(10) == 0:
				logits[i] = special[rng.IntN(len(special))]
			case trial%2 == 0:
				logits[i] = float32(rng.IntN(7) - 3) // many ties
			default:
				logits[i] = float32(rng.NormFloat64() * 4)
			}
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(a, b int) int { return cmp.Compare(logits[b], logits[a]) })
		got := make([]int, n)
		byFallingLogit(got, make([]uint64, n), logits)
		for j, g := range got {
			if g != want[j] {
				t.Fatalf("trial %d: position %d holds token %d (logit %v), want %d (logit %v)", trial, j, g, logits[g], want[j], logits[want[j]])
			}
		}
	}
}
