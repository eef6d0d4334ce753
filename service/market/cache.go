package market

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Source is where the cache gets candles: *Coinbase or *Devnet.
type Source interface {
	// Fetch returns the candles whose bucket starts lie in [start, end],
	// oldest first, as the source publishes them (gaps allowed).
	Fetch(ctx context.Context, product string, g time.Duration, start, end time.Time) ([]Candle, error)
	// Name names the source in answers ("coinbase-exchange").
	Name() string
	// Synthetic reports generated candles.
	Synthetic() bool
}

// CacheConfig configures a Cache.
type CacheConfig struct {
	// RetryAfter is the least time between fetches while the last closed
	// bucket has no candle yet (the exchange publishes late, or nothing
	// traded).
	RetryAfter time.Duration
	// FetchTimeout bounds one fetch sequence, whoever waits for it.
	FetchTimeout time.Duration
	// StaleBuckets is how many candle lengths past its last successful
	// fetch a series may still be served while the source fails (at least
	// MinStale); beyond that the answer is ErrUnavailable.
	StaleBuckets int
	MinStale     time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe is told of each Series call: hit when the cache answered
	// without waiting for a fetch. Nil: nobody.
	Observe func(hit bool)
}

// DefaultCacheConfig returns the production settings.
func DefaultCacheConfig() CacheConfig {
	return CacheConfig{RetryAfter: 15 * time.Second, FetchTimeout: 20 * time.Second, StaleBuckets: 2, MinStale: 10 * time.Minute}
}

// Validate reports every problem of c at once.
func (c CacheConfig) Validate() error {
	var errs []error
	if c.RetryAfter <= 0 || c.FetchTimeout <= 0 || c.MinStale < 0 {
		errs = append(errs, errors.New("cache: retry-after and fetch timeout must be positive, min stale not negative"))
	}
	if c.StaleBuckets < 0 {
		errs = append(errs, errors.New("cache: stale buckets must not be negative"))
	}
	return errors.Join(errs...)
}

// Cache keeps one series per (product, granularity). A series is fresh
// while it holds the last closed bucket (a new candle cannot exist before
// the next bucket closes); when a new candle can exist it is refreshed by
// fetching only the buckets after the last one held (one request an hour
// for hourly candles). Concurrent requests for a stale or missing series
// share one fetch sequence.
type Cache struct {
	src     Source
	cfg     CacheConfig
	now     func() time.Time
	mu      sync.Mutex
	entries map[cacheKey]*entry
}

type cacheKey struct {
	product string
	g       time.Duration
}

type entry struct {
	candles   []Candle // gap-filled, oldest first; never modified once stored
	want      int      // most candles any caller asked for
	covered   int      // most candles the last successful fetch was made for
	fetchedAt time.Time
	flight    *flight // the fetch in progress, if any
}

type flight struct {
	done chan struct{}
	err  error
}

// NewCache returns a cache over src; it does no I/O.
func NewCache(src Source, cfg CacheConfig) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Cache{src: src, cfg: cfg, now: now, entries: map[cacheKey]*entry{}}, nil
}

// Source returns the name of the cache's source and whether it is synthetic.
func (c *Cache) Source() (name string, synthetic bool) { return c.src.Name(), c.src.Synthetic() }

// Series returns the last n closed candles of product at granularity g
// (fewer if the source has less history). When the source fails it serves
// the cached series if it is at most StaleBuckets candle lengths past its
// last fetch, with its true FetchedAt; otherwise the error wraps
// ErrUnavailable (or ErrUnknownProduct).
func (c *Cache) Series(ctx context.Context, product string, g time.Duration, n int) (Series, error) {
	if n < 1 {
		return Series{}, fmt.Errorf("market: asked for %d candles", n)
	}
	if !validGranularity(g) {
		return Series{}, fmt.Errorf("market: granularity %s is not served", g)
	}
	k := cacheKey{product, g}
	for first := true; ; first = false {
		c.mu.Lock()
		e := c.entries[k]
		if e == nil {
			e = &entry{}
			c.entries[k] = e
		}
		e.want = max(e.want, n)
		now := c.now()
		if c.fresh(e, g, n, now) {
			s := c.view(e, product, g, n)
			c.mu.Unlock()
			if first {
				c.observe(true) // a miss was counted when the fetch began
			}
			return s, nil
		}
		if first {
			c.observe(false)
		}
		f := e.flight
		if f == nil {
			f = &flight{done: make(chan struct{})}
			e.flight = f
			go c.fetch(k, e, f)
		}
		c.mu.Unlock()

		select {
		case <-ctx.Done():
			return Series{}, ctx.Err()
		case <-f.done:
		}
		if f.err == nil {
			continue // fresh now, unless a caller wants more candles: look again
		}
		c.mu.Lock()
		if e.covered >= n && c.now().Sub(e.fetchedAt) <= c.staleFor(g) {
			s := c.view(e, product, g, n)
			c.mu.Unlock()
			return s, nil
		}
		c.mu.Unlock()
		return Series{}, f.err
	}
}

func (c *Cache) observe(hit bool) {
	if c.cfg.Observe != nil {
		c.cfg.Observe(hit)
	}
}

// Has reports whether the cache holds candles of product at granularity
// g, whatever their age: the readiness probe's "the market cache has
// data".
func (c *Cache) Has(product string, g time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[cacheKey{product, g}]
	return e != nil && len(e.candles) > 0
}

// fresh reports whether e can answer for n candles at now without a fetch.
func (c *Cache) fresh(e *entry, g time.Duration, n int, now time.Time) bool {
	if e.covered < n {
		return false
	}
	due := lastClosed(now, g)
	if len(e.candles) > 0 && !e.candles[len(e.candles)-1].Time.Before(due) {
		return true
	}
	return now.Sub(e.fetchedAt) < c.cfg.RetryAfter
}

func (c *Cache) staleFor(g time.Duration) time.Duration {
	return max(time.Duration(c.cfg.StaleBuckets)*g, c.cfg.MinStale)
}

func (c *Cache) view(e *entry, product string, g time.Duration, n int) Series {
	cs := e.candles
	if len(cs) > n {
		cs = cs[len(cs)-n:]
	}
	return Series{
		Product:     product,
		Granularity: g,
		Candles:     cs,
		FetchedAt:   e.fetchedAt,
		Source:      c.src.Name(),
		Synthetic:   c.src.Synthetic(),
	}
}

// fetch runs one fetch sequence for e and publishes its outcome to f. It
// is detached from any caller's context, so a caller that gives up does
// not fail the others; FetchTimeout bounds it.
func (c *Cache) fetch(k cacheKey, e *entry, f *flight) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.FetchTimeout)
	defer cancel()

	c.mu.Lock()
	now := c.now()
	want := e.want
	held := e.candles
	c.mu.Unlock()

	due := lastClosed(now, k.g)
	start := due.Add(-time.Duration(want-1) * k.g)
	incremental := len(held) >= want && held[len(held)-1].Time.After(due.Add(-pageSize*k.g))
	if incremental {
		start = held[len(held)-1].Time.Add(k.g)
	}
	var got []Candle
	var err error
	if !start.After(due) {
		got, err = c.src.Fetch(ctx, k.product, k.g, start, due)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		if incremental {
			got = append(slices.Clip(held), got...)
		}
		merged := fillGaps(dedupe(got), k.g)
		if len(merged) > want {
			merged = merged[len(merged)-want:]
		}
		e.candles = merged
		if e.candles == nil {
			e.candles = []Candle{}
		}
		e.covered = want
		e.fetchedAt = now
	}
	f.err = err
	e.flight = nil
	close(f.done)
}

// dedupe drops candles whose time repeats one before it (sorted input).
func dedupe(cs []Candle) []Candle {
	return slices.CompactFunc(cs, func(a, b Candle) bool { return a.Time.Equal(b.Time) })
}
