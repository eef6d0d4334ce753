package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// StateCharged is the state of every voucher call in the books: the
// payer signed for it and was answered. The row is written once, with
// the charge, and never changes: what reaches payTo is claimed and
// settled per channel, not per call (Channels, BatchTxs).
const StateCharged = "charged"

// insertBatchCharge books one voucher call; a hot statement (prepared.go).
const insertBatchCharge = `INSERT INTO batch_charges (channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

// insertCharge writes c's new charge (a voucher call of the
// batch-settlement scheme) to the books, in the transaction that saves
// the channel: one row in batch_charges, keyed by the channel and the
// cumulative amount it reached, and the operation's paid totals. A
// second charge of one (channel, cumulative) fails on the key, and with
// it the whole update: a voucher call is counted once, whichever replica
// writes it.
func (s *DB) insertCharge(ctx context.Context, tx *sql.Tx, c batch.Channel) error {
	args, err := chargeArgs(c)
	if err != nil {
		return err
	}
	if _, err := s.exec(ctx, tx, insertBatchCharge, args...); err != nil {
		return fmt.Errorf("store: record charge: %w", err)
	}
	return s.addCharge(ctx, tx, c.NewCharge.Operation, chargeShard(c), decimal(c.NewCharge.Amount))
}

// saveCharged saves channel c and books its new charge: on PostgreSQL in
// one statement (the channel, the charge and its shard of the totals, as
// data-modifying CTEs: one round trip instead of three), on SQLite as
// saveChannel and insertCharge.
func (s *DB) saveCharged(ctx context.Context, tx *sql.Tx, c batch.Channel) error {
	if s.e.saveCharged == "" {
		if err := s.saveChannel(ctx, tx, c); err != nil {
			return err
		}
		return s.insertCharge(ctx, tx, c)
	}
	args, err := channelArgs(c)
	if err != nil {
		return err
	}
	charge, err := chargeArgs(c)
	if err != nil {
		return err
	}
	args = append(append(args, charge...), chargeShard(c))
	if _, err := tx.ExecContext(ctx, s.e.saveCharged, args...); err != nil {
		return fmt.Errorf("store: record charge: %w", err) // with the channel, in one statement
	}
	return nil
}

// chargeArgs are insertBatchCharge's arguments for c's new charge, which
// it checks first.
func chargeArgs(c batch.Channel) ([]any, error) {
	ch := c.NewCharge
	if err := checkCharge(ch); err != nil {
		return nil, fmt.Errorf("store: record charge on channel %s: %w", c.ID.Hex(), err)
	}
	at := ch.At
	if at.IsZero() {
		at = time.Now() // booked when committed
	}
	return []any{channelKey(c.ID), decimal(ch.Cumulative), ch.Operation, ch.Resource, hexutil.Encode(c.Config.Payer[:]),
		hexutil.Encode(c.Config.Receiver[:]), hexutil.Encode(c.Config.Token[:]), decimal(ch.Amount), stamp(at)}, nil
}

// chargeShard is the shard of charge_totals c's charges add to.
func chargeShard(c batch.Channel) int64 { return int64(c.ID[0] % chargeShards) }

// chargeShards is how many rows of charge_totals one operation's voucher
// calls are spread over (by the channel id's first byte): concurrent
// charges of different channels rarely wait for one another's row lock.
const chargeShards = 16

// addCharge adds one charge of amount to operation's shard of
// charge_totals. PostgreSQL adds in one statement (numeric arithmetic,
// any size); SQLite reads, adds here (amounts of any size) and writes, in
// its single writer's transaction.
func (s *DB) addCharge(ctx context.Context, tx *sql.Tx, operation string, shard int64, amount string) error {
	if d, ok := ctx.Value(deferredKey{}).(deferredTotals); ok && s.e.addCharge == "" {
		// SQLite's one writer has no lock to spread: one row per operation.
		return d.add(operation, 0, amount)
	}
	if s.e.addCharge != "" {
		if _, err := s.exec(ctx, tx, s.e.addCharge, operation, shard, amount); err != nil {
			return fmt.Errorf("charge totals: %w", err)
		}
		return nil
	}
	d := deferredTotals{}
	if err := d.add(operation, shard, amount); err != nil {
		return err
	}
	return s.addTotals(ctx, tx, d)
}

// deferredTotals are the charges of one update of a SQLite group commit
// (group.go), by operation and shard: the group adds them all to
// charge_totals once, before it commits, instead of a read and a write
// per voucher call.
type deferredTotals map[totalKey]*totalSum

type totalKey struct {
	operation string
	shard     int64
}

type totalSum struct {
	count  int64
	amount *big.Int
}

// deferredKey carries an update's deferredTotals in its context.
type deferredKey struct{}

func (d deferredTotals) add(operation string, shard int64, amount string) error {
	a, ok := new(big.Int).SetString(amount, 10)
	if !ok {
		return fmt.Errorf("charge totals: amount %q", amount)
	}
	k := totalKey{operation, shard}
	if d[k] == nil {
		d[k] = &totalSum{amount: new(big.Int)}
	}
	d[k].count++
	d[k].amount.Add(d[k].amount, a)
	return nil
}

// merge adds o to d.
func (d deferredTotals) merge(o deferredTotals) {
	for k, v := range o {
		if d[k] == nil {
			d[k] = &totalSum{amount: new(big.Int)}
		}
		d[k].count += v.count
		d[k].amount.Add(d[k].amount, v.amount)
	}
}

// addTotals adds d to charge_totals in tx: a read and a write per
// operation and shard.
func (s *DB) addTotals(ctx context.Context, tx *sql.Tx, d deferredTotals) error {
	for k, v := range d {
		var count int64
		var sum string
		err := s.queryRow(ctx, tx, selectChargeTotal, k.operation, k.shard).Scan(&count, &sum)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			count, sum = 0, "0"
		case err != nil:
			return fmt.Errorf("charge totals: %w", err)
		}
		total, err := addDecimal(sum, v.amount.String())
		if err != nil {
			return fmt.Errorf("charge totals: %w", err)
		}
		if _, err := s.exec(ctx, tx, upsertChargeTotal, k.operation, k.shard, count+v.count, total); err != nil {
			return fmt.Errorf("charge totals: %w", err)
		}
	}
	return nil
}

// The statements of addCharge on SQLite (prepared.go).
const (
	selectChargeTotal = `SELECT count, amount FROM charge_totals WHERE operation = $1 AND shard = $2`
	upsertChargeTotal = `INSERT INTO charge_totals (operation, shard, count, amount) VALUES ($1, $2, $3, $4)
		ON CONFLICT (operation, shard) DO UPDATE SET count = excluded.count, amount = excluded.amount`
)

// addChargeTotals adds the voucher calls' totals to out, per operation.
func (s *DB) addChargeTotals(ctx context.Context, out map[string]payment.Totals) error {
	rows, err := s.db.QueryContext(ctx, `SELECT operation, count, amount FROM charge_totals`)
	if err != nil {
		return fmt.Errorf("store: charge totals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var op, amount string
		var count int64
		if err := rows.Scan(&op, &count, &amount); err != nil {
			return fmt.Errorf("store: charge totals: %w", err)
		}
		t := out[op]
		sum, err := addDecimal(t.Amount, amount)
		if err != nil {
			return fmt.Errorf("store: charge totals: %w", err)
		}
		t.Paid, t.Amount = t.Paid+uint64(count), sum
		out[op] = t
	}
	return rows.Err()
}

// checkCharge refuses a charge the books could not add up: no operation,
// an amount that is not positive, or a cumulative total below the
// amount.
func checkCharge(ch *batch.Charge) error {
	switch {
	case ch.Operation == "":
		return errors.New("a charge without an operation")
	case ch.Amount == nil || ch.Amount.Sign() <= 0:
		return fmt.Errorf("charge amount %v: want a positive amount", ch.Amount)
	case ch.Cumulative == nil || ch.Cumulative.Cmp(ch.Amount) < 0:
		return fmt.Errorf("charge of %s at cumulative %v: the cumulative total includes the charge", ch.Amount, ch.Cumulative)
	}
	return nil
}

// BatchCharge is one voucher call of the batch-settlement scheme as the
// books keep it: the charge, the channel it was charged to, and the
// channel's payer, receiver (payTo) and token (asset).
type BatchCharge struct {
	batch.Charge
	Channel common.Hash
	Payer   common.Address
	PayTo   common.Address
	Asset   common.Address
}

// BatchCharges returns the voucher calls matching f, oldest first, with
// List's meaning of f: Since is the time of the charge, Payer the
// channel's payer in any case, and State matches only StateCharged (a
// voucher call has no other state), so that List and BatchCharges of one
// Filter are together the books it selects.
func (s *DB) BatchCharges(ctx context.Context, f Filter) ([]BatchCharge, error) {
	if f.State != "" && f.State != StateCharged {
		return nil, nil
	}
	q, args := `SELECT channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at FROM batch_charges WHERE 1 = 1`, []any{}
	if !f.Since.IsZero() {
		args = append(args, f.Since.UTC().Format(timeFormat))
		q += fmt.Sprintf(` AND charged_at >= $%d`, len(args))
	}
	if f.Payer != "" {
		args = append(args, strings.ToLower(f.Payer))
		q += fmt.Sprintf(` AND payer = $%d`, len(args)) // stored lower-case
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY charged_at, channel, cumulative`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: batch charges: %w", err)
	}
	defer rows.Close()
	var out []BatchCharge
	for rows.Next() {
		var c BatchCharge
		var channel, cumulative, payer, payTo, asset, amount, at string
		if err := rows.Scan(&channel, &cumulative, &c.Operation, &c.Resource, &payer, &payTo, &asset, &amount, &at); err != nil {
			return nil, fmt.Errorf("store: batch charges: %w", err)
		}
		c.Channel, c.Payer, c.PayTo, c.Asset = common.HexToHash(channel), common.HexToAddress(payer), common.HexToAddress(payTo), common.HexToAddress(asset)
		if c.Cumulative, err = parseDecimal(cumulative); err == nil {
			c.Amount, err = parseDecimal(amount)
		}
		if err == nil {
			c.At, err = parseStamp(at)
		}
		if err != nil {
			return nil, fmt.Errorf("store: batch charge %s at %s: %w", channel, cumulative, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: batch charges: %w", err)
	}
	return out, nil
}
