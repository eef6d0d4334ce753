package payment

import (
	"context"
	"log/slog"
	"time"
)

// Periodic runs pass every interval until ctx ends, and at once whenever
// wake (nil: never) receives. When turn is set it is asked first, each
// time: replicas take turns under a store lease, and a pass runs only in
// the one holding it. A failed turn or pass is logged, under name, and
// the next comes at its time. A scheme's background work (exact's
// reconciler, batch-settlement's claimer and escrow watcher) runs on it.
func Periodic(ctx context.Context, interval time.Duration, wake <-chan struct{}, turn func(context.Context) (bool, error),
	pass func(context.Context) error, logger *slog.Logger, name string) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		mine, err := true, error(nil)
		if turn != nil {
			mine, err = turn(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			logger.WarnContext(ctx, name+": taking the turn failed; this pass is skipped", "err", err)
		case err == nil && mine:
			if err := pass(ctx); err != nil && ctx.Err() == nil {
				logger.WarnContext(ctx, name+" pass failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
	}
}
