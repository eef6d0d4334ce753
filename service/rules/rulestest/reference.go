// Package rulestest is a second implementation of Tollgate's published
// market rules, written from docs/rules.md and not from service/rules or
// service/indicator, neither of which it imports. Tests derive every field
// of /regime, /signal-pack and the /candles indicators here from the series
// an answer says it used, and compare: a field that drifts from its inputs
// (the wrong bar, the wrong window, a changed threshold) disagrees.
//
// It is written for obviousness, not speed: every indicator is computed
// over the whole series in the textbook form of its definition (TA-Lib's
// EMA and Wilder RSI, ln(close_t/close_t-1) returns, each realized
// volatility summed afresh, the median by sorting).
package rulestest

import (
	"math"
	"slices"
)

// Published periods and thresholds, as docs/rules.md states them.
const (
	emaFast, emaSlow, rsiPeriod, slopeBars = 10, 30, 14, 3

	trendGap, trendSlopeTol, trendRSIMid = 0.5, 0.02, 50.0
	rangeRSILow, rangeRSIHigh            = 40.0, 60.0

	slopeFlat, rsiUp, rsiDown, momentumFlat = 0.02, 55.0, 45.0, 2.0

	volWindow, minBaselineRuns = 24, 168
	volHigh, volLow            = 1.5, 0.67

	gateMinReturnPct, gateRSICeiling = 0.20, 70.0

	// MinCloses is the shortest series the rules answer: EMA30 is first
	// defined at index 29 and the slope looks 3 bars further back.
	MinCloses = emaSlow + slopeBars
)

// Want is every value the rules give for one series.
type Want struct {
	Close     float64 // the last close
	EMA10     float64
	EMA30     float64
	GapPct    float64
	SlopePct  float64
	RSI       float64
	RSIDelta3 float64
	Regime    string // TREND-UP, TREND-DOWN, RANGE or CHOP
	Label     string // trend, range or chop

	Volatility Volatility

	Score    int
	Max      int
	Agree    []string
	Disagree []string

	// Margin is the smallest distance of a value the discrete rules compare
	// (gap, slope, RSI, delta3, volatility ratio) to one of its thresholds,
	// the /signal gate's RSI ceiling included.
	// Two faithful implementations can round to opposite sides of a
	// threshold only when it is below about 1e-9.
	Margin float64
}

// Volatility is the volatility block; nil is JSON null.
type Volatility struct {
	Flag           string // HIGH, NORMAL, LOW or UNKNOWN
	Realized24hPct *float64
	BaselinePct    *float64
	Ratio          *float64
}

// Derive applies the rules to closes (oldest first). ok is false when the
// series is shorter than MinCloses.
func Derive(closes []float64) (w Want, ok bool) {
	n := len(closes)
	if n < MinCloses {
		return Want{}, false
	}
	fast, slow, rsi := ema(closes, emaFast), ema(closes, emaSlow), wilderRSI(closes, rsiPeriod)
	t, p := n-1, n-1-slopeBars
	gapAt := func(i int) float64 { return (fast[i] - slow[i]) / slow[i] * 100 }
	w = Want{
		Close:     closes[t],
		EMA10:     fast[t],
		EMA30:     slow[t],
		GapPct:    gapAt(t),
		SlopePct:  (gapAt(t) - gapAt(p)) / slopeBars,
		RSI:       rsi[t],
		RSIDelta3: rsi[t] - rsi[p],
		Max:       4,
	}
	w.Regime = regime(w.GapPct, w.SlopePct, w.RSI)
	w.Label = map[string]string{"TREND-UP": "trend", "TREND-DOWN": "trend", "RANGE": "range", "CHOP": "chop"}[w.Regime]
	w.Volatility = VolatilityOf(closes)

	want := 0 // where the call points: +1 up, -1 down, 0 nowhere
	switch w.Regime {
	case "TREND-UP":
		want = 1
	case "TREND-DOWN":
		want = -1
	}
	w.Agree, w.Disagree = []string{}, []string{}
	for _, c := range []struct {
		name     string
		v, up, d float64
	}{
		{"emaGap", w.GapPct, trendGap, -trendGap},
		{"emaSlope", w.SlopePct, slopeFlat, -slopeFlat},
		{"rsi", w.RSI, rsiUp, rsiDown},
		{"rsiMomentum", w.RSIDelta3, momentumFlat, -momentumFlat},
	} {
		points := 0
		if c.v >= c.up {
			points = 1
		} else if c.v <= c.d {
			points = -1
		}
		if points == want {
			w.Score++
			w.Agree = append(w.Agree, c.name)
		} else {
			w.Disagree = append(w.Disagree, c.name)
		}
	}

	w.Margin = math.Inf(1)
	near := func(v float64, thresholds ...float64) {
		for _, th := range thresholds {
			w.Margin = min(w.Margin, math.Abs(v-th))
		}
	}
	near(w.GapPct, trendGap, -trendGap)
	near(w.SlopePct, trendSlopeTol, -trendSlopeTol, slopeFlat, -slopeFlat)
	near(w.RSI, trendRSIMid, rangeRSILow, rangeRSIHigh, rsiUp, rsiDown, gateRSICeiling)
	near(w.RSIDelta3, momentumFlat, -momentumFlat)
	if r := w.Volatility.Ratio; r != nil {
		near(*r, volHigh, volLow)
	}
	return w, true
}

// Gate is the /signal gate of docs/rules.md: "GO" in TREND-UP with a
// model expected return of at least 0.20 % and RSI(14) at most 70, else
// "NO-GO" (also without a model answer, expectedReturnPct nil).
func Gate(regime string, expectedReturnPct *float64, rsi float64) string {
	if regime == "TREND-UP" && expectedReturnPct != nil && *expectedReturnPct >= gateMinReturnPct && rsi <= gateRSICeiling {
		return "GO"
	}
	return "NO-GO"
}

// regime is the regime table of docs/rules.md, first match wins.
func regime(gap, slope, rsi float64) string {
	switch {
	case gap >= trendGap && slope > -trendSlopeTol && rsi >= trendRSIMid:
		return "TREND-UP"
	case gap <= -trendGap && slope < trendSlopeTol && rsi <= trendRSIMid:
		return "TREND-DOWN"
	case math.Abs(gap) < trendGap && rsi >= rangeRSILow && rsi <= rangeRSIHigh:
		return "RANGE"
	}
	return "CHOP"
}

// VolatilityOf is the volatility rule over hourly closes, on its own (it
// is defined for series shorter than MinCloses).
func VolatilityOf(closes []float64) Volatility {
	v := Volatility{Flag: "UNKNOWN"}
	var r []float64
	for i := 1; i < len(closes); i++ {
		r = append(r, math.Log(closes[i]/closes[i-1]))
	}
	if len(r) < volWindow {
		return v
	}
	realizedOf := func(run []float64) float64 {
		var ss float64
		for _, x := range run {
			ss += x * x
		}
		return math.Sqrt(ss) * 100
	}
	realized := realizedOf(r[len(r)-volWindow:])
	v.Realized24hPct = &realized
	var runs []float64
	for end := volWindow; end <= len(r); end++ {
		runs = append(runs, realizedOf(r[end-volWindow:end]))
	}
	if len(runs) < minBaselineRuns {
		return v
	}
	slices.Sort(runs)
	baseline := runs[len(runs)/2]
	if len(runs)%2 == 0 {
		baseline = (runs[len(runs)/2-1] + runs[len(runs)/2]) / 2
	}
	v.BaselinePct = &baseline
	if baseline == 0 {
		return v
	}
	ratio := realized / baseline
	v.Ratio = &ratio
	switch {
	case ratio >= volHigh:
		v.Flag = "HIGH"
	case ratio <= volLow:
		v.Flag = "LOW"
	default:
		v.Flag = "NORMAL"
	}
	return v
}

// ema is TA-Lib's EMA(n) over the whole series: the mean of the first n
// closes at index n-1, then ema = (close - ema)·k + ema with k = 2/(n+1).
// Values before index n-1 are NaN.
func ema(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	var sum float64
	for i := range x {
		switch {
		case i < n-1:
			sum += x[i]
			out[i] = math.NaN()
		case i == n-1:
			sum += x[i]
			out[i] = sum / float64(n)
		default:
			k := 2.0 / float64(n+1)
			out[i] = (x[i]-out[i-1])*k + out[i-1]
		}
	}
	return out
}

// wilderRSI is TA-Lib's RSI(n): the first average gain and loss are the
// means of the first n changes (RSI first defined at index n), then
// avg = (avg·(n-1) + change)/n; RSI = 100·gain/(gain+loss), 0 when both
// are 0. Values before index n are NaN.
func wilderRSI(x []float64, n int) []float64 {
	out := make([]float64, len(x))
	var gain, loss float64
	for i := range x {
		if i == 0 {
			out[i] = math.NaN()
			continue
		}
		up, down := 0.0, 0.0
		if d := x[i] - x[i-1]; d > 0 {
			up = d
		} else {
			down = -d
		}
		switch {
		case i < n:
			gain += up
			loss += down
			out[i] = math.NaN()
			continue
		case i == n:
			gain = (gain + up) / float64(n)
			loss = (loss + down) / float64(n)
		default:
			gain = (gain*float64(n-1) + up) / float64(n)
			loss = (loss*float64(n-1) + down) / float64(n)
		}
		if gain+loss == 0 {
			out[i] = 0
		} else {
			out[i] = 100 * gain / (gain + loss)
		}
	}
	return out
}
