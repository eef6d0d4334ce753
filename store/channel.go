package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment/batch"
)

// channelLockClass is the first key of the channels' advisory locks on
// PostgreSQL (the second is a hash of the channel id).
const channelLockClass = 0x7831 // "x1"

const selectChannel = `SELECT id, config, charged, signed_max, signature, balance, total_claimed, withdraw_requested_at,
	refund_nonce, synced_at, last_request, pending_id, pending_max, pending_expires, unclaimed_since,
	refund_pending_nonce, refund_pending_amount, refund_pending_at, refund_pending_orders, last_refund_at,
	answer_resource, answer_type, answer_body, answer_settlement, answer_at, stopped_at, version, updated_at,
	stop_evidence, stop_detail, own_claimed, opened FROM channels`

// selectChannelByID reads one channel; one of the hot statements
// (prepared.go).
const selectChannelByID = selectChannel + ` WHERE id = $1`

// Channel implements batch.Store. It reads outside any transaction (on
// SQLite from the read pool, beside the writer): callers judge from it
// only what UpdateChannel checks again.
func (s *DB) Channel(ctx context.Context, id common.Hash) (batch.Channel, bool, error) {
	c, err := scanChannel(s.readRow(ctx, selectChannelByID, channelKey(id)))
	if errors.Is(err, sql.ErrNoRows) {
		return batch.Channel{}, false, nil
	}
	if err != nil {
		return batch.Channel{}, false, fmt.Errorf("store: channel %s: %w", id.Hex(), err)
	}
	return c, true, nil
}

// Channels implements batch.Store.
func (s *DB) Channels(ctx context.Context) ([]batch.Channel, error) {
	rows, err := s.db.QueryContext(ctx, selectChannel+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: channels: %w", err)
	}
	defer rows.Close()
	var out []batch.Channel
	for rows.Next() {
		c, err := scanChannel(rows)
		if err != nil {
			return nil, fmt.Errorf("store: channels: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// UpdateChannel implements batch.Store: one transaction, holding the
// channel's lock (see engine.lockChannel) from the read to the write. On
// SQLite the updates of concurrent requests are committed together
// (group.go): one flush for many.
func (s *DB) UpdateChannel(ctx context.Context, id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	if s.group != nil {
		return s.group.update(ctx, id, fn)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return batch.Channel{}, fmt.Errorf("store: update channel: %w", err)
	}
	defer tx.Rollback()
	c, wrote, err := s.applyChannel(ctx, tx, id, fn)
	if err != nil || !wrote {
		return c, err
	}
	if err := tx.Commit(); err != nil {
		return batch.Channel{}, fmt.Errorf("store: update channel: %w", err)
	}
	return c, nil
}

// UpdateChannelFrom implements batch.Store: fn runs on from, and its
// change is written with the row's version compared (tryFrom); when the
// row moved on, or fn does not save, the update runs as UpdateChannel.
func (s *DB) UpdateChannelFrom(ctx context.Context, from batch.Channel, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	if s.group != nil {
		return s.group.updateFrom(ctx, from, fn)
	}
	c, ok, err := s.tryFrom(ctx, nil, from, fn)
	if ok || err != nil {
		return c, err
	}
	return s.UpdateChannel(ctx, from.ID, fn)
}

// tryFrom runs fn on from and, when it saves, writes the change only if
// the row is still at from's version: one statement, no read (on
// PostgreSQL one statement outside any transaction, tx nil; on SQLite in
// the writer's tx, with the books). ok false: nothing was written (fn
// did not save, or the row moved on) and the update is to be run again
// from the row.
func (s *DB) tryFrom(ctx context.Context, tx *sql.Tx, from batch.Channel, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, bool, error) {
	was, updated, ok := parseVersion(from.Version)
	if !ok {
		return batch.Channel{}, false, nil
	}
	c := from
	if change, err := fn(&c, true); err != nil || change != batch.Save {
		return batch.Channel{}, false, nil // judged again on the row as it is
	}
	c.ID = from.ID
	// A voucher's charge writes a dozen columns (casVoucher); any other
	// change, the whole row.
	cas, casCharged, at := casChannel, s.e.casCharged, [2]int{27, 15}
	var args []any
	if voucherOnly(from, c) {
		args, cas, casCharged, at = voucherArgs(c), casVoucher, s.e.casVoucherCharged, [2]int{12, 11}
	} else {
		var err error
		if args, err = channelArgs(c); err != nil {
			return batch.Channel{}, false, err
		}
	}
	args = append(args, was, updated)
	var wrote int64
	piped := false
	if tx == nil && c.NewCharge != nil && cas == casVoucher && s.pipe != nil {
		var err error
		if wrote, piped, err = s.piped(ctx, c, args); err != nil {
			return batch.Channel{}, false, err
		}
	}
	switch {
	case piped:
	case tx == nil && c.NewCharge != nil:
		charge, err := chargeArgs(c)
		if err != nil {
			return batch.Channel{}, false, err
		}
		args = append(append(args, charge...), chargeShard(c))
		switch err := s.db.QueryRowContext(ctx, casCharged, args...).Scan(&wrote); {
		case errors.Is(err, sql.ErrNoRows):
			return batch.Channel{}, false, nil // the row moved on
		case err != nil:
			return batch.Channel{}, false, fmt.Errorf("store: record charge: %w", err)
		}
	case tx == nil:
		r, err := s.db.ExecContext(ctx, cas, args...)
		if err != nil {
			return batch.Channel{}, false, fmt.Errorf("store: save channel: %w", err)
		}
		wrote, _ = r.RowsAffected()
	default:
		r, err := s.exec(ctx, tx, cas, args...)
		if err != nil {
			return batch.Channel{}, false, fmt.Errorf("store: save channel: %w", err)
		}
		if wrote, _ = r.RowsAffected(); wrote == 1 && c.NewCharge != nil {
			if err := s.insertCharge(ctx, tx, c); err != nil {
				return batch.Channel{}, false, err
			}
		}
	}
	if wrote != 1 {
		return batch.Channel{}, false, nil
	}
	c.NewCharge, c.Version = nil, version(args[at[0]].(int64), args[at[1]].(string))
	return c, true, nil
}

// casVoucher writes what a voucher's charge changes on a channel that is
// still as it was read ($14, $15, as casChannel's $33, $34); a hot
// statement (prepared.go).
const casVoucher = `UPDATE channels SET charged = $2, signed_max = $3, signature = $4, last_request = $5, unclaimed_since = $6,
			answer_resource = $7, answer_type = $8, answer_body = $9, answer_settlement = $10, answer_at = $11, updated_at = $12, version = $13
		WHERE id = $1 AND version = $14 AND updated_at = $15`

// voucherArgs are casVoucher's arguments for c: the write time ($12) and
// a new version ($13).
func voucherArgs(c batch.Channel) []any {
	var a batch.Answer
	if c.Answer != nil {
		a = *c.Answer
	}
	return []any{channelKey(c.ID), decimal(c.Charged), decimal(c.SignedMax), c.Signature, stamp(c.LastRequest), stamp(c.UnclaimedSince),
		a.Resource, a.ContentType, a.Body, a.Settlement, stamp(a.At), time.Now().UTC().Format(timeFormat), newVersion()}
}

// voucherOnly reports whether c differs from from at most in casVoucher's
// columns: every other field of the row is as it was read.
func voucherOnly(from, c batch.Channel) bool {
	same := func(x, y *big.Int) bool { // nil is 0, as stored
		switch {
		case x == nil || y == nil:
			return (x == nil || x.Sign() == 0) && (y == nil || y.Sign() == 0)
		default:
			return x.Cmp(y) == 0
		}
	}
	return c.Config == from.Config && same(c.Balance, from.Balance) && same(c.TotalClaimed, from.TotalClaimed) &&
		c.WithdrawRequestedAt == from.WithdrawRequestedAt && same(c.RefundNonce, from.RefundNonce) && c.SyncedAt.Equal(from.SyncedAt) &&
		c.Pending == nil && from.Pending == nil && c.RefundPending == nil && from.RefundPending == nil && c.LastRefundAt.Equal(from.LastRefundAt) &&
		c.Opened == from.Opened && same(c.OwnClaimed, from.OwnClaimed) && c.StoppedAt.Equal(from.StoppedAt) &&
		c.StopEvidence == from.StopEvidence && c.StopDetail == from.StopDetail
}

// applyChannel runs one channel update in tx: lock, read, fn, write. It
// reports whether it wrote anything; an error leaves tx to be rolled back
// (or, in a group, back to the update's savepoint).
func (s *DB) applyChannel(ctx context.Context, tx *sql.Tx, id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, bool, error) {
	// The channel's row is read locked (PostgreSQL: FOR UPDATE; SQLite's
	// writer is alone). A row lock cannot cover a row that does not exist
	// yet: a channel's creation is serialized by the advisory lock, and
	// the row read again under it.
	c, err := scanChannel(s.queryRow(ctx, tx, selectChannelByID+s.e.forUpdate, channelKey(id)))
	if errors.Is(err, sql.ErrNoRows) && s.e.lockChannel != "" {
		if _, err := tx.ExecContext(ctx, s.e.lockChannel, channelLockClass, int32(binary.BigEndian.Uint32(id[:4]))); err != nil {
			return batch.Channel{}, false, fmt.Errorf("store: lock channel: %w", err)
		}
		c, err = scanChannel(s.queryRow(ctx, tx, selectChannelByID+s.e.forUpdate, channelKey(id)))
	}
	found := err == nil
	switch {
	case errors.Is(err, sql.ErrNoRows):
		c = batch.Channel{ID: id}
	case err != nil:
		return batch.Channel{}, false, fmt.Errorf("store: update channel: %w", err)
	}
	change, err := fn(&c, found)
	if err != nil {
		return batch.Channel{}, false, err
	}
	c.ID = id // fn may not move a channel
	switch change {
	case batch.Keep:
		c.NewCharge = nil
		return c, false, nil
	case batch.Delete:
		if _, err := tx.ExecContext(ctx, `DELETE FROM channels WHERE id = $1`, channelKey(id)); err != nil {
			return batch.Channel{}, false, fmt.Errorf("store: delete channel: %w", err)
		}
	case batch.Save:
		if c.NewCharge != nil {
			if err := s.saveCharged(ctx, tx, c); err != nil {
				return batch.Channel{}, false, err
			}
			break
		}
		if err := s.saveChannel(ctx, tx, c); err != nil {
			return batch.Channel{}, false, err
		}
	default:
		return batch.Channel{}, false, fmt.Errorf("store: update channel: unknown change %d", change)
	}
	c.NewCharge, c.Version = nil, "" // the new version is not read back
	return c, true, nil
}

// upsertChannel writes a whole channel; a hot statement (prepared.go).
const upsertChannel = `INSERT INTO channels (id, config, charged, signed_max, signature, balance, total_claimed,
			withdraw_requested_at, refund_nonce, synced_at, last_request, pending_id, pending_max, pending_expires, unclaimed_since, updated_at,
			refund_pending_nonce, refund_pending_amount, refund_pending_at, refund_pending_orders, last_refund_at,
			answer_resource, answer_type, answer_body, answer_settlement, answer_at, stopped_at, version,
			stop_evidence, stop_detail, own_claimed, opened)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28,
			$29, $30, $31, $32)
		ON CONFLICT (id) DO UPDATE SET config = excluded.config, charged = excluded.charged, signed_max = excluded.signed_max,
			signature = excluded.signature, balance = excluded.balance, total_claimed = excluded.total_claimed,
			withdraw_requested_at = excluded.withdraw_requested_at, refund_nonce = excluded.refund_nonce,
			synced_at = excluded.synced_at, last_request = excluded.last_request, pending_id = excluded.pending_id,
			pending_max = excluded.pending_max, pending_expires = excluded.pending_expires, unclaimed_since = excluded.unclaimed_since,
			updated_at = excluded.updated_at, refund_pending_nonce = excluded.refund_pending_nonce,
			refund_pending_amount = excluded.refund_pending_amount, refund_pending_at = excluded.refund_pending_at,
			refund_pending_orders = excluded.refund_pending_orders,
			last_refund_at = excluded.last_refund_at, answer_resource = excluded.answer_resource, answer_type = excluded.answer_type,
			answer_body = excluded.answer_body, answer_settlement = excluded.answer_settlement, answer_at = excluded.answer_at,
			stopped_at = excluded.stopped_at, version = excluded.version, stop_evidence = excluded.stop_evidence,
			stop_detail = excluded.stop_detail, own_claimed = excluded.own_claimed, opened = excluded.opened`

// casChannel writes a whole channel that is still as it was read: the
// same version and write time ($33, $34; the time also tells a write by
// a replica older than the version column). A hot statement
// (prepared.go).
const casChannel = `UPDATE channels SET config = $2, charged = $3, signed_max = $4, signature = $5, balance = $6, total_claimed = $7,
			withdraw_requested_at = $8, refund_nonce = $9, synced_at = $10, last_request = $11, pending_id = $12, pending_max = $13,
			pending_expires = $14, unclaimed_since = $15, updated_at = $16, refund_pending_nonce = $17, refund_pending_amount = $18,
			refund_pending_at = $19, refund_pending_orders = $20, last_refund_at = $21, answer_resource = $22, answer_type = $23,
			answer_body = $24, answer_settlement = $25, answer_at = $26, stopped_at = $27, version = $28, stop_evidence = $29,
			stop_detail = $30, own_claimed = $31, opened = $32
		WHERE id = $1 AND version = $33 AND updated_at = $34`

func (s *DB) saveChannel(ctx context.Context, tx *sql.Tx, c batch.Channel) error {
	args, err := channelArgs(c)
	if err != nil {
		return err
	}
	if _, err = s.exec(ctx, tx, upsertChannel, args...); err != nil {
		return fmt.Errorf("store: save channel: %w", err)
	}
	return nil
}

// channelArgs are upsertChannel's arguments for c: its fields, the write
// time ($16) and a new version ($28).
func channelArgs(c batch.Channel) ([]any, error) {
	config, err := json.Marshal(c.Config)
	if err != nil {
		return nil, err
	}
	var pendingID, pendingMax, pendingExpires string
	if p := c.Pending; p != nil {
		pendingID, pendingMax, pendingExpires = p.ID, decimal(p.SignedMax), p.ExpiresAt.UTC().Format(timeFormat)
	}
	var refundNonce, refundAmount, refundAt string
	var refundOrders int64
	if r := c.RefundPending; r != nil {
		refundNonce, refundAmount, refundAt, refundOrders = decimal(r.Nonce), decimal(r.Amount), stamp(r.At), int64(r.Orders)
	}
	var a batch.Answer
	if c.Answer != nil {
		a = *c.Answer
	}
	opened := int64(0)
	if c.Opened {
		opened = 1
	}
	return []any{channelKey(c.ID), string(config), decimal(c.Charged), decimal(c.SignedMax), c.Signature, decimal(c.Balance),
		decimal(c.TotalClaimed), int64(c.WithdrawRequestedAt), decimal(c.RefundNonce), stamp(c.SyncedAt), stamp(c.LastRequest),
		pendingID, pendingMax, pendingExpires, stamp(c.UnclaimedSince), time.Now().UTC().Format(timeFormat),
		refundNonce, refundAmount, refundAt, refundOrders, stamp(c.LastRefundAt),
		a.Resource, a.ContentType, a.Body, a.Settlement, stamp(a.At), stamp(c.StoppedAt), newVersion(),
		c.StopEvidence, c.StopDetail, decimal(c.OwnClaimed), opened}, nil
}

// newVersion draws a row version: random, so that a row deleted and
// written again never repeats the version a stale copy holds.
func newVersion() int64 { return int64(rand.Uint64() >> 1) }

// version is a row's mark as batch.Channel carries it: its version and
// write time.
func version(v int64, updated string) string { return strconv.FormatInt(v, 10) + "@" + updated }

// parseVersion splits a mark of version.
func parseVersion(mark string) (int64, string, bool) {
	v, updated, ok := strings.Cut(mark, "@")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, updated, err == nil
}

// scanChannel reads one row of selectChannel.
func scanChannel(row interface{ Scan(...any) error }) (batch.Channel, error) {
	var (
		c                                                             batch.Channel
		id, config, charged, signedMax, balance, claimed, refundNonce string
		synced, last, pendingID, pendingMax, pendingExpires, since    string
		rpNonce, rpAmount, rpAt, lastRefund, stopped, ownClaimed      string
		rpOrders, opened                                              int64
		a                                                             batch.Answer
		answerAt, updated                                             string
		withdraw, v                                                   int64
	)
	if err := row.Scan(&id, &config, &charged, &signedMax, &c.Signature, &balance, &claimed, &withdraw, &refundNonce,
		&synced, &last, &pendingID, &pendingMax, &pendingExpires, &since,
		&rpNonce, &rpAmount, &rpAt, &rpOrders, &lastRefund, &a.Resource, &a.ContentType, &a.Body, &a.Settlement, &answerAt, &stopped,
		&v, &updated, &c.StopEvidence, &c.StopDetail, &ownClaimed, &opened); err != nil {
		return batch.Channel{}, err
	}
	c.Version = version(v, updated)
	c.ID = common.HexToHash(id)
	if err := json.Unmarshal([]byte(config), &c.Config); err != nil {
		return batch.Channel{}, fmt.Errorf("channel %s config: %w", id, err)
	}
	var err error
	for _, f := range []struct {
		dst **big.Int
		src string
	}{{&c.Charged, charged}, {&c.SignedMax, signedMax}, {&c.Balance, balance}, {&c.TotalClaimed, claimed}, {&c.RefundNonce, refundNonce},
		{&c.OwnClaimed, ownClaimed}} {
		if *f.dst, err = parseDecimal(f.src); err != nil {
			return batch.Channel{}, fmt.Errorf("channel %s: %w", id, err)
		}
	}
	c.WithdrawRequestedAt = uint64(withdraw)
	c.Opened = opened != 0
	if c.SyncedAt, err = parseStamp(synced); err != nil {
		return batch.Channel{}, err
	}
	if c.LastRequest, err = parseStamp(last); err != nil {
		return batch.Channel{}, err
	}
	if c.UnclaimedSince, err = parseStamp(since); err != nil {
		return batch.Channel{}, err
	}
	for _, f := range []struct {
		dst *time.Time
		src string
	}{{&c.LastRefundAt, lastRefund}, {&c.StoppedAt, stopped}, {&a.At, answerAt}} {
		if *f.dst, err = parseStamp(f.src); err != nil {
			return batch.Channel{}, err
		}
	}
	if a.Resource != "" {
		c.Answer = &a
	}
	if rpNonce != "" {
		r := &batch.PendingRefund{Orders: int(rpOrders)}
		if r.Nonce, err = parseDecimal(rpNonce); err != nil {
			return batch.Channel{}, err
		}
		if r.Amount, err = parseDecimal(rpAmount); err != nil {
			return batch.Channel{}, err
		}
		if r.At, err = parseStamp(rpAt); err != nil {
			return batch.Channel{}, err
		}
		c.RefundPending = r
	}
	if pendingID != "" {
		p := &batch.Reservation{ID: pendingID}
		if p.SignedMax, err = parseDecimal(pendingMax); err != nil {
			return batch.Channel{}, err
		}
		if p.ExpiresAt, err = parseStamp(pendingExpires); err != nil {
			return batch.Channel{}, err
		}
		c.Pending = p
	}
	return c, nil
}

// channelKey is a channel id as stored: lower-case hex.
func channelKey(id common.Hash) string { return hexutil.Encode(id[:]) }

// decimal writes an amount; nil is 0.
func decimal(x *big.Int) string {
	if x == nil {
		return "0"
	}
	return x.String()
}

func parseDecimal(s string) (*big.Int, error) {
	x, ok := new(big.Int).SetString(s, 10)
	if !ok || x.Sign() < 0 {
		return nil, fmt.Errorf("amount %q is not a non-negative integer", s)
	}
	return x, nil
}

// stamp writes a time; the zero time is "".
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

func parseStamp(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(timeFormat, s)
}
