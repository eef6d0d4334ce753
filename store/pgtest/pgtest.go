// Package pgtest gives tests a real PostgreSQL: a throwaway cluster of
// the PostgreSQL installed on the machine (Debian's postgresql package,
// /usr/lib/postgresql/*/bin, or initdb on PATH), made with initdb in a
// temporary directory and started with pg_ctl on a free loopback port and
// a unix socket in that directory, the first time a test of the process
// asks for it. Each test gets its own database, dropped when it ends. The
// cluster stops, and its directory goes, when the test process exits: a
// watcher process started with it waits for the end of a pipe the test
// process holds, so no TestMain is needed and a crashed test leaves
// nothing running.
//
// Without PostgreSQL the tests that need it skip, unless
// TOLLGATE_REQUIRE_POSTGRES=1 (CI) makes them fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that turns a missing PostgreSQL from a
// skip into a failure.
const RequireEnv = "TOLLGATE_REQUIRE_POSTGRES"

// cluster is the process's one PostgreSQL, started on first use.
type cluster struct {
	once    sync.Once
	port    int
	err     error
	missing bool     // no PostgreSQL installed
	keep    *os.File // the watcher's pipe: open as long as the process lives
	dbs     atomic.Int64
}

var shared cluster

// URL returns the postgres:// URL of a new, empty database for t, dropped
// when t ends. It skips t when PostgreSQL is not installed, or fails it
// when RequireEnv is 1.
func URL(t testing.TB) string {
	t.Helper()
	return shared.database(t)
}

func (c *cluster) database(t testing.TB) string {
	t.Helper()
	c.once.Do(c.start)
	if c.missing {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("PostgreSQL is required (%s=1): %v", RequireEnv, c.err)
		}
		t.Skipf("capability postgresql not tested: the store on PostgreSQL, replicas on one database (%v); to test it: apt-get install postgresql", c.err)
	}
	if c.err != nil {
		t.Fatalf("PostgreSQL test cluster: %v", c.err)
	}
	ctx := context.Background()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), c.dbs.Add(1))
	admin, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, c.url("postgres"))
		if err != nil {
			t.Error(err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	return c.url(name)
}

func (c *cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// binDir finds the directory of initdb and pg_ctl: the newest Debian
// version, else PATH.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	if len(found) > 0 {
		return filepath.Dir(found[0]), nil
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("no initdb in /usr/lib/postgresql/*/bin or on PATH")
	}
	return filepath.Dir(p), nil
}

// version is the major version in a Debian path, 0 if none.
func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

func (c *cluster) start() {
	bin, err := binDir()
	if err != nil {
		c.missing, c.err = true, err
		return
	}
	c.err = c.startIn(bin)
}

func (c *cluster) startIn(bin string) error {
	// PostgreSQL refuses to run as root: as root, the cluster belongs to
	// the postgres user of the package.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "tollgate-pgtest-")
	if err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		return cmd
	}
	if out, err := run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	// The port is free when chosen, not necessarily when the server binds
	// it: another process may take it in between, so try a few.
	for attempt := 1; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return err
		}
		// Durability is not what these tests are about: fsync off.
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
			c.port, dir)
		out, err := run("pg_ctl", "start", "-w", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts).CombinedOutput()
		if err == nil {
			break
		}
		if attempt == 3 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
		}
	}
	// The watcher: reads its stdin until the test process (the only
	// holder of the pipe's other end) exits, then stops the cluster and
	// removes it. Its own process group, so that an interrupt of go test
	// does not stop it before it cleans up.
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	script := strings.Join([]string{
		"cat >/dev/null",
		shellQuote(filepath.Join(bin, "pg_ctl")) + " stop -m immediate -D " + shellQuote(data) + " >/dev/null 2>&1",
		"rm -rf " + shellQuote(dir),
	}, "; ")
	watcher := exec.Command("/bin/sh", "-c", script)
	watcher.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	watcher.Stdin = r
	if err := watcher.Start(); err != nil {
		w.Close()
		r.Close()
		return fmt.Errorf("pgtest watcher: %w", err)
	}
	r.Close()
	c.keep = w
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
