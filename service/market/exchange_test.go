package market_test

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

// exchange is a local server speaking Coinbase Exchange's candles API:
// GET /products/{id}/candles?granularity=&start=&end= answers rows
// [time, low, high, open, close, volume] newest first, refuses ranges of
// more than 300 buckets and unknown granularities like the real one, and
// publishes no row for buckets listed in gaps. Failures can be scripted.
type exchange struct {
	srv      *httptest.Server
	requests atomic.Int64

	mu       sync.Mutex
	candles  map[string][]market.Candle // by product, oldest first
	gaps     map[int64]bool             // bucket starts with no trades
	failNext []int                      // statuses to answer before serving normally
	down     bool                       // answer 503 to everything
	delay    time.Duration              // before answering
	body     string                     // if set, answered verbatim with 200
	ranges   [][2]time.Time             // requested [start, end]
}

func newExchange(t *testing.T) *exchange {
	t.Helper()
	x := &exchange{candles: map[string][]market.Candle{}, gaps: map[int64]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}/candles", x.serve)
	x.srv = httptest.NewServer(mux)
	t.Cleanup(x.srv.Close)
	return x
}

// seed loads the devnet's candles for product over [from, to] as the
// exchange's history, so tests can compare against a known series.
func (x *exchange) seed(t *testing.T, product string, g time.Duration, from, to time.Time) []market.Candle {
	t.Helper()
	cs, err := market.NewDevnet().Fetch(context.Background(), product, g, from, to)
	if err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	x.candles[product+"/"+g.String()] = cs
	x.mu.Unlock()
	return cs
}

func (x *exchange) serve(w http.ResponseWriter, r *http.Request) {
	x.requests.Add(1)
	x.mu.Lock()
	delay, body := x.delay, x.body
	status := 0
	if x.down {
		status = http.StatusServiceUnavailable
	} else if len(x.failNext) > 0 {
		status, x.failNext = x.failNext[0], x.failNext[1:]
	}
	x.mu.Unlock()
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
	x.mu.Lock()
	x.ranges = append(x.ranges, [2]time.Time{start, end})
	cs, ok := x.candles[r.PathValue("id")+"/"+g.String()]
	var rows [][6]any
	for i := len(cs) - 1; i >= 0; i-- { // newest first
		c := cs[i]
		if c.Time.Before(start) || c.Time.After(end) || x.gaps[c.Time.Unix()] {
			continue
		}
		rows = append(rows, [6]any{c.Time.Unix(), c.Low, c.High, c.Open, c.Close, c.Volume})
	}
	x.mu.Unlock()
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

func (x *exchange) client(t *testing.T, mut func(*market.CoinbaseConfig)) *market.Coinbase {
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

// hour is a fixed, hour-aligned "now" for the tests.
var hour = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func hoursBefore(t time.Time, n int) time.Time { return t.Add(-time.Duration(n) * time.Hour) }

func rangesString(rs [][2]time.Time) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "[%s %s] ", r[0].Format(time.RFC3339), r[1].Format(time.RFC3339))
	}
	return b.String()
}
