package devnet_test

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
)

// TestDescription: a devnet describes itself beside JSON-RPC, the
// description checks out against its chain, and gas accounts are handed
// out one per claim, round robin, funded and derived from the mnemonic.
func TestDescription(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chain, client := devnettest.Start(t)
	d, err := devnet.Fetch(ctx, http.DefaultClient, chain.URL())
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != devnet.Kind || d.ChainID != devnet.ChainID || d.Token.Address != chain.Token || len(d.Scenario) != len(chain.Scenario) || d.Dex == nil ||
		d.Dex.Factory != chain.Dex.Factory || len(d.Dex.Tokens) != len(chain.Dex.Tokens) {
		t.Fatalf("description %+v", d)
	}
	// The V4 exchange and its launch, named by pool id, survive the JSON.
	if d.Dex.V4 == nil || *d.Dex.V4 != *chain.Dex.V4 || fmt.Sprint(d.Dex.Tokens) != fmt.Sprint(chain.Dex.Tokens) {
		t.Errorf("dex %+v %v, the chain's %+v %v", d.Dex.V4, d.Dex.Tokens, chain.Dex.V4, chain.Dex.Tokens)
	}
	if a, ok := d.Account(devnet.RolePayTo); !ok || a.Address != chain.Account(devnet.PayToAccount).Address {
		t.Errorf("payTo %+v", a)
	}
	genesis := func(ctx context.Context) (common.Hash, error) {
		h, err := client.HeaderByNumber(ctx, big.NewInt(0))
		if err != nil {
			return common.Hash{}, err
		}
		return h.Hash(), nil
	}
	tok, err := d.Check(ctx, client, genesis)
	if err != nil {
		t.Fatal(err)
	}
	if tok != (devnet.Token{Address: chain.Token, Name: devnet.TokenName, Symbol: devnet.TokenSymbol, Version: devnet.TokenVersion, Decimals: devnet.TokenDecimals}) {
		t.Errorf("token read from the chain: %+v", tok)
	}
	if b := d.BatchSettlement; b == nil || *b != (devnet.BatchSettlement{Escrow: common.HexToAddress(devnet.BatchSettlementAddress),
		ERC3009DepositCollector: common.HexToAddress(devnet.ERC3009DepositCollectorAddress), Multicall3: common.HexToAddress(devnet.Multicall3Address),
		Name: "x402 Batch Settlement", Version: "1"}) {
		t.Errorf("batchSettlement %+v", b)
	}
	moved := *d
	moved.BatchSettlement = &devnet.BatchSettlement{Escrow: common.HexToAddress("0x4020e07E00000000000000000000000000000003")}
	if _, err := moved.Check(ctx, client, genesis); err == nil || !strings.Contains(err.Error(), "batch-settlement escrow") {
		t.Errorf("a description naming an escrow without code: %v", err)
	}
	movedV4, dex := *d, *d.Dex
	dex.V4 = &devnet.V4Exchange{PoolManager: common.HexToAddress("0x4020e07E00000000000000000000000000000004"), SwapRouter: d.Dex.V4.SwapRouter, LiquidityRouter: d.Dex.V4.LiquidityRouter}
	movedV4.Dex = &dex
	if _, err := movedV4.Check(ctx, client, genesis); err == nil || !strings.Contains(err.Error(), "v4 pool manager") {
		t.Errorf("a description naming a PoolManager without code: %v", err)
	}

	seen := map[common.Address]bool{}
	var first common.Address
	for i := range devnet.GasAccounts + 1 {
		a, index, err := devnet.ClaimGas(ctx, http.DefaultClient, chain.URL())
		if err != nil {
			t.Fatal(err)
		}
		if crypto.PubkeyToAddress(a.Key.PublicKey) != a.Address || index < devnet.FirstGasAccount || index >= devnet.FirstGasAccount+devnet.GasAccounts {
			t.Fatalf("claim %d: #%d %s", i, index, a.Address)
		}
		switch i {
		case 0:
			first = a.Address
			if bal, err := client.BalanceAt(ctx, a.Address, nil); err != nil || bal.Sign() == 0 {
				t.Errorf("gas account %s holds %v ETH (%v)", a.Address, bal, err)
			}
		case devnet.GasAccounts:
			if a.Address != first {
				t.Errorf("claim %d: %s, want the first account again", i, a.Address)
			}
		default:
			if seen[a.Address] {
				t.Errorf("claim %d: %s handed out twice", i, a.Address)
			}
		}
		seen[a.Address] = true
	}

	// The paths answer their method only; JSON-RPC is served as before.
	resp, err := http.Post(chain.URL()+devnet.DescriptionPath, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d", devnet.DescriptionPath, resp.StatusCode)
	}
	if id, err := client.ChainID(ctx); err != nil || id.Int64() != devnet.ChainID {
		t.Errorf("chain id %v (%v)", id, err)
	}
}
