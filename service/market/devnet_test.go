package market_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/rules"
)

func TestDevnetIsDeterministicAndAligned(t *testing.T) {
	t.Parallel()
	d := market.NewDevnet()
	ctx := context.Background()
	end := hoursBefore(hour, 1)
	a, err := d.Fetch(ctx, "ETH-USD", time.Hour, hoursBefore(end, 719), end)
	if err != nil {
		t.Fatal(err)
	}
	// A different range over the same buckets gives the same candles.
	b, err := d.Fetch(ctx, "ETH-USD", time.Hour, hoursBefore(end, 100), end.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 720 || len(b) != 106 {
		t.Fatalf("len %d, %d", len(a), len(b))
	}
	for i := range 101 {
		if a[619+i] != b[i] {
			t.Fatalf("bucket %v differs between fetches: %+v vs %+v", b[i].Time, a[619+i], b[i])
		}
	}
	for i, c := range a {
		if c.Time.Truncate(time.Hour) != c.Time || c.Time.Location() != time.UTC {
			t.Fatalf("candle %d at %v is not on an hour boundary in UTC", i, c.Time)
		}
		if !(c.Low > 0 && c.Low <= math.Min(c.Open, c.Close) && c.High >= math.Max(c.Open, c.Close) && c.Volume > 0) {
			t.Fatalf("candle %d is not sane: %+v", i, c)
		}
		if i > 0 && math.Abs(c.Open-a[i-1].Close) > 1e-9*c.Open {
			t.Fatalf("candle %d opens at %v, previous closed at %v", i, c.Open, a[i-1].Close)
		}
	}
	// Granularities agree: the daily candle spans its hours.
	day := time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC)
	daily, _ := d.Fetch(ctx, "BTC-USD", 24*time.Hour, day, day)
	hourly, _ := d.Fetch(ctx, "BTC-USD", time.Hour, day, day.Add(23*time.Hour))
	hi, lo := 0.0, math.Inf(1)
	for _, h := range hourly {
		hi, lo = math.Max(hi, h.High), math.Min(lo, h.Low)
	}
	if daily[0].Open != hourly[0].Open || math.Abs(daily[0].Close-hourly[23].Close) > 1e-9 || daily[0].High != hi || daily[0].Low != lo {
		t.Errorf("daily %+v does not aggregate its hours (open %v close %v high %v low %v)", daily[0], hourly[0].Open, hourly[23].Close, hi, lo)
	}
	if _, err := d.Fetch(ctx, "DOGE-USD", time.Hour, end, end); !errors.Is(err, market.ErrUnknownProduct) {
		t.Errorf("unknown product: %v", err)
	}
}

// TestDevnetVisitsEveryRegime walks 120 days of hourly ETH and BTC candles
// and classifies every sixth hour by the published rules: every regime and
// every /candles label occurs, and prices stay plausible.
func TestDevnetVisitsEveryRegime(t *testing.T) {
	t.Parallel()
	for _, product := range []string{"ETH-USD", "BTC-USD"} {
		end := hoursBefore(hour, 1)
		cs, err := market.NewDevnet().Fetch(context.Background(), product, time.Hour, hoursBefore(end, 120*24), end)
		if err != nil {
			t.Fatal(err)
		}
		closes := make([]float64, len(cs))
		for i, c := range cs {
			closes[i] = c.Close
		}
		seen := map[string]int{}
		for i := 100; i <= len(closes); i += 6 {
			s, err := rules.Analyze(closes[i-100 : i])
			if err != nil {
				t.Fatal(err)
			}
			seen[rules.Classify(s).String()]++
		}
		for _, r := range []string{"TREND-UP", "TREND-DOWN", "RANGE", "CHOP"} {
			if seen[r] < 5 {
				t.Errorf("%s: regime %s seen %d times in 120 days: %v", product, r, seen[r], seen)
			}
		}
		base := map[string]float64{"ETH-USD": 3400, "BTC-USD": 95000}[product]
		for _, c := range closes {
			if c < base/3 || c > base*3 {
				t.Fatalf("%s wandered to %v", product, c)
			}
		}
		t.Logf("%s regimes over 120 days: %v", product, seen)
	}
}

func BenchmarkDevnet720Hourly(b *testing.B) {
	d := market.NewDevnet()
	end := hoursBefore(hour, 1)
	for b.Loop() {
		if _, err := d.Fetch(context.Background(), "ETH-USD", time.Hour, hoursBefore(end, 719), end); err != nil {
			b.Fatal(err)
		}
	}
}
