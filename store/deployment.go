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
)

// Deployment modes.
const (
	ModeDevnet     = "devnet"
	ModeProduction = "production"
)

// Deployment is what a store's payments belong to. A store is bound to
// one deployment the first time serve opens it (Bind) and refuses any
// other afterwards: a devnet never writes into, or shows the revenue of, a
// production ledger, nor production of a devnet one, and a devnet run never
// shows the payments of an earlier run, whose chain no longer exists.
type Deployment struct {
	// Mode is ModeDevnet or ModeProduction.
	Mode string
	// Network is the CAIP-2 network of the payments, e.g. "eip155:8453".
	// The devnet shares Base's chain id, so it does not tell them apart.
	Network string
	// Asset is the token payments are made in.
	Asset string
	// Genesis is the hash of the chain's genesis block. Every devnet start
	// stamps a new genesis (an hour before the start), so it identifies
	// one devnet run; on Base it never changes.
	Genesis string
}

func (d Deployment) same(o Deployment) bool {
	return d.Mode == o.Mode && d.Network == o.Network && strings.EqualFold(d.Asset, o.Asset) && strings.EqualFold(d.Genesis, o.Genesis)
}

func (d Deployment) String() string {
	if d.Mode == "" {
		return "an unrecorded deployment"
	}
	return fmt.Sprintf("%s on %s (genesis %s, asset %s)", d.Mode, d.Network, d.Genesis, d.Asset)
}

// MismatchError means a store belongs to another deployment than the one
// opening it.
type MismatchError struct {
	// Have is the store's deployment; its Mode is empty for a store
	// written before deployments were recorded that holds payments.
	Have Deployment
	Want Deployment
}

func (e *MismatchError) Error() string {
	switch {
	case e.Have.Mode == "":
		return fmt.Sprintf("the store holds payments recorded before stores named their deployment, and %s must not adopt them "+
			"(devnet never does; production only when every payment is in %s %s): move the store away or use another --data-dir", e.Want.Mode, e.Want.Network, e.Want.Asset)
	case e.Have.Mode != e.Want.Mode:
		return fmt.Sprintf("the store is the ledger of %s; %s mode never opens it: give each mode its own --data-dir", e.Have, e.Want.Mode)
	case e.Have.Mode == ModeDevnet:
		return fmt.Sprintf("the store is the ledger of an earlier devnet run (genesis %s), not of this chain (genesis %s)", e.Have.Genesis, e.Want.Genesis)
	}
	return fmt.Sprintf("the store is the ledger of %s, not of %s: refusing to mix the ledgers of two chains", e.Have, e.Want)
}

// PreviousDevnetRun reports a devnet opening the store of an earlier
// devnet run, or an unrecorded store with payments: a chain that no
// longer exists, which a devnet restart puts aside (cmd decides how).
func (e *MismatchError) PreviousDevnetRun() bool {
	return e.Want.Mode == ModeDevnet && (e.Have.Mode == ModeDevnet || e.Have.Mode == "")
}

// Deployment returns the deployment the store is bound to; ok is false
// when none is recorded yet.
func (s *DB) Deployment(ctx context.Context) (d Deployment, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT mode, network, asset, genesis FROM deployment WHERE id = 1`).Scan(&d.Mode, &d.Network, &d.Asset, &d.Genesis)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Deployment{}, false, nil
	case err != nil:
		return Deployment{}, false, fmt.Errorf("store: deployment: %w", err)
	}
	return d, true, nil
}

// Bind binds the store to d, or checks that it is bound to d already; a
// store of another deployment is a *MismatchError. An unbound store that
// holds payments (written before deployments were recorded) is adopted
// only by production, and only when every payment is in d's network and
// asset.
func (s *DB) Bind(ctx context.Context, d Deployment) error {
	if d.Mode != ModeDevnet && d.Mode != ModeProduction || d.Network == "" || d.Asset == "" || d.Genesis == "" {
		return fmt.Errorf("store: bind: incomplete deployment %+v", d)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: bind: %w", err)
	}
	defer tx.Rollback()
	var have Deployment
	err = tx.QueryRowContext(ctx, `SELECT mode, network, asset, genesis FROM deployment WHERE id = 1`).Scan(&have.Mode, &have.Network, &have.Asset, &have.Genesis)
	switch {
	case err == nil:
		if have.same(d) {
			return nil
		}
		return &MismatchError{Have: have, Want: d}
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("store: bind: %w", err)
	}
	var payments, foreign int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN network = $1 AND LOWER(asset) = LOWER($2) THEN 0 ELSE 1 END), 0) FROM payments`,
		d.Network, d.Asset).Scan(&payments, &foreign); err != nil {
		return fmt.Errorf("store: bind: %w", err)
	}
	if payments > 0 && (d.Mode == ModeDevnet || foreign > 0) {
		return &MismatchError{Want: d}
	}
	// Replicas starting together may bind at once: the one whose insert
	// lands second finds the row there and checks it like a later start.
	res, err := tx.ExecContext(ctx, `INSERT INTO deployment (id, mode, network, asset, genesis, created_at) VALUES (1, $1, $2, $3, $4, $5)
		ON CONFLICT (id) DO NOTHING`, d.Mode, d.Network, d.Asset, d.Genesis, time.Now().UTC().Format(timeFormat))
	if err != nil {
		return fmt.Errorf("store: bind: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: bind: %w", err)
	} else if n == 0 {
		if err := tx.QueryRowContext(ctx, `SELECT mode, network, asset, genesis FROM deployment WHERE id = 1`).Scan(&have.Mode, &have.Network, &have.Asset, &have.Genesis); err != nil {
			return fmt.Errorf("store: bind: %w", err)
		}
		if !have.same(d) {
			return &MismatchError{Have: have, Want: d}
		}
	}
	return tx.Commit()
}

// sqliteFiles are the files of the embedded database in its directory.
// OpenSQLite names the database tollgate.db.
func sqliteFiles() []string { return []string{"tollgate.db", "tollgate.db-wal", "tollgate.db-shm"} }

// MoveSQLite moves the embedded database of dir (closed) into to,
// replacing any database there, and leaves dir without one. The other
// contents of dir (to itself among them) stay where they are.
func MoveSQLite(dir, to string) error {
	if err := os.MkdirAll(to, 0o750); err != nil {
		return fmt.Errorf("store: move: %w", err)
	}
	for _, f := range sqliteFiles() {
		if err := os.Remove(filepath.Join(to, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("store: move: %w", err)
		}
	}
	for _, f := range sqliteFiles() {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(to, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("store: move: %w", err)
		}
	}
	return nil
}
