package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestHelp(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"--help"}, envOf(nil), &out, &errOut)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run --help = %v", err)
	}
	for _, want := range []string{"tollgate serve", "TOLLGATE_PUBLIC_URL", "-http", "-grpc", "-public-url", "-data-dir", "127.0.0.1:9402", ":8402"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunRefusesBadCommands(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"frobnicate"}, {"serve", "extra"}, {"serve", "--nope"}} {
		err := run(context.Background(), args, envOf(nil), io.Discard, io.Discard)
		if err == nil || errors.Is(err, flag.ErrHelp) && len(args) > 0 {
			t.Errorf("run %q = %v, want an error", args, err)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	fs, cfg := newServeFlags(envOf(map[string]string{
		"TOLLGATE_HTTP":            "127.0.0.1:9000",
		"TOLLGATE_PUBLIC_URL":      "https://from-env.example",
		"TOLLGATE_LOG_LEVEL":       "debug",
		"TOLLGATE_REQUEST_TIMEOUT": "5s",
	}))
	if err := fs.Parse([]string{"--public-url", "https://from-flag.example"}); err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:9000" {
		t.Errorf("http = %q, want the env value", cfg.HTTPAddr)
	}
	if cfg.PublicURL != "https://from-flag.example" {
		t.Errorf("public-url = %q, want the flag value", cfg.PublicURL)
	}
	if cfg.GRPCAddr != "127.0.0.1:9402" || cfg.DataDir != "" {
		t.Errorf("defaults: grpc %q data-dir %q", cfg.GRPCAddr, cfg.DataDir)
	}
	if cfg.LogLevel != slog.LevelDebug || cfg.RequestTimeout != 5*time.Second {
		t.Errorf("log level %v timeout %v", cfg.LogLevel, cfg.RequestTimeout)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	if cfg.DataDir != "data/devnet" {
		t.Errorf("devnet data dir %q", cfg.DataDir)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	fs, cfg := newServeFlags(envOf(map[string]string{
		"TOLLGATE_LOG_LEVEL":        "loud",
		"TOLLGATE_SHUTDOWN_TIMEOUT": "soon",
	}))
	if err := fs.Parse([]string{"--http", "nohost", "--log-format", "xml", "--candles-url", "ftp://candles", "--forecast-model", "http://model:9000",
		"--dex-factories", "v4:0x1", "--quote-tokens", "weth"}); err != nil {
		t.Fatal(err)
	}
	err := cfg.validate()
	if err == nil {
		t.Fatal("validate accepted a bad config")
	}
	for _, want := range []string{"TOLLGATE_LOG_LEVEL", "TOLLGATE_SHUTDOWN_TIMEOUT", "--http", "--log-format", "--candles-url", "--forecast-model", "--dex-factories", "--quote-tokens"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestServe runs the whole wiring on loopback ports: REST and gRPC answer,
// reflection lists every service, health says SERVING, and cancelling the
// context shuts down cleanly.
func TestServe(t *testing.T) {
	t.Parallel()
	var ls listeners
	for _, l := range []*net.Listener{&ls.http, &ls.grpc, &ls.devnet} {
		var err error
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	httpLis, grpcLis := ls.http, ls.grpc
	fs, cfg := newServeFlags(envOf(nil))
	if err := fs.Parse([]string{"--public-url", "http://" + httpLis.Addr().String(), "--data-dir", t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveOn(ctx, cfg, slog.New(slog.DiscardHandler), ls) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	base := "http://" + httpLis.Addr().String()
	waitHealthy(t, base, done)
	resp, err := http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health = %d", resp.StatusCode)
	}
	for path, want := range map[string]int{"/signal-pack": 402, "/regime": 402, "/candles?product=XYZ": 400, "/whales": 402, "/demo/regime": 200} {
		resp, err := http.Get(base + path)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s = %v, %v, want %d", path, resp, err, want)
		}
		resp.Body.Close()
	}

	// A paid call end to end: `tollgate pay` against the devnet.
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"pay", base + "/regime"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("pay: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `"regime":`) || !strings.Contains(errOut.String(), "settlement: success=true transaction=0x") {
		t.Errorf("pay printed %q / %q", out.String(), errOut.String())
	}
	var m struct {
		Totals struct{ Paid, Challenges int }
	}
	mresp, err := http.Get(base + "/metrics")
	if err == nil {
		_ = json.NewDecoder(mresp.Body).Decode(&m)
		mresp.Body.Close()
	}
	if m.Totals.Paid != 1 || m.Totals.Challenges < 3 {
		t.Errorf("metrics totals %+v", m.Totals)
	}

	conn, err := grpc.NewClient(grpcLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "tollgate.v1.AnalyticsService"})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health = %v, %v", hc, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, s := range rr.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"tollgate.v1.AnalyticsService", "tollgate.v1.DiscoveryService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(services, want) {
			t.Errorf("reflection lists %q, missing %s", services, want)
		}
	}
	_ = stream.CloseSend()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveOn returned %v after cancel", err)
		}
		done <- nil // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("serveOn did not return after cancel")
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("HTTP still answers after shutdown")
	}
}

func TestDialTarget(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"[::]:9402":      "127.0.0.1:9402",
		"0.0.0.0:9402":   "127.0.0.1:9402",
		"127.0.0.1:9402": "127.0.0.1:9402",
		"10.1.2.3:9402":  "10.1.2.3:9402",
	} {
		addr, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := dialTarget(addr); got != want {
			t.Errorf("dialTarget(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestProductionNeedsPayToAndKey: outside devnet, Tollgate refuses to start
// without a valid receiving address and a way to settle.
func TestProductionNeedsPayToAndKey(t *testing.T) {
	t.Parallel()
	fs, cfg := newServeFlags(envOf(nil))
	if err := fs.Parse([]string{"--chain-rpc", "http://127.0.0.1:1", "--pay-to", "0x123"}); err != nil {
		t.Fatal(err)
	}
	err := cfg.validate()
	if err == nil || !strings.Contains(err.Error(), "--pay-to") || !strings.Contains(err.Error(), "gas key") {
		t.Fatalf("validate = %v", err)
	}
	fs, cfg = newServeFlags(envOf(map[string]string{"TOLLGATE_FACILITATOR_KEY": "0xabc"}))
	if err := fs.Parse([]string{"--chain-rpc", "http://127.0.0.1:1", "--pay-to", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Errorf("a complete production config: %v", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, envOf(nil), &out, io.Discard); !errors.Is(err, flag.ErrHelp) || strings.Contains(out.String(), "0xabc") {
		t.Errorf("help: %v", err)
	}
}

// TestHelpEverywhere: every command's --help (and ledger's and lanes'
// own) prints its usage on stdout, nothing on stderr, and ends in
// flag.ErrHelp (exit 0); serve's lists the environment too. A flag that
// does not parse is one line naming the command's --help.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"pay", "--help"}, {"devnet", "--help"}, {"facilitator", "-h"},
		{"lanes", "--help"}, {"lanes", "import", "--help"}, {"ledger", "--help"}, {"ledger", "help"}, {"ledger", "channels", "--help"},
		{"backtest", "--help"}, {"kronos", "--help"}, {"healthcheck", "--help"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, envOf(nil), &out, &errOut)
		if !errors.Is(err, flag.ErrHelp) || out.Len() == 0 || errOut.Len() != 0 {
			t.Errorf("%q: %v, %d bytes on stdout, stderr %q", args, err, out.Len(), errOut.String())
		}
		if args[0] == "serve" && !strings.Contains(out.String(), "TOLLGATE_PUBLIC_URL") {
			t.Errorf("serve --help lists no environment")
		}
		if args[0] == "kronos" && strings.Count(out.String(), "0.9") != 1 {
			t.Errorf("kronos --help names --top-p's default %d times", strings.Count(out.String(), "0.9"))
		}
	}
	for _, args := range [][]string{{"serve", "--nope"}, {"pay", "--nope", "http://x"}, {"ledger", "list", "--nope"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, envOf(nil), &out, &errOut)
		if err == nil || strings.Count(err.Error(), "\n") > 0 || !strings.Contains(err.Error(), "--help") || out.Len()+errOut.Len() != 0 {
			t.Errorf("%q: %q with %d bytes of output; want one line naming --help", args, err, out.Len()+errOut.Len())
		}
	}
}
