package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/market/markettest"
	"github.com/tollgate/tollgate/service/rules"
)

type candlesBody struct {
	Product     string
	Granularity int
	Count       int
	Candles     []struct {
		T                              int64
		Open, High, Low, Close, Volume float64
	}
	Indicators struct {
		Regime            string
		RSI, Ema10, Ema30 float64
	}
	AsOf   string
	Source string
}

type packBody struct {
	Product    string
	Close      float64
	Components int
	Regime     string
	RSI        struct {
		Value, Delta3 float64
		Period        int
	}
	EmaGap     struct{ Pct, SlopePct, Ema10, Ema30 float64 }
	Volatility struct {
		Flag                                     string
		Realized24hPct, BaselineMedianPct, Ratio *float64
		BaselineWindowHours                      int
	}
	Confidence struct {
		Score, Max      int
		Agree, Disagree []string
	}
	Inputs struct {
		Source                   string
		Synthetic                bool
		Product                  string
		Granularity, WindowHours int
		Closes                   int
		FirstCandle, LastCandle  string
		Thresholds               map[string]float64
	}
	AsOf, Disclaimer string
}

func decodeJSON(t *testing.T, r reply, v any) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("%s: status %d: %s", r.req.URL, r.status, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%s: %v", r.req.URL, err)
	}
}

// TestMarketOnDevnet: the three market operations answer from the devnet
// feed with spec-shaped, schema-valid bodies that say they are synthetic,
// and /candles' indicators re-derive from its own candles by the rules.
func TestMarketOnDevnet(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	for _, path := range []string{"/candles", "/candles?product=BTC-USD&granularity=300", "/candles?granularity=86400", "/regime", "/signal-pack"} {
		r := s.do(t, "GET", path)
		if r.status != 200 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		doc.validateResponse(t, r)
	}

	var c candlesBody
	decodeJSON(t, s.do(t, "GET", "/candles"), &c)
	if c.Product != "ETH-USD" || c.Granularity != 3600 || c.Count != 100 || len(c.Candles) != 100 || c.Source != "devnet-synthetic" {
		t.Fatalf("candles: %s %d count %d len %d source %q", c.Product, c.Granularity, c.Count, len(c.Candles), c.Source)
	}
	now := time.Now().UTC()
	last := time.Unix(c.Candles[99].T, 0)
	if last.Add(time.Hour).After(now) || now.Sub(last) > 2*time.Hour+time.Minute {
		t.Errorf("last candle starts %v, now %v: want the last closed hour", last, now)
	}
	closes := make([]float64, len(c.Candles))
	for i, k := range c.Candles {
		closes[i] = k.Close
		if i > 0 && k.T-c.Candles[i-1].T != 3600 {
			t.Fatalf("candles not hourly and ascending at %d", i)
		}
	}
	snap, err := rules.Analyze(closes)
	if err != nil {
		t.Fatal(err)
	}
	if c.Indicators.RSI != snap.RSI || c.Indicators.Ema10 != snap.EMAFast || c.Indicators.Ema30 != snap.EMASlow || c.Indicators.Regime != rules.Classify(snap).Label() {
		t.Errorf("indicators %+v do not re-derive from the returned candles (%+v)", c.Indicators, snap)
	}

	var five candlesBody
	decodeJSON(t, s.do(t, "GET", "/candles?product=BTC-USD&granularity=300"), &five)
	if five.Product != "BTC-USD" || five.Granularity != 300 || five.Candles[1].T-five.Candles[0].T != 300 {
		t.Errorf("5-minute BTC candles: %+v", five.Candles[:2])
	}

	var regime struct {
		Regime                     string
		Price, Ema10, Ema30, Rsi14 float64
		AsOf, Source               string
	}
	decodeJSON(t, s.do(t, "GET", "/regime"), &regime)
	var p packBody
	decodeJSON(t, s.do(t, "GET", "/signal-pack"), &p)
	if regime.Regime != p.Regime || regime.Price != p.Close || regime.Rsi14 != p.RSI.Value || regime.Ema10 != p.EmaGap.Ema10 {
		t.Errorf("/regime %+v and /signal-pack (%s %v) disagree", regime, p.Regime, p.Close)
	}
	if p.Inputs.Source != "devnet-synthetic" || !p.Inputs.Synthetic || p.Inputs.Closes != 720 || p.Inputs.WindowHours != 720 ||
		p.Inputs.Granularity != 3600 || p.Inputs.Thresholds["trendGapPct"] != rules.TrendGapPct {
		t.Errorf("inputs %+v", p.Inputs)
	}
	first, _ := time.Parse(time.RFC3339, p.Inputs.FirstCandle)
	lastC, _ := time.Parse(time.RFC3339, p.Inputs.LastCandle)
	if lastC.Sub(first) != 719*time.Hour {
		t.Errorf("window %s..%s is not 720 hourly candles", p.Inputs.FirstCandle, p.Inputs.LastCandle)
	}
	if p.Components != 4 || p.Confidence.Max != 4 || p.Confidence.Score != len(p.Confidence.Agree) || len(p.Confidence.Agree)+len(p.Confidence.Disagree) != 4 {
		t.Errorf("confidence %+v", p.Confidence)
	}
	if p.RSI.Period != 14 || p.Volatility.BaselineWindowHours != 720 || p.Volatility.Flag == "UNKNOWN" || p.Volatility.Ratio == nil ||
		math.Abs(*p.Volatility.Ratio - *p.Volatility.Realized24hPct / *p.Volatility.BaselineMedianPct) > 1e-12 {
		t.Errorf("rsi %+v volatility %+v", p.RSI, p.Volatility)
	}
	if p.Disclaimer == "" || p.AsOf == "" {
		t.Error("no disclaimer or asOf")
	}

	// /tollgate says the candles are synthetic.
	var proj struct {
		Sources []struct {
			Kind, Name string
			Synthetic  bool
		}
	}
	decodeJSON(t, s.do(t, "GET", "/tollgate"), &proj)
	if len(proj.Sources) != 1 || proj.Sources[0].Name != "devnet-synthetic" || !proj.Sources[0].Synthetic {
		t.Errorf("/tollgate sources = %+v", proj.Sources)
	}
}

// TestMarketAgainstCoinbaseFormat runs the same operations against a local
// server speaking Coinbase Exchange's wire format: pagination (720 closes
// in three requests), gaps, a 429, and an outage.
func TestMarketAgainstCoinbaseFormat(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	now := time.Now().UTC()
	x.Seed(t, "ETH-USD", time.Hour, now.Add(-800*time.Hour), now)
	x.Seed(t, "BTC-USD", time.Hour, now.Add(-800*time.Hour), now)
	gap := now.Truncate(time.Hour).Add(-30 * time.Hour)
	x.Gaps[gap.Unix()] = true
	x.FailNext = []int{429}
	cache, err := market.NewCache(x.Client(t, nil), market.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, service.NewAnalytics(service.Sources{Candles: cache}), 10*time.Second)
	doc := loadServedDocument(t, s)

	r := s.do(t, "GET", "/signal-pack")
	doc.validateResponse(t, r)
	var p packBody
	decodeJSON(t, r, &p)
	if n := x.Requests.Load(); n != 4 { // one 429, then three pages
		t.Errorf("%d upstream requests for 720 closes (one 429 retried), want 4: %s", n, markettest.RangesString(x.Ranges))
	}
	if p.Inputs.Source != "coinbase-exchange" || p.Inputs.Synthetic || p.Inputs.Closes != 720 {
		t.Errorf("inputs %+v", p.Inputs)
	}
	r = s.do(t, "GET", "/regime")
	doc.validateResponse(t, r)
	if x.Requests.Load() != 4 {
		t.Errorf("/regime after /signal-pack fetched again")
	}

	var c candlesBody
	decodeJSON(t, s.do(t, "GET", "/candles"), &c)
	found := false
	for i, k := range c.Candles {
		if k.T == gap.Unix() {
			found = true
			if k.Volume != 0 || k.Open != c.Candles[i-1].Close || k.Close != c.Candles[i-1].Close {
				t.Errorf("gap candle %+v is not flat at the previous close", k)
			}
		}
	}
	if !found || c.Count != 100 || c.Source != "coinbase-exchange" {
		t.Errorf("gap bucket present %v, count %d, source %q", found, c.Count, c.Source)
	}

	x.Mu.Lock()
	x.Down = true
	x.Mu.Unlock()
	r = s.do(t, "GET", "/candles?product=BTC-USD") // cold for BTC: nothing to fall back on
	if r.status != 503 {
		t.Fatalf("outage: %d %s", r.status, r.body)
	}
	doc.validateResponse(t, r)
	doc.validateSchema(t, "Error", r.body)
	var e struct{ Error, Message string }
	_ = json.Unmarshal(r.body, &e)
	if e.Error != "unavailable" {
		t.Errorf("outage body %s", r.body)
	}
	if r := s.do(t, "GET", "/signal-pack"); r.status != 200 { // warm: still fresh
		t.Errorf("warm series during the outage: %d", r.status)
	}
}

// TestColdCollapseThroughTheStack: 100 concurrent cold /signal-pack calls
// through the REST gateway cause one upstream fetch sequence of three
// requests (720 hourly closes).
func TestColdCollapseThroughTheStack(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	now := time.Now().UTC()
	x.Seed(t, "ETH-USD", time.Hour, now.Add(-800*time.Hour), now)
	x.Delay = 30 * time.Millisecond
	cache, err := market.NewCache(x.Client(t, nil), market.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, service.NewAnalytics(service.Sources{Candles: cache}), 10*time.Second)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := range 100 {
		path := "/signal-pack"
		if i%2 == 1 {
			path = "/regime"
		}
		wg.Go(func() {
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != 200 {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d requests failed", failed.Load())
	}
	if n := x.Requests.Load(); n != 3 {
		t.Errorf("%d upstream requests, want 3: %s", n, markettest.RangesString(x.Ranges))
	}
}

// countingModel counts predictions and fails each, so the embedded model
// answers: the count is the number of forecast computations.
type countingModel struct{ n atomic.Int64 }

func (m *countingModel) Name() string { return "counting" }

func (m *countingModel) Predict(context.Context, market.Series, int) ([]float64, string, error) {
	m.n.Add(1)
	return nil, "", errors.New("counting only")
}

// TestForecastColdCollapse: 100 concurrent cold /forecast requests for one
// product and horizon make one computation and one upstream fetch
// sequence (3 pages for 720 closes), and all get the same closes.
func TestForecastColdCollapse(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	now := time.Now().UTC()
	x.Seed(t, "ETH-USD", time.Hour, now.Add(-800*time.Hour), now)
	x.Delay = 30 * time.Millisecond
	cache, err := market.NewCache(x.Client(t, nil), market.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	model := &countingModel{}
	s := newStackWith(t, service.NewAnalytics(service.Sources{Candles: cache, Model: model}), 10*time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	bodies := map[string]int{}
	for range 100 {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			s.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/forecast?product=ETH-USD&pred_len=24", nil))
			var b struct{ Closes []float64 }
			_ = json.Unmarshal(rec.Body.Bytes(), &b)
			mu.Lock()
			defer mu.Unlock()
			if rec.Code != 200 {
				bodies[fmt.Sprint("status ", rec.Code)]++
				return
			}
			bodies[fmt.Sprint(b.Closes)]++
		})
	}
	wg.Wait()
	if len(bodies) != 1 {
		t.Errorf("%d different answers: %v", len(bodies), bodies)
	}
	if n := model.n.Load(); n != 1 {
		t.Errorf("%d computations, want 1", n)
	}
	if n := x.Requests.Load(); n != 3 {
		t.Errorf("%d upstream requests, want 3: %s", n, markettest.RangesString(x.Ranges))
	}
}
