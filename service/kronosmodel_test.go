package service

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/forecast/kronos"
	"github.com/tollgate/tollgate/service/market"
)

// tinyKronos loads the reference fixtures' tiny checkpoint.
func tinyKronos(t testing.TB) *kronos.Model {
	t.Helper()
	m, err := kronos.Load("forecast/kronos/testdata/tiny/model", "forecast/kronos/testdata/tiny/tokenizer")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// hourly is n hourly candles of a seeded random walk, ending at end.
func hourly(product string, n int, seed uint64, end time.Time) market.Series {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := market.Series{Product: product, Granularity: time.Hour, Source: "test", FetchedAt: end}
	price := 3000.0
	for i := range n {
		open := price
		price *= math.Exp(rng.NormFloat64() * 0.01)
		hi, lo := max(open, price)*(1+rng.Float64()*0.003), min(open, price)*(1-rng.Float64()*0.003)
		s.Candles = append(s.Candles, market.Candle{Time: end.Add(time.Duration(i-n+1) * time.Hour), Open: open, High: hi, Low: lo, Close: price, Volume: 100 + rng.Float64()*50})
	}
	return s
}

// TestKronosModel: the service's Kronos gives the model the last
// 512 − steps candles (the window never slides), samples with the
// service's settings and a seed drawn from the inputs (one input, one
// answer; another input, another seed), names the checkpoint, and fails
// within its deadline, telling the metrics each time.
func TestKronosModel(t *testing.T) {
	t.Parallel()
	m := tinyKronos(t)
	var mu sync.Mutex
	var seen []error
	k := NewKronosModel(m, KronosSampling(), time.Minute, func(model string, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if model != "kronos-custom" {
			t.Errorf("observed model %q", model)
		}
		seen = append(seen, err)
	})
	end := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	s := hourly("ETH-USD", 720, 1, end)
	ctx := context.Background()
	for _, steps := range []int{24, 48} {
		got, name, err := k.Predict(ctx, s, steps)
		if err != nil || name != "kronos-custom" || len(got) != steps {
			t.Fatalf("steps %d: %v %q %d closes", steps, err, name, len(got))
		}
		// What the reference computes for the last 512 − steps candles,
		// the next steps hours, the service's sampling and the same seed.
		n := kronos.DefaultMaxContext - steps
		in := make([]kronos.Candle, n)
		for i, c := range s.Candles[len(s.Candles)-n:] {
			in[i] = kronos.Candle{Time: c.Time, Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume}
		}
		future := make([]time.Time, steps)
		for i := range future {
			future[i] = end.Add(time.Duration(i+1) * time.Hour)
		}
		o := KronosSampling()
		o.Seed = seedOf("ETH-USD", time.Hour, steps, in)
		want, err := m.Forecast(ctx, in, future, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != want[i].Close {
				t.Fatalf("steps %d, close %d: %v, the model on the last %d candles gives %v", steps, i, got[i], n, want[i].Close)
			}
		}
		again, _, _ := k.Predict(ctx, s, steps)
		if !slices.Equal(got, again) {
			t.Errorf("steps %d: two answers for one input", steps)
		}
	}
	moved := hourly("ETH-USD", 720, 2, end)
	a, _, _ := k.Predict(ctx, s, 24)
	b, _, _ := k.Predict(ctx, moved, 24)
	if slices.Equal(a, b) {
		t.Error("two inputs gave one answer")
	}
	if seedOf("ETH-USD", time.Hour, 24, nil) == seedOf("BTC-USD", time.Hour, 24, nil) {
		t.Error("the seed ignores the product")
	}

	late := NewKronosModel(m, KronosSampling(), time.Nanosecond, nil)
	if _, _, err := late.Predict(ctx, s, 24); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past the deadline: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 6 || slices.ContainsFunc(seen, func(err error) bool { return err != nil }) {
		t.Errorf("the metrics were told of %d inferences: %v", len(seen), seen)
	}
}

// candleFeed serves one series for every request.
type candleFeed struct{ s market.Series }

func (f candleFeed) Series(_ context.Context, product string, _ time.Duration, n int) (market.Series, error) {
	s := f.s
	s.Product = product
	s.Candles = s.Candles[max(0, len(s.Candles)-n):]
	return s, nil
}

// TestForecastByKronos: /forecast (and /signal's expected return) comes
// from Kronos when it is configured, named so, with the clamp of the
// horizon; when it fails, the embedded model answers and the answer says
// why.
func TestForecastByKronos(t *testing.T) {
	t.Parallel()
	m := tinyKronos(t)
	feed := candleFeed{hourly("", 720, 3, time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))}
	for _, tt := range []struct {
		name         string
		timeout      time.Duration
		wantModel    string
		wantFallback string
	}{
		{"kronos answers", time.Minute, "kronos-custom", ""},
		{"kronos too slow", time.Nanosecond, "embedded-damped-holt", "kronos-custom: deadline exceeded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := NewAnalytics(Sources{Candles: feed, Model: NewKronosModel(m, KronosSampling(), tt.timeout, nil)})
			r, err := a.GetForecast(context.Background(), &tollgatev1.GetForecastRequest{Product: new("ETH-USD"), PredLen: new(int32(12))})
			if err != nil {
				t.Fatal(err)
			}
			if r.GetModel() != tt.wantModel || r.GetFallback() != tt.wantFallback || len(r.GetCloses()) != 12 || r.GetPredLen() != 12 {
				t.Fatalf("model %q fallback %q, %d closes", r.GetModel(), r.GetFallback(), len(r.GetCloses()))
			}
			sig, err := a.GetSignal(context.Background(), &tollgatev1.GetSignalRequest{Product: new("ETH-USD")})
			if err != nil || sig.GetExpectedReturnPct() == nil {
				t.Fatalf("signal: %v %v", err, sig)
			}
		})
	}
}

// TestKronosHorizonPrefix: the ground for cutting every horizon from one
// 48-step forecast: with the same window and seed, Kronos' first h steps
// of a 48-step forecast are its h-step forecast, for several h, sampled
// as the service samples (five paths, each on its own stream).
func TestKronosHorizonPrefix(t *testing.T) {
	t.Parallel()
	m := tinyKronos(t)
	s := hourly("ETH-USD", 464, 11, time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))
	in := make([]kronos.Candle, len(s.Candles))
	for i, c := range s.Candles {
		in[i] = kronos.Candle{Time: c.Time, Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume}
	}
	future := market.NextBars(s.Product, s.Granularity, in[len(in)-1].Time, 48)
	o := KronosSampling()
	o.Seed = 42
	long, err := m.Forecast(context.Background(), in, future, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []int{1, 6, 24, 47} {
		short, err := m.Forecast(context.Background(), in, future[:h], o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range short {
			if short[i] != long[i] {
				t.Fatalf("h=%d: step %d is %+v alone and %+v in the 48-step forecast", h, i, short[i], long[i])
			}
		}
	}
}

// countingModel answers 48 rising closes and counts its calls.
type countingModel struct {
	mu    sync.Mutex
	calls []int
}

func (c *countingModel) Name() string { return "counting" }

func (c *countingModel) Predict(_ context.Context, s market.Series, steps int) ([]float64, string, error) {
	c.mu.Lock()
	c.calls = append(c.calls, steps)
	c.mu.Unlock()
	out := make([]float64, steps)
	last := s.Candles[len(s.Candles)-1].Close
	for i := range out {
		out[i] = last * (1 + float64(i+1)/100)
	}
	return out, "counting", nil
}

// TestForecastHorizonsShareOneFit: requests for many horizons of one
// product cost one model call, of the longest horizon; each answer is its
// beginning, with its own expected return, and only the first is cold.
// The embedded model's answers are cut the same way and equal its own
// forecast of each horizon.
func TestForecastHorizonsShareOneFit(t *testing.T) {
	t.Parallel()
	feed := candleFeed{hourly("", 720, 5, time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC))}
	model := &countingModel{}
	a := NewAnalytics(Sources{Candles: feed, Model: model})
	embedded := NewAnalytics(Sources{Candles: feed})
	var longest []float64
	for i, h := range []int32{48, 6, 24, 1, 48} {
		r, err := a.GetForecast(context.Background(), &tollgatev1.GetForecastRequest{Product: new("ETH-USD"), PredLen: new(h)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			longest = r.GetCloses()
		}
		want := (longest[h-1]/r.GetLastClose() - 1) * 100
		if !slices.Equal(r.GetCloses(), longest[:h]) || r.GetPredLen() != h || math.Abs(r.GetExpectedReturnPct()-want) > 1e-9 || r.GetCached() != (i > 0) {
			t.Errorf("pred_len %d: %d closes, expected return %v (want %v), cached %v", h, len(r.GetCloses()), r.GetExpectedReturnPct(), want, r.GetCached())
		}
		e, err := embedded.GetForecast(context.Background(), &tollgatev1.GetForecastRequest{Product: new("ETH-USD"), PredLen: new(h)})
		alone, _, ferr := forecast.Forecast(feed.s.Closes(), int(h))
		if err != nil || ferr != nil || !slices.Equal(e.GetCloses(), alone) {
			t.Errorf("embedded, pred_len %d: %v, %v; want its own forecast of %d steps", h, err, ferr, h)
		}
	}
	if !slices.Equal(model.calls, []int{48}) {
		t.Errorf("the model was asked %v; want one 48-step forecast", model.calls)
	}
}
