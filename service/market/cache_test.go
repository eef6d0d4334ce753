package market_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/market/markettest"
)

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func newCache(t *testing.T, src market.Source, clk *clock) *market.Cache {
	t.Helper()
	cfg := market.DefaultCacheConfig()
	cfg.Now = clk.Now
	c, err := market.NewCache(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCacheColdCollapse: 100 concurrent cold requests for 720 hourly
// closes cause one fetch sequence of three requests.
func TestCacheColdCollapse(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Seed(t, "ETH-USD", time.Hour, hoursBefore(hour, 800), hour)
	x.Delay = 20 * time.Millisecond // keep the fetch in flight while the others arrive
	clk := &clock{now: hour.Add(90 * time.Second)}
	cache := newCache(t, x.Client(t, nil), clk)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 100 {
		wg.Go(func() {
			s, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 720)
			if err != nil || len(s.Candles) != 720 || !s.Candles[719].Time.Equal(hoursBefore(hour, 1)) {
				failures.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("%d requests failed", n)
	}
	if n := x.Requests.Load(); n != 3 {
		t.Errorf("%d upstream requests, want 3: %s", n, markettest.RangesString(x.Ranges))
	}
}

// TestCacheRefreshesWhenANewCandleCanExist: no request while the last
// closed bucket is held; one small request per new bucket afterwards.
func TestCacheRefreshesWhenANewCandleCanExist(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Seed(t, "ETH-USD", time.Hour, hoursBefore(hour, 800), hour.Add(5*time.Hour))
	clk := &clock{now: hour.Add(time.Minute)}
	cache := newCache(t, x.Client(t, nil), clk)
	get := func() market.Series {
		t.Helper()
		s, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 720)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := get()
	clk.Set(hour.Add(59 * time.Minute))
	if s := get(); x.Requests.Load() != 3 || !s.FetchedAt.Equal(first.FetchedAt) {
		t.Fatalf("refetched within the hour: %d requests", x.Requests.Load())
	}
	clk.Set(hour.Add(61 * time.Minute)) // the 12:00 bucket has closed
	s := get()
	if n := x.Requests.Load(); n != 4 {
		t.Fatalf("%d requests after the hour, want 4 (one incremental): %s", n, markettest.RangesString(x.Ranges))
	}
	if last := x.Ranges[len(x.Ranges)-1]; !last[0].Equal(hour) || !last[1].Equal(hour) {
		t.Errorf("incremental request asked %s", markettest.RangesString(x.Ranges[3:]))
	}
	if len(s.Candles) != 720 || !s.Candles[719].Time.Equal(hour) || !s.Candles[0].Time.Equal(hoursBefore(hour, 719)) {
		t.Errorf("after refresh: %d candles, %v..%v", len(s.Candles), s.Candles[0].Time, s.Candles[719].Time)
	}
	// A smaller window is served from the same series.
	small, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 100)
	if err != nil || len(small.Candles) != 100 || small.Candles[99] != s.Candles[719] || x.Requests.Load() != 4 {
		t.Errorf("smaller window: %d candles, %d requests, %v", len(small.Candles), x.Requests.Load(), err)
	}
}

// TestCacheGapsAndLateCandles: buckets without trades are filled with the
// previous close and zero volume; a last bucket not yet published is not
// invented, and is asked for again only after RetryAfter.
func TestCacheGapsAndLateCandles(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	cs := x.Seed(t, "BTC-USD", time.Hour, hoursBefore(hour, 200), hour)
	gap1, gap2 := hoursBefore(hour, 50), hoursBefore(hour, 49)
	x.Gaps[gap1.Unix()], x.Gaps[gap2.Unix()] = true, true
	x.Gaps[hoursBefore(hour, 1).Unix()] = true // the last closed bucket, not yet published
	clk := &clock{now: hour.Add(10 * time.Second)}
	cache := newCache(t, x.Client(t, nil), clk)
	s, err := cache.Series(context.Background(), "BTC-USD", time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := s.Candles[len(s.Candles)-1]; !last.Time.Equal(hoursBefore(hour, 2)) {
		t.Errorf("last candle %v, want the last published one", last.Time)
	}
	var before market.Candle
	for _, c := range cs {
		if c.Time.Equal(hoursBefore(hour, 51)) {
			before = c
		}
	}
	for _, c := range s.Candles {
		if c.Time.Equal(gap1) || c.Time.Equal(gap2) {
			if c.Open != before.Close || c.High != before.Close || c.Low != before.Close || c.Close != before.Close || c.Volume != 0 {
				t.Errorf("gap candle %+v, want flat at %v with no volume", c, before.Close)
			}
		}
	}
	for i := 1; i < len(s.Candles); i++ {
		if s.Candles[i].Time.Sub(s.Candles[i-1].Time) != time.Hour {
			t.Fatalf("series not one candle per bucket at %d", i)
		}
	}
	n := x.Requests.Load()
	clk.Set(hour.Add(20 * time.Second))
	if _, err := cache.Series(context.Background(), "BTC-USD", time.Hour, 100); err != nil || x.Requests.Load() != n {
		t.Errorf("asked again before RetryAfter: %d requests", x.Requests.Load())
	}
	delete(x.Gaps, hoursBefore(hour, 1).Unix()) // published late
	clk.Set(hour.Add(30 * time.Second))
	s, err = cache.Series(context.Background(), "BTC-USD", time.Hour, 100)
	if err != nil || x.Requests.Load() != n+1 || !s.Candles[len(s.Candles)-1].Time.Equal(hoursBefore(hour, 1)) {
		t.Errorf("late candle not picked up: %d requests, %v", x.Requests.Load(), err)
	}
}

// TestCacheServesBoundedStale: while the source fails, the last series is
// served with its true FetchedAt for two candle lengths, then the error.
func TestCacheServesBoundedStale(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Seed(t, "ETH-USD", time.Hour, hoursBefore(hour, 800), hour.Add(5*time.Hour))
	clk := &clock{now: hour.Add(time.Minute)}
	cache := newCache(t, x.Client(t, nil), clk)
	fresh, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 720)
	if err != nil {
		t.Fatal(err)
	}
	x.Mu.Lock()
	x.Down = true
	x.Mu.Unlock()
	clk.Set(hour.Add(90 * time.Minute))
	s, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 720)
	if err != nil || !s.FetchedAt.Equal(fresh.FetchedAt) || len(s.Candles) != 720 {
		t.Fatalf("stale answer: %v, fetched at %v", err, s.FetchedAt)
	}
	clk.Set(hour.Add(2*time.Hour + 2*time.Minute))
	if _, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 720); !errors.Is(err, market.ErrUnavailable) {
		t.Fatalf("beyond the bound: %v, want ErrUnavailable", err)
	}
	x.Mu.Lock()
	x.Down = false
	x.Mu.Unlock()
	clk.Set(hour.Add(2*time.Hour + 3*time.Minute))
	s, err = cache.Series(context.Background(), "ETH-USD", time.Hour, 720)
	if err != nil || !s.Candles[719].Time.Equal(hour.Add(time.Hour)) {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestCacheColdFailureIsUnavailable(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Down = true
	cache := newCache(t, x.Client(t, func(c *market.CoinbaseConfig) { c.Retries = 1 }), &clock{now: hour})
	if _, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 10); !errors.Is(err, market.ErrUnavailable) {
		t.Errorf("err = %v", err)
	}
	if _, err := cache.Series(context.Background(), "ETH-USD", 7*time.Minute, 10); err == nil {
		t.Error("accepted a granularity no source serves")
	}
}

// TestCacheCallerGivesUp: a caller's cancelled context ends its wait but
// not the shared fetch.
func TestCacheCallerGivesUp(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Seed(t, "ETH-USD", time.Hour, hoursBefore(hour, 100), hour)
	x.Delay = 100 * time.Millisecond
	cache := newCache(t, x.Client(t, nil), &clock{now: hour.Add(time.Minute)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := cache.Series(ctx, "ETH-USD", time.Hour, 50); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	s, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 50)
	if err != nil || len(s.Candles) != 50 || x.Requests.Load() != 1 {
		t.Errorf("second caller: %v, %d requests", err, x.Requests.Load())
	}
}

// TestCacheObserve: each Series call is one lookup, a miss when it
// waited for a fetch (however many callers shared it), a hit otherwise;
// Has sees the series once fetched.
func TestCacheObserve(t *testing.T) {
	t.Parallel()
	x := markettest.NewExchange(t)
	x.Seed(t, "ETH-USD", time.Hour, hoursBefore(hour, 800), hour)
	clk := &clock{now: hour.Add(90 * time.Second)}
	var hits, misses atomic.Int64
	cfg := market.DefaultCacheConfig()
	cfg.Now = clk.Now
	cfg.Observe = func(hit bool) {
		if hit {
			hits.Add(1)
		} else {
			misses.Add(1)
		}
	}
	cache, err := market.NewCache(x.Client(t, nil), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cache.Has("ETH-USD", time.Hour) {
		t.Error("an empty cache has data")
	}
	for i, want := range []struct{ hits, misses int64 }{{0, 1}, {1, 1}, {2, 1}} {
		if _, err := cache.Series(context.Background(), "ETH-USD", time.Hour, 24); err != nil {
			t.Fatal(err)
		}
		if hits.Load() != want.hits || misses.Load() != want.misses {
			t.Errorf("after call %d: %d hits, %d misses, want %+v", i+1, hits.Load(), misses.Load(), want)
		}
	}
	if !cache.Has("ETH-USD", time.Hour) || cache.Has("BTC-USD", time.Hour) {
		t.Error("Has does not follow what was fetched")
	}
}
