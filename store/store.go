// Package store keeps Tollgate's durable state in SQL: the payment ledger
// (payment.Ledger) today, and other tables as their consumers arrive. The
// statements are plain SQL shared by the embedded SQLite store and a
// PostgreSQL one ($n placeholders, ON CONFLICT upserts); consumers declare
// the interfaces they need and cmd wires a *SQLite in.
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

	_ "modernc.org/sqlite" // database/sql driver "sqlite" (pure Go)

	"github.com/tollgate/tollgate/payment"
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
		created_at   TEXT    NOT NULL,
		updated_at   TEXT    NOT NULL,
		PRIMARY KEY (network, asset, payer, nonce)
	)`,
	`CREATE INDEX IF NOT EXISTS payments_state ON payments (state, operation)`,
	`CREATE TABLE IF NOT EXISTS refused_payments (
		at        TEXT NOT NULL,
		operation TEXT NOT NULL,
		payer     TEXT NOT NULL,
		nonce     TEXT NOT NULL,
		reason    TEXT NOT NULL
	)`,
}

// timeFormat is fixed-width, so stored times compare as strings.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

// SQLite is the embedded store: one database file under the data dir.
type SQLite struct {
	db *sql.DB
}

var _ payment.Ledger = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) dir/tollgate.db with WAL and a busy
// timeout, and applies the schema.
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

const claimSQL = `INSERT INTO payments
	(network, asset, payer, nonce, operation, resource, amount, version, valid_before, state, tx, reason, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, '', '', $11, $11)
	ON CONFLICT (network, asset, payer, nonce) DO UPDATE SET
		operation = excluded.operation, resource = excluded.resource, amount = excluded.amount,
		version = excluded.version, valid_before = excluded.valid_before, state = excluded.state,
		tx = '', reason = '', updated_at = excluded.updated_at
	WHERE payments.state IN ('released', 'failed') OR (payments.state = 'verified' AND payments.updated_at < $12)`

// Claim implements payment.Ledger.
func (s *SQLite) Claim(ctx context.Context, rec payment.Record, staleBefore time.Time) (payment.Record, error) {
	now := time.Now().UTC()
	res, err := s.db.ExecContext(ctx, claimSQL, rec.Network, rec.Asset, rec.Payer, rec.Nonce, rec.Operation,
		rec.Resource, rec.Amount, rec.Version, rec.ValidBefore, payment.StateVerified, now.Format(timeFormat),
		staleBefore.UTC().Format(timeFormat))
	if err != nil {
		return payment.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		rec.State, rec.CreatedAt, rec.UpdatedAt = payment.StateVerified, now, now
		return rec, nil
	}
	existing, err := s.get(ctx, rec.Network, rec.Asset, rec.Payer, rec.Nonce)
	if err != nil {
		return payment.Record{}, err
	}
	return existing, payment.ErrClaimed
}

func (s *SQLite) get(ctx context.Context, network, asset, payer, nonce string) (payment.Record, error) {
	var r payment.Record
	var created, updated string
	err := s.db.QueryRowContext(ctx, `SELECT network, asset, payer, nonce, operation, resource, amount, version,
		valid_before, state, tx, reason, created_at, updated_at FROM payments
		WHERE network = $1 AND asset = $2 AND payer = $3 AND nonce = $4`, network, asset, payer, nonce).
		Scan(&r.Network, &r.Asset, &r.Payer, &r.Nonce, &r.Operation, &r.Resource, &r.Amount, &r.Version,
			&r.ValidBefore, &r.State, &r.Tx, &r.Reason, &created, &updated)
	if err != nil {
		return r, fmt.Errorf("store: get payment: %w", err)
	}
	r.CreatedAt, _ = time.Parse(timeFormat, created)
	r.UpdatedAt, _ = time.Parse(timeFormat, updated)
	return r, nil
}

// Finish implements payment.Ledger.
func (s *SQLite) Finish(ctx context.Context, rec payment.Record) error {
	res, err := s.db.ExecContext(ctx, `UPDATE payments SET state = $1, tx = $2, reason = $3, updated_at = $4
		WHERE network = $5 AND asset = $6 AND payer = $7 AND nonce = $8`,
		rec.State, rec.Tx, rec.Reason, time.Now().UTC().Format(timeFormat), rec.Network, rec.Asset, rec.Payer, rec.Nonce)
	if err != nil {
		return fmt.Errorf("store: finish: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return errors.New("store: finish: no such payment")
	}
	return nil
}

// Refused implements payment.Ledger.
func (s *SQLite) Refused(ctx context.Context, a payment.Attempt) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO refused_payments (at, operation, payer, nonce, reason) VALUES ($1, $2, $3, $4, $5)`,
		a.Time.UTC().Format(timeFormat), a.Operation, a.Payer, a.Nonce, a.Reason)
	return err
}

// PaidByOperation implements payment.Ledger. Amounts are summed exactly
// (big integers), never as floats.
func (s *SQLite) PaidByOperation(ctx context.Context) (map[string]payment.Paid, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT operation, amount FROM payments WHERE state = $1`, payment.StateSettled)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sums := map[string]*big.Int{}
	counts := map[string]uint64{}
	for rows.Next() {
		var op, amount string
		if err := rows.Scan(&op, &amount); err != nil {
			return nil, err
		}
		v, ok := new(big.Int).SetString(amount, 10)
		if !ok {
			return nil, fmt.Errorf("store: amount %q is not an integer", amount)
		}
		if sums[op] == nil {
			sums[op] = new(big.Int)
		}
		sums[op].Add(sums[op], v)
		counts[op]++
	}
	out := map[string]payment.Paid{}
	for op, sum := range sums {
		out[op] = payment.Paid{Count: counts[op], Amount: sum.String()}
	}
	return out, rows.Err()
}

// Payments returns every payment record, oldest first (tests, tooling).
func (s *SQLite) Payments(ctx context.Context) ([]payment.Record, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT network, asset, payer, nonce FROM payments ORDER BY created_at`)
	if err != nil {
		return nil, err
	}
	var keys [][4]string
	for rows.Next() {
		var k [4]string
		if err := rows.Scan(&k[0], &k[1], &k[2], &k[3]); err != nil {
			rows.Close()
			return nil, err
		}
		keys = append(keys, k)
	}
	rows.Close()
	var out []payment.Record
	for _, k := range keys {
		r, err := s.get(ctx, k[0], k[1], k[2], k[3])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
