// Package markettest runs a local server that speaks Coinbase Exchange's
// public candles API, for tests of the client, the cache and the whole
// service against the upstream's real wire format.
package markettest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service/market"
)

// Exchange is a local server speaking Coinbase Exchange's candles API:
// GET /products/{id}/candles?granularity=&start=&end= answers rows
// [time, low, high, open, close, volume] newest first, refuses ranges of
// more than 300 buckets and unknown granularities like the real one, and
// publishes no row for buckets listed in gaps. Failures can be scripted.
type Exchange struct {
	// URL is the server's base URL, to be used as the client's BaseURL.
	URL string
	// Requests counts every request received.
	Requests atomic.Int64

	srv *httptest.Server

	// Mu guards the fields below, which tests may set to script the server.
	Mu       sync.Mutex
	candles  map[string][]market.Candle // by product/granularity, oldest first
	Gaps     map[int64]bool             // bucket starts (Unix) with no trades
	FailNext []int                      // statuses to answer before serving normally
	Down     bool                       // answer 503 to everything
	Delay    time.Duration              // before answering
	Body     string                     // if set, answered verbatim with 200
	Ranges   [][2]time.Time             // requested [start, end], in order
}

// NewExchange starts an exchange, closed when the test ends.
func NewExchange(t testing.TB) *Exchange {
	t.Helper()
	x := &Exchange{candles: map[string][]market.Candle{}, Gaps: map[int64]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}/candles", x.serve)
	x.srv = httptest.NewServer(mux)
	x.URL = x.srv.URL
	t.Cleanup(x.srv.Close)
	return x
}

// Seed loads the devnet's candles for product over [from, to] as the
// exchange's history, so tests can compare against a known series.
func (x *Exchange) Seed(t testing.TB, product string, g time.Duration, from, to time.Time) []market.Candle {
	t.Helper()
	cs, err := market.NewDevnet().Fetch(context.Background(), product, g, from, to)
	if err != nil {
		t.Fatal(err)
	}
	x.Mu.Lock()
	x.candles[product+"/"+g.String()] = cs
	x.Mu.Unlock()
	return cs
}

// SeedCandles loads cs (oldest first, bucket starts aligned to g) as the
// exchange's history of product, for tests that need a particular series.
func (x *Exchange) SeedCandles(product string, g time.Duration, cs []market.Candle) {
	x.Mu.Lock()
	x.candles[product+"/"+g.String()] = slices.Clone(cs)
	x.Mu.Unlock()
}

func (x *Exchange) serve(w http.ResponseWriter, r *http.Request) {
	x.Requests.Add(1)
	x.Mu.Lock()
	delay, body := x.Delay, x.Body
	status := 0
	if x.Down {
		status = http.StatusServiceUnavailable
	} else if len(x.FailNext) > 0 {
		status, x.FailNext = x.FailNext[0], x.FailNext[1:]
	}
	x.Mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"message":%q}`, http.StatusText(status))
		return
	}
	if body != "" {
		fmt.Fprint(w, body)
		return
	}
	q := r.URL.Query()
	gs, _ := strconv.Atoi(q.Get("granularity"))
	g := time.Duration(gs) * time.Second
	if !slices.Contains([]int{60, 300, 900, 3600, 21600, 86400}, gs) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"message":"Unsupported granularity"}`)
		return
	}
	start, err1 := time.Parse(time.RFC3339, q.Get("start"))
	end, err2 := time.Parse(time.RFC3339, q.Get("end"))
	if err1 != nil || err2 != nil || end.Sub(start)/g+1 > 300 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"message":"granularity too small for the requested time range. Count of aggregations requested exceeds 300"}`)
		return
	}
	x.Mu.Lock()
	x.Ranges = append(x.Ranges, [2]time.Time{start, end})
	cs, ok := x.candles[r.PathValue("id")+"/"+g.String()]
	var rows [][6]any
	for i := len(cs) - 1; i >= 0; i-- { // newest first
		c := cs[i]
		if c.Time.Before(start) || c.Time.After(end) || x.Gaps[c.Time.Unix()] {
			continue
		}
		rows = append(rows, [6]any{c.Time.Unix(), c.Low, c.High, c.Open, c.Close, c.Volume})
	}
	x.Mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"NotFound"}`)
		return
	}
	if rows == nil {
		rows = [][6]any{}
	}
	_ = json.NewEncoder(w).Encode(rows)
}

// Client returns a Coinbase client for x with short backoffs and no
// effective rate limit; mut, if not nil, adjusts the config.
func (x *Exchange) Client(t testing.TB, mut func(*market.CoinbaseConfig)) *market.Coinbase {
	t.Helper()
	cfg := market.DefaultCoinbaseConfig(x.srv.URL)
	cfg.MaxBackoff = 20 * time.Millisecond
	cfg.RatePerSecond = 1000
	if mut != nil {
		mut(&cfg)
	}
	c, err := market.NewCoinbase(cfg, x.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RangesString formats requested ranges for test failure messages.
func RangesString(rs [][2]time.Time) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "[%s %s] ", r[0].Format(time.RFC3339), r[1].Format(time.RFC3339))
	}
	return b.String()
}
