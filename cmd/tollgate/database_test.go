package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/pgtest"
)

// TestDatabaseFlag: --database takes a postgres:// URL or nothing, and
// its errors never repeat a password.
func TestDatabaseFlag(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"", true},
		{"postgres://tollgate:secret@db.internal:5432/tollgate?sslmode=require", true},
		{"postgresql://db.internal/tollgate", true},
		{"postgres:///tollgate?host=/run/postgresql", true},
		{"mysql://tollgate:secret@db.internal/tollgate", false},
		{"data/tollgate.db", false},
		{"postgres://tollgate:secret@/tollgate", false},
	} {
		err := validDatabase(tt.in)
		if (err == nil) != tt.ok || err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("validDatabase(%q) = %v, want ok %v and no password", tt.in, err, tt.ok)
		}
	}
	fs, cfg := newServeFlags(envOf(map[string]string{"TOLLGATE_DATABASE": "mysql://tollgate:secret@db.internal/tollgate"}))
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "--database") {
		t.Errorf("serve validated a MySQL URL: %v", err)
	}
}

// TestLedgerOnPostgres: with --database, serve's ledger, tollgate ledger
// and tollgate lanes import all use the PostgreSQL store, replicas of one
// deployment share it, and a new devnet run is refused it rather than
// putting aside a database other replicas use.
func TestLedgerOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, dir := pgtest.URL(t), t.TempDir()
	run1 := store.Deployment{Mode: store.ModeDevnet, Network: "eip155:8453", Asset: "0xD", Genesis: "0x01"}
	logger := slog.New(slog.DiscardHandler)
	for range 2 { // two replicas of one run
		db, err := openLedger(ctx, url, dir, run1, logger)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	db, err := openLedger(ctx, url, dir, run1, logger)
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Claim(ctx, exact.Record{Network: "eip155:8453", Asset: "0xD", Payer: "0xP", Nonce: "0x01", Operation: "regime",
		Resource: "/regime", Amount: "50000", Version: 2, ClaimID: "c", SigHash: "s"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	r.State, r.Tx = exact.StateSettled, "0x"+strings.Repeat("ab", 32)
	if err := db.Finish(ctx, r); err != nil {
		t.Fatal(err)
	}
	db.Close()

	run2 := run1
	run2.Genesis = "0x02"
	if _, err := openLedger(ctx, url, dir, run2, logger); err == nil || !strings.Contains(err.Error(), "--database") {
		t.Errorf("a new devnet run opened the shared ledger of the last one: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the data dir was written to: %v", entries)
	}

	var out, errOut bytes.Buffer
	tape := filepath.Join(t.TempDir(), "tape.csv")
	if err := os.WriteFile(tape, []byte("id,lane,closed_at\nx1,eth-trend,2026-11-01T10:00:00Z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := envOf(map[string]string{"TOLLGATE_DATABASE": url, "TOLLGATE_DATA_DIR": dir})
	if err := run(ctx, []string{"lanes", "import", tape}, getenv, &out, &errOut); err != nil || !strings.Contains(out.String(), "1 new") {
		t.Fatalf("lanes import: %v\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	if err := run(ctx, []string{"ledger", "list", "--database", url}, envOf(nil), &out, &errOut); err != nil ||
		!strings.Contains(out.String(), "1 payments: 1 settled by exact for $0.05 (50000") {
		t.Fatalf("ledger list: %v\n%s%s", err, out.String(), errOut.String())
	}
	if strings.Contains(errOut.String(), "postgres@") {
		t.Errorf("the database URL's user reached the output: %s", errOut.String())
	}
}
