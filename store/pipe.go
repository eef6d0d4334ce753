package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/big"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tollgate/tollgate/payment/batch"
)

// pipe writes PostgreSQL's voucher charges together: the charges of
// concurrent paid calls queued while the previous batch was being written
// go to the server in one round trip and one transaction, as SQLite's
// group commits them (group.go). A voucher's charge alone is one
// statement of little work; what it cost was the rest: the round trip,
// the transaction, and the statement's protocol on both sides
// (bench/outside, issue 32 item 3). In a batch:
//
//   - each charge is casVoucher and its books' row (casVoucherPiped), in
//     the channels' order, and writes only if its channel is still as its
//     voucher was judged on; one that finds the row moved on writes
//     nothing and its caller runs the update again from the row, after
//     the batch's commit, as it would alone;
//   - the charges that wrote are added to charge_totals in one statement
//     at the end, one row per operation and shard, in their order: every
//     batch takes its channels' row locks before any totals row, each in
//     one order, so two batches (two replicas) never wait on each other
//     in a cycle;
//   - any error before the commit rolls the batch back whole, and every
//     charge in it is written again alone, as it would have been without
//     the pipe; an error of the commit itself is every written charge's
//     error, as a lone statement's would be;
//   - no caller learns of its charge before the commit that makes it
//     durable.
//
// A replica runs pipeWriters batches at once, so a slow batch does not
// hold every call; each takes what is queued when it is free.
type pipe struct {
	db    *sql.DB
	queue chan *pipeCharge
	done  chan struct{}
}

// pipeCharge is one voucher's charge waiting for its batch.
type pipeCharge struct {
	ctx       context.Context
	channel   string // the channel's key, the batch's order
	args      []any  // casVoucherPiped's
	operation string
	shard     int64
	amount    *big.Int
	// wrote: the channel was still at its version and the charge is
	// committed; alone: the batch failed before its commit, write it
	// alone; err: the commit failed.
	wrote, alone bool
	err          error
	result       chan struct{}
}

// pipeWriters is how many batches a replica writes at once; maxPipe the
// most charges one takes.
var pipeWriters = max(1, runtime.GOMAXPROCS(0)/2)

const (
	maxPipe = 64
	// pipeTimeout bounds one batch: its callers wait for it whatever
	// their own contexts say, as a lone statement's commit would not be
	// abandoned half way either.
	pipeTimeout = 30 * time.Second
)

// casVoucherPiped is casVoucherCharged without the totals: casVoucher's
// 15 arguments, then insertBatchCharge's 9; a row when it wrote.
const casVoucherPiped = `WITH channel AS (` + casVoucher + ` RETURNING id),
	charge AS (INSERT INTO batch_charges (channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at)
		SELECT $16::text, $17::text, $18::text, $19::text, $20::text, $21::text, $22::text, $23::text, $24::text FROM channel)
	SELECT 1 FROM channel`

// piped writes c's voucher charge (casVoucher's args) through the pipe:
// wrote 1 when it was written, 0 when the row had moved on; done false
// when its batch failed and it is to be written alone.
func (s *DB) piped(ctx context.Context, c batch.Channel, args []any) (wrote int64, done bool, err error) {
	pc, err := newPipeCharge(ctx, c, args)
	if err != nil {
		return 0, true, err
	}
	s.pipe.charge(pc)
	switch {
	case pc.err != nil:
		return 0, true, pc.err
	case pc.alone:
		return 0, false, nil
	case pc.wrote:
		return 1, true, nil
	}
	return 0, true, nil
}

// newPipeCharge is c's charge with casVoucher's args.
func newPipeCharge(ctx context.Context, c batch.Channel, args []any) (*pipeCharge, error) {
	charge, err := chargeArgs(c)
	if err != nil {
		return nil, err
	}
	return &pipeCharge{ctx: ctx, channel: args[0].(string), args: slices.Concat(args, charge),
		operation: c.NewCharge.Operation, shard: chargeShard(c), amount: c.NewCharge.Amount}, nil
}

func newPipe(db *sql.DB) *pipe {
	p := &pipe{db: db, queue: make(chan *pipeCharge), done: make(chan struct{})}
	for range pipeWriters {
		go p.run()
	}
	return p
}

func (p *pipe) close() { close(p.done) }

// charge hands c to a writer and waits for its batch.
func (p *pipe) charge(c *pipeCharge) {
	c.result = make(chan struct{})
	select {
	case p.queue <- c:
	case <-c.ctx.Done():
		c.err = c.ctx.Err()
		return
	case <-p.done:
		c.err = errClosed
		return
	}
	<-c.result // once taken, a charge is answered after its batch, canceled or not
}

func (p *pipe) run() {
	for {
		queued, ok := gather(p.queue, p.done, maxPipe)
		if !ok {
			return
		}
		p.write(queued)
		for _, c := range queued {
			close(c.result)
		}
	}
}

// write writes batch in one transaction; see pipe.
func (p *pipe) write(queued []*pipeCharge) {
	live := queued[:0:0]
	for _, c := range queued {
		if err := c.ctx.Err(); err != nil {
			c.err = err // gone before its turn: nothing done
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	slices.SortStableFunc(live, func(a, b *pipeCharge) int { return strings.Compare(a.channel, b.channel) })
	ctx, cancel := context.WithTimeout(context.Background(), pipeTimeout)
	defer cancel()
	conn, err := p.db.Conn(ctx)
	if err != nil {
		alone(live)
		return
	}
	defer conn.Close()
	// Each charge carries its outcome; the error only tells database/sql
	// whether the connection is still good.
	conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if err := charges(ctx, pc, live); err != nil {
			// Nothing of the batch stays; a connection that cannot say
			// so is given up.
			if _, rerr := pc.Exec(ctx, "ROLLBACK"); rerr != nil {
				return driverBad
			}
			return nil
		}
		return commitCharges(ctx, pc, live)
	})
}

// driverBad, returned from conn.Raw, makes database/sql close a
// connection whose transaction's state is unknown.
var driverBad = driver.ErrBadConn

// charges sends BEGIN and every charge in one round trip and marks the
// ones that wrote. Any error leaves every charge to be written alone.
func charges(ctx context.Context, pc *pgx.Conn, live []*pipeCharge) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	for _, c := range live {
		b.Queue(casVoucherPiped, c.args...)
	}
	br := pc.SendBatch(ctx, b)
	_, err := br.Exec()
	for _, c := range live {
		if err != nil {
			break
		}
		var one int
		switch serr := br.QueryRow().Scan(&one); {
		case serr == nil:
			c.wrote = true
		case errors.Is(serr, pgx.ErrNoRows): // the row moved on
		default:
			err = serr
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		alone(live)
	}
	return err
}

// alone sends every charge of a failed batch back to be written alone.
func alone(live []*pipeCharge) {
	for _, c := range live {
		c.wrote, c.alone = false, true
	}
}

// commitCharges adds the written charges to charge_totals and commits.
func commitCharges(ctx context.Context, pc *pgx.Conn, live []*pipeCharge) error {
	type key struct {
		operation string
		shard     int64
	}
	type total struct {
		count  int64
		amount *big.Int
	}
	totals := map[key]*total{}
	for _, c := range live {
		if !c.wrote {
			continue
		}
		k := key{c.operation, c.shard}
		if totals[k] == nil {
			totals[k] = &total{amount: new(big.Int)}
		}
		totals[k].count++
		totals[k].amount.Add(totals[k].amount, c.amount)
	}
	b := &pgx.Batch{}
	if len(totals) > 0 {
		keys := make([]key, 0, len(totals))
		for k := range totals {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b key) int {
			return cmp.Or(strings.Compare(a.operation, b.operation), cmp.Compare(a.shard, b.shard))
		})
		ops, shards, counts, amounts := make([]string, len(keys)), make([]int64, len(keys)), make([]int64, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			ops[i], shards[i], counts[i], amounts[i] = k.operation, k.shard, totals[k].count, totals[k].amount.String()
		}
		b.Queue(addPipedTotals, ops, shards, counts, amounts)
	}
	b.Queue("COMMIT")
	err := pc.SendBatch(ctx, b).Close()
	if err == nil {
		return nil
	}
	for _, c := range live {
		if c.wrote {
			c.wrote, c.err = false, fmt.Errorf("store: record charge: %w", err)
		}
	}
	return driverBad // a commit that failed leaves the connection's state unknown
}

// addPipedTotals adds a batch's charges to charge_totals, one row per
// operation and shard (arrays $1 to $4, in that order): a row there
// already adds them.
const addPipedTotals = `INSERT INTO charge_totals (operation, shard, count, amount)
	SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])
	ON CONFLICT (operation, shard) DO UPDATE SET count = charge_totals.count + excluded.count,
		amount = (charge_totals.amount::numeric + excluded.amount::numeric)::text`
