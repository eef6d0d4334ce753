package liquidity_test

import (
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/service/liquidity"
	"github.com/tollgate/tollgate/service/whales"
)

// ethDelta is who's native ETH balance change in block.
func (r *run) ethDelta(who common.Address, block uint64) *big.Int {
	r.t.Helper()
	before, err := r.client.BalanceAt(r.ctx, who, new(big.Int).SetUint64(block-1))
	if err != nil {
		r.t.Fatal(err)
	}
	after, err := r.client.BalanceAt(r.ctx, who, new(big.Int).SetUint64(block))
	if err != nil {
		r.t.Fatal(err)
	}
	return after.Sub(after, before)
}

// modifyBlocks are the blocks of a V4 pool's liquidity additions and
// removals, from its PoolManager's ModifyLiquidity logs.
func (r *run) modifyBlocks(manager common.Address, id common.Hash) (adds, removals []uint64) {
	r.t.Helper()
	logs, err := r.client.FilterLogs(r.ctx, ethereum.FilterQuery{Addresses: []common.Address{manager},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte("ModifyLiquidity(bytes32,address,int24,int24,int256,bytes32)"))}, {id}}})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, l := range logs {
		if new(big.Int).SetBytes(l.Data[64:96]).Bit(255) == 1 {
			removals = append(removals, l.BlockNumber)
		} else {
			adds = append(adds, l.BlockNumber)
		}
	}
	return adds, removals
}

// TestUniswapV4 reads V4 pools quoted in native ETH, whose positions a
// router holds (v4-core's PoolModifyLiquidityTest, a sender that is no
// NFT manager: the liquidity is the router's, other): a fresh pool with
// two positions, one partly removed, and the devnet's scripted launch
// whose deployer pulled everything. V4's logs carry no amounts: the
// amounts Read values from liquidity are compared with the ETH the
// PoolManager took and paid.
func TestUniswapV4(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	d := r.c.Account(devnet.ScenarioAccount)

	t.Run("fresh pool", func(t *testing.T) {
		t.Parallel()
		r := r.on(t)
		manager, managerABI := r.deploy(d, "PoolManager", d.Address)
		router, routerABI := r.deploy(d, "PoolModifyLiquidityTest", manager)
		var modify string
		for name, m := range routerABI.Methods {
			if m.RawName == "modifyLiquidity" && len(m.Inputs) == 3 {
				modify = name
			}
		}
		token, _ := r.deploy(d, "LaunchToken", "Four", "FOUR", ether(1_000_000_000))
		created := r.head()
		key := devnet.V4PoolKey{Currency1: token, Fee: big.NewInt(3000), TickSpacing: big.NewInt(60)}
		r.send(d, manager, nil, managerABI, "initialize", key, sqrtPriceX96(token, common.Address{}))
		r.send(d, token, nil, r.erc20, "approve", router, ether(1_000_000_000))
		seed := new(big.Int).Sqrt(new(big.Int).Mul(ether(100_000_000), ether(20)))
		add := func(L *big.Int, salt byte, value *big.Int) uint64 {
			rcpt := r.send(d, router, value, routerABI, modify, key,
				devnet.V4ModifyParams{TickLower: fullLower, TickUpper: fullUpper, LiquidityDelta: L, Salt: [32]byte{31: salt}}, []byte{})
			return rcpt.BlockNumber.Uint64()
		}
		seedBlock := add(seed, 0, ether(21))
		seeded := r.ethDelta(manager, seedBlock)
		add(new(big.Int).Div(seed, big.NewInt(4)), 7, ether(6))
		removeBlock := add(new(big.Int).Neg(new(big.Int).Div(seed, big.NewInt(3))), 0, nil)
		removed := new(big.Int).Neg(r.ethDelta(manager, removeBlock))

		block := r.head()
		got := r.read(liquidity.Input{Token: token, Block: block, Deployer: &d.Address,
			Pools: []liquidity.Pool{{ID: key.ID().Hex(), Venue: whales.UniswapV4, Holder: manager, Created: created}}})[0]
		reserve, err := r.client.BalanceAt(r.ctx, manager, new(big.Int).SetUint64(block))
		if err != nil {
			t.Fatal(err)
		}
		check(t, got, seeded, removed, reserve, shares{Other: 1})
	})

	t.Run("pulled by its deployer", func(t *testing.T) {
		t.Parallel()
		r := r.on(t)
		i := slices.IndexFunc(r.c.Dex.Tokens, func(l devnet.LaunchedToken) bool { return l.Venue == devnet.VenueV4 })
		if i < 0 {
			t.Fatal("the devnet launched no V4 token")
		}
		launch, manager := r.c.Dex.Tokens[i], r.c.Dex.V4.PoolManager
		adds, removals := r.modifyBlocks(manager, launch.PoolID)
		if len(adds) != 1 || len(removals) != 1 {
			t.Fatalf("additions in blocks %v, removals in %v: want one of each", adds, removals)
		}
		seeded := r.ethDelta(manager, adds[0])
		// The PoolManager paid the principal and the fees of the six
		// 1-ETH buys (0.3 % each), which the position had earned.
		removed := new(big.Int).Neg(r.ethDelta(manager, removals[0]))
		removed.Sub(removed, new(big.Int).Mul(big.NewInt(6), big.NewInt(3e15)))

		got := r.read(liquidity.Input{Token: launch.Token, Block: r.head(), Deployer: &d.Address,
			Pools: []liquidity.Pool{{ID: launch.Pool(), Venue: whales.UniswapV4, Holder: manager, Created: 1}}})[0]
		check(t, got, seeded, removed, new(big.Int), shares{})
	})
}

// check compares a V4 pool's answer with the ETH measured; amounts valued
// from liquidity in float64 agree to 1e-9.
func check(t *testing.T, got liquidity.PoolLiquidity, seeded, removed, reserve *big.Int, want shares) {
	t.Helper()
	if !nearInt(got.QuoteAtCreation, seeded, 1e-9) {
		t.Errorf("quote at creation %v, the PoolManager took %v", got.QuoteAtCreation, seeded)
	}
	if !nearInt(got.QuoteRemoved, removed, 1e-9) {
		t.Errorf("quote removed %v, the PoolManager paid %v", got.QuoteRemoved, removed)
	}
	if !nearInt(got.QuoteReserve, reserve, 1e-9) {
		t.Errorf("quote reserve %v, measured %v", got.QuoteReserve, reserve)
	}
	if !sharesOf(got).near(want, 1e-12) || len(got.Locks) != 0 {
		t.Errorf("shares %+v, want %+v; locks %+v", sharesOf(got), want, got.Locks)
	}
	if len(got.Unread) != 1 || !strings.Contains(got.Unread[0], "V4 removals") {
		t.Errorf("unread %q: want the note on V4 removals only", got.Unread)
	}
}
