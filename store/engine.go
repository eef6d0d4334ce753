package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	sqlitedriver "modernc.org/sqlite" // the database/sql driver "sqlite" (pure Go)
	sqlite3 "modernc.org/sqlite/lib"
)

// engine is everything that differs between SQLite and PostgreSQL; every
// statement of the store is otherwise the same text on both.
type engine struct {
	name string
	// forUpdate ends a read that a transaction then writes back (claim,
	// resolve, totals). PostgreSQL locks the row: a concurrent claimer
	// waits and then reads the winner's row. SQLite needs nothing: its
	// transactions begin IMMEDIATE (_txlock in the DSN), one writer at a
	// time.
	forUpdate string
	// lockChannel, run first in a transaction that updates a channel,
	// serializes the updates of one channel, creation included (a row
	// lock cannot cover a row that does not exist yet): on PostgreSQL a
	// transaction-scoped advisory lock in the two-key space (class,
	// hash of the id), released at commit or rollback. SQLite needs
	// nothing: its write transactions run one at a time.
	lockChannel string
	// addCharge, when set, adds one voucher call to its shard of
	// charge_totals in one statement ($1 operation, $2 shard, $3 amount);
	// empty: read, add in Go, write (charge.go).
	addCharge string
	// saveCharged, when set, saves a channel and books its new charge in
	// one statement: upsertChannel's 32 arguments, insertBatchCharge's 9,
	// then the shard (charge.go).
	saveCharged string
	// casCharged, when set, is saveCharged for a channel still as it was
	// read, in one statement outside any transaction: casChannel's 34
	// arguments, insertBatchCharge's 9, then the shard; it returns a row
	// when it wrote the channel, none when the row moved on (nothing
	// written).
	casCharged string
	// casVoucherCharged is casCharged with casVoucher: its 15 arguments,
	// insertBatchCharge's 9, then the shard.
	casVoucherCharged string
	// types maps the column types of the migrations, written for SQLite,
	// to the engine's. On PostgreSQL text compares and sorts bytewise
	// (COLLATE "C"), as SQLite's BINARY does, whatever the database's
	// locale: listings come out in the same order on both.
	types *strings.Replacer
}

// addToTotals ends PostgreSQL's inserts of one charge into its shard of
// charge_totals: a row there already adds the charge (numeric arithmetic,
// any size).
const addToTotals = `
	ON CONFLICT (operation, shard) DO UPDATE SET count = charge_totals.count + 1,
		amount = (charge_totals.amount::numeric + excluded.amount::numeric)::text`

var (
	sqlite   = engine{name: "sqlite", types: strings.NewReplacer()}
	postgres = engine{name: "postgres", forUpdate: " FOR UPDATE", lockChannel: `SELECT pg_advisory_xact_lock($1, $2)`,
		saveCharged: `WITH channel AS (` + upsertChannel + `),
			charge AS (INSERT INTO batch_charges (channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at)
				VALUES ($33, $34, $35, $36, $37, $38, $39, $40, $41))
			INSERT INTO charge_totals (operation, shard, count, amount) VALUES ($35, $42, 1, $40)` + addToTotals,
		casCharged: `WITH channel AS (` + casChannel + ` RETURNING id),
			charge AS (INSERT INTO batch_charges (channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at)
				SELECT $35::text, $36::text, $37::text, $38::text, $39::text, $40::text, $41::text, $42::text, $43::text FROM channel),
			totals AS (INSERT INTO charge_totals (operation, shard, count, amount) SELECT $37::text, $44::bigint, 1, $42::text FROM channel` + addToTotals + `)
			SELECT 1 FROM channel`,
		casVoucherCharged: `WITH channel AS (` + casVoucher + ` RETURNING id),
			charge AS (INSERT INTO batch_charges (channel, cumulative, operation, resource, payer, pay_to, asset, amount, charged_at)
				SELECT $16::text, $17::text, $18::text, $19::text, $20::text, $21::text, $22::text, $23::text, $24::text FROM channel),
			totals AS (INSERT INTO charge_totals (operation, shard, count, amount) SELECT $18::text, $25::bigint, 1, $23::text FROM channel` + addToTotals + `)
			SELECT 1 FROM channel`,
		addCharge: `INSERT INTO charge_totals (operation, shard, count, amount) VALUES ($1, $2, 1, $3)` + addToTotals,
		types:     strings.NewReplacer(" BLOB", " BYTEA", " TEXT", ` TEXT COLLATE "C"`)}
)

// ddl returns a migration statement in the engine's types.
func (e engine) ddl(stmt string) string { return e.types.Replace(stmt) }

// OpenSQLite opens (creating if needed) dir/tollgate.db with WAL, full
// synchronous commits and a busy timeout, and applies the schema.
// Switching a new file to WAL does not wait for the busy timeout when
// another process opens it at the same moment: that open is tried again,
// for up to five seconds.
func OpenSQLite(ctx context.Context, dir string) (*DB, error) {
	for deadline := time.Now().Add(5 * time.Second); ; {
		db, err := openSQLite(ctx, dir)
		var se *sqlitedriver.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return db, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func openSQLite(ctx context.Context, dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	// The busy timeout comes first: the pragmas run in order, and switching
	// a new database to WAL waits for a lock another opener may hold.
	dsn := "file:" + filepath.Join(dir, "tollgate.db") + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serializes writes anyway
	if err := migrate(ctx, db, sqlite); err != nil {
		db.Close()
		return nil, err
	}
	prepared, err := prepare(ctx, db, hotStatements)
	if err != nil {
		db.Close()
		return nil, err
	}
	// Readers beside the writer: WAL lets them read the last committed
	// state while it writes, instead of queueing behind its fsyncs.
	rdb, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		db.Close()
		return nil, err
	}
	rdb.SetMaxOpenConns(readConns)
	rdb.SetMaxIdleConns(readConns)
	reads, err := prepare(ctx, rdb, hotReads)
	if err != nil {
		rdb.Close()
		db.Close()
		return nil, err
	}
	s := &DB{db: db, rdb: rdb, e: sqlite, prepared: prepared, reads: reads}
	s.group = newGroup(s)
	return s, nil
}

// readConns is the size of SQLite's read pool.
const readConns = 4

// maxConns is the most connections one store opens to PostgreSQL.
const maxConns = 20

// migrationLock is the key of the PostgreSQL advisory lock held while
// migrations run (any constant shared by every replica; this one spells
// "tollgate" in ASCII).
const migrationLock int64 = 0x746f6c6c67617465

// OpenPostgres connects to the PostgreSQL database of url (postgres://…,
// any parameter pgx accepts) and applies the schema. Replicas starting
// together migrate one at a time: each holds a session advisory lock
// (pg_advisory_lock) while it checks and applies the migrations, so the
// second finds them recorded.
func OpenPostgres(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: database URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	// A bounded pool per replica: three replicas stay well under
	// PostgreSQL's default max_connections (100), and a burst of paid
	// calls queues for a connection rather than failing to get one.
	// Every open connection may stay idle: a pool that closes what a
	// burst opened starts a PostgreSQL backend (a process) for each next
	// call of the burst; idle ones go after five minutes.
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := migratePostgres(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &DB{db: db, rdb: db, e: postgres, pipe: newPipe(db)}, nil
}

func migratePostgres(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("store: migration lock: %w", err)
	}
	// Unlocked on a fresh context: a canceled ctx must not leave the lock
	// held by a connection that goes back to the pool.
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	return migrate(ctx, conn, postgres)
}
