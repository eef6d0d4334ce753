package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/store"
)

var (
	prodBase = store.Deployment{Mode: store.ModeProduction, Network: "eip155:8453", Asset: "0xA", Genesis: "0xf712aa92"}
	devRun1  = store.Deployment{Mode: store.ModeDevnet, Network: "eip155:8453", Asset: "0xD", Genesis: "0x01"}
	devRun2  = store.Deployment{Mode: store.ModeDevnet, Network: "eip155:8453", Asset: "0xD", Genesis: "0x02"}
)

// TestBind: a store takes the first deployment that binds it and refuses
// every other one, saying which; the same deployment opens it again.
func TestBind(t *testing.T) {
	t.Parallel()
	eachEngine(t, testBind)
}

func testBind(t *testing.T, e engine) {
	tests := []struct {
		name         string
		first, then  store.Deployment
		wantMismatch bool
		previousRun  bool
	}{
		{"production again", prodBase, prodBase, false, false},
		{"production, hex case differs", prodBase, store.Deployment{Mode: "production", Network: "eip155:8453", Asset: "0xa", Genesis: "0xF712AA92"}, false, false},
		{"devnet opens production", prodBase, devRun1, true, false},
		{"production opens devnet", devRun1, prodBase, true, false},
		{"next devnet run", devRun1, devRun2, true, true},
		{"same devnet run", devRun1, devRun1, false, false},
		{"production of another chain", prodBase, store.Deployment{Mode: "production", Network: "eip155:8453", Asset: "0xA", Genesis: "0xbeef"}, true, false},
		{"production in another asset", prodBase, store.Deployment{Mode: "production", Network: "eip155:8453", Asset: "0xB", Genesis: "0xf712aa92"}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openStore(t, e)
			if err := s.Bind(ctx, tt.first); err != nil {
				t.Fatal(err)
			}
			err := s.Bind(ctx, tt.then)
			var m *store.MismatchError
			if errors.As(err, &m) != tt.wantMismatch {
				t.Fatalf("Bind(%v) after %v = %v", tt.then, tt.first, err)
			}
			if m != nil && (m.PreviousDevnetRun() != tt.previousRun || m.Have != tt.first || m.Error() == "") {
				t.Errorf("mismatch %+v: previous run %v, want %v", m, m.PreviousDevnetRun(), tt.previousRun)
			}
			got, ok, err := s.Deployment(ctx)
			if err != nil || !ok || got != tt.first {
				t.Errorf("Deployment() = %v %v %v, want the first binding", got, ok, err)
			}
		})
	}
}

// TestBindUnrecordedStore: a store written before deployments were
// recorded is adopted by production when its payments are production's,
// refused by production when they are not, and never adopted by a devnet.
func TestBindUnrecordedStore(t *testing.T) {
	t.Parallel()
	eachEngine(t, testBindUnrecordedStore)
}

func testBindUnrecordedStore(t *testing.T, e engine) {
	ctx := context.Background()
	withPayment := func(asset string) *store.DB {
		s := openStore(t, e)
		r := rec("0x01")
		r.Asset = asset
		if _, err := s.Claim(ctx, r, time.Time{}); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if err := withPayment("0xa").Bind(ctx, prodBase); err != nil {
		t.Errorf("production's own payments: %v", err)
	}
	var m *store.MismatchError
	if err := withPayment("0xD").Bind(ctx, prodBase); !errors.As(err, &m) || m.Have.Mode != "" || m.PreviousDevnetRun() {
		t.Errorf("devnet payments opened by production: %v", err)
	}
	if err := withPayment("0xD").Bind(ctx, devRun1); !errors.As(err, &m) || !m.PreviousDevnetRun() {
		t.Errorf("payments of an unknown run opened by devnet: %v", err)
	}
	if err := openStore(t, e).Bind(ctx, devRun1); err != nil {
		t.Errorf("empty store: %v", err)
	}
	if err := openStore(t, e).Bind(ctx, store.Deployment{Mode: "staging", Network: "x", Asset: "y", Genesis: "z"}); err == nil {
		t.Error("bound to an unknown mode")
	}
}

// TestMoveSQLite: the database moves with its WAL, replacing the one
// there, and a new store opens empty where it was.
func TestMoveSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	prev := filepath.Join(dir, "previous")
	for _, run := range []store.Deployment{devRun1, devRun2} {
		s, err := store.OpenSQLite(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Bind(ctx, run); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, rec("0x"+run.Genesis), time.Time{}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if err := store.MoveSQLite(dir, prev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tollgate.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("database left in place: %v", err)
	}
	old := openStoreIn(t, prev)
	d, _, _ := old.Deployment(ctx)
	ps, _ := old.Payments(ctx)
	if d != devRun2 || len(ps) != 1 {
		t.Errorf("previous/ holds %v with %d payments, want the second run's one", d, len(ps))
	}
	fresh := openStoreIn(t, dir)
	if ps, _ := fresh.Payments(ctx); len(ps) != 0 {
		t.Errorf("fresh store has %d payments", len(ps))
	}
}

func openStoreIn(t *testing.T, dir string) *store.DB {
	t.Helper()
	s, err := store.OpenSQLite(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
