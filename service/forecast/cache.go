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

// Cache keeps forecasts per product and horizon for a TTL, collapses
// concurrent cold requests for one key into one computation, and holds at
// most Max entries (the oldest goes first).
type Cache struct {
	ttl     time.Duration
	max     int
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]Result
	flight  singleflight.Group
}

// NewCache returns a cache; it does no I/O.
func NewCache(ttl time.Duration, maxEntries int, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{ttl: ttl, max: maxEntries, now: now, entries: map[string]Result{}}
}

// Get returns the forecast of product over steps: from the cache while it
// is younger than the TTL (cached true), else from compute, once for all
// concurrent callers of the key.
func (c *Cache) Get(ctx context.Context, product string, steps int, compute func(context.Context) (Result, error)) (Result, bool, error) {
	key := fmt.Sprintf("%s/%d", product, steps)
	c.mu.Lock()
	r, ok := c.entries[key]
	c.mu.Unlock()
	if ok && c.now().Sub(r.At) < c.ttl {
		return r, true, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) {
		r, err := compute(ctx)
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
	if err != nil {
		return Result{}, false, err
	}
	return v.(Result), false, nil
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
