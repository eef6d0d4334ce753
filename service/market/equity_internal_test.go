package market

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// yahooServer serves the recorded-shape chart bodies of testdata at the
// API's path and checks the query the client sends.
func yahooServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("interval") != "60m" || q.Get("period1") == "" || q.Get("period2") == "" {
			http.Error(w, `{"chart":{"result":null,"error":{"code":"Bad Request","description":"Invalid input"}}}`, http.StatusBadRequest)
			return
		}
		file := "testdata/yahoo-chart-notfound.json"
		status := http.StatusNotFound
		if r.URL.Path == "/v8/finance/chart/TCS.NS" {
			file, status = "testdata/yahoo-chart-tcs.json", http.StatusOK
		}
		body, err := os.ReadFile(file)
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestYahooBars: two sessions of TCS.NS come back as their traded bars
// only (no night or weekend filler), without the null bar and without the
// bar still open; a symbol the API does not know is a clear unavailable
// error; a symbol off the whitelist is refused before any request.
func TestYahooBars(t *testing.T) {
	t.Parallel()
	srv := yahooServer(t)
	y, err := NewYahoo(YahooConfig{BaseURL: srv.URL + "/", RequestTimeout: 5 * time.Second, Days: 200}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	y.now = func() time.Time { return time.Date(2025, 11, 20, 15, 25, 0, 0, ist) } // the 15:15 bar is still open
	s, err := y.Bars(context.Background(), "TCS.NS", 720)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Candles) != 12 || s.Source != "yahoo-finance" || s.Granularity != time.Hour {
		t.Fatalf("%d bars from %s", len(s.Candles), s.Source)
	}
	for _, c := range s.Candles {
		local := c.Time.In(ist)
		if tod := time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute; tod < sessionOpen || tod >= sessionClose || local.Minute() != 15 {
			t.Errorf("bar at %s is outside the session grid", local)
		}
	}
	if first := s.Candles[0].Time.In(ist); first.Day() != 19 || first.Hour() != 9 {
		t.Errorf("first bar %s", first)
	}
	if last := s.Candles[len(s.Candles)-1].Time.In(ist); last.Day() != 20 || last.Hour() != 14 {
		t.Errorf("last bar %s, want 14:15 on the 20th", last)
	}
	if s, _ := y.Bars(context.Background(), "TCS.NS", 5); len(s.Candles) != 5 {
		t.Errorf("n=5 gave %d bars", len(s.Candles))
	}
	if _, err := y.Bars(context.Background(), "INFY.NS", 10); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "No data found") {
		t.Errorf("unknown to the API: %v", err)
	}
	if _, err := y.Bars(context.Background(), "AAPL", 10); !errors.Is(err, ErrUnknownProduct) {
		t.Errorf("off the whitelist: %v", err)
	}
}

// TestDevnetEquities: the synthetic feed has NSE's shape: weekdays only,
// seven bars a session from 09:15 IST with a 15-minute last bar, nothing
// still open, deterministic.
func TestDevnetEquities(t *testing.T) {
	t.Parallel()
	d := NewDevnetEquities()
	d.now = func() time.Time { return time.Date(2026, 11, 23, 12, 0, 0, 0, ist) } // Monday noon
	s, err := d.Bars(context.Background(), "RELIANCE.NS", 720)
	if err != nil || len(s.Candles) != 720 || !s.Synthetic {
		t.Fatalf("%d bars, %v", len(s.Candles), err)
	}
	perDay := map[string]int{}
	for i, c := range s.Candles {
		local := c.Time.In(ist)
		if wd := local.Weekday(); wd == time.Saturday || wd == time.Sunday {
			t.Fatalf("bar on %s", local)
		}
		if local.Minute() != 15 || local.Hour() < 9 || local.Hour() > 15 || !(c.Close > 0) || c.High < c.Low {
			t.Fatalf("bar %d: %+v at %s", i, c, local)
		}
		perDay[local.Format("2006-01-02")]++
	}
	if perDay["2026-11-20"] != 7 || perDay["2026-11-23"] != 2 { // Friday full; Monday 09:15 and 10:15 closed by noon
		t.Errorf("bars per day: Friday %d, Monday %d", perDay["2026-11-20"], perDay["2026-11-23"])
	}
	again, _ := d.Bars(context.Background(), "RELIANCE.NS", 720)
	if again.Candles[100] != s.Candles[100] {
		t.Error("not deterministic")
	}
}
