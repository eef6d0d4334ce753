package forecast_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service/forecast"
)

func series(n int, f func(i int) float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// TestForecastShapes: a flat series forecasts flat, a steady exponential
// trend keeps rising, a noisy series gives the same answer twice, and
// short or non-positive input is refused.
func TestForecastShapes(t *testing.T) {
	t.Parallel()
	flat, _, err := forecast.Forecast(series(200, func(int) float64 { return 100 }), 24)
	if err != nil || len(flat) != 24 || math.Abs(flat[23]-100) > 1e-9 {
		t.Errorf("flat: %v %v", flat, err)
	}
	up, p, err := forecast.Forecast(series(200, func(i int) float64 { return 100 * math.Exp(0.001*float64(i)) }), 24)
	last := 100 * math.Exp(0.001*199)
	if err != nil || !(up[0] > last) || !(up[23] > up[0]) || up[23] > last*math.Exp(0.001*24)*1.0001 {
		t.Errorf("trend: %v %+v %v (last %v)", up, p, err, last)
	}
	noisy := series(720, func(i int) float64 { return 2000 + 50*math.Sin(float64(i)/9) + float64(i%7) })
	a, pa, _ := forecast.Forecast(noisy, 48)
	b, pb, _ := forecast.Forecast(noisy, 48)
	if pa != pb || a[47] != b[47] {
		t.Error("two fits of the same closes differ")
	}
	if _, _, err := forecast.Forecast(series(47, func(int) float64 { return 1 }), 1); !errors.Is(err, forecast.ErrTooFewCloses) {
		t.Errorf("47 closes: %v", err)
	}
	if _, _, err := forecast.Forecast(series(100, func(i int) float64 { return float64(i) }), 1); !errors.Is(err, forecast.ErrTooFewCloses) {
		t.Errorf("a zero close: %v", err)
	}
}

// TestCache: hits within the TTL, a recomputation after it, one
// computation for 100 concurrent cold callers, a bounded size, a
// fallback kept for its shorter retry time, and a computation that
// outlives a caller who leaves.
func TestCache(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := forecast.NewCache(900*time.Second, 60*time.Second, 2, clock)
	var computed atomic.Int64
	release := make(chan struct{})
	compute := func(context.Context) (forecast.Result, error) {
		computed.Add(1)
		<-release
		return forecast.Result{Product: "ETH-USD", At: clock()}, nil
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := c.Get(context.Background(), "ETH-USD", 24, compute); err != nil {
				failed.Add(1)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // most callers wait on the cold key; late ones hit the cache
	close(release)
	wg.Wait()
	if computed.Load() != 1 || failed.Load() != 0 {
		t.Errorf("%d computations, %d failures for 100 cold callers", computed.Load(), failed.Load())
	}
	if _, cached, _ := c.Get(context.Background(), "ETH-USD", 24, compute); !cached {
		t.Error("no hit within the TTL")
	}
	mu.Lock()
	now = now.Add(901 * time.Second)
	mu.Unlock()
	if _, cached, _ := c.Get(context.Background(), "ETH-USD", 24, compute); cached || computed.Load() != 2 {
		t.Error("served past the TTL")
	}
	for _, steps := range []int{1, 2, 3} {
		mu.Lock()
		now = now.Add(time.Second) // distinct ages, so "oldest" is defined
		mu.Unlock()
		_, _, _ = c.Get(context.Background(), "ETH-USD", steps, compute)
	}
	if _, cached, _ := c.Get(context.Background(), "ETH-USD", 3, compute); !cached {
		t.Error("the newest entry was evicted")
	}
	if _, cached, _ := c.Get(context.Background(), "ETH-USD", 1, compute); cached {
		t.Error("more entries kept than the bound")
	}

	// A fallback is kept for the retry time only: the configured model is
	// asked again a minute later, well within the TTL.
	fallback := func(context.Context) (forecast.Result, error) {
		computed.Add(1)
		return forecast.Result{Product: "BTC-USD", At: clock(), Fallback: "kronos-small: deadline exceeded"}, nil
	}
	before := computed.Load()
	_, _, _ = c.Get(context.Background(), "BTC-USD", 24, fallback)
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	if _, cached, _ := c.Get(context.Background(), "BTC-USD", 24, fallback); !cached {
		t.Error("a fallback not kept within its retry time")
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if _, cached, _ := c.Get(context.Background(), "BTC-USD", 24, fallback); cached || computed.Load() != before+2 {
		t.Error("a fallback kept past its retry time")
	}

	// A caller who leaves stops waiting; the computation, shared with the
	// others, goes on under a context the caller's cancellation does not
	// reach, and its answer is cached.
	ctx, cancel := context.WithCancel(context.Background())
	started, finish := make(chan struct{}), make(chan struct{})
	var sawCancel atomic.Bool
	slow := func(ctx context.Context) (forecast.Result, error) {
		close(started)
		<-finish
		sawCancel.Store(ctx.Err() != nil)
		return forecast.Result{Product: "SOL-USD", At: clock()}, nil
	}
	left := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "SOL-USD", 24, slow)
		left <- err
	}()
	<-started
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("a caller who left: %v", err)
	}
	close(finish)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, cached, _ := c.Get(context.Background(), "SOL-USD", 24, slow); cached {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the computation the leaver started was not cached")
		}
	}
	if sawCancel.Load() {
		t.Error("the shared computation saw the leaver's cancellation")
	}
}

// BenchmarkForecastCold is one fit on 720 hourly closes with 48 steps
// (target: at most 50 ms).
func BenchmarkForecastCold(b *testing.B) {
	closes := series(720, func(i int) float64 { return 3000 * math.Exp(0.02*math.Sin(float64(i)/13)+0.0001*float64(i)) })
	for b.Loop() {
		if _, _, err := forecast.Forecast(closes, 48); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBacktest: on a steady trend the model beats the random walk and
// calls every direction; on too little history it refuses.
func TestBacktest(t *testing.T) {
	t.Parallel()
	trend := series(400, func(i int) float64 { return 100 * math.Exp(0.002*float64(i)) })
	r, err := forecast.Backtest(trend, 200, 24, 10)
	if err != nil {
		t.Fatal(err)
	}
	if r.Origins != 18 || !(r.MASE < 0.5) || r.DirectionalAccuracy != 1 {
		t.Errorf("trend: %+v", r)
	}
	if _, err := forecast.Backtest(trend[:100], 200, 24, 10); err == nil {
		t.Error("a backtest on too little history")
	}
}
