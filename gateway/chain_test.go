package gateway_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/whales"
)

// TestChainBodiesMatchTheDocument: live /rugcheck, /token and /whales
// bodies from the devnet validate against the served OpenAPI document, and
// /whales before the first scan is a documented 503.
func TestChainBodiesMatchTheDocument(t *testing.T) {
	t.Parallel()
	dn := devnettest.StartChain(t)
	rc, err := rpc.Dial(dn.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cc, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	wcfg := whales.DefaultConfig()
	wcfg.Factories = []whales.Factory{{Address: dn.Dex.Factory, Kind: whales.UniswapV2}, {Address: dn.Dex.V4.PoolManager, Kind: whales.UniswapV4}}
	wcfg.Quotes, wcfg.Confirmations = []common.Address{dn.Dex.WETH}, 0
	scanner, err := whales.New(rc, wcfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s := newStackWith(t, service.NewAnalytics(service.Sources{Chain: cc, Whales: scanner}), 10*time.Second)
	doc := loadServedDocument(t, s)

	r := s.do(t, "GET", "/whales")
	doc.validateResponse(t, r)
	if r.status != 503 || !strings.Contains(string(r.body), "nothing was charged") {
		t.Errorf("/whales before the scan: %d %s", r.status, r.body)
	}
	if _, err := scanner.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	r = s.do(t, "GET", "/whales")
	doc.validateResponse(t, r)
	var w struct {
		TokensScanned int
		Wallets       []struct{ Address string }
	}
	if err := json.Unmarshal(r.body, &w); err != nil || r.status != 200 || w.TokensScanned != 5 || len(w.Wallets) == 0 {
		t.Errorf("/whales: %d %s", r.status, r.body)
	}
	// MCAT's rug check names its collapsed V2 pair, VAPR's (the last
	// launch) its V4 pool id.
	vapr := dn.Dex.Tokens[len(dn.Dex.Tokens)-1].Token.Hex()
	paths := map[string]int{"/token/" + dn.Dex.Tokens[0].Token.Hex(): 200, "/rugcheck/" + dn.Dex.Tokens[0].Token.Hex(): 200, "/rugcheck/" + vapr: 200}
	for _, sc := range dn.Scenario {
		status := 200
		if sc.Expect == devnet.ExpectRefused { // not a token: a documented 400
			status = 400
		}
		paths["/rugcheck/"+sc.Address.Hex()], paths["/token/"+sc.Address.Hex()] = status, status
	}
	for p, status := range paths {
		r := s.do(t, "GET", p)
		if r.status != status {
			t.Errorf("%s: %d %s, want %d", p, r.status, r.body, status)
		}
		doc.validateResponse(t, r)
	}
}
