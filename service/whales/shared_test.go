package whales_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/devnet"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/whales"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/pgtest"
)

// countedRPC counts the JSON-RPC round trips of one replica's scanner.
type countedRPC struct {
	r *rpc.Client
	n atomic.Int64
}

func (c *countedRPC) CallContext(ctx context.Context, result any, method string, args ...any) error {
	c.n.Add(1)
	return c.r.CallContext(ctx, result, method, args...)
}

func (c *countedRPC) BatchCallContext(ctx context.Context, b []rpc.BatchElem) error {
	c.n.Add(1)
	return c.r.BatchCallContext(ctx, b)
}

// crashed is a replica's store that never releases its lease: the replica
// dies rather than shuts down, and the lease has to expire.
type crashed struct{ *store.DB }

func (crashed) ReleaseLease(context.Context, string, string) error { return nil }

type replica struct {
	rpc    *countedRPC
	shared *whales.Shared
	api    *service.Analytics
	stop   context.CancelFunc
	done   chan struct{}
}

// TestSharedScan: two replicas on one PostgreSQL database and one devnet.
// One scans, the other makes no chain call; both answer /whales with the
// same snapshot, 503 before the first. When the scanning replica dies
// (its lease left to expire), the other takes the scan over.
func TestSharedScan(t *testing.T) {
	t.Parallel()
	c, r := startDevnet(t)
	url := pgtest.URL(t)
	ctx := context.Background()
	const interval = time.Second
	start := func(holder string) *replica {
		db, err := store.OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		cr := &countedRPC{r: r}
		cfg := devnetConfig(c)
		cfg.Interval = interval
		sc, err := whales.New(cr, cfg, quiet())
		if err != nil {
			t.Fatal(err)
		}
		sh := whales.NewShared(sc, crashed{db}, holder, quiet())
		rctx, stop := context.WithCancel(ctx)
		rep := &replica{rpc: cr, shared: sh, api: service.NewAnalytics(service.Sources{Whales: sh}), stop: stop, done: make(chan struct{})}
		// Not ready (503 through the service's error mapping).
		if _, err := rep.api.GetWhales(ctx, &tollgatev1.GetWhalesRequest{}); err == nil {
			t.Fatal("/whales answered before any scan")
		}
		go func() { sh.Run(rctx); close(rep.done) }()
		t.Cleanup(func() { stop(); <-rep.done })
		return rep
	}
	reps := []*replica{start("a"), start("b")}

	deadline := time.Now().Add(30 * time.Second)
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 30 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	same := func() bool {
		a, b := reps[0].shared.Snapshot(), reps[1].shared.Snapshot()
		return a != nil && b != nil && a.AsOf.Equal(b.AsOf)
	}
	waitFor("common snapshot", same)
	// A few more intervals: still one scanner.
	first := reps[0].shared.Snapshot().AsOf
	waitFor("later common snapshot", func() bool { return same() && reps[0].shared.Snapshot().AsOf.After(first.Add(2*interval)) })
	holder, follower := reps[0], reps[1]
	if holder.rpc.n.Load() == 0 {
		holder, follower = follower, holder
	}
	if holder.rpc.n.Load() == 0 || follower.rpc.n.Load() != 0 {
		t.Fatalf("chain calls: %d and %d, want one replica only", holder.rpc.n.Load(), follower.rpc.n.Load())
	}
	var answers [2]*tollgatev1.GetWhalesResponse
	waitFor("same /whales", func() bool {
		for i, rep := range reps {
			resp, err := rep.api.GetWhales(ctx, &tollgatev1.GetWhalesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			answers[i] = resp
		}
		return proto.Equal(answers[0], answers[1])
	})
	if answers[0].TokensScanned != 5 || len(answers[0].Wallets) == 0 || answers[0].Wallets[0].Address != c.Account(devnet.SmartTrader).Address.Hex() {
		t.Fatalf("/whales %v", answers[0])
	}

	// The holder dies: the follower scans within an interval of the lease's
	// expiry, and its snapshots reach the store.
	holder.stop()
	<-holder.done
	last := holder.shared.Snapshot().AsOf
	waitFor("takeover", func() bool {
		s := follower.shared.Snapshot()
		return follower.rpc.n.Load() > 0 && s != nil && s.AsOf.After(last)
	})
	db, err := store.OpenPostgres(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitFor("stored takeover snapshot", func() bool {
		at, err := db.WhaleSnapshotTime(ctx)
		return err == nil && at.After(last)
	})
}
