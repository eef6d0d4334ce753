package pgtest

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestURL: a database of its own per test, on a running cluster.
func TestURL(t *testing.T) {
	t.Parallel()
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("two tests share database %s", a)
	}
	conn, err := pgx.Connect(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}

// TestMissingPostgres: without PostgreSQL a test skips, unless
// RequireEnv=1 (CI), which fails it.
func TestMissingPostgres(t *testing.T) {
	for _, tt := range []struct {
		require    string
		skip, fail bool
	}{{"", true, false}, {"1", false, true}} {
		t.Run("require="+tt.require, func(t *testing.T) {
			t.Setenv(RequireEnv, tt.require)
			c := &cluster{}
			c.once.Do(func() { c.missing, c.err = true, errors.New("no initdb") })
			r := &recorder{TB: t}
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.database(r)
			}()
			<-done
			if r.skipped != tt.skip || r.failed != tt.fail {
				t.Errorf("skipped %v, failed %v; want %v, %v", r.skipped, r.failed, tt.skip, tt.fail)
			}
		})
	}
}

// recorder notes a skip or a failure and ends the goroutine, as testing
// does.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(string, ...any) {
	r.skipped = true
	runtime.Goexit()
}

func (r *recorder) Fatalf(string, ...any) {
	r.failed = true
	runtime.Goexit()
}
