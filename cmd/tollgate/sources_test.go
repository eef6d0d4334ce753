package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/market/markettest"
	"github.com/tollgate/tollgate/store"
)

const prodPayTo = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"

// TestMarketFeedChoice: devnet defaults to the synthetic feeds; outside
// devnet the real upstreams are the default, and a synthetic feed is
// refused unless --synthetic-market-data asks for it.
func TestMarketFeedChoice(t *testing.T) {
	t.Parallel()
	prod := []string{"--chain-rpc", "http://127.0.0.1:1", "--pay-to", prodPayTo}
	key := map[string]string{"TOLLGATE_FACILITATOR_KEY": "0xabc"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	const synthetic = ""
	tests := []struct {
		name              string
		args              []string
		env               map[string]string
		candles, equities string // resolved URL; "" is the synthetic feed
		err               []string
	}{
		{name: "devnet, no flags", candles: synthetic, equities: synthetic},
		{name: "devnet, real candles", args: []string{"--candles-url", "http://exchange.test"}, candles: "http://exchange.test", equities: synthetic},
		{name: "devnet, synthetic named", args: []string{"--candles-url", "synthetic"}, candles: synthetic, equities: synthetic},
		{name: "production, no market flags", args: prod, env: key, candles: coinbaseExchangeURL, equities: yahooChartURL},
		{name: "production, own upstreams", args: append([]string{"--candles-url", "https://cb.test", "--equities-url", "https://yh.test"}, prod...), env: key,
			candles: "https://cb.test", equities: "https://yh.test"},
		{name: "production, synthetic candles refused", args: append([]string{"--candles-url", "synthetic"}, prod...), env: key,
			err: []string{"--candles-url synthetic", "--synthetic-market-data", "TOLLGATE_SYNTHETIC_MARKET_DATA"}},
		{name: "production, synthetic equities from env refused", args: prod, env: with(key, "TOLLGATE_EQUITIES_URL", "synthetic"),
			err: []string{"--equities-url synthetic", "--synthetic-market-data"}},
		{name: "production, synthetic by flag", args: append([]string{"--synthetic-market-data"}, prod...), env: key, candles: synthetic, equities: synthetic},
		{name: "production, synthetic by env", args: prod, env: with(key, "TOLLGATE_SYNTHETIC_MARKET_DATA", "true"), candles: synthetic, equities: synthetic},
		{name: "production, synthetic named and allowed", args: append([]string{"--synthetic-market-data", "--candles-url", "synthetic"}, prod...), env: key,
			candles: synthetic, equities: synthetic},
		{name: "production, flag with a real candle feed", args: append([]string{"--synthetic-market-data", "--candles-url", "https://cb.test"}, prod...), env: key,
			candles: "https://cb.test", equities: synthetic},
		{name: "not a URL", args: []string{"--equities-url", "query1.finance.yahoo.com"}, err: []string{"--equities-url", "absolute http(s) URL"}},
		{name: "flag env does not parse", env: map[string]string{"TOLLGATE_SYNTHETIC_MARKET_DATA": "perhaps"}, err: []string{"TOLLGATE_SYNTHETIC_MARKET_DATA"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs, cfg := newServeFlags(envOf(tt.env))
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := cfg.validate()
			if tt.err != nil {
				if err == nil {
					t.Fatalf("validate accepted it: candles %+v equities %+v", cfg.candles, cfg.equities)
				}
				for _, want := range tt.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.candles.url != tt.candles || cfg.equities.url != tt.equities {
				t.Errorf("candles %q equities %q, want %q %q", cfg.candles.url, cfg.equities.url, tt.candles, tt.equities)
			}
		})
	}
}

// TestDataDirDefaults: devnet and production state live apart by
// default, and ledger and lanes find serve's store under the same
// environment.
func TestDataDirDefaults(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, nil, "data/devnet"},
		{map[string]string{"TOLLGATE_CHAIN_RPC": "http://127.0.0.1:1", "TOLLGATE_PAY_TO": prodPayTo, "TOLLGATE_FACILITATOR_KEY": "0xabc"}, nil, "data"},
		{map[string]string{"TOLLGATE_DATA_DIR": "/var/lib/tollgate"}, nil, "/var/lib/tollgate"},
	} {
		fs, cfg := newServeFlags(envOf(tt.env))
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		if cfg.DataDir != tt.want || serveDataDir(envOf(tt.env)) != tt.want {
			t.Errorf("env %v: serve uses %q, ledger and lanes %q, want %q", tt.env, cfg.DataDir, serveDataDir(envOf(tt.env)), tt.want)
		}
	}
}

// served is one serveOn in process that a test can stop and restart.
type served struct {
	base      string
	admin     string // the operator listener's URL
	grpc      string // the private listener's address
	devnetRPC string // the devnet's JSON-RPC URL; empty outside devnet mode
	conn      *grpc.ClientConn
	stop      func() error
}

// serveFor runs serve with args and env on loopback ports until stop or
// the end of the test. err is serveOn's result when it fails to start.
func serveFor(t testing.TB, args []string, env map[string]string) (*served, error) {
	t.Helper()
	var ls listeners
	binds := []*net.Listener{&ls.http, &ls.grpc, &ls.admin}
	if env["TOLLGATE_FACILITATOR_KEY"] == "" && !slices.Contains(args, "--devnet-url") {
		binds = append(binds, &ls.devnet) // the in-process chain's
	}
	for _, l := range binds {
		var err error
		if *l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	base := "http://" + ls.http.Addr().String()
	fs, cfg := newServeFlags(envOf(env))
	if err := fs.Parse(append([]string{"--public-url", base}, args...)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveOn(ctx, cfg, slog.New(slog.DiscardHandler), ls) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-done:
			cancel()
			if ls.devnet != nil {
				ls.devnet.Close()
			}
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("server did not come up within 60 s")
		}
	}
	conn, err := grpc.NewClient(ls.grpc.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	s := &served{base: base, admin: "http://" + ls.admin.Addr().String(), grpc: ls.grpc.Addr().String(), conn: conn, stop: func() error {
		if stopped {
			return nil
		}
		stopped = true
		conn.Close()
		cancel()
		return <-done
	}}
	if ls.devnet != nil {
		s.devnetRPC = "http://" + ls.devnet.Addr().String()
	}
	t.Cleanup(func() { _ = s.stop() })
	return s, nil
}

// productionOn returns the flags and environment of a production serve
// whose chain is a throwaway devnet (chain id 8453).
func productionOn(t *testing.T, chain *devnet.Chain, dataDir string, extra ...string) ([]string, map[string]string) {
	t.Helper()
	key := fmt.Sprintf("%x", crypto.FromECDSA(chain.Account(devnet.FacilitatorAccount).Key))
	return append([]string{"--chain-rpc", chain.URL(), "--pay-to", prodPayTo, "--data-dir", dataDir, "--whale-confirmations", "0"}, extra...),
		map[string]string{"TOLLGATE_FACILITATOR_KEY": key}
}

// TestSyntheticOutsideDevnetIsNamed: with --synthetic-market-data a
// production server serves the synthetic feeds, and /tollgate and every
// market answer say so; a real feed beside it is named as real.
func TestSyntheticOutsideDevnetIsNamed(t *testing.T) {
	t.Parallel()
	chain := devnettest.StartChain(t)
	x := markettest.NewExchange(t)
	now := time.Now().UTC()
	x.Seed(t, "ETH-USD", time.Hour, now.Add(-800*time.Hour), now)
	ctx := context.Background()

	type source struct {
		Kind, Name, Description string
		Synthetic               bool
	}
	project := func(s *served) map[string]source {
		resp, err := http.Get(s.base + "/tollgate")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct {
			Mode    string
			Sources []source
		}
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		out := map[string]source{"mode": {Name: p.Mode}}
		for _, src := range p.Sources {
			out[src.Kind] = src
		}
		return out
	}

	// Both feeds synthetic, by the flag.
	args, env := productionOn(t, chain, t.TempDir(), "--synthetic-market-data")
	s, err := serveFor(t, args, env)
	if err != nil {
		t.Fatal(err)
	}
	srcs := project(s)
	for _, kind := range []string{"candles", "equities"} {
		if src := srcs[kind]; src.Name != "devnet-synthetic" || !src.Synthetic || !strings.Contains(src.Description, "--synthetic-market-data") {
			t.Errorf("/tollgate %s source %+v: want devnet-synthetic, synthetic, naming the flag", kind, src)
		}
	}
	cl := tollgatev1.NewAnalyticsServiceClient(s.conn) // the private listener: no payment
	r, err := cl.GetRegime(ctx, &tollgatev1.GetRegimeRequest{})
	if err != nil || r.GetSource() != "devnet-synthetic" {
		t.Errorf("/regime source %q (%v)", r.GetSource(), err)
	}
	p, err := cl.GetSignalPack(ctx, &tollgatev1.GetSignalPackRequest{})
	if err != nil || p.GetInputs().GetSource() != "devnet-synthetic" || !p.GetInputs().GetSynthetic() {
		t.Errorf("/signal-pack inputs %v (%v)", p.GetInputs(), err)
	}
	c, err := cl.GetCandles(ctx, &tollgatev1.GetCandlesRequest{Product: proto.String("ETH-USD"), Granularity: proto.Int32(3600)})
	if err != nil || c.GetSource() != "devnet-synthetic" {
		t.Errorf("/candles source %q (%v)", c.GetSource(), err)
	}
	f, err := cl.GetForecast(ctx, &tollgatev1.GetForecastRequest{Product: proto.String("RELIANCE.NS"), PredLen: proto.Int32(12)})
	if err != nil || f.GetSource() != "devnet-synthetic" || !f.GetSynthetic() {
		t.Errorf("/forecast of an equity: source %q synthetic %v (%v)", f.GetSource(), f.GetSynthetic(), err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	// Real candles from a local exchange; equities still synthetic.
	args, env = productionOn(t, chain, t.TempDir(), "--synthetic-market-data", "--candles-url", x.URL)
	s, err = serveFor(t, args, env)
	if err != nil {
		t.Fatal(err)
	}
	srcs = project(s)
	if c := srcs["candles"]; c.Name != "coinbase-exchange" || c.Synthetic || !strings.Contains(c.Description, x.URL) {
		t.Errorf("/tollgate candles %+v", c)
	}
	if e := srcs["equities"]; !e.Synthetic {
		t.Errorf("/tollgate equities %+v", e)
	}
	cl = tollgatev1.NewAnalyticsServiceClient(s.conn)
	p, err = cl.GetSignalPack(ctx, &tollgatev1.GetSignalPackRequest{})
	if err != nil || p.GetInputs().GetSource() != "coinbase-exchange" || p.GetInputs().GetSynthetic() {
		t.Errorf("/signal-pack inputs %v (%v)", p.GetInputs(), err)
	}
	sig, err := cl.GetSignal(ctx, &tollgatev1.GetSignalRequest{Product: proto.String("ETH-USD")})
	if err != nil || sig.GetSource() != "coinbase-exchange" || sig.GetSynthetic() {
		t.Errorf("/signal source %q synthetic %v (%v)", sig.GetSource(), sig.GetSynthetic(), err)
	}
	f, err = cl.GetForecast(ctx, &tollgatev1.GetForecastRequest{Product: proto.String("ETH-USD"), PredLen: proto.Int32(12)})
	if err != nil || f.GetSource() != "coinbase-exchange" || f.GetSynthetic() {
		t.Errorf("/forecast source %q synthetic %v (%v)", f.GetSource(), f.GetSynthetic(), err)
	}
	last, _ := time.Parse(time.RFC3339, p.GetInputs().GetLastCandle())
	if !last.Equal(now.Truncate(time.Hour).Add(-time.Hour)) {
		t.Errorf("last candle %s", p.GetInputs().GetLastCandle())
	}
}

// TestLedgerBelongsToItsChain: a devnet restart starts an empty ledger
// and puts the previous run's aside in previous/; a production store is
// never opened by devnet mode, nor a devnet store by production.
func TestLedgerBelongsToItsChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	devDir := filepath.Join(t.TempDir(), "devnet")
	paid := func(s *served) int {
		resp, err := http.Get(s.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct{ Totals struct{ Paid int } }
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m.Totals.Paid
	}
	boundTo := func(dir string) store.Deployment {
		db, err := store.OpenSQLite(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		d, _, err := db.Deployment(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	first, err := serveFor(t, []string{"--data-dir", devDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"pay", first.base + "/regime"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("pay: %v\n%s", err, errOut.String())
	}
	if n := paid(first); n != 1 {
		t.Fatalf("first run: %d paid", n)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	firstRun := boundTo(devDir)
	if firstRun.Mode != store.ModeDevnet || firstRun.Genesis == "" {
		t.Fatalf("first run's store bound to %+v", firstRun)
	}

	second, err := serveFor(t, []string{"--data-dir", devDir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := paid(second); n != 0 {
		t.Errorf("a devnet restart shows %d paid calls of the previous chain", n)
	}
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	if d := boundTo(devDir); d.Genesis == firstRun.Genesis {
		t.Errorf("second run kept the first run's genesis %s", d.Genesis)
	}
	if d := boundTo(filepath.Join(devDir, "previous")); d != firstRun {
		t.Errorf("previous/ holds %+v, want the first run's store", d)
	}
	out.Reset()
	if err := run(ctx, []string{"ledger", "list", "--data-dir", filepath.Join(devDir, "previous")}, envOf(nil), &out, &errOut); err != nil ||
		!strings.Contains(out.String(), "1 settled") {
		t.Errorf("ledger list of previous/: %v\n%s", err, out.String())
	}

	// Production on a chain, then devnet on its store, then production on
	// a devnet store: all refused, saying why.
	chain := devnettest.StartChain(t)
	prodDir := t.TempDir()
	args, env := productionOn(t, chain, prodDir)
	prod, err := serveFor(t, args, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := serveFor(t, []string{"--data-dir", prodDir}, nil); err == nil || !strings.Contains(err.Error(), "production") ||
		!strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("devnet on a production store: %v", err)
	}
	args, env = productionOn(t, chain, devDir)
	if _, err := serveFor(t, args, env); err == nil || !strings.Contains(err.Error(), "devnet") {
		t.Errorf("production on a devnet store: %v", err)
	}
	if d := boundTo(prodDir); d.Mode != store.ModeProduction {
		t.Errorf("production store now bound to %+v", d)
	}
	// reconcile refuses a chain that is not the store's.
	other := devnettest.StartChain(t)
	err = run(ctx, []string{"ledger", "reconcile", "--data-dir", prodDir, "--chain-rpc", other.URL()}, envOf(nil), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "genesis") {
		t.Errorf("reconcile against another chain: %v", err)
	}
}
