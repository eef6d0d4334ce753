package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/lanes"
	"github.com/tollgate/tollgate/store"
)

var claims atomic.Int64

func rec(nonce string) payment.Record {
	return payment.Record{Network: "eip155:8453", Asset: "0xA", Payer: "0xP", Nonce: nonce, Operation: "regime",
		Resource: "/regime", Amount: "50000", Version: 2, ValidBefore: time.Now().Add(time.Hour).Unix(),
		ClaimID: fmt.Sprint("claim-", claims.Add(1)), SigHash: "0xsig"}
}

// TestLedger is the contract every Ledger implementation meets (the
// SQLite store here; a PostgreSQL store runs the same cases).
func TestLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)

	r, err := l.Claim(ctx, rec("0x01"), past)
	if err != nil || r.State != payment.StateVerified {
		t.Fatalf("first claim: %+v %v", r, err)
	}
	if got, err := l.Claim(ctx, rec("0x01"), past); !errors.Is(err, payment.ErrClaimed) || got.State != payment.StateVerified {
		t.Fatalf("second claim: %+v %v", got, err)
	}
	for _, state := range []string{payment.StateReleased, payment.StateFailed, payment.StatePending} {
		r.State, r.Tx = state, "0xpending"
		if err := l.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
		next, err := l.Claim(ctx, rec("0x01"), past)
		if err != nil || next.PrevState != state {
			t.Fatalf("claim after %s: %+v %v", state, next, err)
		}
		if err := l.Finish(ctx, r); !errors.Is(err, payment.ErrLostClaim) {
			t.Errorf("the old claim finished after a takeover: %v", err)
		}
		r = next
	}
	// A claim left verified by a process that died can be taken over once stale.
	stale, err := l.Claim(ctx, rec("0x01"), time.Now().Add(time.Minute))
	if err != nil || stale.PrevState != payment.StateVerified {
		t.Fatalf("stale claim not taken over: %+v %v", stale, err)
	}
	r = stale
	r.State, r.Tx, r.Response, r.ContentType = payment.StateSettled, "0xabc", []byte(`{"ok":true}`), "application/json"
	if err := l.Finish(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, withState(r, payment.StateFailed)); !errors.Is(err, payment.ErrLostClaim) {
		t.Errorf("a settled record was overwritten: %v", err)
	}
	for _, staleBefore := range []time.Time{past, time.Now().Add(time.Hour)} {
		got, err := l.Claim(ctx, rec("0x01"), staleBefore)
		if !errors.Is(err, payment.ErrClaimed) || got.State != payment.StateSettled || got.Tx != "0xabc" || got.Resource != "/regime" ||
			string(got.Response) != `{"ok":true}` || got.SigHash != "0xsig" {
			t.Fatalf("claim of a settled payment: %+v %v", got, err)
		}
	}
	if got, err := l.Claim(ctx, rec("0x02"), past); err != nil || got.PrevState != "" {
		t.Fatal(err)
	}
	if got, err := l.Claim(ctx, rec("0x02"), past); !errors.Is(err, payment.ErrClaimed) || got.State != payment.StateVerified {
		t.Fatalf("claim of an in-flight payment: %+v %v", got, err)
	}
	if err := l.Finish(ctx, rec("0x99")); !errors.Is(err, payment.ErrLostClaim) {
		t.Errorf("finish of an unknown payment: %v", err)
	}

	// Durable: reopened, the ledger still holds everything.
	l.Close()
	l, err = store.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	paid, err := l.PaidByOperation(ctx)
	if err != nil || paid["regime"].Count != 1 || paid["regime"].Amount != "50000" {
		t.Fatalf("paid after reopen: %+v %v", paid, err)
	}
}

// TestLedgerConcurrentClaims: one claim wins per key, however many race.
func TestLedgerConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := l.Claim(ctx, rec("0x07"), time.Now().Add(-time.Hour)); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, payment.ErrClaimed) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d claims won", wins.Load())
	}
}

// TestPaidSumsExactly: amounts are summed as integers, however large.
func TestPaidSumsExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, amount := range []string{"99999999999999999999", "1", "250000"} {
		r := rec(fmt.Sprintf("0x1%d", i))
		r.Amount = amount
		if _, err := l.Claim(ctx, r, time.Time{}); err != nil {
			t.Fatal(err)
		}
		r.State = payment.StateSettled
		if err := l.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	paid, _ := l.PaidByOperation(ctx)
	if paid["regime"].Count != 3 || paid["regime"].Amount != "100000000000000250000" {
		t.Errorf("paid %+v", paid["regime"])
	}
}

func withState(r payment.Record, state string) payment.Record {
	r.State = state
	return r
}

// TestLaneTape: imports are idempotent by id, a conflicting id fails the
// whole import with nothing stored, and the summary counts per lane.
func TestLaneTape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := store.OpenSQLite(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := func(h int) time.Time { return time.Date(2026, 11, 1, h, 0, 0, 0, time.UTC) }
	first := []lanes.Close{{ID: "a", Lane: "eth", ClosedAt: at(1)}, {ID: "b", Lane: "eth", ClosedAt: at(3)}, {ID: "c", Lane: "btc", ClosedAt: at(2)}}
	if ls, err := s.Lanes(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("empty tape: %v %v", ls, err)
	}
	if ins, dup, err := s.ImportCloses(ctx, first); err != nil || ins != 3 || dup != 0 {
		t.Fatalf("import: %d %d %v", ins, dup, err)
	}
	if ins, dup, err := s.ImportCloses(ctx, append(first, lanes.Close{ID: "d", Lane: "btc", ClosedAt: at(5)})); err != nil || ins != 1 || dup != 3 {
		t.Fatalf("re-import: %d %d %v", ins, dup, err)
	}
	conflict := []lanes.Close{{ID: "e", Lane: "eth", ClosedAt: at(9)}, {ID: "a", Lane: "btc", ClosedAt: at(1)}}
	if _, _, err := s.ImportCloses(ctx, conflict); !errors.Is(err, lanes.ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
	ls, err := s.Lanes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []lanes.Lane{{Name: "btc", Closes: 2, LastClose: at(5)}, {Name: "eth", Closes: 2, LastClose: at(3)}}
	if len(ls) != 2 || ls[0] != want[0] || ls[1] != want[1] {
		t.Errorf("lanes %+v, want %+v (the conflicting import stored nothing)", ls, want)
	}
}
