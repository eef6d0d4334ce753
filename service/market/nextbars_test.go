package market

import (
	"testing"
	"time"
)

// TestNextBars: after an NSE bar come the session's next bars, then the
// next weekday's from 09:15 IST; a crypto series simply steps on.
func TestNextBars(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse("2006-01-02 15:04 MST", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ist := time.FixedZone("IST", 5*3600+1800)
	for _, tt := range []struct {
		product string
		last    time.Time
		want    []string // IST for equities, UTC otherwise
	}{
		{"TCS.NS", time.Date(2026, 11, 20, 13, 15, 0, 0, ist), []string{"2026-11-20 14:15", "2026-11-20 15:15", "2026-11-23 09:15", "2026-11-23 10:15"}}, // a Friday
		// A special Saturday session (Budget day): its bars are not
		// foreseeable; the next known ones are Monday's, from 09:15.
		{"HDFCBANK.NS", time.Date(2025, 2, 1, 10, 15, 0, 0, ist), []string{"2025-02-03 09:15", "2025-02-03 10:15", "2025-02-03 11:15"}},
		{"INFY.NS", time.Date(2026, 11, 24, 15, 15, 0, 0, ist), []string{"2026-11-25 09:15", "2026-11-25 10:15", "2026-11-25 11:15", "2026-11-25 12:15"}},
		{"ETH-USD", at("2026-11-20 23:00 UTC"), []string{"2026-11-21 00:00", "2026-11-21 01:00", "2026-11-21 02:00", "2026-11-21 03:00"}},
	} {
		got := NextBars(tt.product, time.Hour, tt.last.UTC(), len(tt.want))
		for i, g := range got {
			zone := time.UTC
			if IsEquity(tt.product) {
				zone = ist
			}
			if s := g.In(zone).Format("2006-01-02 15:04"); s != tt.want[i] {
				t.Errorf("%s after %s: bar %d at %s, want %s", tt.product, tt.last, i, s, tt.want[i])
			}
		}
	}
}
