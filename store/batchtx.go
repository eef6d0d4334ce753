package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment/batch"
)

var _ batch.ClaimStore = (*DB)(nil)

// RecordBatchTx implements batch.ClaimStore: it appends r to the history
// of claim and settle transactions (a random key when r has none).
func (s *DB) RecordBatchTx(ctx context.Context, r batch.TxRecord) error {
	if r.ID == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("store: batch tx id: %w", err)
		}
		r.ID = hex.EncodeToString(b[:])
	}
	var tx string
	if r.Tx != (common.Hash{}) {
		tx = strings.ToLower(r.Tx.Hex())
	}
	var receiver, token string
	if r.Receiver != (common.Address{}) || r.Token != (common.Address{}) {
		receiver, token = r.Receiver.Hex(), r.Token.Hex()
	}
	at := r.At
	if at.IsZero() {
		at = time.Now()
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO batch_txs (id, kind, tx, receiver, token, amount, row_count, result, reason, message, sent_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		r.ID, r.Kind, tx, receiver, token, decimal(r.Amount), int64(r.Rows), r.Result, r.Reason, r.Message, at.UTC().Format(timeFormat))
	if err != nil {
		return fmt.Errorf("store: record batch tx: %w", err)
	}
	return nil
}

// BatchTxs returns the latest limit claim and settle transactions
// recorded, newest first (limit ≤ 0: all of them).
func (s *DB) BatchTxs(ctx context.Context, limit int) ([]batch.TxRecord, error) {
	q := `SELECT id, kind, tx, receiver, token, amount, row_count, result, reason, message, sent_at FROM batch_txs ORDER BY sent_at DESC, id DESC`
	var args []any
	if limit > 0 {
		q += ` LIMIT $1`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: batch txs: %w", err)
	}
	defer rows.Close()
	var out []batch.TxRecord
	for rows.Next() {
		var (
			r                               batch.TxRecord
			tx, receiver, token, amount, at string
			n                               int64
		)
		if err := rows.Scan(&r.ID, &r.Kind, &tx, &receiver, &token, &amount, &n, &r.Result, &r.Reason, &r.Message, &at); err != nil {
			return nil, fmt.Errorf("store: batch txs: %w", err)
		}
		if tx != "" {
			r.Tx = common.HexToHash(tx)
		}
		if receiver != "" {
			r.Receiver, r.Token = common.HexToAddress(receiver), common.HexToAddress(token)
		}
		r.Rows = int(n)
		if r.Amount, err = parseDecimal(amount); err != nil {
			return nil, fmt.Errorf("store: batch tx %s: %w", r.ID, err)
		}
		if r.At, err = time.Parse(timeFormat, at); err != nil {
			return nil, fmt.Errorf("store: batch tx %s: %w", r.ID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// BatchUnclaimed sums what the batch-settlement channels charged and have
// not claimed yet: how many channels hold such value, its total (atomic
// units, every token together) and since when the oldest of it has
// waited (zero when none has, or none has a recorded age). The metrics
// read it at each scrape.
func (s *DB) BatchUnclaimed(ctx context.Context) (channels int, unclaimed *big.Int, oldest time.Time, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT charged, total_claimed, unclaimed_since FROM channels`)
	if err != nil {
		return 0, nil, time.Time{}, fmt.Errorf("store: unclaimed: %w", err)
	}
	defer rows.Close()
	unclaimed = new(big.Int)
	for rows.Next() {
		var charged, claimed, since string
		if err := rows.Scan(&charged, &claimed, &since); err != nil {
			return 0, nil, time.Time{}, fmt.Errorf("store: unclaimed: %w", err)
		}
		ch, err1 := parseDecimal(charged)
		cl, err2 := parseDecimal(claimed)
		at, err3 := parseStamp(since)
		if err1 != nil || err2 != nil || err3 != nil {
			return 0, nil, time.Time{}, fmt.Errorf("store: unclaimed: a channel row does not parse (%q, %q, %q)", charged, claimed, since)
		}
		if ch.Cmp(cl) <= 0 {
			continue
		}
		channels++
		unclaimed.Add(unclaimed, ch.Sub(ch, cl))
		if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, time.Time{}, fmt.Errorf("store: unclaimed: %w", err)
	}
	return channels, unclaimed, oldest, nil
}
