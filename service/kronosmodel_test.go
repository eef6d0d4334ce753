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
