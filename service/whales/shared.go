package whales

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// LeaseName is the store lease whose holder runs the scan.
const LeaseName = "whale-scan"

// Store is where the replicas of one service share the scan: a lease that
// one of them holds at a time, and the latest snapshot. *store.DB
// provides it.
type Store interface {
	Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	PutWhaleSnapshot(ctx context.Context, lease, holder string, takenAt time.Time, body []byte) (bool, error)
	WhaleSnapshotTime(ctx context.Context) (time.Time, error)
	WhaleSnapshot(ctx context.Context) (takenAt time.Time, body []byte, err error)
}

// Shared runs a Scanner on one replica of a service at a time and serves
// every replica the latest snapshot in the store. The replica holding the
// lease scans every Interval and writes each completed snapshot to the
// store; the others read the store. Each replica tries the lease every
// Interval/4, and the holder renews it as often, for Interval/2: when the
// holder dies, another replica scans within one Interval. A new holder
// starts its scan from the window (the scan state is not shared, only the
// snapshot) and serves the stored snapshot until its own first one.
type Shared struct {
	scanner *Scanner
	store   Store
	holder  string
	log     *slog.Logger
	ttl     time.Duration
	tick    time.Duration
	snap    atomic.Pointer[Snapshot]
}

// NewShared returns the shared scan of sc over st, holder naming this
// replica (unique among the replicas); it does no I/O.
func NewShared(sc *Scanner, st Store, holder string, log *slog.Logger) *Shared {
	return &Shared{scanner: sc, store: st, holder: holder, log: log,
		ttl: sc.cfg.Interval / 2, tick: sc.cfg.Interval / 4}
}

// Snapshot returns the latest snapshot this replica has, nil before the
// service's first.
func (s *Shared) Snapshot() *Snapshot { return s.snap.Load() }

// Run takes part until ctx ends: scanning while it holds the lease,
// following the store otherwise.
func (s *Shared) Run(ctx context.Context) {
	for {
		held, err := s.store.Lease(ctx, LeaseName, s.holder, s.ttl)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("whale scan lease", "err", err)
		case held:
			s.log.Info("whale scan: this replica holds the lease and scans", "holder", s.holder)
			s.lead(ctx)
			s.log.Info("whale scan: lease given up", "holder", s.holder)
		}
		if err := s.follow(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("whale scan: reading the stored snapshot", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.tick):
		}
	}
}

// lead scans until ctx ends or the lease is lost, renewing it every tick
// on the side (a cycle catching up may take longer than the lease).
func (s *Shared) lead(ctx context.Context) {
	lctx, cancel := context.WithCancel(ctx)
	renewing := make(chan struct{})
	defer func() {
		cancel()
		<-renewing // no renewal after the release
		// Released on a fresh context, so that a shutdown hands over at once.
		s.store.ReleaseLease(context.WithoutCancel(ctx), LeaseName, s.holder)
	}()
	go func() {
		defer close(renewing)
		for {
			select {
			case <-lctx.Done():
				return
			case <-time.After(s.tick):
			}
			held, err := s.store.Lease(lctx, LeaseName, s.holder, s.ttl)
			if lctx.Err() != nil {
				return
			}
			if err != nil || !held {
				s.log.Warn("whale scan: lease lost; scanning stops", "err", err)
				cancel()
				return
			}
		}
	}()
	if s.snap.Load() == nil { // a fresh replica serves the stored snapshot until its own
		if err := s.follow(lctx); err != nil && lctx.Err() == nil {
			s.log.Warn("whale scan: reading the stored snapshot", "err", err)
		}
	}
	for {
		st, err := s.scanner.Scan(lctx)
		wait := s.scanner.cfg.Interval
		switch {
		case lctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("whale scan failed; the last snapshot stays served", "err", err, "rpc_calls", st.Calls)
		case st.Completed:
			if err := s.publish(lctx, s.scanner.Snapshot()); err != nil {
				s.log.Warn("whale scan: storing the snapshot", "err", err)
			}
		}
		if err == nil && !st.CaughtUp {
			wait = 0
		}
		select {
		case <-lctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// publish stores snap and, once stored, serves it here.
func (s *Shared) publish(ctx context.Context, snap *Snapshot) error {
	body, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	ok, err := s.store.PutWhaleSnapshot(ctx, LeaseName, s.holder, snap.AsOf, body)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not written: the lease was lost or a newer snapshot is stored")
	}
	s.snap.Store(snap)
	return nil
}

// follow loads the stored snapshot if it is newer than the one served.
func (s *Shared) follow(ctx context.Context) error {
	at, err := s.store.WhaleSnapshotTime(ctx)
	if err != nil || at.IsZero() {
		return err
	}
	if cur := s.snap.Load(); cur != nil && !at.After(cur.AsOf) {
		return nil
	}
	at, body, err := s.store.WhaleSnapshot(ctx)
	if err != nil || body == nil {
		return err
	}
	var snap Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		return fmt.Errorf("stored snapshot of %s: %w", at, err)
	}
	snap.AsOf = at // the stored time, exactly: the next check compares against it
	s.snap.Store(&snap)
	return nil
}
