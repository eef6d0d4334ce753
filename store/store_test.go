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
	"github.com/tollgate/tollgate/store"
)

func rec(nonce string) payment.Record {
	return payment.Record{Network: "eip155:8453", Asset: "0xA", Payer: "0xP", Nonce: nonce, Operation: "regime",
		Resource: "/regime", Amount: "50000", Version: 2, ValidBefore: time.Now().Add(time.Hour).Unix()}
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
	for _, state := range []string{payment.StateReleased, payment.StateFailed} {
		r.State = state
		if err := l.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Claim(ctx, rec("0x01"), past); err != nil {
			t.Fatalf("claim after %s: %v", state, err)
		}
	}
	// A claim left verified by a process that died can be taken over once stale.
	if _, err := l.Claim(ctx, rec("0x01"), time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("stale claim not taken over: %v", err)
	}
	r.State, r.Tx = payment.StateSettled, "0xabc"
	if err := l.Finish(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, staleBefore := range []time.Time{past, time.Now().Add(time.Hour)} {
		got, err := l.Claim(ctx, rec("0x01"), staleBefore)
		if !errors.Is(err, payment.ErrClaimed) || got.State != payment.StateSettled || got.Tx != "0xabc" || got.Resource != "/regime" {
			t.Fatalf("claim of a settled payment: %+v %v", got, err)
		}
	}
	p := rec("0x02")
	if _, err := l.Claim(ctx, p, past); err != nil {
		t.Fatal(err)
	}
	p.State, p.Tx = payment.StatePending, "0xdef"
	if err := l.Finish(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Claim(ctx, rec("0x02"), time.Now().Add(time.Hour)); !errors.Is(err, payment.ErrClaimed) || got.State != payment.StatePending {
		t.Fatalf("claim of a pending payment: %+v %v", got, err)
	}
	if err := l.Finish(ctx, rec("0x99")); err == nil {
		t.Error("finish of an unknown payment succeeded")
	}
	if err := l.Refused(ctx, payment.Attempt{Time: time.Now(), Operation: "regime", Reason: "invalid_payload"}); err != nil {
		t.Fatal(err)
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
