package holders_test

import (
	"context"
	"math"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/holders"
	"github.com/tollgate/tollgate/service/trading/tradingtest"
)

// TestReadOnChain: catalogue tokens (service/trading/testdata) on a
// devnet with a genuine Uniswap V2, each given its holders by real
// transactions: seeded pools, buys and sales through the router, plain
// transfers, a dispersal through Multicall3, a burn to 0x…dEaD. Every
// figure of the answer is held to the balances measured on chain at the
// block read, over every address the test's transactions touched: the
// top holders and their shares, the owner's and the deployer's, the
// excluded and burned, the holder count (exact: the devnet's history is
// short).
func TestReadOnChain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := devnettest.StartChain(t)
	v := tradingtest.UniswapV2(t, c, c.Account(6))
	eth, err := ethclient.Dial(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eth.Close)
	rc, err := rpc.Dial(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	client, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, multicallABI, err := devnet.LoadArtifact("Multicall3")
	if err != nil {
		t.Fatal(err)
	}
	multicall := common.HexToAddress(devnet.Multicall3Address)
	dead := common.HexToAddress("0x000000000000000000000000000000000000dEaD")

	// A scenario deploys a token from its deployer and gives it holders;
	// it returns what the caller of Read would know of it, and every
	// address its transactions credited.
	type scenario struct {
		token   common.Address
		owner   *common.Address
		exclude map[common.Address]string
		touched []common.Address
	}
	cases := []struct {
		name     string
		deployer int
		// fromCreation: Token.From is the block before the deployment
		// (else 0, unknown); supply: Token.Supply is given.
		fromCreation, supply bool
		setUp                func(t *testing.T, d devnet.Account) scenario
		// check asserts what the scenario is about, beyond what every
		// answer is held to.
		check func(t *testing.T, s scenario, got holders.Holders, bal map[common.Address]*big.Int)
	}{
		{
			name: "concentrated: the deployer keeps 90 %", deployer: 7, fromCreation: true,
			setUp: func(t *testing.T, d devnet.Account) scenario {
				token, parsed := v.DeployTrap(t, d, "OwnerTaxes", v.Router, big.NewInt(0), big.NewInt(300))
				pair := v.AddLiquidity(t, d, token, ether(50_000_000), ether(1))
				buyer := c.Account(10)
				got, _, err := v.Buy(t, buyer, token, big.NewInt(1e16))
				if err != nil {
					t.Fatal(err)
				}
				// A sale pays 3 % to the token's own balance.
				if _, _, err := v.Sell(t, buyer, token, new(big.Int).Rsh(got, 1)); err != nil {
					t.Fatal(err)
				}
				transfer(t, c, d, token, parsed, fresh("team"), ether(50_000_000))
				owner := call(t, eth, nil, token, parsed, "owner")[0].(common.Address)
				return scenario{token: token, owner: &owner, exclude: map[common.Address]string{pair: "Uniswap V2 pool"},
					touched: []common.Address{d.Address, pair, buyer.Address, token, fresh("team")}}
			},
			check: func(t *testing.T, s scenario, got holders.Holders, bal map[common.Address]*big.Int) {
				if got.Top[0].Why != "the owner and the deployer" || got.Owner.Share != got.Deployer.Share || got.Owner.Share < 0.89 {
					t.Errorf("top holder %+v, owner %+v, deployer %+v: want the owner-deployer with 90 %%", got.Top[0], got.Owner, got.Deployer)
				}
				if got.Top10Share < 0.9 {
					t.Errorf("top 10 hold %.4f", got.Top10Share)
				}
				i := slices.IndexFunc(got.Top, func(h holders.Holder) bool { return h.Address == s.token })
				if i < 0 || got.Top[i].Why != "the token contract itself" || bal[s.token].Sign() == 0 {
					t.Errorf("the token's own fees (%s) are not a top holder named as such: %+v", bal[s.token], got.Top)
				}
			},
		},
		{
			name: "dispersed: forty holders from one transaction", deployer: 8, supply: true,
			setUp: func(t *testing.T, d devnet.Account) scenario {
				token, parsed := v.DeployTrap(t, d, "ConstantSellFee3", v.Router)
				total := ether(1_000_000_000)
				transfer(t, c, d, token, parsed, multicall, new(big.Int).Sub(total, ether(10_000_000)))
				type call3 struct {
					Target       common.Address
					AllowFailure bool
					CallData     []byte
				}
				var calls []call3
				touched := []common.Address{d.Address, multicall, token}
				left := new(big.Int).Sub(total, ether(10_000_000))
				for i := range 40 {
					to := fresh("holder " + string(rune('A'+i)))
					amount := ether(int64(24_000_000 + 37_500*i))
					if i == 39 {
						amount = left // Multicall3 is left with nothing
					}
					left = new(big.Int).Sub(left, amount)
					data, err := parsed.Pack("transfer", to, amount)
					if err != nil {
						t.Fatal(err)
					}
					calls = append(calls, call3{Target: token, CallData: data})
					touched = append(touched, to)
				}
				data, err := multicallABI.Pack("aggregate3", calls)
				if err != nil {
					t.Fatal(err)
				}
				if rcpt, err := c.Transact(ctx, d, multicall, data); err != nil || rcpt.Status != 1 {
					t.Fatalf("aggregate3: %v", err)
				}
				return scenario{token: token, touched: touched}
			},
			check: func(t *testing.T, s scenario, got holders.Holders, bal map[common.Address]*big.Int) {
				if got.Count != 41 || got.Top10Share > 0.3 || got.Owner != nil {
					t.Errorf("%d holders, top 10 %.4f, owner %+v: want 41, the most of it dispersed, none", got.Count, got.Top10Share, got.Owner)
				}
			},
		},
		{
			name: "exclusions and a burn; the owner renounced", deployer: 2, fromCreation: true,
			setUp: func(t *testing.T, d devnet.Account) scenario {
				token, parsed := v.DeployTrap(t, d, "OwnerTaxes", v.Router, big.NewInt(0), big.NewInt(0))
				pair := v.AddLiquidity(t, d, token, ether(200_000_000), ether(1))
				locker, holder := fresh("locker"), fresh("a holder")
				transfer(t, c, d, token, parsed, dead, ether(300_000_000))
				transfer(t, c, d, token, parsed, locker, ether(100_000_000))
				transfer(t, c, d, token, parsed, holder, ether(50_000_000))
				data, err := parsed.Pack("renounceOwnership")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Transact(ctx, d, token, data); err != nil {
					t.Fatal(err)
				}
				owner := call(t, eth, nil, token, parsed, "owner")[0].(common.Address)
				return scenario{token: token, owner: &owner,
					exclude: map[common.Address]string{pair: "Uniswap V2 pool", locker: "locked until 2027"},
					touched: []common.Address{d.Address, pair, locker, holder, token}}
			},
			check: func(t *testing.T, s scenario, got holders.Holders, bal map[common.Address]*big.Int) {
				if got.Owner != nil {
					t.Errorf("a renounced owner holds %+v", got.Owner)
				}
				if len(got.Burns) != 2 || got.Burns[0].Address != dead || math.Abs(got.Burns[0].Share-0.3) > 1e-9 {
					t.Errorf("burns %+v: want 0x…dEaD with 30 %% of the supply first", got.Burns)
				}
				// The deployer keeps 35 % of the supply: half of what is
				// not burned.
				if math.Abs(got.Deployer.Share-0.5) > 1e-9 || got.Top[0].Address != got.Deployer.Address {
					t.Errorf("deployer %+v, top %+v: want the top holder with half the circulating supply", got.Deployer, got.Top[0])
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := c.Account(tc.deployer)
			before, err := eth.BlockNumber(ctx)
			if err != nil {
				t.Fatal(err)
			}
			s := tc.setUp(t, d)
			block, err := eth.BlockNumber(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tok := holders.Token{Address: s.token, Block: block, Owner: s.owner, Deployer: &d.Address, Exclude: s.exclude}
			if tc.fromCreation {
				tok.From = before
			}
			erc20, at := tradingtest.Catalogue(t)["ConstantSellFee3"].ABI, new(big.Int).SetUint64(block)
			supply := call(t, eth, at, s.token, erc20, "totalSupply")[0].(*big.Int)
			if tc.supply {
				tok.Supply = supply
			}
			got, err := holders.Read(ctx, client, tok)
			if err != nil {
				t.Fatal(err)
			}
			known := append(s.touched, common.Address{}, dead)
			bal := map[common.Address]*big.Int{}
			for _, a := range known {
				bal[a] = call(t, eth, at, s.token, erc20, "balanceOf", a)[0].(*big.Int)
			}
			checkOnChain(t, got, tok, supply, bal)
			tc.check(t, s, got, bal)
			t.Logf("%s: %d logs, top 10 %.4f, %d holders\n%s", tc.name, got.Logs, got.Top10Share, got.Count, got.Note)
		})
	}
}

// checkOnChain holds got to the balances measured at its block (bal: of
// every address the token's history credited, and the burn addresses).
func checkOnChain(t *testing.T, got holders.Holders, tok holders.Token, supply *big.Int, bal map[common.Address]*big.Int) {
	t.Helper()
	burned := new(big.Int).Add(bal[common.Address{}], bal[common.HexToAddress("0x000000000000000000000000000000000000dEaD")])
	circulating := new(big.Int).Sub(supply, burned)
	if got.Supply.Cmp(supply) != 0 || got.Burned.Cmp(burned) != 0 || got.Circulating.Cmp(circulating) != 0 {
		t.Errorf("supply %s, burned %s, circulating %s; measured %s, %s, %s", got.Supply, got.Burned, got.Circulating, supply, burned, circulating)
	}
	share := func(b, of *big.Int) float64 {
		f, _ := new(big.Rat).SetFrac(b, of).Float64()
		return f
	}
	var want []common.Address
	count := uint64(0)
	for a, b := range bal {
		burn := a == (common.Address{}) || a == common.HexToAddress("0x000000000000000000000000000000000000dEaD")
		if _, excluded := tok.Exclude[a]; b.Sign() > 0 && !burn && !excluded {
			want = append(want, a)
		}
		if b.Sign() > 0 && !burn {
			count++
		}
	}
	slices.SortFunc(want, func(a, b common.Address) int {
		if c := bal[b].Cmp(bal[a]); c != 0 {
			return c
		}
		return strings.Compare(a.Hex(), b.Hex())
	})
	want = want[:min(holders.TopN, len(want))]
	if len(got.Top) != len(want) {
		t.Fatalf("%d top holders, measured %d", len(got.Top), len(want))
	}
	sum := 0.0
	for i, h := range got.Top {
		if h.Address != want[i] || h.Balance.Cmp(bal[h.Address]) != 0 || h.Share != share(bal[h.Address], circulating) {
			t.Errorf("top holder %d: %s holds %s (%g); measured %s with %s (%g)", i, h.Address, h.Balance, h.Share, want[i], bal[want[i]], share(bal[want[i]], circulating))
		}
		sum += h.Share
	}
	if math.Abs(sum-got.Top10Share) > 1e-12 {
		t.Errorf("top 10 share %g, measured %g", got.Top10Share, sum)
	}
	if got.Count != count || !got.CountExact || got.Estimated {
		t.Errorf("%d holders (exact %v, estimated %v), measured %d", got.Count, got.CountExact, got.Estimated, count)
	}
	for _, h := range got.Excluded {
		if h.Balance.Cmp(bal[h.Address]) != 0 || h.Share != share(bal[h.Address], circulating) || h.Why != tok.Exclude[h.Address] {
			t.Errorf("excluded %+v; measured %s, why %q", h, bal[h.Address], tok.Exclude[h.Address])
		}
	}
	if len(got.Excluded) != len(tok.Exclude) {
		t.Errorf("%d excluded, want %d", len(got.Excluded), len(tok.Exclude))
	}
	for _, h := range got.Burns {
		if h.Balance.Cmp(bal[h.Address]) != 0 || h.Share != share(bal[h.Address], supply) || h.Why != "burn address" {
			t.Errorf("burn %+v; measured %s", h, bal[h.Address])
		}
	}
	for what, h := range map[string]*holders.Holder{"owner": got.Owner, "deployer": got.Deployer} {
		if h != nil && (h.Balance.Cmp(bal[h.Address]) != 0 || h.Share != share(bal[h.Address], circulating)) {
			t.Errorf("%s %+v; measured %s", what, h, bal[h.Address])
		}
	}
	if got.Deployer == nil || *tok.Deployer != got.Deployer.Address {
		t.Errorf("deployer %+v, want %s", got.Deployer, tok.Deployer)
	}
}

// ether is n tokens of 18 decimals, or n ETH in wei.
func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }

// fresh is an address no key holds, named for the reader.
func fresh(name string) common.Address {
	return common.BytesToAddress(crypto.Keccak256([]byte("holders test: " + name))[12:])
}

// transfer sends amount of token from `from` to `to` on c; a revert
// fails the test.
func transfer(t *testing.T, c *devnet.Chain, from devnet.Account, token common.Address, parsed abi.ABI, to common.Address, amount *big.Int) {
	t.Helper()
	data, err := parsed.Pack("transfer", to, amount)
	if err != nil {
		t.Fatal(err)
	}
	if rcpt, err := c.Transact(context.Background(), from, token, data); err != nil || rcpt.Status != 1 {
		t.Fatalf("transfer %s to %s: %v", amount, to, err)
	}
}

// call makes a read-only call of method on `to` at block (nil: the
// head), and unpacks its outputs.
func call(t *testing.T, eth *ethclient.Client, block *big.Int, to common.Address, parsed abi.ABI, method string, args ...any) []any {
	t.Helper()
	at := block
	data, err := parsed.Pack(method, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := eth.CallContract(context.Background(), ethereum.CallMsg{To: &to, Data: data}, at)
	if err != nil {
		t.Fatalf("%s on %s: %v", method, to, err)
	}
	res, err := parsed.Unpack(method, out)
	if err != nil {
		t.Fatalf("%s on %s: %v", method, to, err)
	}
	return res
}
