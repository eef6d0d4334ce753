package market_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/market/markettest"
)

// TestCoinbaseRecordedBodies parses bodies in the exact shape the exchange
// sends (testdata/coinbase_*.json).
func TestCoinbaseRecordedBodies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file    string
		status  int
		want    int // candles
		wantErr error
	}{
		{"coinbase_candles_eth_3600.json", 200, 11, nil},
		{"coinbase_error_404.json", 404, 0, market.ErrUnknownProduct},
		{"coinbase_error_429.json", 429, 0, market.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write(body)
			}))
			defer srv.Close()
			cfg := market.DefaultCoinbaseConfig(srv.URL)
			cfg.Retries, cfg.MaxBackoff = 1, time.Millisecond
			c, err := market.NewCoinbase(cfg, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			from := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
			got, err := c.Fetch(context.Background(), "ETH-USD", time.Hour, from, from.Add(11*time.Hour))
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if len(got) != tt.want {
				t.Fatalf("%d candles, want %d", len(got), tt.want)
			}
			if tt.want == 0 {
				return
			}
			// Oldest first, the missing 05:00 bucket absent, fields in OHLC order.
			if !got[0].Time.Equal(from) || got[5].Time.Hour() != 6 || got[10].Time.Hour() != 11 {
				t.Errorf("times: %v %v %v", got[0].Time, got[5].Time, got[10].Time)
			}
			last := got[10] // first row of the body: [1795172400,3429.89,3437.77,3433.5,3433.8,1853.13339333]
			if last.Low != 3429.89 || last.High != 3437.77 || last.Open != 3433.5 || last.Close != 3433.8 || last.Volume != 1853.13339333 {
				t.Errorf("last candle %+v", last)
			}
		})
	}
}

// TestCoinbasePagination: 720 hourly candles take exactly three requests
// of at most 300 buckets, and come back oldest first without duplicates.
func TestCoinbasePagination(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	end := hoursBefore(hour, 1)
	start := hoursBefore(end, 719)
	want := x.Seed(t, "ETH-USD", time.Hour, start.Add(-48*time.Hour), end)
	got, err := x.Client(t, nil).Fetch(context.Background(), "ETH-USD", time.Hour, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if n := x.Requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3: %s", n, markettest.RangesString(x.Ranges))
	}
	if len(got) != 720 || !got[0].Time.Equal(start) || !got[719].Time.Equal(end) {
		t.Fatalf("%d candles from %v to %v", len(got), got[0].Time, got[len(got)-1].Time)
	}
	if got[300] != want[len(want)-720+300] {
		t.Errorf("candle 300 = %+v, want %+v", got[300], want[len(want)-720+300])
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time.Sub(got[i-1].Time) != time.Hour {
			t.Fatalf("candles %d and %d are not consecutive", i-1, i)
		}
	}
}

func TestCoinbaseFailures(t *testing.T) {
	t.Parallel()
	end := hoursBefore(hour, 1)
	start := hoursBefore(end, 9)
	tests := []struct {
		name     string
		setup    func(*markettest.Exchange)
		product  string
		cfg      func(*market.CoinbaseConfig)
		wantErr  error
		requests int64
	}{
		{name: "429 then success", setup: func(x *markettest.Exchange) { x.FailNext = []int{429, 429} }, requests: 3},
		{name: "500 then success", setup: func(x *markettest.Exchange) { x.FailNext = []int{500} }, requests: 2},
		{name: "down past the retries", setup: func(x *markettest.Exchange) { x.Down = true }, wantErr: market.ErrUnavailable, requests: 4},
		{name: "bad request is not retried", setup: func(x *markettest.Exchange) { x.FailNext = []int{400} }, wantErr: market.ErrUnavailable, requests: 1},
		{name: "unknown product", product: "DOGE-USD", wantErr: market.ErrUnknownProduct, requests: 1},
		{name: "malformed body", setup: func(x *markettest.Exchange) { x.Body = `{"candles":[]}` }, wantErr: market.ErrUnavailable, requests: 1},
		{name: "row with five fields", setup: func(x *markettest.Exchange) { x.Body = `[[1795132800,1,2,1.5,1.7]]` }, wantErr: market.ErrUnavailable, requests: 1},
		{name: "impossible OHLC", setup: func(x *markettest.Exchange) { x.Body = `[[1795132800,3,2,1.5,1.7,10]]` }, wantErr: market.ErrUnavailable, requests: 1},
		{name: "off-boundary time", setup: func(x *markettest.Exchange) { x.Body = `[[1795132801,1,2,1.5,1.7,10]]` }, wantErr: market.ErrUnavailable, requests: 1},
		{name: "slow answers time out per request", setup: func(x *markettest.Exchange) { x.Delay = 200 * time.Millisecond },
			cfg: func(c *market.CoinbaseConfig) { c.RequestTimeout = 20 * time.Millisecond; c.Retries = 1 }, wantErr: market.ErrUnavailable, requests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			x := markettest.NewExchange(t)
			x.Seed(t, "ETH-USD", time.Hour, start, end)
			if tt.setup != nil {
				tt.setup(x)
			}
			product := tt.product
			if product == "" {
				product = "ETH-USD"
			}
			got, err := x.Client(t, tt.cfg).Fetch(context.Background(), product, time.Hour, start, end)
			if tt.wantErr == nil {
				if err != nil || len(got) != 10 {
					t.Fatalf("Fetch = %d candles, %v", len(got), err)
				}
			} else if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if n := x.Requests.Load(); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestCoinbaseHonoursContext(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Down = true
	c := x.Client(t, func(c *market.CoinbaseConfig) { c.Retries = 10; c.MaxBackoff = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Fetch(ctx, "ETH-USD", time.Hour, hoursBefore(hour, 5), hour)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Errorf("err %v after %v", err, time.Since(start))
	}
}

func TestCoinbaseConfigValidate(t *testing.T) {
	t.Parallel()
	bad := market.CoinbaseConfig{BaseURL: "ftp://x"}
	if err := bad.Validate(); err == nil {
		t.Error("accepted a bad config")
	}
	if _, err := market.NewCoinbase(market.DefaultCoinbaseConfig("https://api.exchange.coinbase.com"), http.DefaultClient); err != nil {
		t.Error(err)
	}
}
