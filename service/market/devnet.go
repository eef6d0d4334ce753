package market

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Devnet is the synthetic candle feed of the devnet: a deterministic
// function of (product, time) with no I/O, so every process, test and
// machine sees the same candles for the same buckets.
//
// The price path is a one-minute log-price walk in 48-hour segments. Each
// segment draws a regime from a hash of (product, segment): a trend up or
// down (2-5% a day), a quiet range, or a choppy range (high noise plus a
// 12-hour swing), with a pull back towards the product's base price so the
// path stays plausible. Within a segment the walk is a Brownian bridge
// between the segment's anchors, so any bucket is computed from its own
// segment alone. Candles aggregate the minutes of their bucket; volume
// grows with the size of the moves. Every regime label of the rules occurs
// over time.
//
// It is not market data and says so: Synthetic() is true and Name() is
// "devnet-synthetic".
type Devnet struct{}

// NewDevnet returns the synthetic feed.
func NewDevnet() *Devnet { return &Devnet{} }

// Name implements Source.
func (*Devnet) Name() string { return "devnet-synthetic" }

// Synthetic implements Source.
func (*Devnet) Synthetic() bool { return true }

type synthProduct struct {
	base       float64 // price the path is pulled towards
	minuteVol  float64 // log-price noise per minute
	restVolume float64 // volume per minute at rest
	seed       uint64
}

func synthProducts(product string) (synthProduct, bool) {
	switch product {
	case "BTC-USD":
		return synthProduct{base: 95000, minuteVol: 0.0006, restVolume: 8, seed: 0x42544355534400}, true
	case "ETH-USD":
		return synthProduct{base: 3400, minuteVol: 0.0008, restVolume: 150, seed: 0x45544855534400}, true
	case "RELIANCE.NS":
		return synthProduct{base: 1300, minuteVol: 0.0004, restVolume: 9000, seed: 0x52454c4e53}, true
	case "TCS.NS":
		return synthProduct{base: 3500, minuteVol: 0.0004, restVolume: 3000, seed: 0x5443534e53}, true
	case "HDFCBANK.NS":
		return synthProduct{base: 1700, minuteVol: 0.0004, restVolume: 8000, seed: 0x484446434e53}, true
	case "INFY.NS":
		return synthProduct{base: 1600, minuteVol: 0.0004, restVolume: 6000, seed: 0x494e46594e53}, true
	case "ICICIBANK.NS":
		return synthProduct{base: 1300, minuteVol: 0.0004, restVolume: 7000, seed: 0x494349434e53}, true
	}
	return synthProduct{}, false
}

const (
	synthOriginUnix = 1704067200 // 2024-01-01T00:00:00Z: the walk starts here
	segmentMinutes  = 48 * 60
	swingMinutes    = 12 * 60 // period of the chop swing; divides the segment
)

type segmentKind int

const (
	kindTrend segmentKind = iota
	kindRange
	kindChop
)

// Fetch implements Source: every bucket start in [start, end] at or after
// the origin (2024-01-01), oldest first.
func (d *Devnet) Fetch(ctx context.Context, product string, g time.Duration, start, end time.Time) ([]Candle, error) {
	p, ok := synthProducts(product)
	if !ok {
		return nil, fmt.Errorf("%w: devnet feed has no %q", ErrUnknownProduct, product)
	}
	if !validGranularity(g) {
		return nil, fmt.Errorf("devnet: granularity %s is not served", g)
	}
	origin := time.Unix(synthOriginUnix, 0).UTC()
	start, end = start.Truncate(g).UTC(), end.Truncate(g).UTC()
	if start.Before(origin) {
		start = origin
	}
	if end.Before(start) {
		return nil, nil
	}
	w := newWalk(p)
	per := int(g / time.Minute)
	out := make([]Candle, 0, int(end.Sub(start)/g)+1)
	for t := start; !t.After(end); t = t.Add(g) {
		if len(out)%64 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m0 := int64(t.Sub(origin) / time.Minute)
		c := Candle{Time: t, Open: w.price(m0)}
		c.High, c.Low = c.Open, c.Open
		prev := c.Open
		for k := 1; k <= per; k++ {
			px := w.price(m0 + int64(k))
			c.High, c.Low = math.Max(c.High, px), math.Min(c.Low, px)
			move := math.Abs(math.Log(px / prev))
			c.Volume += p.restVolume * (0.5 + unit(p.seed^0x766f6c, uint64(m0)+uint64(k))) * (1 + 400*move)
			prev = px
		}
		c.Close = prev
		c.Volume = math.Round(c.Volume*1e4) / 1e4
		out = append(out, c)
	}
	return out, nil
}

// walk evaluates the price path, keeping the current segment's walk.
type walk struct {
	p       synthProduct
	seg     int64     // segment held in cum, -1 for none
	anchors []float64 // anchors[s] = log price at the start of segment s
	cum     []float64 // cum[k] = noise walk at minute k of seg, k in [0, segmentMinutes]
	kind    segmentKind
}

func newWalk(p synthProduct) *walk {
	return &walk{p: p, seg: -1, anchors: []float64{math.Log(p.base)}}
}

// price returns the price at minute m after the origin.
func (w *walk) price(m int64) float64 {
	s, k := m/segmentMinutes, int(m%segmentMinutes)
	w.load(s)
	a0, a1 := w.anchors[s], w.anchors[s+1]
	frac := float64(k) / segmentMinutes
	lp := a0 + (a1-a0)*frac + w.cum[k] - frac*w.cum[segmentMinutes]
	if w.kind == kindChop {
		lp += 0.012 * math.Sin(2*math.Pi*float64(k)/swingMinutes)
	}
	return math.Exp(lp)
}

// load prepares segment s: its anchors (each from the one before) and its
// bridge noise.
func (w *walk) load(s int64) {
	for int64(len(w.anchors)) <= s+1 {
		i := int64(len(w.anchors)) - 1
		_, drift := w.draw(i, w.anchors[i])
		w.anchors = append(w.anchors, w.anchors[i]+drift)
	}
	if w.seg == s {
		return
	}
	w.seg = s
	w.kind, _ = w.draw(s, w.anchors[s])
	vol := w.p.minuteVol
	switch w.kind {
	case kindRange:
		vol *= 0.6
	case kindChop:
		vol *= 1.5
	}
	if w.cum == nil {
		w.cum = make([]float64, segmentMinutes+1)
	}
	base := uint64(s) * segmentMinutes
	for k := 1; k <= segmentMinutes; k++ {
		w.cum[k] = w.cum[k-1] + vol*gauss(w.p.seed, base+uint64(k))
	}
}

// draw decides segment s's regime and its net log move from a hash of
// (product, s), pulled back towards the base price.
func (w *walk) draw(s int64, anchor float64) (segmentKind, float64) {
	u := unit(w.p.seed^0x6b696e64, uint64(s))
	pos := anchor - math.Log(w.p.base) // > 0: above base
	switch {
	case u < 0.45:
		up := unit(w.p.seed^0x646972, uint64(s)) < math.Max(0.1, math.Min(0.9, 0.5-2*pos))
		perDay := 0.02 + 0.03*unit(w.p.seed^0x6d6167, uint64(s))
		if !up {
			perDay = -perDay
		}
		return kindTrend, 2 * perDay
	case u < 0.75:
		return kindRange, -0.3*pos + 0.01*(unit(w.p.seed^0x726e67, uint64(s))-0.5)
	default:
		return kindChop, -0.3*pos + 0.02*(unit(w.p.seed^0x63686f70, uint64(s))-0.5)
	}
}

// splitmix64 is a fast, well-mixed 64-bit hash (Steele et al.).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit returns a uniform number in [0, 1) for (seed, i).
func unit(seed, i uint64) float64 {
	return float64(splitmix64(seed^splitmix64(i))>>11) / (1 << 53)
}

// gauss returns an approximately standard normal number for (seed, i): the
// sum of four uniforms, centred and scaled (Irwin-Hall).
func gauss(seed, i uint64) float64 {
	h := splitmix64(seed ^ splitmix64(i))
	g := splitmix64(h)
	s := float64(h>>32) + float64(h&0xffffffff) + float64(g>>32) + float64(g&0xffffffff)
	return (s/(1<<32) - 2) * math.Sqrt(3)
}
