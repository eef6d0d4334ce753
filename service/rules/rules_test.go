package rules_test

import (
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/service/rules"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// series builds hourly closes from a per-bar drift and a deterministic
// zig-zag of the given amplitude (both in log terms).
func series(n int, start float64, drift func(i int) float64, zig float64) []float64 {
	out := make([]float64, n)
	lp := math.Log(start)
	for i := range out {
		lp += drift(i)
		z := zig
		if i%2 == 1 {
			z = -zig
		}
		out[i] = math.Exp(lp + z)
	}
	return out
}

func constant(v float64) func(int) float64 { return func(int) float64 { return v } }

// goldenSeries are 720-close series built to land in each regime, plus
// the volatility cases.
func goldenSeries() map[string][]float64 {
	calmThenWild := series(720, 3400, func(i int) float64 {
		if i >= 696 {
			return 0.012 * math.Sin(float64(i)) // last 24 hours swing hard
		}
		return 0.001 * math.Sin(float64(i)*1.7)
	}, 0)
	wildThenCalm := series(720, 3400, func(i int) float64 {
		if i >= 696 {
			return 0.0003 * math.Sin(float64(i))
		}
		return 0.006 * math.Sin(float64(i)*1.3)
	}, 0)
	return map[string][]float64{
		"trend-up":       series(720, 3000, constant(0.0015), 0.003),
		"trend-down":     series(720, 3800, constant(-0.0015), 0.003),
		"range":          series(720, 3400, func(i int) float64 { return 0.0008 * math.Sin(float64(i)/4) }, 0.002),
		"chop":           series(720, 3400, func(i int) float64 { return map[bool]float64{true: 0.0015, false: -0.006}[i < 712] }, 0.003),
		"vol-high":       calmThenWild,
		"vol-low":        wildThenCalm,
		"short-baseline": series(150, 3400, constant(0.001), 0.003),
		"flat":           slices.Repeat([]float64{3400}, 720),
	}
}

type golden struct {
	Regime     string
	Label      string
	Snapshot   rules.Snapshot
	Flag       string
	Realized   *float64
	Baseline   *float64
	Ratio      *float64
	Confidence rules.Confidence
}

// TestGolden pins the whole signal pack of each series. Run with -update
// after a deliberate change of a rule, and review the diff.
func TestGolden(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"trend-up": "TREND-UP", "trend-down": "TREND-DOWN", "range": "RANGE", "chop": "CHOP",
		"vol-high": "", "vol-low": "", "short-baseline": "TREND-UP", "flat": "CHOP",
	}
	wantFlag := map[string]string{"vol-high": "HIGH", "vol-low": "LOW", "short-baseline": "UNKNOWN", "flat": "UNKNOWN", "trend-up": "NORMAL"}
	for name, closes := range goldenSeries() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := rules.SignalPack(closes)
			if err != nil {
				t.Fatal(err)
			}
			if w := want[name]; w != "" && p.Regime.String() != w {
				t.Errorf("regime %s, want %s (%+v)", p.Regime, w, p.Snapshot)
			}
			if w := wantFlag[name]; w != "" && p.Volatility.Flag.String() != w {
				t.Errorf("volatility %s, want %s", p.Volatility.Flag, w)
			}
			got := golden{
				Regime: p.Regime.String(), Label: p.Regime.Label(), Snapshot: p.Snapshot,
				Flag: p.Volatility.Flag.String(), Realized: p.Volatility.Realized24hPct,
				Baseline: p.Volatility.BaselineMedianPct, Ratio: p.Volatility.Ratio, Confidence: p.Confidence,
			}
			out, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			ref, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./service/rules -update)", err)
			}
			var refG golden
			if err := json.Unmarshal(ref, &refG); err != nil {
				t.Fatal(err)
			}
			if !sameGolden(got, refG) {
				t.Errorf("signal pack changed:\n got %s\nwant %s", out, ref)
			}
		})
	}
}

// sameGolden compares with a relative tolerance of 1e-9 on numbers, so a
// golden file survives floating-point reassociation but not a rule change.
func sameGolden(a, b golden) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(y)) }
	nearP := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || near(*x, *y)) }
	sa, sb := a.Snapshot, b.Snapshot
	return a.Regime == b.Regime && a.Label == b.Label && a.Flag == b.Flag &&
		near(sa.Close, sb.Close) && near(sa.EMAFast, sb.EMAFast) && near(sa.EMASlow, sb.EMASlow) &&
		near(sa.GapPct, sb.GapPct) && near(sa.SlopePct, sb.SlopePct) && near(sa.RSI, sb.RSI) && near(sa.RSIDelta3, sb.RSIDelta3) &&
		nearP(a.Realized, b.Realized) && nearP(a.Baseline, b.Baseline) && nearP(a.Ratio, b.Ratio) &&
		a.Confidence.Score == b.Confidence.Score && a.Confidence.Max == b.Confidence.Max &&
		slices.Equal(a.Confidence.Agree, b.Confidence.Agree) && slices.Equal(a.Confidence.Disagree, b.Confidence.Disagree)
}

// TestClassifyBoundaries walks the edges of the regime rule.
func TestClassifyBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		gap, slope, rsi float64
		want            rules.Regime
	}{
		{0.5, 0, 50, rules.TrendUp},
		{0.4999, 0.1, 70, rules.Chop},
		{0.5, -0.0199, 60, rules.TrendUp},
		{0.5, -0.02, 60, rules.Chop},
		{0.8, 0.1, 49.99, rules.Chop},
		{-0.5, 0, 50, rules.TrendDown},
		{-0.5, 0.0199, 40, rules.TrendDown},
		{-0.5, 0.02, 40, rules.Chop},
		{-0.9, -0.1, 50.01, rules.Chop},
		{0.4999, -1, 40, rules.Range},
		{-0.4999, 1, 60, rules.Range},
		{0, 0, 39.99, rules.Chop},
		{0, 0, 60.01, rules.Chop},
		{0, 0, 0, rules.Chop}, // flat series: TA-Lib RSI is 0
	}
	for _, tt := range tests {
		s := rules.Snapshot{GapPct: tt.gap, SlopePct: tt.slope, RSI: tt.rsi}
		if got := rules.Classify(s); got != tt.want {
			t.Errorf("Classify(gap %v, slope %v, rsi %v) = %s, want %s", tt.gap, tt.slope, tt.rsi, got, tt.want)
		}
	}
	for r, label := range map[rules.Regime]string{rules.TrendUp: "trend", rules.TrendDown: "trend", rules.Range: "range", rules.Chop: "chop"} {
		if r.Label() != label {
			t.Errorf("%s.Label() = %q", r, r.Label())
		}
	}
}

func TestConfidence(t *testing.T) {
	t.Parallel()
	s := rules.Snapshot{GapPct: 0.9, SlopePct: 0.05, RSI: 53, RSIDelta3: -3}
	c := rules.ConfidenceOf(s, rules.TrendUp)
	if c.Score != 2 || c.Max != 4 || !slices.Equal(c.Agree, []string{"emaGap", "emaSlope"}) || !slices.Equal(c.Disagree, []string{"rsi", "rsiMomentum"}) {
		t.Errorf("TREND-UP confidence = %+v", c)
	}
	r := rules.ConfidenceOf(rules.Snapshot{GapPct: 0.1, SlopePct: 0.01, RSI: 50, RSIDelta3: 1}, rules.Range)
	if r.Score != 4 || len(r.Disagree) != 0 {
		t.Errorf("RANGE confidence = %+v", r)
	}
	d := rules.ConfidenceOf(rules.Snapshot{GapPct: 0.9, SlopePct: 0.05, RSI: 60, RSIDelta3: 3}, rules.TrendDown)
	if d.Score != 0 || d.Agree == nil {
		t.Errorf("opposed confidence = %+v (agree must be [] not null)", d)
	}
}

func TestVolatilityUnknownCases(t *testing.T) {
	t.Parallel()
	short := rules.VolatilityOf(series(24, 100, constant(0.001), 0.01))
	if short.Flag != rules.VolUnknown || short.Realized24hPct != nil || short.BaselineMedianPct != nil || short.Ratio != nil {
		t.Errorf("24 closes: %+v", short)
	}
	mid := rules.VolatilityOf(series(100, 100, constant(0.001), 0.01))
	if mid.Flag != rules.VolUnknown || mid.Realized24hPct == nil || mid.BaselineMedianPct != nil || mid.Ratio != nil {
		t.Errorf("100 closes: %+v", mid)
	}
	flat := rules.VolatilityOf(slices.Repeat([]float64{5}, 720))
	if flat.Flag != rules.VolUnknown || flat.BaselineMedianPct == nil || *flat.BaselineMedianPct != 0 || flat.Ratio != nil {
		t.Errorf("flat: %+v", flat)
	}
	// 25 closes = 24 returns: realized is defined, and equals sqrt(sum r^2)*100.
	x := series(25, 100, constant(0), 0.01)
	v := rules.VolatilityOf(x)
	if want := math.Sqrt(24*0.02*0.02) * 100; v.Realized24hPct == nil || math.Abs(*v.Realized24hPct-want) > 1e-9 {
		t.Errorf("realized %v, want %v", v.Realized24hPct, want)
	}
}

func TestAnalyzeRefusesBadSeries(t *testing.T) {
	t.Parallel()
	if _, err := rules.Analyze(make([]float64, 10)); !errors.Is(err, rules.ErrInsufficientData) {
		t.Errorf("short: %v", err)
	}
	bad := series(40, 100, constant(0), 0)
	bad[7] = math.NaN()
	if _, err := rules.Analyze(bad); !errors.Is(err, rules.ErrBadClose) {
		t.Errorf("NaN: %v", err)
	}
	bad[7] = 0
	if _, err := rules.Analyze(bad); !errors.Is(err, rules.ErrBadClose) {
		t.Errorf("zero: %v", err)
	}
	if _, err := rules.Analyze(series(rules.MinCloses, 100, constant(0.001), 0)); err != nil {
		t.Errorf("MinCloses closes: %v", err)
	}
}

func TestThresholdsArePublished(t *testing.T) {
	t.Parallel()
	th := rules.Thresholds()
	if th["trendGapPct"] != rules.TrendGapPct || th["volHighRatio"] != 1.5 || len(th) != 18 {
		t.Errorf("thresholds = %v", th)
	}
}

// BenchmarkSignalPack720 is indicators + regime + the signal pack over 720
// closes (target: at most 20 us per call).
func BenchmarkSignalPack720(b *testing.B) {
	closes := goldenSeries()["trend-up"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rules.SignalPack(closes); err != nil {
			b.Fatal(err)
		}
	}
}
