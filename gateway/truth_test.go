package gateway_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/market/markettest"
	"github.com/tollgate/tollgate/service/rules/rulestest"
)

// TestMarketAnswersRederiveFromTheirWindow runs /regime, /signal-pack,
// /signal, /forecast and /candles through the real gateway against a local exchange whose
// history the test knows, takes the window each answer names
// (inputs.firstCandle .. inputs.lastCandle, inputs.closes; the 100
// candles of /candles), rebuilds it from the exchange's history by the
// published gap rule, and derives every field again with the independent
// implementation in rulestest. The last closed bar carries a spike, so a
// price taken from any other bar cannot pass.
func TestMarketAnswersRederiveFromTheirWindow(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	now := time.Now().UTC()
	history := x.Seed(t, "ETH-USD", time.Hour, now.Add(-800*time.Hour), now)
	lastClosed := now.Truncate(time.Hour).Add(-time.Hour)
	var spike float64
	for i := range history {
		switch history[i].Time {
		case lastClosed: // a spike on the bar the price must come from
			history[i].Close *= 1.2
			spike = history[i].Close
			history[i].High = max(history[i].High, history[i].Close)
		case lastClosed.Add(-40 * time.Hour): // a bucket without trades
			x.Gaps[history[i].Time.Unix()] = true
		}
	}
	x.SeedCandles("ETH-USD", time.Hour, history)
	cache, err := market.NewCache(x.Client(t, nil), market.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, service.NewAnalytics(service.Sources{Candles: cache}), 10*time.Second)

	var p packBody
	decodeJSON(t, s.do(t, "GET", "/signal-pack"), &p)
	var regime struct {
		Regime                     string
		Price, Ema10, Ema30, Rsi14 float64
		AsOf, Source               string
	}
	decodeJSON(t, s.do(t, "GET", "/regime"), &regime)

	// The window the pack names, rebuilt from the exchange's history.
	first, err1 := time.Parse(time.RFC3339, p.Inputs.FirstCandle)
	last, err2 := time.Parse(time.RFC3339, p.Inputs.LastCandle)
	if err1 != nil || err2 != nil || !last.Equal(lastClosed) {
		t.Fatalf("inputs window %s..%s, want it to end at the last closed hour %s", p.Inputs.FirstCandle, p.Inputs.LastCandle, lastClosed)
	}
	closes := window(history, x.Gaps, first, last, time.Hour)
	if len(closes) != p.Inputs.Closes || p.Inputs.Closes != 720 || p.Inputs.Granularity != 3600 {
		t.Fatalf("window %s..%s holds %d hourly closes; inputs say %d at %d s", first, last, len(closes), p.Inputs.Closes, p.Inputs.Granularity)
	}
	want, ok := rulestest.Derive(closes)
	if !ok {
		t.Fatal("reference refused the window")
	}
	if spike == 0 || want.Close != spike {
		t.Fatalf("the window's last close %v is not the spiked bar's %v", want.Close, spike)
	}

	// /regime: price is the close of lastCandle, to the bit.
	if regime.Price != want.Close {
		t.Errorf("/regime price %v, want %v, the close of %s", regime.Price, want.Close, p.Inputs.LastCandle)
	}
	checkNear(t, "/regime", map[string][2]float64{
		"ema10": {regime.Ema10, want.EMA10}, "ema30": {regime.Ema30, want.EMA30}, "rsi14": {regime.Rsi14, want.RSI},
	})
	if regime.Regime != want.Regime || regime.Source != "coinbase-exchange" {
		t.Errorf("/regime %s from %q, want %s from coinbase-exchange", regime.Regime, regime.Source, want.Regime)
	}

	// /signal-pack: every field.
	if p.Close != want.Close || p.Product != "ETH-USD" || p.Inputs.Product != "ETH-USD" || p.Inputs.Source != "coinbase-exchange" || p.Inputs.Synthetic {
		t.Errorf("/signal-pack close %v product %s inputs %+v, want close %v of coinbase-exchange ETH-USD", p.Close, p.Product, p.Inputs, want.Close)
	}
	checkNear(t, "/signal-pack", map[string][2]float64{
		"emaGap.ema10": {p.EmaGap.Ema10, want.EMA10}, "emaGap.ema30": {p.EmaGap.Ema30, want.EMA30},
		"emaGap.pct": {p.EmaGap.Pct, want.GapPct}, "emaGap.slopePct": {p.EmaGap.SlopePct, want.SlopePct},
		"rsi.value": {p.RSI.Value, want.RSI}, "rsi.delta3": {p.RSI.Delta3, want.RSIDelta3},
	})
	checkNearPtr(t, "/signal-pack volatility.realized24hPct", p.Volatility.Realized24hPct, want.Volatility.Realized24hPct)
	checkNearPtr(t, "/signal-pack volatility.baselineMedianPct", p.Volatility.BaselineMedianPct, want.Volatility.BaselinePct)
	checkNearPtr(t, "/signal-pack volatility.ratio", p.Volatility.Ratio, want.Volatility.Ratio)
	if want.Margin > 1e-9 {
		if p.Regime != want.Regime || p.Volatility.Flag != want.Volatility.Flag {
			t.Errorf("/signal-pack regime %s volatility %s, want %s %s", p.Regime, p.Volatility.Flag, want.Regime, want.Volatility.Flag)
		}
		c := p.Confidence
		if c.Score != want.Score || c.Max != want.Max || !slices.Equal(c.Agree, want.Agree) || !slices.Equal(c.Disagree, want.Disagree) {
			t.Errorf("/signal-pack confidence %+v, want %d/%d %v %v", c, want.Score, want.Max, want.Agree, want.Disagree)
		}
	}
	if p.Components != 4 || p.RSI.Period != 14 || p.Volatility.BaselineWindowHours != 720 || p.Inputs.WindowHours != 720 {
		t.Errorf("/signal-pack constants: components %d period %d baseline %d window %d", p.Components, p.RSI.Period, p.Volatility.BaselineWindowHours, p.Inputs.WindowHours)
	}

	// /forecast's lastClose is the same last close, and /signal reads the
	// same window through the same rules, plus the gate over the model's
	// expected return.
	var f struct {
		LastClose, ExpectedReturnPct float64
		Closes                       []float64
	}
	decodeJSON(t, s.do(t, "GET", "/forecast?product=ETH-USD&pred_len=24"), &f)
	if f.LastClose != want.Close || len(f.Closes) != 24 {
		t.Errorf("/forecast lastClose %v (%d closes), want %v", f.LastClose, len(f.Closes), want.Close)
	} else if ret := (f.Closes[23]/f.LastClose - 1) * 100; math.Abs(ret-f.ExpectedReturnPct) > 1e-9 {
		t.Errorf("/forecast expectedReturnPct %v, want %v from its closes", f.ExpectedReturnPct, ret)
	}
	var sig struct {
		Gate, Regime      string
		ExpectedReturnPct *float64
		RSI, EmaGapPct    float64
	}
	decodeJSON(t, s.do(t, "GET", "/signal?product=ETH-USD"), &sig)
	checkNear(t, "/signal", map[string][2]float64{"rsi": {sig.RSI, want.RSI}, "emaGapPct": {sig.EmaGapPct, want.GapPct}})
	if sig.ExpectedReturnPct == nil || *sig.ExpectedReturnPct != f.ExpectedReturnPct {
		t.Errorf("/signal expectedReturnPct %s, want /forecast's %v", ptrString(sig.ExpectedReturnPct), f.ExpectedReturnPct)
	}
	if want.Margin > 1e-9 && (sig.Regime != want.Regime || sig.Gate != rulestest.Gate(want.Regime, sig.ExpectedReturnPct, want.RSI)) {
		t.Errorf("/signal %s %s, want %s %s", sig.Regime, sig.Gate, want.Regime, rulestest.Gate(want.Regime, sig.ExpectedReturnPct, want.RSI))
	}

	// /candles: the indicators re-derive from the 100 candles returned,
	// which are the last 100 of the same history.
	var c candlesBody
	decodeJSON(t, s.do(t, "GET", "/candles"), &c)
	if len(c.Candles) != 100 || c.Candles[99].T != lastClosed.Unix() || c.Source != "coinbase-exchange" {
		t.Fatalf("/candles: %d candles, last at %d, source %q", len(c.Candles), c.Candles[len(c.Candles)-1].T, c.Source)
	}
	got := make([]float64, len(c.Candles))
	for i, k := range c.Candles {
		got[i] = k.Close
	}
	if !slices.Equal(got, closes[len(closes)-100:]) {
		t.Errorf("/candles closes are not the last 100 of the window")
	}
	cw, _ := rulestest.Derive(got)
	checkNear(t, "/candles indicators", map[string][2]float64{
		"ema10": {c.Indicators.Ema10, cw.EMA10}, "ema30": {c.Indicators.Ema30, cw.EMA30}, "rsi": {c.Indicators.RSI, cw.RSI},
	})
	if cw.Margin > 1e-9 && c.Indicators.Regime != cw.Label {
		t.Errorf("/candles regime %s, want %s", c.Indicators.Regime, cw.Label)
	}
}

// window returns the closes of the buckets first..last (step g) of
// history by the published gap rule: a bucket the exchange did not publish
// takes the previous close.
func window(history []market.Candle, gaps map[int64]bool, first, last time.Time, g time.Duration) []float64 {
	byTime := map[int64]float64{}
	for _, c := range history {
		if !gaps[c.Time.Unix()] {
			byTime[c.Time.Unix()] = c.Close
		}
	}
	var out []float64
	for t := first; !t.After(last); t = t.Add(g) {
		c, ok := byTime[t.Unix()]
		if !ok && len(out) > 0 {
			c = out[len(out)-1]
		}
		out = append(out, c)
	}
	return out
}

func checkNear(t *testing.T, what string, fields map[string][2]float64) {
	t.Helper()
	for name, v := range fields {
		if math.Abs(v[0]-v[1]) > 1e-9*math.Max(1, math.Abs(v[1])) {
			t.Errorf("%s %s = %v, want %v", what, name, v[0], v[1])
		}
	}
}

func checkNearPtr(t *testing.T, what string, got, want *float64) {
	t.Helper()
	if (got == nil) != (want == nil) || got != nil && math.Abs(*got-*want) > 1e-9*math.Max(1, math.Abs(*want)) {
		t.Errorf("%s = %s, want %s", what, ptrString(got), ptrString(want))
	}
}

func ptrString(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
