// Package market supplies OHLCV candles: from Coinbase Exchange's public
// candles API ([Coinbase]) or from the devnet's deterministic synthetic feed
// ([Devnet]), through a [Cache] per (product, granularity) that fetches only
// when a new candle can exist, collapses concurrent fetches into one, and
// serves a bounded-stale series while the source fails.
//
// A series holds closed candles only, one per bucket, oldest first: a bucket
// in which nothing traded (the exchange publishes no candle for it) is
// filled with the previous close and zero volume, so that N hourly closes
// always span N hours. market knows nothing of the rules applied to the
// candles, of protobuf or of HTTP.
package market

import (
	"errors"
	"time"
)

// Candle is one bucket of trading.
type Candle struct {
	// Time is the start of the bucket, UTC.
	Time                           time.Time
	Open, High, Low, Close, Volume float64
}

// Series is the closed candles of one product at one granularity.
type Series struct {
	Product     string
	Granularity time.Duration
	// Candles are oldest first, one per bucket, gaps filled.
	Candles []Candle
	// FetchedAt is when the source last answered for this series; an answer
	// computed from it is as of this time.
	FetchedAt time.Time
	// Source names where the candles come from, e.g. "coinbase-exchange".
	Source string
	// Synthetic is true for generated candles (the devnet feed).
	Synthetic bool
}

// Closes returns the close of every candle.
func (s Series) Closes() []float64 {
	out := make([]float64, len(s.Candles))
	for i, c := range s.Candles {
		out[i] = c.Close
	}
	return out
}

// Errors of sources and of the cache. Source errors wrap one of these.
var (
	// ErrUnavailable means the source failed (unreachable, throttled past
	// the retries, 5xx, or an answer that is not candles) and no cached
	// series young enough could stand in.
	ErrUnavailable = errors.New("market: candle source unavailable")
	// ErrUnknownProduct means the source has no such product.
	ErrUnknownProduct = errors.New("market: unknown product")
)

// validGranularity reports whether every source serves candles of length g.
func validGranularity(g time.Duration) bool {
	switch g {
	case 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour:
		return true
	}
	return false
}

// lastClosed returns the start of the last bucket of length g that has
// closed at now (buckets are aligned to the Unix epoch, as the exchange's).
func lastClosed(now time.Time, g time.Duration) time.Time {
	return now.Truncate(g).Add(-g).UTC()
}

// fillGaps returns candles (sorted, unique times) with every missing bucket
// between the first and the last filled by a flat candle at the previous
// close with zero volume.
func fillGaps(candles []Candle, g time.Duration) []Candle {
	if len(candles) == 0 {
		return nil
	}
	n := int(candles[len(candles)-1].Time.Sub(candles[0].Time)/g) + 1
	out := make([]Candle, 0, n)
	for _, c := range candles {
		for len(out) > 0 && c.Time.Sub(out[len(out)-1].Time) > g {
			prev := out[len(out)-1]
			out = append(out, Candle{Time: prev.Time.Add(g), Open: prev.Close, High: prev.Close, Low: prev.Close, Close: prev.Close})
		}
		out = append(out, c)
	}
	return out
}
