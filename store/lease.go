package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Lease takes or renews the lease name for holder until now+ttl, and
// reports whether holder has it: it does when nobody held it, when holder
// already did, or when the last holder's lease expired. One statement, so
// two replicas racing for a free lease cannot both win (the upsert's
// conflict check serializes them on both engines).
//
// Expiry is judged by the replicas' clocks, which must agree to well
// within ttl.
func (s *DB) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	now := time.Now().UTC()
	res, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leases.holder = excluded.holder OR leases.expires_at < $4`,
		name, holder, now.Add(ttl).Format(timeFormat), now.Format(timeFormat))
	if err != nil {
		return false, fmt.Errorf("store: lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: lease %s: %w", name, err)
	}
	return n == 1, nil
}

// ReleaseLease gives up holder's lease name, if it still has it, so that
// another replica takes it at its next try rather than at expiry.
func (s *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("store: release lease %s: %w", name, err)
	}
	return nil
}

// PutWhaleSnapshot replaces the stored whale snapshot with body, taken at
// takenAt, if holder holds the unexpired lease (a replica that lost the
// lease mid-cycle writes nothing) and the stored one is older. It reports
// whether it wrote.
func (s *DB) PutWhaleSnapshot(ctx context.Context, lease, holder string, takenAt time.Time, body []byte) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO whale_snapshots (id, taken_at, body)
		SELECT 1, $1, $2 WHERE EXISTS (SELECT 1 FROM leases WHERE name = $3 AND holder = $4 AND expires_at >= $5)
		ON CONFLICT (id) DO UPDATE SET taken_at = excluded.taken_at, body = excluded.body
		WHERE whale_snapshots.taken_at < excluded.taken_at`,
		takenAt.UTC().Format(timeFormat), body, lease, holder, time.Now().UTC().Format(timeFormat))
	if err != nil {
		return false, fmt.Errorf("store: whale snapshot: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: whale snapshot: %w", err)
	}
	return n == 1, nil
}

// WhaleSnapshot returns the stored whale snapshot and when it was taken;
// body is nil before the first.
func (s *DB) WhaleSnapshot(ctx context.Context) (takenAt time.Time, body []byte, err error) {
	var at string
	err = s.db.QueryRowContext(ctx, `SELECT taken_at, body FROM whale_snapshots WHERE id = 1`).Scan(&at, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil, nil
	}
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("store: whale snapshot: %w", err)
	}
	takenAt, err = time.Parse(timeFormat, at)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("store: whale snapshot time %q: %w", at, err)
	}
	return takenAt, body, nil
}

// WhaleSnapshotTime returns when the stored whale snapshot was taken
// (zero before the first): a cheap check before reading its body.
func (s *DB) WhaleSnapshotTime(ctx context.Context) (time.Time, error) {
	var at string
	err := s.db.QueryRowContext(ctx, `SELECT taken_at FROM whale_snapshots WHERE id = 1`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: whale snapshot: %w", err)
	}
	return time.Parse(timeFormat, at)
}
