package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

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
	ch := c.NewCharge
	if err := checkCharge(ch); err != nil {
		return fmt.Errorf("store: record charge on channel %s: %w", c.ID.Hex(), err)
	}
	at := ch.At
	if at.IsZero() {
		at = time.Now() // booked when committed
	}
	_, err := s.exec(ctx, tx, insertBatchCharge,
		channelKey(c.ID), decimal(ch.Cumulative), ch.Operation, ch.Resource, strings.ToLower(c.Config.Payer.Hex()),
		strings.ToLower(c.Config.Receiver.Hex()), strings.ToLower(c.Config.Token.Hex()), decimal(ch.Amount), stamp(at))
	if err != nil {
		return fmt.Errorf("store: record charge: %w", err)
	}
	return s.addPaid(ctx, tx, ch.Operation, decimal(ch.Amount))
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
