// Package store keeps Tollgate's durable state in SQL: the payment ledger
// (payment.Ledger) and the lanes tape (closes by id), with other tables as
// their consumers arrive. The
// statements are plain SQL shared by the embedded SQLite store and a
// PostgreSQL one ($n placeholders, ON CONFLICT, transactions); consumers
// declare the interfaces they need and cmd wires a *SQLite in.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite" (pure Go)

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/lanes"
)

// schema creates the tables; every statement is idempotent.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS payments (
		network      TEXT    NOT NULL,
		asset        TEXT    NOT NULL,
		payer        TEXT    NOT NULL,
		nonce        TEXT    NOT NULL,
		operation    TEXT    NOT NULL,
		resource     TEXT    NOT NULL,
		amount       TEXT    NOT NULL,
		version      INTEGER NOT NULL,
		valid_before BIGINT  NOT NULL,
		state        TEXT    NOT NULL,
		tx           TEXT    NOT NULL DEFAULT '',
		reason       TEXT    NOT NULL DEFAULT '',
		claim_id     TEXT    NOT NULL,
		sig_hash     TEXT    NOT NULL,
		response     BLOB,
		content_type TEXT    NOT NULL DEFAULT '',
		created_at   TEXT    NOT NULL,
		updated_at   TEXT    NOT NULL,
		PRIMARY KEY (network, asset, payer, nonce)
	)`,
	`CREATE INDEX IF NOT EXISTS payments_state ON payments (state, operation)`,
	`CREATE TABLE IF NOT EXISTS paid_totals (
		operation TEXT PRIMARY KEY,
		count     BIGINT NOT NULL,
		amount    TEXT   NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS lane_closes (
		id          TEXT PRIMARY KEY,
		lane        TEXT NOT NULL,
		closed_at   TEXT NOT NULL,
		imported_at TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS lane_closes_lane ON lane_closes (lane, closed_at)`,
}

// timeFormat is fixed-width, so stored times compare as strings.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

// SQLite is the embedded store: one database file under the data dir.
type SQLite struct {
	db *sql.DB
}

var _ payment.Ledger = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) dir/tollgate.db with WAL, full
// synchronous commits and a busy timeout, and applies the schema.
func OpenSQLite(ctx context.Context, dir string) (*SQLite, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	dsn := "file:" + filepath.Join(dir, "tollgate.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serializes writes anyway
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("store: schema: %w", err)
		}
	}
	return &SQLite{db: db}, nil
}

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

const selectPayment = `SELECT network, asset, payer, nonce, operation, resource, amount, version, valid_before,
	state, tx, reason, claim_id, sig_hash, response, content_type, created_at, updated_at FROM payments`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (payment.Record, error) {
	var r payment.Record
	var created, updated string
	err := row.Scan(&r.Network, &r.Asset, &r.Payer, &r.Nonce, &r.Operation, &r.Resource, &r.Amount, &r.Version,
		&r.ValidBefore, &r.State, &r.Tx, &r.Reason, &r.ClaimID, &r.SigHash, &r.Response, &r.ContentType, &created, &updated)
	r.CreatedAt, _ = time.Parse(timeFormat, created)
	r.UpdatedAt, _ = time.Parse(timeFormat, updated)
	return r, err
}

// Claim implements payment.Ledger, in one transaction: read the key, then
// insert it or take it over.
func (s *SQLite) Claim(ctx context.Context, rec payment.Record, staleBefore time.Time) (payment.Record, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return payment.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UTC()
	existing, err := scanRecord(tx.QueryRowContext(ctx, selectPayment+` WHERE network = $1 AND asset = $2 AND payer = $3 AND nonce = $4`,
		rec.Network, rec.Asset, rec.Payer, rec.Nonce))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, `INSERT INTO payments (network, asset, payer, nonce, operation, resource, amount, version,
			valid_before, state, claim_id, sig_hash, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)`,
			rec.Network, rec.Asset, rec.Payer, rec.Nonce, rec.Operation, rec.Resource, rec.Amount, rec.Version,
			rec.ValidBefore, payment.StateVerified, rec.ClaimID, rec.SigHash, now.Format(timeFormat))
	case err != nil:
	case takeable(existing, staleBefore):
		rec.PrevState, rec.PrevTx = existing.State, existing.Tx
		_, err = tx.ExecContext(ctx, `UPDATE payments SET operation = $1, resource = $2, amount = $3, version = $4,
			valid_before = $5, state = $6, claim_id = $7, sig_hash = $8, reason = '', updated_at = $9
			WHERE network = $10 AND asset = $11 AND payer = $12 AND nonce = $13`,
			rec.Operation, rec.Resource, rec.Amount, rec.Version, rec.ValidBefore, payment.StateVerified, rec.ClaimID,
			rec.SigHash, now.Format(timeFormat), rec.Network, rec.Asset, rec.Payer, rec.Nonce)
	default:
		return existing, payment.ErrClaimed
	}
	if err != nil {
		return payment.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return payment.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	rec.State, rec.CreatedAt, rec.UpdatedAt = payment.StateVerified, now, now
	return rec, nil
}

func takeable(r payment.Record, staleBefore time.Time) bool {
	switch r.State {
	case payment.StateReleased, payment.StateFailed, payment.StatePending:
		return true
	case payment.StateVerified:
		return r.UpdatedAt.Before(staleBefore)
	}
	return false
}

// Finish implements payment.Ledger. Settling also adds to the running
// totals, in the same transaction.
func (s *SQLite) Finish(ctx context.Context, rec payment.Record) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: finish: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE payments SET state = $1, tx = $2, reason = $3, response = $4, content_type = $5, updated_at = $6
		WHERE network = $7 AND asset = $8 AND payer = $9 AND nonce = $10 AND claim_id = $11 AND state <> $12`,
		rec.State, rec.Tx, rec.Reason, rec.Response, rec.ContentType, time.Now().UTC().Format(timeFormat),
		rec.Network, rec.Asset, rec.Payer, rec.Nonce, rec.ClaimID, payment.StateSettled)
	if err != nil {
		return fmt.Errorf("store: finish: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return payment.ErrLostClaim
	}
	if rec.State == payment.StateSettled {
		var count int64
		var amount string
		err := tx.QueryRowContext(ctx, `SELECT count, amount FROM paid_totals WHERE operation = $1`, rec.Operation).Scan(&count, &amount)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: totals: %w", err)
		}
		sum, ok := new(big.Int).SetString(orZero(amount), 10)
		add, ok2 := new(big.Int).SetString(rec.Amount, 10)
		if !ok || !ok2 {
			return fmt.Errorf("store: amount %q is not an integer", rec.Amount)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO paid_totals (operation, count, amount) VALUES ($1, $2, $3)
			ON CONFLICT (operation) DO UPDATE SET count = excluded.count, amount = excluded.amount`,
			rec.Operation, count+1, sum.Add(sum, add).String()); err != nil {
			return fmt.Errorf("store: totals: %w", err)
		}
	}
	return tx.Commit()
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// PaidByOperation implements payment.Ledger from the running totals.
func (s *SQLite) PaidByOperation(ctx context.Context) (map[string]payment.Paid, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT operation, count, amount FROM paid_totals`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]payment.Paid{}
	for rows.Next() {
		var op, amount string
		var count int64
		if err := rows.Scan(&op, &count, &amount); err != nil {
			return nil, err
		}
		out[op] = payment.Paid{Count: uint64(count), Amount: amount}
	}
	return out, rows.Err()
}

// Payments returns every payment record, oldest first (tests, tooling).
func (s *SQLite) Payments(ctx context.Context) ([]payment.Record, error) {
	rows, err := s.db.QueryContext(ctx, selectPayment+` ORDER BY created_at`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []payment.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ImportCloses stores closes in one transaction, idempotently by id: a
// close already stored identically is counted as a duplicate; one stored
// with another lane or time fails the import (lanes.ErrConflict) and
// nothing is stored.
func (s *SQLite) ImportCloses(ctx context.Context, closes []lanes.Close) (inserted, duplicates int, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("store: import closes: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UTC().Format(timeFormat)
	for _, c := range closes {
		var lane, closedAt string
		err := tx.QueryRowContext(ctx, `SELECT lane, closed_at FROM lane_closes WHERE id = $1`, c.ID).Scan(&lane, &closedAt)
		switch {
		case err == nil:
			if lane != c.Lane || closedAt != c.ClosedAt.UTC().Format(timeFormat) {
				return 0, 0, fmt.Errorf("close %q (stored in lane %q at %s): %w", c.ID, lane, closedAt, lanes.ErrConflict)
			}
			duplicates++
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return 0, 0, fmt.Errorf("store: import closes: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO lane_closes (id, lane, closed_at, imported_at) VALUES ($1, $2, $3, $4)`,
			c.ID, c.Lane, c.ClosedAt.UTC().Format(timeFormat), now); err != nil {
			return 0, 0, fmt.Errorf("store: import closes: %w", err)
		}
		inserted++
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("store: import closes: %w", err)
	}
	return inserted, duplicates, nil
}

// Lanes summarizes the tape: every lane with its close count and last
// close, by name.
func (s *SQLite) Lanes(ctx context.Context) ([]lanes.Lane, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT lane, COUNT(*), MAX(closed_at) FROM lane_closes GROUP BY lane ORDER BY lane`)
	if err != nil {
		return nil, fmt.Errorf("store: lanes: %w", err)
	}
	defer rows.Close()
	var out []lanes.Lane
	for rows.Next() {
		var l lanes.Lane
		var last string
		if err := rows.Scan(&l.Name, &l.Closes, &last); err != nil {
			return nil, fmt.Errorf("store: lanes: %w", err)
		}
		if l.LastClose, err = time.Parse(timeFormat, last); err != nil {
			return nil, fmt.Errorf("store: lanes: last close %q: %w", last, err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
