package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// BenchmarkHotMarket (and the cached /forecast) measures server-side latency of the market operations
// with a fresh cache: the HTTP handler (parameter checks, gateway, gRPC
// client over an in-memory connection, interceptors, rules, REST JSON),
// called directly, without a network client. Reported: p50 and p99 per
// request (target: p50 at most 1 ms).
func BenchmarkHotMarket(b *testing.B) {
	s := newStack(b)
	for _, path := range []string{"/regime", "/signal-pack", "/candles", "/forecast?product=ETH-USD&pred_len=48"} {
		b.Run(path, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			serve := func() {
				rec := httptest.NewRecorder()
				s.handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
				}
			}
			serve() // warm the cache
			durations := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				serve()
				durations = append(durations, time.Since(start))
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
		})
	}
}
