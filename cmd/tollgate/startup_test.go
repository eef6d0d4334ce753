package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStartFailsAtOnce: a start-up that fails, however far it got (a
// Kronos checkpoint, the store, the chain, a listener), returns its error
// by itself, without waiting for an interrupt: serve exits non-zero with
// the message. The context here is never canceled; only the test's
// guard would end a start that hangs.
func TestStartFailsAtOnce(t *testing.T) {
	t.Parallel()
	junk := t.TempDir()
	if err := os.WriteFile(filepath.Join(junk, "config.json"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // the subtests run after this function returns
	free := []string{"--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a missing Kronos checkpoint", []string{"--devnet-rpc", "127.0.0.1:0", "--kronos-model", "/nonexistent", "--kronos-tokenizer", "/nonexistent"},
			nil, "/nonexistent/config.json"},
		{"a junk Kronos config", []string{"--devnet-rpc", "127.0.0.1:0", "--kronos-model", junk, "--kronos-tokenizer", junk}, nil, "config.json"},
		{"an unreachable store", []string{"--devnet-rpc", "127.0.0.1:0", "--database", "postgres://tollgate@127.0.0.1:1/tollgate?connect_timeout=2"},
			nil, "127.0.0.1:1"},
		{"an unreachable chain", []string{"--chain-rpc", "http://127.0.0.1:1", "--pay-to", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"},
			map[string]string{"TOLLGATE_FACILITATOR_KEY": "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"}, "chain rpc"},
		{"a busy devnet listener", []string{"--devnet-rpc", busy.Addr().String()}, nil, "address already in use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the guard
			defer cancel()
			var log bytes.Buffer
			err := run(ctx, append(append([]string{"serve", "--data-dir", t.TempDir()}, free...), tc.args...), envOf(tc.env), &log, &log)
			switch {
			case err == nil:
				t.Fatal("serve started")
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				t.Fatalf("serve hung until the guard (%v)\n%s", err, log.String())
			case !strings.Contains(err.Error(), tc.want):
				t.Errorf("serve failed with %q; want it to name %q", err, tc.want)
			}
		})
	}
}

// TestCleanStop: a serve stopped by its context leaves no serve.lock in
// its data dir, and its log ends with a line saying it stopped.
func TestCleanStop(t *testing.T) {
	t.Parallel()
	addrs := freeAddrs(t, 4)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data-dir", dir, "--http", addrs[0], "--grpc", addrs[1], "--admin", addrs[2], "--devnet-rpc", addrs[3],
			"--public-url", "http://" + addrs[0]}, envOf(nil), &log, &log)
	}()
	waitHealthy(t, "http://"+addrs[0], done)
	if _, err := os.Stat(filepath.Join(dir, lockFile)); err != nil {
		t.Fatalf("a running serve holds no %s: %v", lockFile, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("a clean stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, lockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left behind after a clean stop (%v)", lockFile, err)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "msg=stopped") {
		t.Errorf("the log ends with %q; want the line saying it stopped", last)
	}
}

// syncBuffer is a bytes.Buffer safe for a serve's concurrent log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddrs returns n loopback addresses free a moment ago, for a serve
// run by its command line (the --http, --grpc, --admin and --devnet-rpc
// flags).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = l.Addr().String()
		l.Close()
	}
	return addrs
}
