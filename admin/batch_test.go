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

// TestBatchWatchMetrics: the stopped-channels counter is exposed at 0
// for each evidence once batch-settlement starts; the escrow watcher's
// series appear when it starts, its last success at the start time, and
// follow its passes.
func TestBatchWatchMetrics(t *testing.T) {
	t.Parallel()
	m := NewMetrics(Build{}, nil)
	m.BatchStopEvidences("voucher_ahead", "opened_elsewhere", "claimed_elsewhere")
	fams := scrape(t, m)
	if n := len(fams["tollgate_batch_channels_stopped_total"].GetMetric()); n != 3 {
		t.Errorf("tollgate_batch_channels_stopped_total has %d series at the start, want 3 at zero", n)
	}
	for _, name := range []string{"tollgate_batch_escrow_watch_last_success_timestamp_seconds", "tollgate_batch_escrow_watch_errors_total"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s is exposed before the escrow watcher starts", name)
		}
	}
	before := float64(time.Now().Unix())
	m.EscrowWatchStarted()
	fams = scrape(t, m)
	started := counter(fams, "tollgate_batch_escrow_watch_last_success_timestamp_seconds", nil)
	if started < before || started > float64(time.Now().Unix())+1 {
		t.Errorf("last success %v at the start, want about %v", started, before)
	}
	if _, ok := fams["tollgate_batch_escrow_watch_errors_total"]; !ok {
		t.Error("tollgate_batch_escrow_watch_errors_total is not exposed at the start")
	}
	m.EscrowWatched(errors.New("429 Too Many Requests"))
	m.EscrowWatched(errors.New("429 Too Many Requests"))
	m.BatchChannelStopped("claimed_elsewhere")
	fams = scrape(t, m)
	for _, tt := range []struct {
		name string
		want float64
	}{
		{"tollgate_batch_escrow_watch_errors_total", 2},
		{"tollgate_batch_escrow_watch_last_success_timestamp_seconds", started},
		{"tollgate_batch_channels_stopped_total", 1},
	} {
		labels := map[string]string(nil)
		if tt.name == "tollgate_batch_channels_stopped_total" {
			labels = map[string]string{"evidence": "claimed_elsewhere"}
		}
		if got := counter(fams, tt.name, labels); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, got, tt.want)
		}
	}
	m.EscrowWatched(nil)
	if got := counter(scrape(t, m), "tollgate_batch_escrow_watch_last_success_timestamp_seconds", nil); got < started {
		t.Errorf("last success %v after a pass, before the start %v", got, started)
	}
}
