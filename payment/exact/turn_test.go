package exact_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment/exact"
)

// countingBook counts the reconciler's passes; it has nothing unresolved.
type countingBook struct{ passes atomic.Int64 }

func (b *countingBook) Unresolved(context.Context, time.Time, int) ([]exact.Record, error) {
	b.passes.Add(1)
	return nil, nil
}
func (b *countingBook) Resolve(context.Context, exact.Record) error { return nil }

// TestReconcilerTakesTurns: with Turn set, Run makes a pass only when it
// is this replica's turn.
func TestReconcilerTakesTurns(t *testing.T) {
	t.Parallel()
	audit, err := exact.NewAuditor(exact.DefaultAuditConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	book := &countingBook{}
	var asked, granted atomic.Int64
	cfg := exact.DefaultReconcilerConfig()
	cfg.Interval = 5 * time.Millisecond
	cfg.Turn = func(context.Context) (bool, error) {
		n := asked.Add(1)
		if n%3 == 0 { // another replica holds the lease two passes out of three
			granted.Add(1)
			return true, nil
		}
		return false, nil
	}
	r, err := exact.NewReconciler(cfg, book, audit, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	for asked.Load() < 12 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if book.passes.Load() != granted.Load() || granted.Load() < 4 {
		t.Errorf("%d passes for %d turns granted of %d asked", book.passes.Load(), granted.Load(), asked.Load())
	}
}
