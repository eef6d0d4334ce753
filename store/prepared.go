package store

import (
	"context"
	"database/sql"
	"fmt"
)

// hotStatements run on every paid call (a voucher's channel update and
// its books): on SQLite they are prepared once, at open, on the writer's
// connection, because parsing them cost more CPU than running them
// (bench/voucher, issue 20 item 9).
var hotStatements = []string{selectChannelByID, upsertChannel, casChannel, casVoucher, insertBatchCharge, selectChargeTotal, upsertChargeTotal,
	insertPaidTotal, selectPaidTotal, updatePaidTotal, savepoint, rollbackToSavepoint, releaseSavepoint}

// hotReads run outside transactions on every paid call (a voucher's
// pre-read of its channel): on SQLite they are prepared on the read pool,
// where database/sql prepares each once per connection.
var hotReads = []string{selectChannelByID}

// prepare prepares the hot statements on db. With one open connection
// (SQLite's writer) each is prepared on it, and a transaction of that
// connection reuses it (sql.Tx.StmtContext).
func prepare(ctx context.Context, db *sql.DB, qs []string) (map[string]*sql.Stmt, error) {
	out := make(map[string]*sql.Stmt, len(qs))
	for _, q := range qs {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			for _, p := range out {
				p.Close()
			}
			return nil, fmt.Errorf("store: prepare: %w", err)
		}
		out[q] = st
	}
	return out, nil
}

// exec runs q in tx, prepared when it is a hot statement.
func (s *DB) exec(ctx context.Context, tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st := s.prepared[q]; st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, q, args...)
}

// queryRow reads one row of q in tx, prepared when it is a hot statement.
func (s *DB) queryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	if st := s.prepared[q]; st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, q, args...)
}

// readRow reads one row of q outside any transaction, from the read pool,
// prepared when it is a hot read.
func (s *DB) readRow(ctx context.Context, q string, args ...any) *sql.Row {
	if st := s.reads[q]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.rdb.QueryRowContext(ctx, q, args...)
}
