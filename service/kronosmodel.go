package service

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/service/forecast/kronos"
	"github.com/tollgate/tollgate/service/market"
)

// KronosSampling is how the service samples Kronos (docs/rules.md,
// "Forecasts"): five paths at temperature 0.6 within the 0.9 nucleus,
// averaged. A point forecast should be the conditional mean, which the
// average of several paths estimates (the reference averages its
// sample_count paths, and the paper forecasts that way); a temperature
// below 1 keeps each path nearer the model's likely course, so five paths
// give a steady mean. Five keep a cold Kronos-small forecast within
// seconds on two cores (docs/figures.md). The seed is set per call from
// the inputs, so one input gives one answer.
func KronosSampling() kronos.Options {
	return kronos.Options{Temperature: 0.6, TopP: 0.9, Samples: 5}
}

// KronosModel forecasts with Kronos in process (service/forecast/kronos);
// it implements Model. It gives the model at most 512 − steps candles, so
// the window never slides and a key/value cache makes the answer the
// reference's for that input at a fraction of its cost. One forecast runs
// at a time (each uses every core); the others wait within their deadline.
type KronosModel struct {
	m       *kronos.Model
	name    string
	opts    kronos.Options
	timeout time.Duration
	turn    chan struct{}
	observe func(model string, took time.Duration, err error)
	// warmUp is WarmUp's time; last the latest inference that ended.
	warmUp atomic.Int64
	last   atomic.Pointer[inference]
}

// inference is one inference's time and end.
type inference struct {
	took time.Duration
	at   time.Time
}

// NewKronosModel serves m with the sampling opts (KronosSampling, the
// seed excepted), each forecast bounded by timeout; observe, if not nil,
// is told of each inference. It does no I/O.
func NewKronosModel(m *kronos.Model, opts kronos.Options, timeout time.Duration, observe func(model string, took time.Duration, err error)) *KronosModel {
	if observe == nil {
		observe = func(string, time.Duration, error) {}
	}
	return &KronosModel{m: m, name: KronosName(m.Info()), opts: opts, timeout: timeout, turn: make(chan struct{}, 1), observe: observe}
}

// KronosName names a checkpoint in answers: "kronos-small", "kronos-mini",
// "kronos-base", or "kronos-custom" for other shapes.
func KronosName(info kronos.Info) string {
	name := strings.ToLower(info.Name)
	if !strings.HasPrefix(name, "kronos-") {
		return "kronos-custom"
	}
	return name
}

// Name is the model's name in answers.
func (k *KronosModel) Name() string { return k.name }

// Predict forecasts steps closes after s from its last 512 − steps
// candles, at the times of the bars that follow (an equity's next session
// hours), sampled with the model's options and a seed drawn from the
// inputs.
func (k *KronosModel) Predict(ctx context.Context, s market.Series, steps int) ([]float64, string, error) {
	return k.predict(ctx, s, steps, true)
}

// predict is Predict; served tells an answer's inference (observed, and
// the latest in Cost) from the warm-up's.
func (k *KronosModel) predict(ctx context.Context, s market.Series, steps int, served bool) ([]float64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	n := min(len(s.Candles), kronos.DefaultMaxContext-steps)
	if n < 1 || s.Granularity <= 0 {
		return nil, "", fmt.Errorf("kronos: %d candles of %s for %d steps", len(s.Candles), s.Granularity, steps)
	}
	in := make([]kronos.Candle, n)
	for i, c := range s.Candles[len(s.Candles)-n:] {
		in[i] = kronos.Candle{Time: c.Time.UTC(), Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume}
	}
	future := market.NextBars(s.Product, s.Granularity, in[n-1].Time, steps)
	select {
	case k.turn <- struct{}{}:
	case <-ctx.Done():
		if served {
			k.observe(k.name, 0, ctx.Err())
		}
		return nil, "", fmt.Errorf("kronos: waiting for the model: %w", ctx.Err())
	}
	defer func() { <-k.turn }()
	o := k.opts
	o.Seed = seedOf(s.Product, s.Granularity, steps, in)
	start := time.Now()
	out, err := k.m.Forecast(ctx, in, future, o)
	if took := time.Since(start); served {
		k.observe(k.name, took, err)
		if err == nil {
			k.last.Store(&inference{took: took, at: time.Now()})
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("kronos: %w", err)
	}
	closes := make([]float64, len(out))
	for i, c := range out {
		if !(c.Close > 0) || math.IsInf(c.Close, 0) {
			return nil, "", fmt.Errorf("kronos: close %d is %v", i, c.Close)
		}
		closes[i] = c.Close
	}
	return closes, k.name, nil
}

// Warm-up's input: a cold /forecast at its usual size, the most candles
// a 48-step forecast reads (512 − 48) and the longest horizon.
const (
	warmUpCandles = kronos.DefaultMaxContext - warmUpSteps
	warmUpSteps   = forecastHorizon
)

// WarmUp runs one inference at a cold /forecast's size, on hourly
// candles of a smooth synthetic course, with the service's sampling, and
// returns its time, which Cost reports from then on: the cost of the
// checkpoint on this machine, measured where it serves. It is not an
// answer's inference: neither observed nor Cost's latest.
func (k *KronosModel) WarmUp(ctx context.Context) (time.Duration, error) {
	s := market.Series{Product: "ETH-USD", Granularity: time.Hour}
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for i := range warmUpCandles {
		c := 2000 + 50*math.Sin(float64(i)/24) + float64(i)/10
		s.Candles = append(s.Candles, market.Candle{Time: t0.Add(time.Duration(i) * time.Hour), Open: c - 1, High: c + 3, Low: c - 3, Close: c, Volume: 1000})
	}
	start := time.Now()
	_, _, err := k.predict(ctx, s, warmUpSteps, false)
	took := time.Since(start)
	if err == nil {
		k.warmUp.Store(int64(took))
	}
	return took, err
}

// Cost is what the model costs to run: its checkpoint, its parameters,
// the warm-up's time, the deadline and the latest inference.
func (k *KronosModel) Cost() ModelCost {
	info := k.m.Info()
	c := ModelCost{Checkpoint: k.name, Parameters: int64(info.Params + info.TokenizerParams), WarmUp: time.Duration(k.warmUp.Load()), Timeout: k.timeout}
	if l := k.last.Load(); l != nil {
		c.Last, c.LastAt = l.took, l.at
	}
	return c
}

// seedOf draws a forecast's seed from what it is asked: the product, the
// candles' length, the horizon and every candle the model reads.
func seedOf(product string, granularity time.Duration, steps int, in []kronos.Candle) uint64 {
	h := fnv.New64a()
	h.Write([]byte(product))
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(granularity))
	put(uint64(steps))
	for _, c := range in {
		put(uint64(c.Time.Unix()))
		for _, v := range []float64{c.Open, c.High, c.Low, c.Close, c.Volume} {
			put(math.Float64bits(v))
		}
	}
	return h.Sum64()
}
