package gateway_test

import (
	"testing"
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
	}{
		{"", "BTC-USD", 24},
		{"?product=ETH-USD&pred_len=6", "ETH-USD", 6},
		{"?product=ETH-USD&pred_len=99", "ETH-USD", 48},
		{"?product=ETH-USD&pred_len=0", "ETH-USD", 1},
	} {
		r := s.do(t, "GET", "/forecast"+tc.query)
		doc.validateResponse(t, r)
		var b body
		decodeJSON(t, r, &b)
		want := (b.Closes[len(b.Closes)-1]/b.LastClose - 1) * 100
		if b.Product != tc.product || b.PredLen != tc.steps || len(b.Closes) != tc.steps || b.Cached || b.Model != "embedded-damped-holt" ||
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
