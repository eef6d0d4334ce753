package forecast

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Result is one forecast.
type Result struct {
	Product   string
	LastClose float64
	// Closes are the forecast closes, next step first.
	Closes []float64
	// ExpectedReturnPct is the last forecast close against LastClose.
	ExpectedReturnPct float64
	Model             string
	// Source names the feed the closes came from; Synthetic says it is
	// not market data.
	Source    string
	Synthetic bool
	At        time.Time
	// Fallback says why the embedded model answered in place of the
	// configured one; empty when the configured one answered.
	Fallback string
}

// Cache keeps forecasts per product and horizon for a TTL (a fallback's,
// answered by the embedded model in place of a failed one, for a shorter
// one, so the configured model is asked again soon), collapses concurrent
// cold requests for one key into one computation, and holds at most Max
// entries (the oldest goes first).
type Cache struct {
	ttl     time.Duration
	retry   time.Duration
	max     int
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]Result
	flight  singleflight.Group
}

// NewCache returns a cache keeping answers for ttl and fallbacks for
// retry; it does no I/O.
func NewCache(ttl, retry time.Duration, maxEntries int, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{ttl: ttl, retry: retry, max: maxEntries, now: now, entries: map[string]Result{}}
}

// Get returns the forecast of product over steps: from the cache while it
// is younger than the TTL (cached true), else from compute, once for all
// concurrent callers of the key. The computation is theirs together: it
// runs without the first caller's cancellation (compute bounds its own
// work), and a caller who leaves stops waiting for it, not it.
func (c *Cache) Get(ctx context.Context, product string, steps int, compute func(context.Context) (Result, error)) (Result, bool, error) {
	key := fmt.Sprintf("%s/%d", product, steps)
	c.mu.Lock()
	r, ok := c.entries[key]
	c.mu.Unlock()
	if ok && c.now().Sub(r.At) < c.keep(r) {
		return r, true, nil
	}
	shared := context.WithoutCancel(ctx)
	flight := c.flight.DoChan(key, func() (any, error) {
		r, err := compute(shared)
		if err != nil {
			return Result{}, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
			c.evictOldest()
		}
		c.entries[key] = r
		return r, nil
	})
	select {
	case <-ctx.Done():
		return Result{}, false, ctx.Err()
	case res := <-flight:
		if res.Err != nil {
			return Result{}, false, res.Err
		}
		return res.Val.(Result), false, nil
	}
}

// keep is how long r is served from the cache.
func (c *Cache) keep(r Result) time.Duration {
	if r.Fallback != "" {
		return min(c.retry, c.ttl)
	}
	return c.ttl
}

func (c *Cache) evictOldest() {
	var oldest string
	var at time.Time
	for k, r := range c.entries {
		if oldest == "" || r.At.Before(at) {
			oldest, at = k, r.At
		}
	}
	delete(c.entries, oldest)
}
