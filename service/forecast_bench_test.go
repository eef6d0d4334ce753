package service

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/market"
)

// equityFeed serves every symbol the same hourly bars.
type equityFeed struct{ s market.Series }

func (f equityFeed) Bars(_ context.Context, symbol string, n int) (market.Series, error) {
	s := f.s
	s.Product = symbol
	s.Candles = s.Candles[max(0, len(s.Candles)-n):]
	return s, nil
}

// BenchmarkColdForecastBurst: 50 concurrent /forecast requests for
// distinct products and horizons (the 7 products, horizons drawn from
// 1–48) on a cold cache, with Kronos in process (the tiny test
// checkpoint); ns/op is the time to the last answer. Each op starts
// cold (a new Analytics). Issue 35 item 2: before, each product and
// horizon was a fit of its own; after, each product is one.
func BenchmarkColdForecastBurst(b *testing.B) {
	m := tinyKronos(b)
	end := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	feed := candleFeed{hourly("", 720, 3, end)}
	equities := equityFeed{hourly("", 720, 4, end)}
	products := append([]string{"BTC-USD", "ETH-USD"}, market.Equities...)
	rng := rand.New(rand.NewPCG(1, 2))
	type call struct {
		product string
		h       int32
	}
	seen := map[call]bool{}
	var calls []call
	for len(calls) < 50 {
		c := call{products[len(calls)%len(products)], int32(1 + rng.IntN(48))}
		if !seen[c] {
			seen[c] = true
			calls = append(calls, c)
		}
	}
	fits := 0
	for b.Loop() {
		var mu sync.Mutex
		a := NewAnalytics(Sources{Candles: feed, Equities: equities, Model: NewKronosModel(m, KronosSampling(), time.Minute,
			func(string, time.Duration, error) { mu.Lock(); fits++; mu.Unlock() })})
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				r, err := a.GetForecast(context.Background(), &tollgatev1.GetForecastRequest{Product: &c.product, PredLen: &c.h})
				if err != nil || r.GetFallback() != "" || len(r.GetCloses()) != int(c.h) {
					panic(fmt.Sprintf("%s/%d: %v %v", c.product, c.h, err, r))
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(fits)/float64(b.N), "fits/op")
}
