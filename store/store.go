// Package store keeps Tollgate's durable state in SQL: the payment ledger
// (exact.Ledger), the lanes tape (closes by id), the leases of work one
// replica does for all and the whale snapshot (lease.go), with other tables as
// their consumers arrive. One type, [DB], runs on two engines: the
// embedded SQLite database of one process ([OpenSQLite]) and PostgreSQL,
// shared by replicas ([OpenPostgres]). Both run the same statements ($n
// placeholders, ON CONFLICT, transactions); what differs between them sits
// in engine.go. Consumers declare the interfaces they need and cmd wires a
// *DB in.
package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service/lanes"
)

// migrations are applied in order, each once, recorded in
// schema_migrations. The first is the schema as it stood before versions
// were recorded (idempotent statements, so a database of that time takes
// it as a no-op); every later one is new.
var migrations = [][]string{
	1: {
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
	},
	// The recipient, so that a payment is checked on chain against the
	// payTo it was made to, whatever --pay-to says today.
	2: {`ALTER TABLE payments ADD COLUMN pay_to TEXT NOT NULL DEFAULT ''`},
	// 402 challenges per operation, flushed in batches by the gate.
	3: {`CREATE TABLE challenge_counts (
		operation TEXT PRIMARY KEY,
		count     BIGINT NOT NULL
	)`},
	// The deployment the store belongs to (deployment.go): one row, written
	// by the first serve that opens the store, checked by every later one.
	4: {`CREATE TABLE deployment (
		id         INTEGER PRIMARY KEY CHECK (id = 1),
		mode       TEXT NOT NULL,
		network    TEXT NOT NULL,
		asset      TEXT NOT NULL,
		genesis    TEXT NOT NULL,
		created_at TEXT NOT NULL
	)`},
	// Work one replica does for all (lease.go): leases by name, and the
	// whale scan's latest snapshot, one row.
	5: {
		`CREATE TABLE leases (
			name       TEXT PRIMARY KEY,
			holder     TEXT NOT NULL,
			expires_at TEXT NOT NULL
		)`,
		`CREATE TABLE whale_snapshots (
			id       INTEGER PRIMARY KEY CHECK (id = 1),
			taken_at TEXT NOT NULL,
			body     BLOB NOT NULL
		)`,
	},
	// Payment channels of the batch-settlement scheme (channel.go).
	6: {`CREATE TABLE channels (
		id                    TEXT   PRIMARY KEY,
		config                TEXT   NOT NULL,
		charged               TEXT   NOT NULL,
		signed_max            TEXT   NOT NULL,
		signature             BLOB,
		balance               TEXT   NOT NULL,
		total_claimed         TEXT   NOT NULL,
		withdraw_requested_at BIGINT NOT NULL,
		refund_nonce          TEXT   NOT NULL,
		synced_at             TEXT   NOT NULL,
		last_request          TEXT   NOT NULL,
		pending_id            TEXT   NOT NULL DEFAULT '',
		pending_max           TEXT   NOT NULL DEFAULT '',
		pending_expires       TEXT   NOT NULL DEFAULT '',
		updated_at            TEXT   NOT NULL
	)`},
	// The batch-settlement claimer (batchtx.go): how long a channel's
	// value has waited for a claim, and the claim and settle transactions.
	7: {
		`ALTER TABLE channels ADD COLUMN unclaimed_since TEXT NOT NULL DEFAULT ''`,
		`CREATE TABLE batch_txs (
			id        TEXT   PRIMARY KEY,
			kind      TEXT   NOT NULL,
			tx        TEXT   NOT NULL,
			receiver  TEXT   NOT NULL,
			token     TEXT   NOT NULL,
			amount    TEXT   NOT NULL,
			row_count BIGINT NOT NULL,
			result    TEXT   NOT NULL,
			reason    TEXT   NOT NULL,
			message   TEXT   NOT NULL,
			sent_at   TEXT   NOT NULL
		)`,
		`CREATE INDEX batch_txs_sent_at ON batch_txs (sent_at)`,
	},
	// Batch-settlement's guarantees (issue 20): a refund in flight, the
	// refund rate, the last answer for a resent voucher, claims made
	// elsewhere; and every voucher call in the books (charge.go).
	8: {
		`ALTER TABLE channels ADD COLUMN refund_pending_nonce TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN refund_pending_amount TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN refund_pending_at TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN refund_pending_orders BIGINT NOT NULL DEFAULT 0`,
		`ALTER TABLE channels ADD COLUMN last_refund_at TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN answer_resource TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN answer_type TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN answer_body BLOB`,
		`ALTER TABLE channels ADD COLUMN answer_settlement BLOB`,
		`ALTER TABLE channels ADD COLUMN answer_at TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN foreign_claim_at TEXT NOT NULL DEFAULT ''`,
		`CREATE TABLE batch_charges (
			channel    TEXT NOT NULL,
			cumulative TEXT NOT NULL,
			operation  TEXT NOT NULL,
			resource   TEXT NOT NULL,
			payer      TEXT NOT NULL,
			pay_to     TEXT NOT NULL,
			asset      TEXT NOT NULL,
			amount     TEXT NOT NULL,
			charged_at TEXT NOT NULL,
			PRIMARY KEY (channel, cumulative)
		)`,
		`CREATE INDEX batch_charges_charged_at ON batch_charges (charged_at)`,
		// The voucher calls' part of the paid totals, in shards: every
		// charge adds to one row, and one row for all would serialize
		// every replica's charges on its lock (charge.go).
		`CREATE TABLE charge_totals (
			operation TEXT   NOT NULL,
			shard     BIGINT NOT NULL,
			count     BIGINT NOT NULL,
			amount    TEXT   NOT NULL,
			PRIMARY KEY (operation, shard)
		)`,
	},
	// A voucher's charge written without reading its channel again when
	// the row is as the voucher was judged on (channel.go, tryFrom): the
	// row's version, a random number each write draws.
	9: {`ALTER TABLE channels ADD COLUMN version BIGINT NOT NULL DEFAULT 0`},
	// A channel is served only by the store that opened it, and stops on
	// evidence that another server charged it (issue 32): when and why it
	// stopped (a foreign claim, until now the only evidence), the highest
	// total this store asked the escrow to claim (the rows before it:
	// every claim on record was theirs), and whether this store opened
	// it (the rows before it: yes, as they were served).
	10: {
		`ALTER TABLE channels RENAME COLUMN foreign_claim_at TO stopped_at`,
		`ALTER TABLE channels ADD COLUMN stop_evidence TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN stop_detail TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE channels ADD COLUMN own_claimed TEXT NOT NULL DEFAULT '0'`,
		`ALTER TABLE channels ADD COLUMN opened BIGINT NOT NULL DEFAULT 1`,
		`UPDATE channels SET own_claimed = total_claimed`,
		`UPDATE channels SET stop_evidence = 'claimed_elsewhere', stop_detail = 'the escrow showed a claimed total above what this store charged'
			WHERE stopped_at <> ''`,
	},
	// The payment-identifier extension's ids (identifier.go): the request
	// and payload an id was first used with, the payer and the answer; and
	// the sign-in-with-x extension's spent nonces (signin.go).
	11: {
		`CREATE TABLE payment_ids (
			id           TEXT   PRIMARY KEY,
			operation    TEXT   NOT NULL,
			resource     TEXT   NOT NULL,
			payload_hash TEXT   NOT NULL,
			owner        TEXT   NOT NULL,
			payer        TEXT   NOT NULL DEFAULT '',
			done         BIGINT NOT NULL DEFAULT 0,
			answer_type  TEXT   NOT NULL DEFAULT '',
			answer_body  BLOB,
			settlement   BLOB,
			created_at   TEXT   NOT NULL,
			finished_at  TEXT   NOT NULL DEFAULT ''
		)`,
		`CREATE INDEX payment_ids_created_at ON payment_ids (created_at)`,
		// The sign-in-with-x extension's spent nonces (signin.go).
		`CREATE TABLE siwx_nonces (
			nonce   TEXT PRIMARY KEY,
			used_at TEXT NOT NULL
		)`,
		`CREATE INDEX siwx_nonces_used_at ON siwx_nonces (used_at)`,
	},
}

// execer is a *sql.DB or one of its connections.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrate applies the migrations the database has not recorded, each in
// its own transaction, their DDL written for e's engine. On PostgreSQL
// the caller holds the migration lock (engine.go).
func migrate(ctx context.Context, db execer, e engine) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return err
	}
	for v := 1; v < len(migrations); v++ {
		err := func() error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, v).Scan(&n); err != nil || n > 0 {
				return err
			}
			for _, stmt := range migrations[v] {
				if _, err := tx.ExecContext(ctx, e.ddl(stmt)); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
				v, time.Now().UTC().Format(timeFormat)); err != nil {
				return err
			}
			return tx.Commit()
		}()
		if err != nil {
			return fmt.Errorf("store: migration %d: %w", v, err)
		}
	}
	return nil
}

// timeFormat is fixed-width, so stored times compare as strings.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

// DB is the store on either engine. Its methods mean the same on both:
// the store's tests run every case against each.
type DB struct {
	db *sql.DB
	e  engine
	// rdb reads outside transactions: on SQLite a pool of read-only
	// connections beside db's single writer (WAL lets them read while it
	// writes); on PostgreSQL db itself.
	rdb *sql.DB
	// prepared are the hot statements prepared once (SQLite, whose parser
	// costs more than the statements; pgx caches PostgreSQL's itself).
	prepared map[string]*sql.Stmt
	// reads are the hot reads prepared on rdb (SQLite).
	reads map[string]*sql.Stmt
	// group commits SQLite's channel updates together (group.go); nil on
	// PostgreSQL.
	group *group
	// pipe writes PostgreSQL's voucher charges in batches (pipe.go); nil
	// on SQLite.
	pipe *pipe
}

// SQLite is DB's former name, from when SQLite was its only engine; code
// written against it keeps compiling.
type SQLite = DB

var _ exact.Ledger = (*DB)(nil)

// Close closes the database.
func (s *DB) Close() error {
	if s.group != nil {
		s.group.close()
	}
	if s.pipe != nil {
		s.pipe.close()
	}
	for _, st := range s.prepared {
		st.Close()
	}
	for _, st := range s.reads {
		st.Close()
	}
	if s.rdb != s.db {
		s.rdb.Close()
	}
	return s.db.Close()
}

// Ping reports whether the database answers (the readiness probe).
func (s *DB) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

const selectPayment = `SELECT network, asset, payer, nonce, operation, resource, amount, pay_to, version, valid_before,
	state, tx, reason, claim_id, sig_hash, response, content_type, created_at, updated_at FROM payments`

const whereKey = ` WHERE network = $1 AND asset = $2 AND payer = $3 AND nonce = $4`

type scanner interface{ Scan(dest ...any) error }

func scanRecord(row scanner) (exact.Record, error) {
	var r exact.Record
	var created, updated string
	err := row.Scan(&r.Network, &r.Asset, &r.Payer, &r.Nonce, &r.Operation, &r.Resource, &r.Amount, &r.PayTo, &r.Version,
		&r.ValidBefore, &r.State, &r.Tx, &r.Reason, &r.ClaimID, &r.SigHash, &r.Response, &r.ContentType, &created, &updated)
	r.CreatedAt, _ = time.Parse(timeFormat, created)
	r.UpdatedAt, _ = time.Parse(timeFormat, updated)
	return r, err
}

// Claim implements exact.Ledger, in one transaction: insert the key
// unless it exists, else read it under the engine's write lock and take it
// over if it may be. Inserting first is what makes one claim win on
// PostgreSQL too: a concurrent insert of the same key waits for the other
// transaction and then does nothing, and the locked read sees its row.
func (s *DB) Claim(ctx context.Context, rec exact.Record, staleBefore time.Time) (exact.Record, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return exact.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UTC()
	res, err := tx.ExecContext(ctx, `INSERT INTO payments (network, asset, payer, nonce, operation, resource, amount, pay_to, version,
		valid_before, state, claim_id, sig_hash, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)
		ON CONFLICT (network, asset, payer, nonce) DO NOTHING`,
		rec.Network, rec.Asset, rec.Payer, rec.Nonce, rec.Operation, rec.Resource, rec.Amount, rec.PayTo, rec.Version,
		rec.ValidBefore, exact.StateVerified, rec.ClaimID, rec.SigHash, now.Format(timeFormat))
	if err != nil {
		return exact.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return exact.Record{}, fmt.Errorf("store: claim: %w", err)
	} else if n == 0 {
		existing, err := scanRecord(tx.QueryRowContext(ctx, selectPayment+whereKey+s.e.forUpdate, rec.Network, rec.Asset, rec.Payer, rec.Nonce))
		if err != nil {
			return exact.Record{}, fmt.Errorf("store: claim: %w", err)
		}
		if !takeable(existing, staleBefore) {
			return existing, exact.ErrClaimed
		}
		rec.PrevState, rec.PrevTx, rec.CreatedAt = existing.State, existing.Tx, existing.CreatedAt
		if _, err := tx.ExecContext(ctx, `UPDATE payments SET operation = $1, resource = $2, amount = $3, pay_to = $4, version = $5,
			valid_before = $6, state = $7, claim_id = $8, sig_hash = $9, reason = '', updated_at = $10
			WHERE network = $11 AND asset = $12 AND payer = $13 AND nonce = $14`,
			rec.Operation, rec.Resource, rec.Amount, rec.PayTo, rec.Version, rec.ValidBefore, exact.StateVerified, rec.ClaimID,
			rec.SigHash, now.Format(timeFormat), rec.Network, rec.Asset, rec.Payer, rec.Nonce); err != nil {
			return exact.Record{}, fmt.Errorf("store: claim: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return exact.Record{}, fmt.Errorf("store: claim: %w", err)
	}
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	rec.State, rec.UpdatedAt = exact.StateVerified, now
	return rec, nil
}

func takeable(r exact.Record, staleBefore time.Time) bool {
	switch r.State {
	case exact.StateReleased, exact.StateFailed, exact.StatePending:
		return true
	case exact.StateVerified:
		return r.UpdatedAt.Before(staleBefore)
	}
	return false
}

// Finish implements exact.Ledger.
func (s *DB) Finish(ctx context.Context, rec exact.Record) error {
	if rec.State == exact.StateSettled {
		return s.Resolve(ctx, rec)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE payments SET state = $1, tx = $2, reason = $3, response = $4, content_type = $5, updated_at = $6
		WHERE network = $7 AND asset = $8 AND payer = $9 AND nonce = $10 AND claim_id = $11 AND state <> $12`,
		rec.State, rec.Tx, rec.Reason, rec.Response, rec.ContentType, time.Now().UTC().Format(timeFormat),
		rec.Network, rec.Asset, rec.Payer, rec.Nonce, rec.ClaimID, exact.StateSettled)
	if err != nil {
		return fmt.Errorf("store: finish: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return exact.ErrLostClaim
	}
	return nil
}

// Resolve implements exact.Ledger. A settlement adds to the running
// totals in the same transaction, once.
func (s *DB) Resolve(ctx context.Context, rec exact.Record) error {
	switch rec.State {
	case exact.StateSettled:
		if !isTxHash(rec.Tx) {
			return fmt.Errorf("store: settled payment with transaction %q: a settlement needs its real transaction hash", rec.Tx)
		}
	case exact.StateFailed:
	default:
		return fmt.Errorf("store: resolve to %q: only settled or failed", rec.State)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: resolve: %w", err)
	}
	defer tx.Rollback()
	existing, err := scanRecord(tx.QueryRowContext(ctx, selectPayment+whereKey+s.e.forUpdate, rec.Network, rec.Asset, rec.Payer, rec.Nonce))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return exact.ErrLostClaim
	case err != nil:
		return fmt.Errorf("store: resolve: %w", err)
	}
	now := time.Now().UTC().Format(timeFormat)
	switch {
	case existing.State == exact.StateSettled && rec.State == exact.StateSettled:
		if !strings.EqualFold(existing.Tx, rec.Tx) {
			return fmt.Errorf("store: payment already settled by %s, not %s", existing.Tx, rec.Tx)
		}
		switch {
		case existing.Response != nil && rec.Response != nil && !bytes.Equal(existing.Response, rec.Response):
			return exact.ErrAnswered // the first response stays the answer
		case existing.Response != nil || rec.Response == nil:
			return nil // recorded already
		}
		_, err = tx.ExecContext(ctx, `UPDATE payments SET response = $1, content_type = $2, updated_at = $3
			WHERE network = $4 AND asset = $5 AND payer = $6 AND nonce = $7`,
			rec.Response, rec.ContentType, now, rec.Network, rec.Asset, rec.Payer, rec.Nonce)
	case existing.State == exact.StateSettled:
		return exact.ErrLostClaim
	case rec.State == exact.StateFailed && existing.State != exact.StateVerified && existing.State != exact.StatePending:
		return exact.ErrLostClaim
	default:
		response, contentType := rec.Response, rec.ContentType
		if response == nil {
			response, contentType = existing.Response, existing.ContentType
		}
		_, err = tx.ExecContext(ctx, `UPDATE payments SET state = $1, tx = $2, reason = $3, response = $4, content_type = $5, updated_at = $6
			WHERE network = $7 AND asset = $8 AND payer = $9 AND nonce = $10`,
			rec.State, rec.Tx, rec.Reason, response, contentType, now, rec.Network, rec.Asset, rec.Payer, rec.Nonce)
		if err == nil && rec.State == exact.StateSettled {
			err = s.addPaid(ctx, tx, existing.Operation, existing.Amount)
		}
	}
	if err != nil {
		return fmt.Errorf("store: resolve: %w", err)
	}
	return tx.Commit()
}

// addPaid adds one settled payment of amount to operation's totals. The
// row is created first and then read under the write lock, so concurrent
// settlements of one operation add up on PostgreSQL too (amounts are
// integers of any size, summed here rather than in SQL).
func (s *DB) addPaid(ctx context.Context, tx *sql.Tx, operation, amount string) error {
	if _, err := s.exec(ctx, tx, insertPaidTotal, operation); err != nil {
		return fmt.Errorf("totals: %w", err)
	}
	var count int64
	var sum string
	err := s.queryRow(ctx, tx, selectPaidTotal+s.e.forUpdate, operation).Scan(&count, &sum)
	if err != nil {
		return fmt.Errorf("totals: %w", err)
	}
	total, err := addDecimal(sum, amount)
	if err != nil {
		return fmt.Errorf("totals: %w", err)
	}
	_, err = s.exec(ctx, tx, updatePaidTotal, count+1, total, operation)
	return err
}

// addDecimal adds two amounts written as decimal text (any size; "" is
// 0), as the totals keep them.
func addDecimal(a, b string) (string, error) {
	x, ok := new(big.Int).SetString(orZero(a), 10)
	y, ok2 := new(big.Int).SetString(orZero(b), 10)
	if !ok || !ok2 {
		return "", fmt.Errorf("amount %q or %q is not an integer", a, b)
	}
	return x.Add(x, y).String(), nil
}

// The statements of addPaid, hot on every paid call (prepared.go).
const (
	insertPaidTotal = `INSERT INTO paid_totals (operation, count, amount) VALUES ($1, 0, '0')
		ON CONFLICT (operation) DO NOTHING`
	selectPaidTotal = `SELECT count, amount FROM paid_totals WHERE operation = $1`
	updatePaidTotal = `UPDATE paid_totals SET count = $1, amount = $2 WHERE operation = $3`
)

// isTxHash reports a 0x-prefixed 32-byte hash that is not all zeros.
func isTxHash(s string) bool {
	if len(s) != 66 || !strings.HasPrefix(s, "0x") {
		return false
	}
	b, err := hex.DecodeString(s[2:])
	return err == nil && !bytes.Equal(b, make([]byte, 32))
}

// Lookup implements exact.Ledger.
func (s *DB) Lookup(ctx context.Context, rec exact.Record) (exact.Record, error) {
	r, err := scanRecord(s.db.QueryRowContext(ctx, selectPayment+whereKey, rec.Network, rec.Asset, rec.Payer, rec.Nonce))
	if errors.Is(err, sql.ErrNoRows) {
		return r, exact.ErrNotFound
	}
	return r, err
}

// Unresolved returns up to limit payments still verified or pending and
// last updated before before, oldest first: the reconciler's work.
func (s *DB) Unresolved(ctx context.Context, before time.Time, limit int) ([]exact.Record, error) {
	return s.query(ctx, selectPayment+` WHERE state IN ($1, $2) AND updated_at < $3 ORDER BY created_at LIMIT $4`,
		exact.StateVerified, exact.StatePending, before.UTC().Format(timeFormat), limit)
}

// UnresolvedSummary counts the payments still verified or pending and
// returns when the oldest of them was first seen (zero when none is).
func (s *DB) UnresolvedSummary(ctx context.Context) (count int, oldest time.Time, err error) {
	var first sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(created_at) FROM payments WHERE state IN ($1, $2)`,
		exact.StateVerified, exact.StatePending).Scan(&count, &first)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("store: unresolved: %w", err)
	}
	if first.Valid {
		oldest, _ = time.Parse(timeFormat, first.String)
	}
	return count, oldest, nil
}

func (s *DB) query(ctx context.Context, q string, args ...any) ([]exact.Record, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []exact.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// Totals implements exact.Ledger from the running totals.
func (s *DB) Totals(ctx context.Context) (map[string]payment.Totals, error) {
	out := map[string]payment.Totals{}
	rows, err := s.db.QueryContext(ctx, `SELECT operation, count, amount FROM paid_totals`)
	if err != nil {
		return nil, fmt.Errorf("store: totals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var op, amount string
		var count int64
		if err := rows.Scan(&op, &count, &amount); err != nil {
			return nil, fmt.Errorf("store: totals: %w", err)
		}
		out[op] = payment.Totals{Paid: uint64(count), Amount: amount}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: totals: %w", err)
	}
	if err := s.addChargeTotals(ctx, out); err != nil {
		return nil, err
	}
	crows, err := s.db.QueryContext(ctx, `SELECT operation, count FROM challenge_counts`)
	if err != nil {
		return nil, fmt.Errorf("store: challenges: %w", err)
	}
	defer crows.Close()
	for crows.Next() {
		var op string
		var count int64
		if err := crows.Scan(&op, &count); err != nil {
			return nil, fmt.Errorf("store: challenges: %w", err)
		}
		t := out[op]
		t.Challenges = uint64(count)
		out[op] = t
	}
	return out, crows.Err()
}

// AddChallenges implements exact.Ledger.
func (s *DB) AddChallenges(ctx context.Context, counts map[string]uint64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: challenges: %w", err)
	}
	defer tx.Rollback()
	// In a fixed order, so that two replicas flushing at once lock the
	// rows in the same order and never deadlock.
	for _, op := range slices.Sorted(maps.Keys(counts)) {
		n := counts[op]
		if n == 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO challenge_counts (operation, count) VALUES ($1, $2)
			ON CONFLICT (operation) DO UPDATE SET count = challenge_counts.count + excluded.count`, op, int64(n)); err != nil {
			return fmt.Errorf("store: challenges: %w", err)
		}
	}
	return tx.Commit()
}

// Payments returns every payment record, oldest first (tests, tooling).
func (s *DB) Payments(ctx context.Context) ([]exact.Record, error) {
	return s.query(ctx, selectPayment+` ORDER BY created_at`)
}

// Filter selects payments for an operator's listing; zero fields match
// everything.
type Filter struct {
	State string    // one state, e.g. "settled"
	Since time.Time // first seen at or after
	Payer string    // payer address, any case
}

// List returns the payments matching f, oldest first.
func (s *DB) List(ctx context.Context, f Filter) ([]exact.Record, error) {
	q, args := selectPayment+` WHERE 1 = 1`, []any{}
	if f.State != "" {
		args = append(args, f.State)
		q += fmt.Sprintf(` AND state = $%d`, len(args))
	}
	if !f.Since.IsZero() {
		args = append(args, f.Since.UTC().Format(timeFormat))
		q += fmt.Sprintf(` AND created_at >= $%d`, len(args))
	}
	if f.Payer != "" {
		args = append(args, strings.ToLower(f.Payer))
		q += fmt.Sprintf(` AND LOWER(payer) = $%d`, len(args))
	}
	return s.query(ctx, q+` ORDER BY created_at`, args...)
}

// ImportCloses stores closes in one transaction, idempotently by id: a
// close already stored identically is counted as a duplicate; one stored
// with another lane or time fails the import (lanes.ErrConflict) and
// nothing is stored.
func (s *DB) ImportCloses(ctx context.Context, closes []lanes.Close) (inserted, duplicates int, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("store: import closes: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UTC().Format(timeFormat)
	// By id, so that two imports sharing closes take their rows in the same
	// order and never deadlock on PostgreSQL (stable: the first of two
	// closes with one id in a file is the one stored).
	closes = slices.Clone(closes)
	slices.SortStableFunc(closes, func(a, b lanes.Close) int { return strings.Compare(a.ID, b.ID) })
	for _, c := range closes {
		closed := c.ClosedAt.UTC().Format(timeFormat)
		res, err := tx.ExecContext(ctx, `INSERT INTO lane_closes (id, lane, closed_at, imported_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO NOTHING`, c.ID, c.Lane, closed, now)
		if err != nil {
			return 0, 0, fmt.Errorf("store: import closes: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, 0, fmt.Errorf("store: import closes: %w", err)
		} else if n == 1 {
			inserted++
			continue
		}
		var lane, closedAt string
		if err := tx.QueryRowContext(ctx, `SELECT lane, closed_at FROM lane_closes WHERE id = $1`, c.ID).Scan(&lane, &closedAt); err != nil {
			return 0, 0, fmt.Errorf("store: import closes: %w", err)
		}
		if lane != c.Lane || closedAt != closed {
			return 0, 0, fmt.Errorf("close %q (stored in lane %q at %s): %w", c.ID, lane, closedAt, lanes.ErrConflict)
		}
		duplicates++
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("store: import closes: %w", err)
	}
	return inserted, duplicates, nil
}

// Lanes summarizes the tape: every lane with its close count and last
// close, by name.
func (s *DB) Lanes(ctx context.Context) ([]lanes.Lane, error) {
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
