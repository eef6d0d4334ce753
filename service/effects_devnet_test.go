package service_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"maps"
	"math/big"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet/devnettest"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/chain"
)

// catalogueBuild is the renamed-power catalogue as solc 0.8 builds it with
// the optimizer (service/bytecode/testdata/effects).
type catalogueBuild struct {
	Contracts map[string]struct {
		ABI      json.RawMessage
		Bytecode string
	}
}

// TestRugCheckPowersOnChain: renamed powers deployed on a devnet and
// checked through the service: the guard fields are read from the
// token's storage at the inspected block (a packed switch beside its
// owner, a private second owner, an immutable), so the same code FAILs
// while its guard is live and not once it is gone, with the function, the
// effect and the guard's value as evidence. An OpenZeppelin 4.9 UUPS
// implementation is no unresolved proxy.
func TestRugCheckPowersOnChain(t *testing.T) {
	t.Parallel()
	build := catalogueBuild{Contracts: map[string]struct {
		ABI      json.RawMessage
		Bytecode string
	}{}}
	for _, f := range []string{"bytecode/testdata/effects/0.8-optimized.json", "bytecode/testdata/launchpads/clanker.json"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var b catalogueBuild
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		maps.Copy(build.Contracts, b.Contracts)
	}
	d := devnettest.StartChain(t)
	ctx := context.Background()
	deployer, dev := d.Account(6), d.Account(7)
	dead := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	// ClankerToken(name, symbol, maxSupply, admin, image, metadata,
	// context, initialSupplyChainId): the supply is minted on Base.
	clanker := func(admin common.Address) []any {
		return []any{"Clanked", "CLNK", new(big.Int).Exp(big.NewInt(10), big.NewInt(29), nil), admin, "ipfs://image", "{}", "{}", big.NewInt(8453)}
	}
	type token struct {
		name, contract string
		args           []any
		renounce       bool // the deployer calls renounceOwnership() after
		verdict        string
		flags          []string // among the flags
		absent         []string
		evidence       string // in some rule's evidence
	}
	tokens := []token{
		{"hidden farm, dev live", "HiddenFarm", []any{dev.Address}, false, "FAIL",
			[]string{"mintable", "hidden-owner", "owner-renounced"}, nil, strings.ToLower(dev.Address.Hex())},
		{"hidden farm, dev zero", "HiddenFarm", []any{common.Address{}}, false, "WARN",
			[]string{"mintable", "owner-renounced"}, []string{"hidden-owner"}, "every guard is gone"},
		{"fake renounce", "FakeRenounce", []any{dev.Address}, true, "FAIL",
			[]string{"fee-setter", "hidden-owner", "fake-renounce", "owner-renounced"}, nil, "does not clear slot 0x4"},
		{"packed switch, owner live", "Halt", nil, false, "FAIL",
			[]string{"trading-switch", "owner-active"}, []string{"hidden-owner"}, "slot 0x3 (bits from 160)"},
		{"packed switch, renounced", "Halt", nil, true, "WARN",
			[]string{"trading-switch", "owner-renounced"}, nil, "every guard is gone"},
		{"immutable minter", "ImmutableFarm", []any{dev.Address}, false, "FAIL",
			[]string{"mintable", "hidden-owner"}, nil, strings.ToLower(dev.Address.Hex()[2:])},
		{"immutable minter dead", "ImmutableFarm", []any{dead}, false, "WARN",
			[]string{"mintable"}, []string{"hidden-owner"}, "every guard is gone"},
		// Clanker's tokens from its SDK (v4 is an ERC-7802 SuperchainERC20:
		// the SuperchainTokenBridge alone mints, for supply burnt on another
		// chain): no owner power, PASS.
		{"clanker v3.1", "ClankerToken_v3_1", clanker(dev.Address), false, "PASS", nil, []string{"mintable", "hidden-owner"}, ""},
		{"clanker v4", "ClankerToken_v4", clanker(dev.Address), false, "PASS", nil, []string{"mintable", "hidden-owner"}, ""},
		// OpenZeppelin 4.9's UUPS implementation, checked itself: its one
		// DELEGATECALL runs the implementation upgradeToAndCall is passed.
		{"uups implementation", "UUPSToken", nil, false, "WARN",
			[]string{"upgradeable"}, []string{"unresolved-proxy"}, "upgradeTo"},
	}
	addrs := make([]common.Address, len(tokens))
	var wg sync.WaitGroup
	for i, tk := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := build.Contracts[tk.contract]
			parsed, err := abi.JSON(strings.NewReader(string(c.ABI)))
			if err != nil {
				t.Error(err)
				return
			}
			args, err := parsed.Pack("", tk.args...)
			if err != nil {
				t.Error(err)
				return
			}
			code, err := hex.DecodeString(strings.TrimPrefix(c.Bytecode, "0x"))
			if err != nil {
				t.Error(err)
				return
			}
			if addrs[i], err = d.DeployCode(ctx, deployer, append(code, args...)); err != nil {
				t.Errorf("%s: %v", tk.name, err)
				return
			}
			if tk.renounce {
				if _, err := d.Transact(ctx, deployer, addrs[i], parsed.Methods["renounceOwnership"].ID); err != nil {
					t.Errorf("%s: renounce: %v", tk.name, err)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	rc, err := rpc.Dial(d.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cc, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	svc := service.NewAnalytics(service.Sources{Chain: cc})
	for i, tk := range tokens {
		r, err := svc.GetRugCheck(ctx, &tollgatev1.GetRugCheckRequest{Addr: addrs[i].Hex()})
		if err != nil {
			t.Fatalf("%s: %v", tk.name, err)
		}
		verdict := strings.TrimPrefix(r.GetVerdict().String(), "VERDICT_")
		var evidence []string
		for _, rule := range r.GetChecks().GetRules() {
			evidence = append(evidence, rule.GetFlag()+": "+rule.GetEvidence())
		}
		if verdict != tk.verdict {
			t.Errorf("%s: %s %v, want %s", tk.name, verdict, evidence, tk.verdict)
		}
		for _, f := range tk.flags {
			if !slices.Contains(r.GetFlags(), f) {
				t.Errorf("%s: no %s in %v", tk.name, f, r.GetFlags())
			}
		}
		for _, f := range tk.absent {
			if slices.Contains(r.GetFlags(), f) {
				t.Errorf("%s: %s in %v", tk.name, f, evidence)
			}
		}
		if !strings.Contains(strings.ToLower(strings.Join(evidence, "\n")), strings.ToLower(tk.evidence)) {
			t.Errorf("%s: no %q in the evidence %v", tk.name, tk.evidence, evidence)
		}
	}
}
