package deploy

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to read the shared store

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/store/pgtest"
)

// RequireHAProxyEnv names the variable that turns a missing haproxy from
// a skip into a failure (CI sets it; .ci/run installs Debian's haproxy).
const RequireHAProxyEnv = "TOLLGATE_REQUIRE_HAPROXY"

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// tollgateBinary builds cmd/tollgate once per test process: the cluster
// runs the binary an operator runs, as separate processes that can be
// killed.
func tollgateBinary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if build.dir, build.err = os.MkdirTemp("", "tollgate-deploy-"); build.err != nil {
			return
		}
		build.bin = filepath.Join(build.dir, "tollgate")
		out, err := exec.Command("go", "build", "-buildvcs=true", "-o", build.bin, "github.com/tollgate/tollgate/cmd/tollgate").CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build ./cmd/tollgate: %w\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// haproxyPath finds haproxy; without it the test skips, or fails when
// RequireHAProxyEnv is 1.
func haproxyPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"haproxy", "/usr/sbin/haproxy"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv(RequireHAProxyEnv) == "1" {
		t.Fatalf("haproxy is not installed and %s=1 (apt-get install haproxy)", RequireHAProxyEnv)
	}
	t.Skipf("capability haproxy not tested: replicas behind a load balancer, end to end; to test it: apt-get install haproxy (%s=1 makes its absence a failure)", RequireHAProxyEnv)
	return ""
}

// process is one child process of a cluster, its output in a log file.
type process struct {
	name string
	path string
	args []string
	env  []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start runs the process; it does not wait for it to be ready.
func (p *process) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Killed with the test process, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// pid is the running process's id.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// exited is closed once the process has exited.
func (p *process) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// kill sends SIGKILL, as a crash or an OOM kill would, and waits.
func (p *process) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// stop asks the process to shut down (SIGTERM) and kills it if it has
// not within 30 s.
func (p *process) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// tail is the end of the process's log.
func (p *process) tail(lines int) string {
	b, _ := os.ReadFile(p.log)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// replica is one `tollgate serve` of a cluster.
type replica struct {
	*process
	base  string // its own URL, bypassing the load balancer
	admin string // its operator listener
}

// cluster is the production layout of docs/storage.md on loopback: one
// PostgreSQL database, one `tollgate devnet` chain, replicas of `tollgate
// serve` sharing both, and HAProxy (deploy/haproxy.cfg) in front; or, by
// clusterConfig.stores, replicas each with a store of its own.
type cluster struct {
	database  string // postgres:// URL of the shared store; empty unless sharedPostgres
	devnetURL string
	devnet    *process
	desc      *devnet.Description
	replicas  []*replica
	haproxy   *process
	lb        string // the load balancer's URL: the service's public URL
	bin       string
}

// clusterConfig shapes a cluster.
type clusterConfig struct {
	replicas      int
	whaleInterval time.Duration // serve --whale-interval
	serveArgs     []string      // more flags of every serve
	stores        storeLayout   // where the replicas keep their books
}

// storeLayout is where a cluster's replicas keep their books.
type storeLayout int

const (
	// sharedPostgres: one PostgreSQL database, every replica's --database
	// (the production layout of docs/storage.md).
	sharedPostgres storeLayout = iota
	// ownPostgres: a PostgreSQL database of its own for each replica.
	ownPostgres
	// ownSQLite: no --database; each replica's SQLite in its own --data-dir.
	ownSQLite
)

// startCluster starts a cluster for t and stops it when t ends, printing
// the processes' logs if t failed.
func startCluster(t testing.TB, cfg clusterConfig) *cluster {
	t.Helper()
	haproxy := haproxyPath(t)
	c := &cluster{bin: tollgateBinary(t)}
	if cfg.stores == sharedPostgres {
		c.database = pgtest.URL(t)
	}
	logs := t.TempDir()
	var all []*process
	t.Cleanup(func() {
		for i := len(all) - 1; i >= 0; i-- {
			all[i].stop()
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("--- %s (last lines of %s)\n%s", p.name, p.log, p.tail(40))
			}
		}
	})
	run := func(p *process) {
		t.Helper()
		p.log = filepath.Join(logs, p.name+".log")
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}

	c.devnetURL = "http://" + freeAddr(t)
	c.devnet = &process{name: "devnet", path: c.bin, args: []string{"devnet", "--rpc", strings.TrimPrefix(c.devnetURL, "http://")}}
	run(c.devnet)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(t, ctx, c.devnet, func() error {
		var err error
		c.desc, err = devnet.Fetch(ctx, http.DefaultClient, c.devnetURL)
		return err
	})

	lbAddr := freeAddr(t)
	c.lb = "http://" + lbAddr
	for i := range cfg.replicas {
		addr, adminAddr := freeAddr(t), freeAddr(t)
		r := &replica{base: "http://" + addr, admin: "http://" + adminAddr, process: &process{name: fmt.Sprintf("replica%d", i+1), path: c.bin, args: []string{
			"serve", "--devnet-url", c.devnetURL,
			"--http", addr, "--grpc", freeAddr(t), "--public-url", c.lb,
			"--data-dir", t.TempDir(), "--whale-interval", cfg.whaleInterval.String(), "--log-format", "json",
			"--admin", adminAddr, "--drain-delay", "1500ms",
			"--trusted-proxies", "127.0.0.1", // HAProxy's X-Forwarded-For names the client
		}}}
		switch {
		case cfg.stores == ownPostgres:
			r.args = append(r.args, "--database", pgtest.URL(t))
		case c.database != "":
			r.args = append(r.args, "--database", c.database)
		}
		r.args = append(r.args, cfg.serveArgs...)
		run(r.process)
		c.replicas = append(c.replicas, r)
	}
	for _, r := range c.replicas {
		c.waitHealthy(t, ctx, r)
	}

	env := []string{"TOLLGATE_LB_BIND=" + lbAddr}
	for i := range 3 { // haproxy.cfg names three servers: fewer replicas are named more than once
		r := c.replicas[i%len(c.replicas)]
		_, adminPort, _ := net.SplitHostPort(strings.TrimPrefix(r.admin, "http://"))
		env = append(env, fmt.Sprintf("TOLLGATE_REPLICA_%d=%s", i+1, strings.TrimPrefix(r.base, "http://")),
			fmt.Sprintf("TOLLGATE_REPLICA_%d_ADMIN_PORT=%s", i+1, adminPort))
	}
	c.haproxy = &process{name: "haproxy", path: haproxy, args: []string{"-db", "-f", "haproxy.cfg"}, env: env}
	run(c.haproxy)
	waitFor(t, ctx, c.haproxy, func() error { return healthy(ctx, c.lb+"/health") })
	return c
}

// restart starts r again, with the same flags and port, and waits for it.
func (c *cluster) restart(t testing.TB, r *replica) {
	t.Helper()
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c.waitHealthy(t, ctx, r)
}

func (c *cluster) waitHealthy(t testing.TB, ctx context.Context, r *replica) {
	t.Helper()
	waitFor(t, ctx, r.process, func() error { return healthy(ctx, r.admin+"/readyz") })
}

// sql opens the shared store for reading what the replicas wrote.
func (c *cluster) sql(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", c.database)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// tollgate runs a tollgate command to its end and returns its stdout.
func (c *cluster) tollgate(t testing.TB, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("tollgate %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// byPID is the replica running as pid, nil if none is.
func (c *cluster) byPID(pid int) *replica {
	for _, r := range c.replicas {
		select {
		case <-r.exited():
			continue
		default:
		}
		if r.pid() == pid {
			return r
		}
	}
	return nil
}

// waitFor polls ready until it succeeds, failing t when p exits first or
// ctx ends.
func waitFor(t testing.TB, ctx context.Context, p *process, ready func() error) {
	t.Helper()
	for {
		err := ready()
		if err == nil {
			return
		}
		select {
		case <-p.exited():
			t.Fatalf("%s exited while starting:\n%s", p.name, p.tail(30))
		case <-ctx.Done():
			t.Fatalf("%s not ready: %v\n%s", p.name, err, p.tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// healthy is nil when url answers GET with 200.
func healthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
	}
	return nil
}

// freeAddr is a loopback address free when chosen. Its port is held by
// nobody between this and the child binding it, a window too short to
// matter on a test machine.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
