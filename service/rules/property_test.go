package rules_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/service/rules"
	"github.com/tollgate/tollgate/service/rules/rulestest"
)

// shape generates a close series of length n from a seeded source.
type shape struct {
	name string
	gen  func(r *rand.Rand, n int) []float64
}

// walk is a log-price walk from start: each bar adds step(i) to the log.
func walk(n int, start float64, step func(i int) float64) []float64 {
	out := make([]float64, n)
	lp := math.Log(start)
	for i := range out {
		lp += step(i)
		out[i] = math.Exp(lp)
	}
	return out
}

// shapes are the kinds of series the property test draws: random walks of
// several volatilities, trends both ways, flat and nearly flat series,
// single spikes (on the last bar, the first, or inside), regime switches,
// and flat stretches after a spike (a running sum of squares must come
// back to exactly zero there).
func shapes() []shape {
	gauss := func(r *rand.Rand, sigma float64) float64 { return r.NormFloat64() * sigma }
	return []shape{
		{"random-walk-calm", func(r *rand.Rand, n int) []float64 {
			return walk(n, 3400, func(int) float64 { return gauss(r, 0.002) })
		}},
		{"random-walk-wild", func(r *rand.Rand, n int) []float64 {
			return walk(n, 95000, func(int) float64 { return gauss(r, 0.03) })
		}},
		{"trend-up", func(r *rand.Rand, n int) []float64 {
			return walk(n, 100, func(int) float64 { return 0.002 + gauss(r, 0.001) })
		}},
		{"trend-down", func(r *rand.Rand, n int) []float64 {
			return walk(n, 100, func(int) float64 { return -0.002 + gauss(r, 0.001) })
		}},
		{"steady-up", func(_ *rand.Rand, n int) []float64 {
			return walk(n, 50, func(int) float64 { return 0.001 })
		}},
		{"flat", func(r *rand.Rand, n int) []float64 {
			return slices.Repeat([]float64{1 + float64(r.IntN(5000))}, n)
		}},
		{"nearly-flat", func(r *rand.Rand, n int) []float64 {
			return walk(n, 3400, func(int) float64 { return gauss(r, 1e-7) })
		}},
		{"spike-last", func(r *rand.Rand, n int) []float64 {
			x := walk(n, 3400, func(int) float64 { return gauss(r, 0.002) })
			x[n-1] *= 1.3
			return x
		}},
		{"spike-first", func(r *rand.Rand, n int) []float64 {
			x := walk(n, 3400, func(int) float64 { return gauss(r, 0.002) })
			x[0] *= 5
			return x
		}},
		{"spike-inside", func(r *rand.Rand, n int) []float64 {
			x := walk(n, 3400, func(int) float64 { return gauss(r, 0.002) })
			x[r.IntN(n)] *= 0.5
			return x
		}},
		{"flat-spike-flat", func(r *rand.Rand, n int) []float64 {
			x := slices.Repeat([]float64{2000}, n)
			x[r.IntN(n)] = 2600
			return x
		}},
		{"switch", func(r *rand.Rand, n int) []float64 {
			at := r.IntN(n)
			return walk(n, 3400, func(i int) float64 {
				if i < at {
					return 0.003 + gauss(r, 0.002)
				}
				return -0.004 + gauss(r, 0.002)
			})
		}},
	}
}

// lengths cover the edges of every rule: the shortest answered series,
// the first baseline (168 runs of 24 returns need 192 closes), the
// /candles window, the /regime window and beyond.
var lengths = []int{rulestest.MinCloses, rulestest.MinCloses + 1, 50, 100, 191, 192, 193, 400, 720, 1000}

// TestEveryFieldRederives: over many generated series, every field of the
// signal pack (and so of /regime and the /candles indicators, which are
// its snapshot and regime) equals what the independent implementation in
// rulestest derives from the same series.
func TestEveryFieldRederives(t *testing.T) {
	t.Parallel()
	const seeds = 8
	cases, nearThreshold := 0, 0
	gates := map[string]int{}
	for _, sh := range shapes() {
		for _, n := range lengths {
			for seed := range uint64(seeds) {
				r := rand.New(rand.NewPCG(seed, uint64(n)))
				closes := sh.gen(r, n)
				name := fmt.Sprintf("%s/n=%d/seed=%d", sh.name, n, seed)
				want, ok := rulestest.Derive(closes)
				if !ok {
					t.Fatalf("%s: reference refused %d closes", name, n)
				}
				p, err := rules.SignalPack(closes)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				cases++
				if ambiguous(p, want) {
					nearThreshold++
				}
				for _, d := range comparePack(p, want) {
					t.Errorf("%s: %s", name, d)
				}
				// /regime and /candles use Analyze and Classify alone.
				s, err := rules.Analyze(closes)
				if err != nil || s != p.Snapshot || rules.Classify(s) != p.Regime {
					t.Errorf("%s: Analyze/Classify (%+v, %v) differ from the pack's", name, s, err)
				}
				// /signal adds the gate over the regime, RSI and a model's
				// expected return.
				if ambiguous(p, want) {
					continue
				}
				for _, e := range []*float64{nil, ptr(-1), ptr(0.1999), ptr(0.2), ptr(3)} {
					got := map[bool]string{true: "GO", false: "NO-GO"}[rules.Gate(p.Regime, e, p.RSI)]
					if w := rulestest.Gate(want.Regime, e, want.RSI); got != w {
						t.Errorf("%s: gate(expected %s) = %s, want %s", name, fmtPtr(e), got, w)
					}
					gates[got]++
				}
			}
		}
	}
	if gates["GO"] == 0 || gates["NO-GO"] == 0 {
		t.Errorf("gates %v: the generators never open or never shut the gate", gates)
	}
	if nearThreshold > cases/100 {
		t.Errorf("%d of %d series sit on a threshold: the generators test rounding, not the rules", nearThreshold, cases)
	}
}

// TestVolatilityRederivesOnShortSeries covers the volatility rule where it
// is defined and Analyze is not: 0 to 40 closes.
func TestVolatilityRederivesOnShortSeries(t *testing.T) {
	t.Parallel()
	for _, sh := range shapes() {
		for n := range 41 {
			r := rand.New(rand.NewPCG(7, uint64(n)))
			var closes []float64
			if n > 0 {
				closes = sh.gen(r, n)
			}
			got, want := rules.VolatilityOf(closes), rulestest.VolatilityOf(closes)
			for _, d := range compareVol(got, want) {
				t.Errorf("%s/n=%d: %s", sh.name, n, d)
			}
		}
	}
}

// TestCloseIsTheLastBar pins the bug of issue 11: the price is the last
// close of the series, whatever came before it.
func TestCloseIsTheLastBar(t *testing.T) {
	t.Parallel()
	closes := walk(720, 3400, func(i int) float64 { return 0.001 * math.Sin(float64(i)) })
	closes[719] = 1234.5
	p, err := rules.SignalPack(closes)
	if err != nil {
		t.Fatal(err)
	}
	if p.Close != 1234.5 {
		t.Errorf("close %v, want the last bar's 1234.5", p.Close)
	}
}

// near compares with an absolute tolerance of 1e-9 below 1 and a relative
// one above: far above the rounding of two faithful implementations
// (about 1e-12), far below any difference of bars or windows.
func near(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

func ptr(v float64) *float64 { return &v }

func nearPtr(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || near(*a, *b)) }

func fmtPtr(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// ambiguous reports a series on which two faithful implementations may
// round to opposite sides of a threshold: a value the discrete rules
// compare is within 1e-9 of one of its thresholds and the two
// implementations do not agree on that value to the last bit.
func ambiguous(p rules.Pack, want rulestest.Want) bool {
	if want.Margin >= 1e-9 {
		return false
	}
	ratio := func(v *float64) float64 {
		if v == nil {
			return math.NaN()
		}
		return *v
	}
	for _, v := range []struct {
		got, want  float64
		thresholds []float64
	}{
		{p.GapPct, want.GapPct, []float64{rules.TrendGapPct, -rules.TrendGapPct}},
		{p.SlopePct, want.SlopePct, []float64{rules.TrendSlopeTolPct, -rules.TrendSlopeTolPct, rules.SlopeFlatPct, -rules.SlopeFlatPct}},
		{p.RSI, want.RSI, []float64{rules.TrendRSIMid, rules.RangeRSILow, rules.RangeRSIHigh, rules.RSIUp, rules.RSIDown, rules.GateRSICeiling}},
		{p.RSIDelta3, want.RSIDelta3, []float64{rules.MomentumFlatPts, -rules.MomentumFlatPts}},
		{ratio(p.Volatility.Ratio), ratio(want.Volatility.Ratio), []float64{rules.VolHighRatio, rules.VolLowRatio}},
	} {
		for _, th := range v.thresholds {
			if math.Abs(v.want-th) < 1e-9 && v.got != v.want {
				return true
			}
		}
	}
	return false
}

// comparePack lists the fields of p that differ from want. Discrete
// fields are compared unless the series is ambiguous.
func comparePack(p rules.Pack, want rulestest.Want) []string {
	var diffs []string
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"close", p.Close, want.Close},
		{"ema10", p.EMAFast, want.EMA10},
		{"ema30", p.EMASlow, want.EMA30},
		{"emaGap.pct", p.GapPct, want.GapPct},
		{"emaGap.slopePct", p.SlopePct, want.SlopePct},
		{"rsi.value", p.RSI, want.RSI},
		{"rsi.delta3", p.RSIDelta3, want.RSIDelta3},
	} {
		if !near(f.got, f.want) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", f.name, f.got, f.want))
		}
	}
	diffs = append(diffs, compareVol(p.Volatility, want.Volatility)...)
	if ambiguous(p, want) {
		return diffs
	}
	if p.Regime.String() != want.Regime || p.Regime.Label() != want.Label {
		diffs = append(diffs, fmt.Sprintf("regime %s (%s), want %s (%s)", p.Regime, p.Regime.Label(), want.Regime, want.Label))
	}
	c := p.Confidence
	if c.Score != want.Score || c.Max != want.Max || !slices.Equal(c.Agree, want.Agree) || !slices.Equal(c.Disagree, want.Disagree) {
		diffs = append(diffs, fmt.Sprintf("confidence %+v, want score %d/%d agree %v disagree %v", c, want.Score, want.Max, want.Agree, want.Disagree))
	}
	return diffs
}

func compareVol(got rules.Volatility, want rulestest.Volatility) []string {
	var diffs []string
	if !nearPtr(got.Realized24hPct, want.Realized24hPct) || !nearPtr(got.BaselineMedianPct, want.BaselinePct) || !nearPtr(got.Ratio, want.Ratio) {
		diffs = append(diffs, fmt.Sprintf("volatility realized %s baseline %s ratio %s, want %s %s %s",
			fmtPtr(got.Realized24hPct), fmtPtr(got.BaselineMedianPct), fmtPtr(got.Ratio),
			fmtPtr(want.Realized24hPct), fmtPtr(want.BaselinePct), fmtPtr(want.Ratio)))
	}
	ambiguous := want.Ratio != nil && (math.Abs(*want.Ratio-rules.VolHighRatio) < 1e-9 || math.Abs(*want.Ratio-rules.VolLowRatio) < 1e-9)
	if got.Flag.String() != want.Flag && !ambiguous {
		diffs = append(diffs, fmt.Sprintf("volatility flag %s, want %s", got.Flag, want.Flag))
	}
	return diffs
}
