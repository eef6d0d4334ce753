package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReplicasOnOneMachine: two serves on one machine, as the README's
// devnet replicas recipe starts them (one `tollgate devnet`, each serve
// with --devnet-url and its own --http, --grpc and --data-dir). A second
// serve whose operator listener is the first one's address stops at once
// with an error that names --admin and the fix; one colliding everywhere
// names every flag in one error; given its own --admin it starts, and
// each replica's operator listener answers.
func TestReplicasOnOneMachine(t *testing.T) {
	t.Parallel()
	devnetURL := startDevnetCmd(t)
	first, err := serveOnDevnet(t, devnetURL, t.TempDir())
	if err != nil {
		t.Fatalf("first serve: %v", err)
	}
	firstAdmin, firstHTTP := strings.TrimPrefix(first.admin, "http://"), strings.TrimPrefix(first.base, "http://")
	dir := t.TempDir()
	second := func(ctx context.Context, log io.Writer, args ...string) error {
		return run(ctx, append([]string{"serve", "--devnet-url", devnetURL, "--data-dir", dir}, args...), envOf(nil), io.Discard, log)
	}
	refused := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := second(ctx, io.Discard, args...); err != nil {
			return err.Error()
		}
		t.Fatalf("serve %q started beside the first one", args)
		return ""
	}

	// The operator listener forgotten: the first replica holds it.
	msg := refused("--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", firstAdmin)
	for _, want := range []string{"--admin " + firstAdmin + ": ", "address already in use", "give each serve on this machine its own --admin", "--admin off"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "--http") || strings.Contains(msg, "--grpc") {
		t.Errorf("the error names listeners that were free:\n%s", msg)
	}

	// Every listener colliding: one error names each flag.
	msg = refused("--http", firstHTTP, "--grpc", first.grpc, "--admin", firstAdmin)
	for _, flag := range []string{"--http " + firstHTTP, "--grpc " + first.grpc, "--admin " + firstAdmin} {
		if !strings.Contains(msg, flag+": ") {
			t.Errorf("the error does not name %s:\n%s", flag, msg)
		}
	}
	if n := strings.Count(msg, "address already in use"); n != 3 {
		t.Errorf("%d collisions reported, want 3:\n%s", n, msg)
	}

	// The recipe with --admin named: the second replica starts beside the
	// first; its log names where it listens.
	ctx, cancel := context.WithCancel(context.Background())
	log := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- second(ctx, log, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0")
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second serve: %v", err)
		}
	})
	serving := regexp.MustCompile(`msg="tollgate serving" http=(\S+) grpc=\S+ admin=(\S+)`)
	var m []string
	for deadline := time.Now().Add(time.Minute); m == nil; m = serving.FindStringSubmatch(log.String()) {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the second serve stopped: %v\n%s", err, log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second serve did not start within a minute:\n%s", log.String())
		}
	}
	secondHTTP, secondAdmin := m[1], m[2]
	if secondAdmin == firstAdmin || secondHTTP == firstHTTP {
		t.Fatalf("the replicas share a listener: %s %s", secondHTTP, secondAdmin)
	}
	for _, url := range []string{"http://" + secondHTTP + "/health", "http://" + secondAdmin + "/readyz", first.admin + "/readyz"} {
		status := 0
		for deadline := time.Now().Add(30 * time.Second); status != http.StatusOK && time.Now().Before(deadline); {
			resp, err := http.Get(url)
			if err != nil {
				t.Fatalf("GET %s: %v", url, err)
			}
			resp.Body.Close()
			if status = resp.StatusCode; status != http.StatusOK {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", url, status)
		}
	}
}

// TestListenError: an address another process holds is named by its
// flag, marked when it is the flag's default, and answered with the fix
// for that listener; any other failure is named by its flag alone.
func TestListenError(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, inUse := net.Listen("tcp", held.Addr().String())
	if !errors.Is(inUse, syscall.EADDRINUSE) {
		t.Skipf("a second bind of one address fails with %v here, not EADDRINUSE", inUse)
	}
	other := errors.New("listen tcp 10.9.9.9:9403: bind: cannot assign requested address")
	for _, tt := range []struct {
		name, flag, addr string
		err              error
		want             []string
		not              []string
	}{
		{"default admin busy", "admin", defaultAdmin, inUse,
			[]string{"--admin 127.0.0.1:9403 (the default): ", "address already in use", "a second tollgate serve?", "its own --admin (e.g. --admin 127.0.0.1:9413)", "TOLLGATE_ADMIN", "--admin off"}, nil},
		{"explicit admin busy", "admin", "127.0.0.1:9413", inUse,
			[]string{"--admin 127.0.0.1:9413: ", "e.g. --admin 127.0.0.1:9423"}, []string{"(the default)"}},
		{"default http busy", "http", defaultHTTP, inUse,
			[]string{"--http :8402 (the default): ", "its own --http (e.g. --http :8412)", "--public-url"}, nil},
		{"default grpc busy", "grpc", defaultGRPC, inUse,
			[]string{"--grpc 127.0.0.1:9402 (the default): ", "its own --grpc (e.g. --grpc 127.0.0.1:9412)"}, nil},
		{"devnet rpc busy", "devnet-rpc", "0.0.0.0:8545", inUse,
			[]string{"--devnet-rpc 0.0.0.0:8545: ", "--devnet-url http://127.0.0.1:8545", "its own --devnet-rpc (e.g. --devnet-rpc 0.0.0.0:8555)"}, nil},
		{"another failure", "admin", "10.9.9.9:9403", other,
			[]string{"--admin 10.9.9.9:9403: listen tcp"}, []string{"another process", "its own"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := listenError(tt.flag, tt.addr, map[string]string{"admin": defaultAdmin, "http": defaultHTTP, "grpc": defaultGRPC, "devnet-rpc": defaultDevnetRPC}[tt.flag], tt.err)
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap the listen error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("lacks %q: %v", w, err)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(err.Error(), n) {
					t.Errorf("has %q: %v", n, err)
				}
			}
		})
	}
}
