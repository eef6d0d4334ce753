package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service/lanes"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/pgtest"
)

// engine is one of the store's engines, as the tests open it: at a place
// (a directory, a database URL) made for the test, reopened at the same
// place when a test checks durability.
type engine struct {
	name  string
	place func(t testing.TB) string
	open  func(ctx context.Context, place string) (*store.DB, error)
}

// engines are both of the store's engines: every case of the store runs
// on each (PostgreSQL skips where it is not installed, unless
// TOLLGATE_REQUIRE_POSTGRES=1).
var engines = []engine{
	{"sqlite", func(t testing.TB) string { return t.TempDir() }, store.OpenSQLite},
	{"postgres", func(t testing.TB) string { return pgtest.URL(t) }, store.OpenPostgres},
}

// twoStores opens two stores on one database (two replicas), closed when
// t ends.
func twoStores(t *testing.T, e engine, place string) [2]*store.DB {
	t.Helper()
	var out [2]*store.DB
	for i := range out {
		s, err := e.open(context.Background(), place)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// eachEngine runs f as a parallel subtest per engine.
func eachEngine(t *testing.T, f func(t *testing.T, e engine)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			f(t, e)
		})
	}
}

var claims atomic.Int64

// Transaction hashes of settlements.
const (
	txA = "0x00000000000000000000000000000000000000000000000000000000000000aa"
	txB = "0x00000000000000000000000000000000000000000000000000000000000000bb"
)

func rec(nonce string) exact.Record {
	return exact.Record{Network: "eip155:8453", Asset: "0xA", Payer: "0xP", Nonce: nonce, Operation: "regime",
		Resource: "/regime", Amount: "50000", PayTo: "0xPayTo", Version: 2, ValidBefore: time.Now().Add(time.Hour).Unix(),
		ClaimID: fmt.Sprint("claim-", claims.Add(1)), SigHash: "0xsig"}
}

// TestLedger is the contract every Ledger implementation meets (the
// SQLite store here; a PostgreSQL store runs the same cases).
func TestLedger(t *testing.T) {
	t.Parallel()
	eachEngine(t, testLedger)
}

func testLedger(t *testing.T, e engine) {
	ctx := context.Background()
	dir := e.place(t)
	l, err := e.open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)

	r, err := l.Claim(ctx, rec("0x01"), past)
	if err != nil || r.State != exact.StateVerified {
		t.Fatalf("first claim: %+v %v", r, err)
	}
	if got, err := l.Claim(ctx, rec("0x01"), past); !errors.Is(err, exact.ErrClaimed) || got.State != exact.StateVerified {
		t.Fatalf("second claim: %+v %v", got, err)
	}
	for _, state := range []string{exact.StateReleased, exact.StateFailed, exact.StatePending} {
		r.State, r.Tx = state, "0xpending"
		if err := l.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
		next, err := l.Claim(ctx, rec("0x01"), past)
		if err != nil || next.PrevState != state {
			t.Fatalf("claim after %s: %+v %v", state, next, err)
		}
		if err := l.Finish(ctx, r); !errors.Is(err, exact.ErrLostClaim) {
			t.Errorf("the old claim finished after a takeover: %v", err)
		}
		r = next
	}
	// A claim left verified by a process that died can be taken over once stale.
	stale, err := l.Claim(ctx, rec("0x01"), time.Now().Add(time.Minute))
	if err != nil || stale.PrevState != exact.StateVerified {
		t.Fatalf("stale claim not taken over: %+v %v", stale, err)
	}
	r = stale
	r.State, r.Tx, r.Response, r.ContentType = exact.StateSettled, txA, []byte(`{"ok":true}`), "application/json"
	if err := l.Finish(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, withState(r, exact.StateFailed)); !errors.Is(err, exact.ErrLostClaim) {
		t.Errorf("a settled record was overwritten: %v", err)
	}
	for _, staleBefore := range []time.Time{past, time.Now().Add(time.Hour)} {
		got, err := l.Claim(ctx, rec("0x01"), staleBefore)
		if !errors.Is(err, exact.ErrClaimed) || got.State != exact.StateSettled || got.Tx != txA || got.Resource != "/regime" ||
			string(got.Response) != `{"ok":true}` || got.SigHash != "0xsig" {
			t.Fatalf("claim of a settled payment: %+v %v", got, err)
		}
	}
	if got, err := l.Claim(ctx, rec("0x02"), past); err != nil || got.PrevState != "" {
		t.Fatal(err)
	}
	if got, err := l.Claim(ctx, rec("0x02"), past); !errors.Is(err, exact.ErrClaimed) || got.State != exact.StateVerified {
		t.Fatalf("claim of an in-flight payment: %+v %v", got, err)
	}
	if err := l.Finish(ctx, rec("0x99")); !errors.Is(err, exact.ErrLostClaim) {
		t.Errorf("finish of an unknown payment: %v", err)
	}

	if err := l.AddChallenges(ctx, map[string]uint64{"regime": 3, "whales": 0}); err != nil {
		t.Fatal(err)
	}
	if err := l.AddChallenges(ctx, map[string]uint64{"regime": 2, "lanes": 1}); err != nil {
		t.Fatal(err)
	}

	// Durable: reopened, the ledger still holds everything, challenge
	// counts included.
	l.Close()
	l, err = e.open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	paid, err := l.Totals(ctx)
	if err != nil || paid["regime"].Paid != 1 || paid["regime"].Amount != "50000" || paid["regime"].Challenges != 5 ||
		paid["lanes"].Challenges != 1 || paid["lanes"].Paid != 0 {
		t.Fatalf("paid after reopen: %+v %v", paid, err)
	}
}

// TestLedgerConcurrentClaims: one claim wins per key, however many race.
func TestLedgerConcurrentClaims(t *testing.T) {
	t.Parallel()
	eachEngine(t, testLedgerConcurrentClaims)
}

func testLedgerConcurrentClaims(t *testing.T, e engine) {
	ctx := context.Background()
	l := openStore(t, e)
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := l.Claim(ctx, rec("0x07"), time.Now().Add(-time.Hour)); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, exact.ErrClaimed) {
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
	eachEngine(t, testPaidSumsExactly)
}

func testPaidSumsExactly(t *testing.T, e engine) {
	ctx := context.Background()
	l := openStore(t, e)
	for i, amount := range []string{"99999999999999999999", "1", "250000"} {
		r := rec(fmt.Sprintf("0x1%d", i))
		r.Amount = amount
		if _, err := l.Claim(ctx, r, time.Time{}); err != nil {
			t.Fatal(err)
		}
		r.State, r.Tx = exact.StateSettled, fmt.Sprintf("0x%064x", i+1)
		if err := l.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	paid, _ := l.Totals(ctx)
	if paid["regime"].Paid != 3 || paid["regime"].Amount != "100000000000000250000" {
		t.Errorf("paid %+v", paid["regime"])
	}
}

func withState(r exact.Record, state string) exact.Record {
	r.State = state
	return r
}

// TestLaneTape: imports are idempotent by id, a conflicting id fails the
// whole import with nothing stored, and the summary counts per lane.
func TestLaneTape(t *testing.T) {
	t.Parallel()
	eachEngine(t, testLaneTape)
}

func testLaneTape(t *testing.T, e engine) {
	ctx := context.Background()
	s := openStore(t, e)
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

// TestResolve: outcomes established on chain are recorded whoever holds
// the claim: a settlement once (idempotent, totals counted once, the
// first response kept, a missing one filled in), never with a zero or
// missing hash; a failure only over an unresolved record.
func TestResolve(t *testing.T) {
	t.Parallel()
	eachEngine(t, testResolve)
}

func testResolve(t *testing.T, e engine) {
	ctx := context.Background()
	l := openStore(t, e)
	past := time.Now().Add(-time.Hour)
	held, err := l.Claim(ctx, rec("0x21"), past)
	if err != nil {
		t.Fatal(err)
	}
	other := held
	other.ClaimID = "someone else"
	zero := "0x" + strings.Repeat("0", 64)
	for _, tx := range []string{"", zero, "0x1234"} {
		if err := l.Resolve(ctx, withTx(withState(other, exact.StateSettled), tx)); err == nil {
			t.Errorf("settled with transaction %q", tx)
		}
	}
	settled := withTx(withState(other, exact.StateSettled), txA)
	if err := l.Resolve(ctx, settled); err != nil {
		t.Fatalf("a settlement by a request not holding the claim: %v", err)
	}
	owed := settled
	owed.Response, owed.ContentType = []byte(`{"late":true}`), "application/json"
	for range 2 {
		if err := l.Resolve(ctx, owed); err != nil {
			t.Fatalf("the same settlement again, with the owed response: %v", err)
		}
	}
	if err := l.Finish(ctx, withTx(withState(held, exact.StateSettled), txA)); err != nil {
		t.Fatalf("the claim holder's own record of the same settlement: %v", err)
	}
	// The holder's own response, recorded after the owed one: the first
	// stays the payment's one answer.
	mine := withTx(withState(held, exact.StateSettled), txA)
	mine.Response, mine.ContentType = []byte(`{"mine":true}`), "application/json"
	if err := l.Finish(ctx, mine); !errors.Is(err, exact.ErrAnswered) {
		t.Errorf("a second, different response for one settlement: %v, want ErrAnswered", err)
	}
	if err := l.Resolve(ctx, withTx(withState(other, exact.StateSettled), txB)); err == nil {
		t.Error("a second transaction settled one authorization")
	}
	if err := l.Resolve(ctx, withState(other, exact.StateFailed)); !errors.Is(err, exact.ErrLostClaim) {
		t.Errorf("a settled payment was failed: %v", err)
	}
	got, err := l.Lookup(ctx, rec("0x21"))
	if err != nil || got.State != exact.StateSettled || got.Tx != txA || string(got.Response) != `{"late":true}` {
		t.Fatalf("lookup %+v %v", got, err)
	}
	if paid, _ := l.Totals(ctx); paid["regime"].Paid != 1 {
		t.Errorf("paid %+v: a settlement counted more than once", paid)
	}
	if _, err := l.Lookup(ctx, rec("0x22")); !errors.Is(err, exact.ErrNotFound) {
		t.Errorf("lookup of an unknown payment: %v", err)
	}

	// Failures from the chain apply to unresolved records only.
	pending, _ := l.Claim(ctx, rec("0x23"), past)
	if err := l.Finish(ctx, withTx(withState(pending, exact.StatePending), txB)); err != nil {
		t.Fatal(err)
	}
	canceled := withState(other, exact.StateFailed)
	canceled.Nonce, canceled.Reason = "0x23", exact.ReasonAuthorizationCanceled
	if err := l.Resolve(ctx, canceled); err != nil {
		t.Fatal(err)
	}
	if err := l.Resolve(ctx, canceled); !errors.Is(err, exact.ErrLostClaim) {
		t.Errorf("a failed payment failed again: %v", err)
	}
	released, _ := l.Claim(ctx, rec("0x24"), past)
	if err := l.Finish(ctx, withState(released, exact.StateReleased)); err != nil {
		t.Fatal(err)
	}
	if err := l.Resolve(ctx, withState(withNonce(other, "0x24"), exact.StateFailed)); !errors.Is(err, exact.ErrLostClaim) {
		t.Errorf("a released payment was failed from the chain: %v", err)
	}
}

// TestUnresolved lists verified and pending payments older than a bound,
// oldest first, and summarizes them.
func TestUnresolved(t *testing.T) {
	t.Parallel()
	eachEngine(t, testUnresolved)
}

func testUnresolved(t *testing.T, e engine) {
	ctx := context.Background()
	l := openStore(t, e)
	past := time.Now().Add(-time.Hour)
	states := map[string]string{"0x31": exact.StateVerified, "0x32": exact.StatePending, "0x33": exact.StateFailed,
		"0x34": exact.StateReleased, "0x35": exact.StateSettled}
	for _, nonce := range []string{"0x31", "0x32", "0x33", "0x34", "0x35"} {
		r, err := l.Claim(ctx, rec(nonce), past)
		if err != nil {
			t.Fatal(err)
		}
		if state := states[nonce]; state != exact.StateVerified {
			if err := l.Finish(ctx, withTx(withState(r, state), txA)); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := l.Unresolved(ctx, time.Now().Add(time.Second), 10)
	if err != nil || len(got) != 2 || got[0].Nonce != "0x31" || got[1].Nonce != "0x32" || got[0].PayTo != "0xPayTo" {
		t.Fatalf("unresolved %+v %v", got, err)
	}
	if got, _ := l.Unresolved(ctx, time.Now().Add(-time.Minute), 10); len(got) != 0 {
		t.Errorf("unresolved before a minute ago: %+v", got)
	}
	n, oldest, err := l.UnresolvedSummary(ctx)
	if err != nil || n != 2 || time.Since(oldest) > time.Minute {
		t.Errorf("summary %d %v %v", n, oldest, err)
	}
	for _, f := range []struct {
		filter store.Filter
		want   int
	}{{store.Filter{}, 5}, {store.Filter{State: exact.StateSettled}, 1}, {store.Filter{Payer: "0XP"}, 5},
		{store.Filter{Payer: "0xQ"}, 0}, {store.Filter{Since: time.Now().Add(time.Minute)}, 0}} {
		if got, err := l.List(ctx, f.filter); err != nil || len(got) != f.want {
			t.Errorf("list %+v: %d rows, want %d (%v)", f.filter, len(got), f.want, err)
		}
	}
}

// TestMigratesOldLedger: a database written before schema versions were
// recorded opens, keeps its rows and gains the new columns and tables.
func TestMigratesOldLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "tollgate.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE payments (network TEXT NOT NULL, asset TEXT NOT NULL, payer TEXT NOT NULL, nonce TEXT NOT NULL,
			operation TEXT NOT NULL, resource TEXT NOT NULL, amount TEXT NOT NULL, version INTEGER NOT NULL,
			valid_before BIGINT NOT NULL, state TEXT NOT NULL, tx TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
			claim_id TEXT NOT NULL, sig_hash TEXT NOT NULL, response BLOB, content_type TEXT NOT NULL DEFAULT '',
			created_at TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (network, asset, payer, nonce))`,
		`CREATE TABLE paid_totals (operation TEXT PRIMARY KEY, count BIGINT NOT NULL, amount TEXT NOT NULL)`,
		`INSERT INTO payments VALUES ('eip155:8453', '0xA', '0xP', '0x41', 'regime', '/regime', '50000', 2, 0, 'pending', '', '',
			'c', 's', NULL, '', '2026-11-01T00:00:00.000000000Z', '2026-11-01T00:00:00.000000000Z')`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for range 2 { // and a second open applies nothing twice
		l, err := store.OpenSQLite(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Lookup(ctx, rec("0x41"))
		if err != nil || got.State != exact.StatePending || got.PayTo != "" {
			t.Fatalf("old row: %+v %v", got, err)
		}
		l.Close()
	}
}

func withTx(r exact.Record, tx string) exact.Record {
	r.Tx = tx
	return r
}

func withNonce(r exact.Record, nonce string) exact.Record {
	r.Nonce = nonce
	return r
}

// openStore opens an empty store of engine e, closed when the test ends.
func openStore(t *testing.T, e engine) *store.DB {
	t.Helper()
	s, err := e.open(context.Background(), e.place(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestClaimsAcrossInstances: two stores open on one database (two
// replicas) race many claimers per payment key; each key has one winner,
// settlements of one operation from both add up exactly, and each
// settlement counts once however many resolve it.
func TestClaimsAcrossInstances(t *testing.T) {
	t.Parallel()
	eachEngine(t, testClaimsAcrossInstances)
}

func testClaimsAcrossInstances(t *testing.T, e engine) {
	ctx := context.Background()
	place := e.place(t)
	replicas := twoStores(t, e, place)
	const keys, racers = 10, 16
	var wins [keys]atomic.Int64
	won := make(chan exact.Record, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for i := range racers {
			wg.Go(func() {
				r, err := replicas[i%2].Claim(ctx, rec(fmt.Sprintf("0xa%d", k)), time.Now().Add(-time.Hour))
				switch {
				case err == nil:
					wins[k].Add(1)
					won <- r
				case !errors.Is(err, exact.ErrClaimed):
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	close(won)
	for k := range wins {
		if n := wins[k].Load(); n != 1 {
			t.Errorf("key %d: %d claims won", k, n)
		}
	}
	// A released claim is taken over by one of many racing claimers.
	released, err := replicas[0].Claim(ctx, rec("0xc0"), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if err := replicas[1].Finish(ctx, withState(released, exact.StateReleased)); err != nil {
		t.Fatal(err)
	}
	var takeovers atomic.Int64
	for i := range racers {
		wg.Go(func() {
			r, err := replicas[i%2].Claim(ctx, rec("0xc0"), time.Now().Add(-time.Hour))
			switch {
			case err == nil && r.PrevState == exact.StateReleased:
				takeovers.Add(1)
			case err == nil:
				t.Errorf("a claim won without taking over the released one: %+v", r)
			case !errors.Is(err, exact.ErrClaimed):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := takeovers.Load(); n != 1 {
		t.Errorf("%d claimers took over one released claim", n)
	}
	for r := range won {
		for i := range 4 { // the holder and three late resolvers, on both replicas
			wg.Go(func() {
				if err := replicas[i%2].Resolve(ctx, withTx(withState(r, exact.StateSettled), txA)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	paid, err := replicas[0].Totals(ctx)
	if err != nil || paid["regime"].Paid != keys || paid["regime"].Amount != fmt.Sprint(keys*50000) {
		t.Errorf("totals %+v %v: want %d payments of 50000", paid["regime"], err, keys)
	}
}

// TestConcurrentChallenges: flushes of challenge counts from two
// replicas at once add up, in whatever order their maps iterate.
func TestConcurrentChallenges(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		place := e.place(t)
		var wg sync.WaitGroup
		replicas := twoStores(t, e, place)
		for i := range 20 {
			wg.Go(func() {
				if err := replicas[i%2].AddChallenges(ctx, map[string]uint64{"regime": 1, "whales": 2, "lanes": 3, "forecast": 4}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		got, err := replicas[1].Totals(ctx)
		if err != nil || got["regime"].Challenges != 20 || got["forecast"].Challenges != 80 {
			t.Errorf("challenges %+v %v", got, err)
		}
	})
}

// TestReplicasStartTogether: stores opening one empty database at once
// migrate it once (the others wait for the migration lock) and bind it to
// one deployment.
func TestReplicasStartTogether(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		place := e.place(t)
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				s, err := e.open(ctx, place)
				if err != nil {
					t.Error(err)
					return
				}
				defer s.Close()
				if err := s.Bind(ctx, prodBase); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	})
}

// BenchmarkClaimFinish is the ledger's cost per paid call on each engine:
// a claim and a settlement, from parallel callers. (pgtest's cluster runs
// with fsync off; SQLite here syncs every commit.)
func BenchmarkClaimFinish(b *testing.B) {
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := e.open(ctx, e.place(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					r, err := s.Claim(ctx, rec(fmt.Sprintf("0xb%d", i)), time.Time{})
					if err != nil {
						b.Error(err)
						return
					}
					r.State, r.Tx, r.Response = exact.StateSettled, fmt.Sprintf("0x%064x", i), []byte(`{"ok":true}`)
					if err := s.Finish(ctx, r); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
