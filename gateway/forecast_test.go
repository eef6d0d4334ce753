package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/lanes"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/rules"
	"github.com/tollgate/tollgate/store"
)

// TestForecast: /forecast on the devnet feed validates against the
// document; pred_len is clamped into 1-48; a product outside the
// whitelist and a non-integer pred_len are 400s; a second call is a cache
// hit with the same closes; equities answer 501 until their feed lands.
func TestForecast(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	type body struct {
		Product           string
		LastClose         float64
		Closes            []float64
		ExpectedReturnPct float64
		PredLen           int
		Cached            bool
		Model             string
	}
	for _, tc := range []struct {
		query   string
		product string
		steps   int
		cached  bool // a product's later horizons are cut from its first forecast
	}{
		{"", "BTC-USD", 24, false},
		{"?product=ETH-USD&pred_len=6", "ETH-USD", 6, false},
		{"?product=ETH-USD&pred_len=99", "ETH-USD", 48, true},
		{"?product=ETH-USD&pred_len=0", "ETH-USD", 1, true},
	} {
		r := s.do(t, "GET", "/forecast"+tc.query)
		doc.validateResponse(t, r)
		var b body
		decodeJSON(t, r, &b)
		want := (b.Closes[len(b.Closes)-1]/b.LastClose - 1) * 100
		if b.Product != tc.product || b.PredLen != tc.steps || len(b.Closes) != tc.steps || b.Cached != tc.cached || b.Model != "embedded-damped-holt" ||
			b.ExpectedReturnPct != want {
			t.Errorf("%s: %+v", tc.query, b)
		}
	}
	r := s.do(t, "GET", "/forecast?product=ETH-USD&pred_len=6")
	var again body
	decodeJSON(t, r, &again)
	if !again.Cached || len(again.Closes) != 6 {
		t.Errorf("second call: %+v", again)
	}
	for query, want := range map[string]int{"?product=DOGE-USD": 400, "?pred_len=2.5": 400, "?pred_len=x": 400, "?product=TCS.NS": 501} {
		r := s.do(t, "GET", "/forecast"+query)
		doc.validateResponse(t, r)
		if r.status != want {
			t.Errorf("%s: %d %s, want %d", query, r.status, r.body, want)
		}
	}
}

// TestForecastEquity: with an equity feed the .NS products forecast from
// their session bars.
func TestForecastEquity(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, service.NewAnalytics(service.Sources{Equities: market.NewDevnetEquities()}), 5*time.Second)
	doc := loadServedDocument(t, s)
	r := s.do(t, "GET", "/forecast?product=TCS.NS&pred_len=7")
	doc.validateResponse(t, r)
	var b struct {
		Product string
		Closes  []float64
		Model   string
	}
	decodeJSON(t, r, &b)
	if b.Product != "TCS.NS" || len(b.Closes) != 7 || b.Model != "embedded-damped-holt" {
		t.Errorf("%+v", b)
	}
	if r := s.do(t, "GET", "/forecast?product=ETH-USD"); r.status != 501 {
		t.Errorf("crypto without a candle source: %d", r.status)
	}
}

// TestSignal: /signal validates against the document; its expected return
// is the 24h forecast's; its gate follows the published rule from its own
// inputs; provenance is null without a tape and the lane counts with one.
func TestSignal(t *testing.T) {
	t.Parallel()
	cache, err := market.NewCache(market.NewDevnet(), market.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	type body struct {
		Product           string
		Gate              string
		Regime            string
		ExpectedReturnPct *float64
		Rsi               float64
		EmaGapPct         float64
		Provenance        *struct {
			TotalCloses int
			Lanes       map[string]int
		}
	}
	for _, withTape := range []bool{false, true} {
		src := service.Sources{Candles: cache}
		if withTape {
			src.Tape = db
			closes := []lanes.Close{{ID: "1", Lane: "eth-trend", ClosedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}}
			if _, _, err := db.ImportCloses(context.Background(), closes); err != nil {
				t.Fatal(err)
			}
		}
		s := newStackWith(t, service.NewAnalytics(src), 5*time.Second)
		doc := loadServedDocument(t, s)
		r := s.do(t, "GET", "/signal")
		doc.validateResponse(t, r)
		var b body
		decodeJSON(t, r, &b)
		var f struct{ ExpectedReturnPct float64 }
		decodeJSON(t, s.do(t, "GET", "/forecast?product=ETH-USD&pred_len=24"), &f)
		if b.Product != "ETH-USD" || b.ExpectedReturnPct == nil || *b.ExpectedReturnPct != f.ExpectedReturnPct {
			t.Errorf("signal %+v, forecast return %v", b, f.ExpectedReturnPct)
		}
		reg := map[string]rules.Regime{"TREND-UP": rules.TrendUp, "TREND-DOWN": rules.TrendDown, "RANGE": rules.Range, "CHOP": rules.Chop}[b.Regime]
		if want := map[bool]string{true: "GO", false: "NO-GO"}[rules.Gate(reg, b.ExpectedReturnPct, b.Rsi)]; b.Gate != want {
			t.Errorf("gate %s from its inputs %+v, want %s", b.Gate, b, want)
		}
		if withTape != (b.Provenance != nil) || (withTape && (b.Provenance.TotalCloses != 1 || b.Provenance.Lanes["eth-trend"] != 1)) {
			t.Errorf("tape %v: provenance %+v", withTape, b.Provenance)
		}
	}
}
