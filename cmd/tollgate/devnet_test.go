package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/store"
)

// startDevnetCmd runs `tollgate devnet --rpc 127.0.0.1:0` in process for
// the rest of the test and returns its JSON-RPC URL, read from its banner.
func startDevnetCmd(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"devnet", "--rpc", "127.0.0.1:0"}, envOf(nil), io.Discard, pw)
		pw.CloseWithError(io.EOF)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tollgate devnet: %v", err)
		}
	})
	rpcLine := regexp.MustCompile(`JSON-RPC (http://\S+)\)`)
	sc := bufio.NewScanner(pr)
	var rpcURL string
	for sc.Scan() {
		if m := rpcLine.FindStringSubmatch(sc.Text()); m != nil {
			rpcURL = m[1]
		}
		if strings.Contains(sc.Text(), "try ") {
			break
		}
	}
	if rpcURL == "" {
		t.Fatalf("tollgate devnet printed no JSON-RPC URL (%v)", sc.Err())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return rpcURL
}

// serveOnDevnet runs serve with --devnet-url on loopback ports (no
// in-process chain) until the end of the test.
func serveOnDevnet(t *testing.T, devnetURL, dataDir string) (*served, error) {
	t.Helper()
	return serveFor(t, []string{"--data-dir", dataDir, "--devnet-url", devnetURL}, nil)
}

// TestSharedDevnet: two servers on one `tollgate devnet`, each with its
// own data dir, take payments settled on that one chain (each with its own
// gas account), list its contracts, and answer /rugcheck and /whales from
// them; their stores record a devnet deployment of that chain.
func TestSharedDevnet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	devnetURL := startDevnetCmd(t)
	desc, err := devnet.Fetch(ctx, http.DefaultClient, devnetURL)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]common.Address{}
	for _, sc := range desc.Scenario {
		byName[sc.Name] = sc.Address
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	var replicas []*served
	for _, dir := range dirs {
		s, err := serveOnDevnet(t, devnetURL, dir)
		if err != nil {
			t.Fatalf("serve --devnet-url: %v", err)
		}
		replicas = append(replicas, s)
	}

	client, err := ethclient.Dial(devnetURL)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	txLine := regexp.MustCompile(`settlement: success=true transaction=(0x[0-9a-f]{64})`)
	senders := map[common.Address]bool{}
	for i, s := range replicas {
		proj, err := tollgatev1.NewDiscoveryServiceClient(s.conn).GetProject(ctx, &tollgatev1.GetProjectRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if proj.GetMode() != "devnet" || !strings.EqualFold(proj.GetTerms().GetAsset(), desc.Token.Address.Hex()) ||
			proj.GetTerms().GetAssetName() != desc.Token.Name || proj.GetTerms().GetAssetVersion() != desc.Token.Version {
			t.Errorf("replica %d: mode %q terms %v, want devnet and the devnet's token %+v", i, proj.GetMode(), proj.GetTerms(), desc.Token)
		}
		if got := byRole(proj, "mintable"); got != byName["mintable"].Hex() || byRole(proj, "dex-factory") != desc.Dex.Factory.Hex() {
			t.Errorf("replica %d lists mintable %s, factory %s; the devnet has %s, %s", i, got, byRole(proj, "dex-factory"), byName["mintable"].Hex(), desc.Dex.Factory.Hex())
		}

		// A paid rug check of one of the devnet's contracts.
		var out, errOut bytes.Buffer
		if err := run(ctx, []string{"pay", s.base + "/rugcheck/" + byName["mintable"].Hex()}, envOf(nil), &out, &errOut); err != nil {
			t.Fatalf("replica %d: pay /rugcheck: %v\n%s", i, err, errOut.String())
		}
		if !strings.Contains(out.String(), `"verdict":"VERDICT_FAIL"`) && !strings.Contains(out.String(), `"verdict":"FAIL"`) {
			t.Errorf("replica %d: /rugcheck of mintable: %s", i, out.String())
		}
		m := txLine.FindStringSubmatch(errOut.String())
		if m == nil {
			t.Fatalf("replica %d: no settlement: %s", i, errOut.String())
		}
		rcpt, err := client.TransactionReceipt(ctx, common.HexToHash(m[1]))
		if err != nil || rcpt.Status != types.ReceiptStatusSuccessful || len(rcpt.Logs) == 0 || rcpt.Logs[0].Address != desc.Token.Address {
			t.Fatalf("replica %d: settlement %s on the shared chain: %+v (%v)", i, m[1], rcpt, err)
		}
		tx, _, err := client.TransactionByHash(ctx, rcpt.TxHash)
		if err != nil {
			t.Fatal(err)
		}
		from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
		if err != nil {
			t.Fatal(err)
		}
		senders[from] = true

		// /whales from the devnet's exchange.
		w := waitWhales(t, tollgatev1.NewAnalyticsServiceClient(s.conn))
		if w.GetTokensScanned() != uint32(len(desc.Dex.Tokens)) {
			t.Errorf("replica %d: whales scanned %d tokens, the devnet launched %d", i, w.GetTokensScanned(), len(desc.Dex.Tokens))
		}
	}
	if len(senders) != 2 {
		t.Errorf("settlements sent from %v: want one gas account per replica", senders)
	}

	for i, s := range replicas {
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		db, err := store.OpenSQLite(ctx, dirs[i])
		if err != nil {
			t.Fatal(err)
		}
		d, _, err := db.Deployment(ctx)
		db.Close()
		want := store.Deployment{Mode: store.ModeDevnet, Network: baseNetwork, Asset: desc.Token.Address.Hex(), Genesis: desc.Genesis.Hex()}
		if err != nil || d != want {
			t.Errorf("replica %d's store is bound to %+v (%v), want %+v", i, d, err, want)
		}
	}
	// A replica restarted on the same devnet keeps its ledger.
	again, err := serveOnDevnet(t, devnetURL, dirs[0])
	if err != nil {
		t.Fatalf("restart on the same devnet: %v", err)
	}
	resp, err := http.Get(again.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var metrics struct{ Totals struct{ Paid int } }
	_ = json.NewDecoder(resp.Body).Decode(&metrics)
	resp.Body.Close()
	if metrics.Totals.Paid != 1 {
		t.Errorf("restarted replica shows %d paid calls, want its 1", metrics.Totals.Paid)
	}
}

// TestDevnetURLRefusesOthers: --devnet-url accepts only a Tollgate devnet
// whose description matches its chain, and never with --chain-rpc.
func TestDevnetURLRefusesOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chain := devnettest.StartChain(t)
	target, err := url.Parse(chain.URL())
	if err != nil {
		t.Fatal(err)
	}
	// lying serves the chain's JSON-RPC with its description edited.
	lying := func(edit func(d *devnet.Description)) string {
		proxy := httputil.NewSingleHostReverseProxy(target)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != devnet.DescriptionPath {
				proxy.ServeHTTP(w, r)
				return
			}
			d := chain.Description()
			edit(d)
			_ = json.NewEncoder(w).Encode(d)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	plainNode := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			w.WriteHeader(http.StatusOK) // go-ethereum answers a bare GET with 200
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(plainNode.Close)
	jsonNotDevnet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"kind":"something-else"}`)
	}))
	t.Cleanup(jsonNotDevnet.Close)

	for _, tt := range []struct {
		name, url string
		want      []string
	}{
		{"a plain node", plainNode.URL, []string{"--devnet-url", "/devnet.json", "HTTP 404", "not a Tollgate devnet"}},
		{"another JSON document", jsonNotDevnet.URL, []string{"does not describe a Tollgate devnet"}},
		{"nothing listening", "http://127.0.0.1:1", []string{"--devnet-url", "/devnet.json"}},
		{"another genesis", lying(func(d *devnet.Description) { d.Genesis = common.HexToHash("0x01") }), []string{"genesis"}},
		{"another token name", lying(func(d *devnet.Description) { d.Token.Name = "Tether" }), []string{`"USD Coin"`, `"Tether"`}},
		{"not a token", lying(func(d *devnet.Description) { d.Token.Address = d.Accounts[0].Address }), []string{"token", "no code"}},
		{"Base's USDC", lying(func(d *devnet.Description) { d.Token.Address = common.HexToAddress(baseUSDC) }), []string{"Base mainnet, not a devnet"}},
		{"a payTo of another key", lying(func(d *devnet.Description) { d.Accounts[1].Address = d.Accounts[0].Address }), []string{"payTo account #1"}},
		{"a contract without code", lying(func(d *devnet.Description) { d.Scenario[0].Address = common.HexToAddress("0x1234") }), []string{"clean", "no code"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := dialDevnet(ctx, tt.url, "http://localhost:8402")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}

	t.Run("serve refuses", func(t *testing.T) {
		t.Parallel()
		if _, err := serveOnDevnet(t, plainNode.URL, t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a Tollgate devnet") {
			t.Errorf("serve on a plain node: %v", err)
		}
	})
	t.Run("flags", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"--devnet-url", chain.URL(), "--chain-rpc", chain.URL(), "--pay-to", prodPayTo},
			{"--devnet-url", "127.0.0.1:8545"},
		} {
			fs, cfg := newServeFlags(envOf(map[string]string{"TOLLGATE_FACILITATOR_KEY": "0xabc"}))
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "--devnet-url") {
				t.Errorf("%v: %v", args, err)
			}
		}
	})
}
