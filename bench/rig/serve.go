package rig

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Serve is one `tollgate serve` process that StartServe started.
type Serve struct {
	URL   string // the public REST listener, also its --public-url
	Admin string // the operator listener (/readyz, /metrics, /debug/pprof)
	Chain string // the in-process devnet's JSON-RPC
	Log   string // its stdout and stderr
	Pid   int
	stop  func()
}

// StartServe runs `tollgate serve` on its embedded devnet, on fresh
// loopback ports, with a temporary data dir and then args (which may
// override any of those), without the environment's TOLLGATE_ variables
// (serve reads them as flag defaults). It waits until /readyz answers
// 200, and stops the process when tb ends (SIGTERM, then SIGKILL after
// 20 s; also killed if the test binary dies; or earlier, by Stop),
// logging the end of its log when tb failed.
func StartServe(tb testing.TB, bin string, args ...string) *Serve {
	httpAddr, adminAddr, rpcAddr := FreeAddr(tb), FreeAddr(tb), FreeAddr(tb)
	s := &Serve{URL: "http://" + httpAddr, Admin: "http://" + adminAddr, Chain: "http://" + rpcAddr,
		Log: filepath.Join(tb.TempDir(), "serve.log")}
	all := append([]string{"serve", "--http", httpAddr, "--public-url", s.URL, "--grpc", FreeAddr(tb), "--admin", adminAddr,
		"--devnet-rpc", rpcAddr, "--data-dir", tb.TempDir()}, args...)
	f, err := os.Create(s.Log)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, all...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TOLLGATE_") })
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // killed with the benchmark, however it ends
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	s.Pid = cmd.Process.Pid
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	s.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if tb.Failed() {
			tb.Logf("tollgate serve log:\n%s", s.Tail())
		}
	})
	tb.Cleanup(s.stop)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if Get(s.Admin+"/readyz") == http.StatusOK {
			return s
		}
		select {
		case <-done:
			tb.Fatalf("tollgate serve exited while starting:\n%s", s.Tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("tollgate serve not ready within 2 minutes:\n%s", s.Tail())
		}
	}
}

// Stop stops the server before tb ends (a benchmark that starts one per
// run), as the cleanup would.
func (s *Serve) Stop() { s.stop() }

// Tail is the end of the server's log.
func (s *Serve) Tail() string {
	raw, _ := os.ReadFile(s.Log)
	if len(raw) > 6000 {
		raw = raw[len(raw)-6000:]
	}
	return string(raw)
}

// Get is the status of GET url, 0 when there is no answer.
func Get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
