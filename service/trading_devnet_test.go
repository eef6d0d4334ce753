package service_test

import (
	"context"
	"maps"
	"math"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet/devnettest"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/trading/tradingtest"
	"github.com/tollgate/tollgate/service/whales"
)

// poolBook is a whale scan's snapshot the test writes: the pools of the
// tokens it deployed.
type poolBook struct {
	mu    sync.Mutex
	pools map[common.Address][]whales.Pool
}

func (b *poolBook) add(token, pair, creator, weth common.Address, created uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pools[token] = []whales.Pool{{ID: pair.Hex(), Holder: pair, Venue: whales.UniswapV2, Creator: creator, Quote: weth, Created: created}}
}

func (b *poolBook) Snapshot() *whales.Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &whales.Snapshot{Pools: maps.Clone(b.pools), Collapses: map[common.Address]whales.Collapse{}}
}

func tokens(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }

// share is 1 − got/of, in percent.
func share(got, of *big.Int) float64 {
	r, _ := new(big.Rat).SetFrac(got, of).Float64()
	return (1 - r) * 100
}

// TestRugCheckTradingOnChain: the fixed-trap catalogue and its controls
// (service/trading/testdata/Traps.sol), each pooled against WETH through
// the genuine Uniswap V2 router, bought and sold through it by a buyer;
// the rug check's taxes are what the chain measured, a token whose sale
// reverts on chain FAILs with the trap's flag and evidence, and a control
// of the same shape that does not bite raises none of the trap flags.
func TestRugCheckTradingOnChain(t *testing.T) {
	t.Parallel()
	d := devnettest.StartChain(t)
	deployer, buyer := d.Account(6), d.Account(7)
	v := tradingtest.UniswapV2(t, d, deployer)
	rc, err := rpc.Dial(d.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cc, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	book := &poolBook{pools: map[common.Address][]whales.Pool{}}
	svc := service.NewAnalytics(service.Sources{Chain: cc, Whales: book})
	past := big.NewInt(1) // an allow-list that expired in 1970
	trapFlags := []string{"extreme-tax", "cannot-sell", "trading-closed", "transfers-paused", "trapping-limit", "sale-locked"}
	type want struct {
		fail     bool     // FAIL; false: not FAIL (the controls have no other power left)
		any      bool     // the verdict is judged by other rules too: not asserted
		flags    []string // among the flags, with their rule
		evidence string   // in some rule's evidence
		sells    bool     // the chain's sale of the bought position passes
		cooldown *uint32
		absent   []string // not among the flags
	}
	twenty := uint32(20)
	cases := []struct {
		contract string
		args     []any
		renounce bool
		want     want
	}{
		{"ConstantSellFee99", nil, false, want{fail: true, flags: []string{"extreme-tax"}, evidence: "sell tax 99", sells: true}},
		{"ConstantSellFee3", nil, false, want{sells: true}},
		{"SellAllowList", []any{[]common.Address{}}, false, want{fail: true, flags: []string{"cannot-sell"}, evidence: "a list keyed by an address"}},
		{"SellAllowListExpiring", []any{[]common.Address{}, past}, false, want{sells: true}},
		{"MaxSellOneToken", nil, false, want{fail: true, flags: []string{"trapping-limit"}, evidence: "largest sale is 1000000000000000000 "}},
		{"MaxSellOnePercent", nil, false, want{sells: true}},
		{"TradingClosedDeadOpener", nil, false, want{fail: true, flags: []string{"trading-closed"}, evidence: "0x000000000000000000000000000000000000dead"}},
		{"TradingOpenedForGood", nil, false, want{sells: true}},
		{"SellLock30Days", nil, false, want{fail: true, flags: []string{"sale-locked"}, evidence: "2592000 s"}},
		{"SellLock20Seconds", nil, false, want{cooldown: &twenty}},
		{"OriginSellGate", nil, false, want{fail: true, flags: []string{"cannot-sell"}}},
		{"PausedToken", nil, true, want{fail: true, flags: []string{"trading-closed"}, evidence: "guards are all gone"}},
		{"UnpausedToken", nil, true, want{sells: true}},
		{"BuyTax5", nil, false, want{sells: true}},
		{"SellTax7", nil, false, want{sells: true}},
		{"BuyTax2SellTax8", nil, false, want{sells: true}},
		{"OwnerTaxes", []any{big.NewInt(300), big.NewInt(400)}, false, want{any: true, sells: true}},
		{"WhitelistHoneypot", []any{[]common.Address{}}, true, want{fail: true, flags: []string{"cannot-sell"}}},
		{"ReflectionToken", []any{big.NewInt(0), big.NewInt(99)}, true, want{fail: true, flags: []string{"extreme-tax"}, sells: true}},
		{"ReflectionToken", []any{big.NewInt(5), big.NewInt(5)}, true, want{sells: true}},
		// Precision: a SafeMoon-style token's own pair (an immutable its
		// _transfer compares the sender with) is no hidden owner, nor are
		// its reward exclusions mints; the 99 % copy FAILs for its tax.
		{"SafeMoonStyle", []any{big.NewInt(0), big.NewInt(99)}, true, want{fail: true, flags: []string{"extreme-tax"}, sells: true, absent: []string{"hidden-owner", "mintable", "seizable"}}},
		{"SafeMoonStyle", []any{big.NewInt(5), big.NewInt(5)}, true, want{sells: true, absent: []string{"hidden-owner", "mintable", "seizable"}}},
		// OpenZeppelin 5's ERC20Votes (with ERC20Permit), pooled: no tax,
		// no trap, no power, fully analysed.
		{"VotesToken", nil, false, want{sells: true, absent: []string{"analysis-incomplete", "high-tax"}}},
	}
	for _, c := range cases {
		name := c.contract
		if len(c.args) > 0 && (c.contract == "ReflectionToken" || c.contract == "SafeMoonStyle") {
			name += "-" + c.args[1].(*big.Int).String()
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append([]any{v.Router}, c.args...)
			if c.contract == "VotesToken" {
				args = nil // a library token: no router, no pair of its own
			}
			token, parsed := v.DeployTrap(t, deployer, c.contract, args...)
			pair := v.AddLiquidity(t, deployer, token, tokens(100_000_000), tokens(10))
			if c.renounce {
				if _, err := d.Transact(context.Background(), deployer, token, parsed.Methods["renounceOwnership"].ID); err != nil {
					t.Fatal(err)
				}
			}
			// The pair was created by the token's constructor, sent by the
			// deployer: the whale scan's creator.
			var head hexutil.Uint64
			if err := rc.Call(&head, "eth_blockNumber"); err != nil {
				t.Fatal(err)
			}
			book.add(token, pair, deployer.Address, v.WETH, uint64(head))
			// The chain's measure: a buy of 0.1 ETH and a sale of what it
			// bought, through the router.
			received, poolSent, buyErr := v.Buy(t, buyer, token, big.NewInt(1e17))
			var poolGot *big.Int
			var sellErr error
			if buyErr == nil {
				_, poolGot, sellErr = v.Sell(t, buyer, token, received)
			}
			r, err := svc.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: token.Hex()})
			if err != nil {
				t.Fatal(err)
			}
			tr := r.GetChecks().GetTrading()
			var evidence []string
			for _, rule := range r.GetChecks().GetRules() {
				evidence = append(evidence, rule.GetFlag()+" ("+rule.GetRule()+"): "+rule.GetEvidence())
			}
			report := strings.Join(evidence, "\n")
			t.Logf("%s %v\ntrading %v\n%s", r.GetVerdict(), r.GetFlags(), tr, report)
			fail := r.GetVerdict() == tollgatev1.Verdict_VERDICT_FAIL
			switch {
			case c.want.any:
			case fail != c.want.fail:
				t.Errorf("verdict %s, want FAIL %v", r.GetVerdict(), c.want.fail)
			}
			for _, f := range c.want.flags {
				if !slices.Contains(r.GetFlags(), f) {
					t.Errorf("no %s among %v", f, r.GetFlags())
				}
			}
			for _, f := range c.want.absent {
				if slices.Contains(r.GetFlags(), f) {
					t.Errorf("%s among the flags", f)
				}
			}
			if !c.want.fail {
				for _, f := range trapFlags {
					if slices.Contains(r.GetFlags(), f) {
						t.Errorf("a control raised %s", f)
					}
				}
			}
			if !strings.Contains(strings.ToLower(report), strings.ToLower(c.want.evidence)) {
				t.Errorf("no %q in the evidence", c.want.evidence)
			}
			if c.want.sells != (buyErr == nil && sellErr == nil) {
				t.Fatalf("the chain: buy %v, sale %v; want the sale to pass %v", buyErr, sellErr, c.want.sells)
			}
			if c.want.cooldown != nil && (tr.GetCooldownSeconds() == nil || tr.GetCooldownSeconds().GetValue() != *c.want.cooldown) {
				t.Errorf("cooldown %v, want %d", tr.GetCooldownSeconds(), *c.want.cooldown)
			}
			// The deployer record, the holders and the liquidity, against
			// the chain: the deployer sent the token's creation; its
			// balance and the pool's liquidity are what the chain holds.
			dep := r.GetChecks().GetDeployer()
			if dep.GetAddress().GetValue() != deployer.Address.Hex() || dep.GetSource() != "creation" {
				t.Errorf("deployer %v (%s), want %s from the creation", dep.GetAddress(), dep.GetSource(), deployer.Address.Hex())
			}
			if got, want := r.GetChecks().GetHolders().GetDeployer().GetBalance(), v.BalanceOf(t, token, deployer.Address).String(); got != want {
				t.Errorf("the deployer's balance %s, the chain %s", got, want)
			}
			if liq := r.GetChecks().GetLiquidity(); len(liq) != 1 || liq[0].GetPool() != pair.Hex() || liq[0].GetDeployerPct() < 99 {
				t.Errorf("liquidity %v, want the deployer holding the pair's LP", liq)
			} else if !slices.Contains(r.GetFlags(), "liquidity-unlocked") {
				t.Errorf("no liquidity-unlocked among %v", r.GetFlags())
			}
			if !c.want.sells {
				return
			}
			// Taxes as the chain measured them; a reflection's sale pays
			// part of its fee back to every holder, the pool included.
			tolerance := 0.01
			if c.contract == "ReflectionToken" || c.contract == "SafeMoonStyle" {
				tolerance = 1
			}
			buyTax, sellTax := share(received, poolSent), share(poolGot, received)
			if c.contract == "SafeMoonStyle" {
				// Its sale first sells the fees it holds into the same
				// pair (swapAndLiquify), which the pair's balance counts;
				// its fee is the same both ways.
				sellTax = buyTax
			}
			if got := tr.GetBuyTaxPct(); got == nil || math.Abs(got.GetValue()-buyTax) > tolerance {
				t.Errorf("buy tax %v, the chain measured %.4f %%", got, buyTax)
			}
			if got := tr.GetSellTaxPct(); got == nil || math.Abs(got.GetValue()-sellTax) > tolerance {
				t.Errorf("sell tax %v, the chain measured %.4f %%", got, sellTax)
			}
		})
	}
}
