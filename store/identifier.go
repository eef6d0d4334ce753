package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/payment"
)

// This file keeps the payment-identifier extension's ids (payment.IDBook;
// payment/identifier.go says what they answer). Each statement stands
// alone, so replicas on one database share the ids: a reservation is an
// insert that only the first of two racing requests makes, and taking
// over a stale or expired one is an update compared on the holder.

var _ payment.IDBook = (*DB)(nil)

const selectPaymentID = `SELECT id, operation, resource, payload_hash, owner, payer, done, answer_type, answer_body, settlement, created_at, finished_at
	FROM payment_ids WHERE id = $1`

// ReserveID implements payment.IDBook.
func (s *DB) ReserveID(ctx context.Context, r payment.IDRecord, stale, expired time.Time) (payment.IDRecord, bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO payment_ids (id, operation, resource, payload_hash, owner, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`, r.ID, r.Operation, r.Resource, r.PayloadHash, r.Owner, stamp(r.Created))
	if err != nil {
		return payment.IDRecord{}, false, fmt.Errorf("store: reserve payment id: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return r, true, nil
	}
	known, err := s.paymentID(ctx, r.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return s.ReserveID(ctx, r, stale, expired) // released meanwhile
	}
	if err != nil || !(known.Done && known.Created.Before(expired) || !known.Done && known.Created.Before(stale)) {
		return known, false, err
	}
	// A reservation whose payment never ended, or an id past its
	// keeping: taken over (the old record replaced), unless another
	// request took it first. Ids are otherwise kept: the ledger shows
	// them beside the payments they paid.
	res, err = s.db.ExecContext(ctx, `UPDATE payment_ids SET operation = $2, resource = $3, payload_hash = $4, owner = $5, created_at = $6,
			payer = '', done = 0, answer_type = '', answer_body = NULL, settlement = NULL, finished_at = ''
		WHERE id = $1 AND owner = $7`, r.ID, r.Operation, r.Resource, r.PayloadHash, r.Owner, stamp(r.Created), known.Owner)
	if err != nil {
		return payment.IDRecord{}, false, fmt.Errorf("store: reserve payment id: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return r, true, nil
	}
	known, err = s.paymentID(ctx, r.ID)
	return known, false, err
}

// FinishID implements payment.IDBook.
func (s *DB) FinishID(ctx context.Context, r payment.IDRecord) error {
	res, err := s.db.ExecContext(ctx, `UPDATE payment_ids SET payer = $3, done = 1, answer_type = $4, answer_body = $5, settlement = $6, finished_at = $7
		WHERE id = $1 AND owner = $2`, r.ID, r.Owner, r.Payer, r.ContentType, r.Body, r.Settlement, stamp(r.Finished))
	if err != nil {
		return fmt.Errorf("store: finish payment id: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: finish payment id %s: the reservation is no longer this request's", r.ID)
	}
	return nil
}

// ReleaseID implements payment.IDBook.
func (s *DB) ReleaseID(ctx context.Context, id, owner string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM payment_ids WHERE id = $1 AND owner = $2 AND done = 0`, id, owner); err != nil {
		return fmt.Errorf("store: release payment id: %w", err)
	}
	return nil
}

// PaymentIDs lists the answered payment identifiers created since since,
// oldest first, for the ledger.
func (s *DB) PaymentIDs(ctx context.Context, since time.Time) ([]payment.IDRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, operation, resource, payload_hash, owner, payer, done, answer_type, answer_body, settlement, created_at, finished_at
		FROM payment_ids WHERE done = 1 AND created_at >= $1 ORDER BY created_at, id`, stamp(since))
	if err != nil {
		return nil, fmt.Errorf("store: payment ids: %w", err)
	}
	defer rows.Close()
	var out []payment.IDRecord
	for rows.Next() {
		r, err := scanPaymentID(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *DB) paymentID(ctx context.Context, id string) (payment.IDRecord, error) {
	return scanPaymentID(s.db.QueryRowContext(ctx, selectPaymentID, id))
}

func scanPaymentID(row interface{ Scan(...any) error }) (payment.IDRecord, error) {
	var r payment.IDRecord
	var done int64
	var created, finished string
	if err := row.Scan(&r.ID, &r.Operation, &r.Resource, &r.PayloadHash, &r.Owner, &r.Payer, &done, &r.ContentType, &r.Body, &r.Settlement,
		&created, &finished); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return r, err
		}
		return r, fmt.Errorf("store: payment id: %w", err)
	}
	r.Done = done == 1
	var err error
	if r.Created, err = parseStamp(created); err == nil {
		r.Finished, err = parseStamp(finished)
	}
	if err != nil {
		return r, fmt.Errorf("store: payment id %s: %w", r.ID, err)
	}
	return r, nil
}
