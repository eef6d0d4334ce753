package admin

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBatchMetrics: claims and settles are counted by kind and result,
// with their USD when they landed; the unclaimed gauges read the store at
// each scrape, and a failing read yields no stale figure.
func TestBatchMetrics(t *testing.T) {
	t.Parallel()
	m := NewMetrics(Build{}, nil)
	var readErr error
	m.WatchBatch(func(context.Context) (int, float64, time.Duration, error) {
		return 3, 1.25, 90 * time.Second, readErr
	})
	m.BatchTransaction("claim", "ok", 0.5)
	m.BatchTransaction("claim", "refused", 0)
	m.BatchTransaction("claim", "ok", 0.25)
	m.BatchTransaction("settle", "ok", 0.75)
	fams := scrape(t, m)
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tollgate_batch_transactions_total", map[string]string{"kind": "claim", "result": "ok"}, 2},
		{"tollgate_batch_transactions_total", map[string]string{"kind": "claim", "result": "refused"}, 1},
		{"tollgate_batch_transactions_total", map[string]string{"kind": "settle", "result": "ok"}, 1},
		{"tollgate_batch_usd_total", map[string]string{"kind": "claim"}, 0.75},
		{"tollgate_batch_usd_total", map[string]string{"kind": "settle"}, 0.75},
		{"tollgate_batch_unclaimed_channels", nil, 3},
		{"tollgate_batch_unclaimed_usd", nil, 1.25},
		{"tollgate_batch_oldest_unclaimed_seconds", nil, 90},
	} {
		if got := counter(fams, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	readErr = errors.New("database is locked")
	if _, err := m.reg.Gather(); err == nil {
		t.Error("a failing store read scraped cleanly")
	}
}
