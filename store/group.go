package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment/batch"
)

// group commits the channel updates of concurrent requests together on
// SQLite (group commit): one goroutine takes every update queued while
// the previous transaction was being written, runs each under a savepoint
// of one transaction, and commits once. With synchronous=FULL a commit is
// a flush of the WAL to disk: the flush, not the statements, is what a
// paid call waited for (bench/voucher, issue 20 item 9), and now many
// calls share one. Each update still reads the state the updates before
// it left (they run in order, in the same transaction), an update whose
// fn fails is rolled back to its savepoint alone, and no caller learns of
// its update before the commit that makes it durable. The charges the
// updates book are added to their operations' totals once per
// transaction, not once each.
//
// PostgreSQL does not need it: its replicas write on many connections at
// once, each commit its own.
type group struct {
	s     *DB
	queue chan *groupUpdate
	done  chan struct{}
}

// groupUpdate is one UpdateChannel waiting for its commit.
type groupUpdate struct {
	ctx    context.Context
	id     common.Hash
	fn     func(c *batch.Channel, found bool) (batch.Change, error)
	from   *batch.Channel // UpdateChannelFrom's copy, tried first
	c      batch.Channel
	err    error
	result chan struct{}
}

// maxGroup is the most updates one transaction takes.
const maxGroup = 64

func newGroup(s *DB) *group {
	g := &group{s: s, queue: make(chan *groupUpdate), done: make(chan struct{})}
	go g.run()
	return g
}

// errClosed answers updates to a closed store.
var errClosed = errors.New("store: closed")

func (g *group) update(ctx context.Context, id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	return g.queued(&groupUpdate{ctx: ctx, id: id, fn: fn, result: make(chan struct{})})
}

func (g *group) updateFrom(ctx context.Context, from batch.Channel, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	return g.queued(&groupUpdate{ctx: ctx, id: from.ID, fn: fn, from: &from, result: make(chan struct{})})
}

// queued hands u to the writer and waits for its commit.
func (g *group) queued(u *groupUpdate) (batch.Channel, error) {
	ctx := u.ctx
	select {
	case g.queue <- u:
	case <-ctx.Done():
		return batch.Channel{}, ctx.Err()
	case <-g.done:
		return batch.Channel{}, errClosed
	}
	<-u.result // once taken, an update is answered after its commit, canceled or not
	return u.c, u.err
}

func (g *group) close() { close(g.done) }

func (g *group) run() {
	for {
		updates, ok := gather(g.queue, g.done, maxGroup)
		if !ok {
			return
		}
		g.commit(updates)
	}
}

// gather waits for the next item of queue and takes it with every item
// queued meanwhile, at most most, or reports false once done is closed.
// Before it drains, it yields once to the goroutines about to queue
// (their requests past the signature check): SQLite's groups took a
// quarter more updates per commit for it, where a commit's flush, not its
// statements, is most of a voucher's store cost (bench/outside).
func gather[T any](queue <-chan T, done <-chan struct{}, most int) ([]T, bool) {
	var first T
	select {
	case first = <-queue:
	case <-done:
		return nil, false
	}
	items := []T{first}
	runtime.Gosched()
	for len(items) < most {
		select {
		case item := <-queue:
			items = append(items, item)
		default:
			return items, true
		}
	}
	return items, true
}

// commit runs updates in one transaction and answers every one.
func (g *group) commit(updates []*groupUpdate) {
	defer func() {
		for _, u := range updates {
			close(u.result)
		}
	}()
	ctx := context.Background()
	tx, err := g.s.db.BeginTx(ctx, nil)
	if err != nil {
		for _, u := range updates {
			u.err = fmt.Errorf("store: update channel: %w", err)
		}
		return
	}
	defer tx.Rollback()
	wrote := false
	var written []*groupUpdate
	totals := deferredTotals{} // the written updates' charges, added once
	for _, u := range updates {
		if err := u.ctx.Err(); err != nil {
			u.err = err // gone before its turn: nothing done
			continue
		}
		if _, err := g.s.exec(ctx, tx, savepoint); err != nil {
			u.err = fmt.Errorf("store: update channel: %w", err)
			continue
		}
		mine := deferredTotals{}
		c, w, err := g.s.apply(context.WithValue(u.ctx, deferredKey{}, mine), u, tx)
		if err != nil {
			if _, rerr := g.s.exec(ctx, tx, rollbackToSavepoint); rerr != nil {
				// The transaction is in an unknown state: give it up whole.
				for _, v := range updates {
					if v.err == nil {
						v.err = fmt.Errorf("store: update channel: %w", rerr)
					}
				}
				return
			}
		}
		if _, rerr := g.s.exec(ctx, tx, releaseSavepoint); rerr != nil && err == nil {
			err = fmt.Errorf("store: update channel: %w", rerr)
		}
		u.c, u.err = c, err
		if err == nil && w {
			wrote = true
			written = append(written, u)
			totals.merge(mine)
		}
	}
	if !wrote {
		return
	}
	if err := g.s.addTotals(ctx, tx, totals); err != nil {
		for _, u := range written {
			u.c, u.err = batch.Channel{}, fmt.Errorf("store: update channel: %w", err)
		}
		return
	}
	if err := tx.Commit(); err != nil {
		for _, u := range written {
			u.c, u.err = batch.Channel{}, fmt.Errorf("store: update channel: %w", err)
		}
	}
}

// apply runs u in tx, under ctx (u's, carrying where its charges'
// totals go): from its copy when the row is still at its version, else
// from the row.
func (s *DB) apply(ctx context.Context, u *groupUpdate, tx *sql.Tx) (batch.Channel, bool, error) {
	if u.from != nil {
		if c, ok, err := s.tryFrom(ctx, tx, *u.from, u.fn); ok || err != nil {
			return c, ok, err
		}
	}
	return s.applyChannel(ctx, tx, u.id, u.fn)
}

// The savepoint around each update of a group.
const (
	savepoint           = `SAVEPOINT channel_update`
	rollbackToSavepoint = `ROLLBACK TO SAVEPOINT channel_update`
	releaseSavepoint    = `RELEASE SAVEPOINT channel_update`
)
