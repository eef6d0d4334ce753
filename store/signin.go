package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
)

// This file serves the sign-in-with-x extension (payment/siwx.go): the
// nonces a signed-in request spent, shared by every replica of the
// store, and what a wallet bought, read from the books as they are.

var (
	_ payment.NonceBook    = (*DB)(nil)
	_ payment.PurchaseBook = (*DB)(nil)
)

// nonceKeptFor is how long a spent nonce is kept: past it, its message's
// issue time is long too old to be accepted anyway.
const nonceKeptFor = time.Hour

// UseNonce implements payment.NonceBook.
func (s *DB) UseNonce(ctx context.Context, nonce string, at time.Time) (bool, error) {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM siwx_nonces WHERE used_at < $1`, stamp(at.Add(-nonceKeptFor))); err != nil {
		return false, fmt.Errorf("store: sign-in nonce: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO siwx_nonces (nonce, used_at) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING`, nonce, stamp(at))
	if err != nil {
		return false, fmt.Errorf("store: sign-in nonce: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Purchases implements payment.PurchaseBook from three records: exact's
// settled payments with their stored answers, the last answer of each
// channel payer was charged on, and the answers of payer's payment
// identifiers.
func (s *DB) Purchases(ctx context.Context, payer common.Address, operation string, since time.Time) ([]payment.Purchase, error) {
	var out []payment.Purchase
	add := func(resource, contentType string, body, settlement []byte, at string, tx string) error {
		t, err := parseStamp(at)
		if err != nil || t.Before(since) || body == nil {
			return err
		}
		p := payment.Purchase{Operation: operation, Resource: resource, ContentType: contentType, Body: body, At: t,
			Settlement: payment.SettleResponse{Success: true, Transaction: tx, Payer: payer.Hex()}}
		if settlement != nil {
			if err := json.Unmarshal(settlement, &p.Settlement); err != nil {
				return fmt.Errorf("store: purchase's settlement: %w", err)
			}
		}
		out = append(out, p)
		return nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT resource, content_type, response, updated_at, tx FROM payments
		WHERE lower(payer) = $1 AND operation = $2 AND state = $3 AND updated_at >= $4`, strings.ToLower(payer.Hex()), operation, "settled", stamp(since))
	if err != nil {
		return nil, fmt.Errorf("store: purchases: %w", err)
	}
	for rows.Next() {
		var resource, contentType, at, tx string
		var body []byte
		if err := rows.Scan(&resource, &contentType, &body, &at, &tx); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: purchases: %w", err)
		}
		if err := add(resource, contentType, body, nil, at, tx); err != nil {
			rows.Close()
			return nil, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: purchases: %w", err)
	}
	// A voucher call's answer is kept on its channel until the next one.
	rows, err = s.db.QueryContext(ctx, `SELECT c.answer_resource, c.answer_type, c.answer_body, c.answer_settlement, c.answer_at FROM channels c
		WHERE c.id IN (SELECT DISTINCT channel FROM batch_charges WHERE payer = $1 AND operation = $2 AND charged_at >= $3)`,
		strings.ToLower(payer.Hex()), operation, stamp(since))
	if err != nil {
		return nil, fmt.Errorf("store: purchases: %w", err)
	}
	for rows.Next() {
		var resource, contentType, at string
		var body, settlement []byte
		if err := rows.Scan(&resource, &contentType, &body, &settlement, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: purchases: %w", err)
		}
		if err := add(resource, contentType, body, settlement, at, ""); err != nil {
			rows.Close()
			return nil, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: purchases: %w", err)
	}
	rows, err = s.db.QueryContext(ctx, `SELECT resource, answer_type, answer_body, settlement, finished_at FROM payment_ids
		WHERE done = 1 AND lower(payer) = $1 AND operation = $2 AND finished_at >= $3`, strings.ToLower(payer.Hex()), operation, stamp(since))
	if err != nil {
		return nil, fmt.Errorf("store: purchases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var resource, contentType, at string
		var body, settlement []byte
		if err := rows.Scan(&resource, &contentType, &body, &settlement, &at); err != nil {
			return nil, fmt.Errorf("store: purchases: %w", err)
		}
		if err := add(resource, contentType, body, settlement, at, ""); err != nil {
			return nil, err
		}
	}
	return out, rows.Err()
}
