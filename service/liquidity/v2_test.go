package liquidity_test

import (
	"math/big"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/service/liquidity"
	"github.com/tollgate/tollgate/service/trading/tradingtest"
	"github.com/tollgate/tollgate/service/whales"
)

// v2Launch is one token launched on the genuine Uniswap V2 of a test:
// its pair, seeded by the deployer, and what the test measured.
type v2Launch struct {
	*run
	v                *tradingtest.V2
	deployer, owner  devnet.Account
	token, pair      common.Address
	pairABI, router  abi.ABI
	created          uint64
	seededETH        *big.Int
	removedETH       *big.Int // what the pair's WETH reserve lost to removals
	timelock         common.Address
	releaseTime      uint64
	timelockABI      abi.ABI
	timelockBytecode []byte
	minimumLiquidity *big.Int
}

func (l *v2Launch) lp(who common.Address, block *big.Int) *big.Int {
	return l.view(l.pair, l.pairABI, "balanceOf", block, who)[0].(*big.Int)
}

// shareOf is who's share of the pair's LP supply less the minimum
// liquidity, at block.
func (l *v2Launch) shareOf(who common.Address, block *big.Int) float64 {
	supply := l.view(l.pair, l.pairABI, "totalSupply", block)[0].(*big.Int)
	held := l.lp(who, block)
	if who == (common.Address{}) {
		held = new(big.Int).Sub(held, l.minimumLiquidity)
	}
	return ratio(held, new(big.Int).Sub(supply, l.minimumLiquidity))
}

func (l *v2Launch) transferLP(to common.Address, amount *big.Int) {
	l.t.Helper()
	l.send(l.deployer, l.pair, nil, l.pairABI, "transfer", to, amount)
}

// wethReserve is the pair's WETH reserve at block.
func (l *v2Launch) wethReserve(block *big.Int) *big.Int {
	res := l.view(l.pair, l.pairABI, "getReserves", block)
	if l.token.Cmp(l.v.WETH) < 0 {
		return res[1].(*big.Int)
	}
	return res[0].(*big.Int)
}

// pull removes amount of the deployer's liquidity through the router
// and records the WETH the pair's reserve lost.
func (l *v2Launch) pull(amount *big.Int) {
	l.t.Helper()
	l.send(l.deployer, l.pair, nil, l.pairABI, "approve", l.v.Router, amount)
	// The pair writes its price accumulators only in a block after its
	// last update: an estimate made in that block is short of gas.
	l.waitPast(uint64(l.view(l.pair, l.pairABI, "getReserves", nil)[2].(uint32)))
	before := l.wethReserve(nil)
	rcpt := l.send(l.deployer, l.v.Router, nil, l.router, "removeLiquidityETH", l.token, amount, big.NewInt(0), big.NewInt(0), l.deployer.Address, farDeadline)
	l.removedETH.Add(l.removedETH, new(big.Int).Sub(before, l.wethReserve(rcpt.BlockNumber)))
}

// lock moves amount of the deployer's LP tokens into a new LPTimelock
// releasing them to the deployer an hour from now.
func (l *v2Launch) lock(amount *big.Int) {
	l.t.Helper()
	l.releaseTime = l.headTime() + 3600
	ctor, err := l.timelockABI.Pack("", l.pair, l.deployer.Address, new(big.Int).SetUint64(l.releaseTime))
	if err != nil {
		l.t.Fatal(err)
	}
	if l.timelock, err = l.c.DeployCode(l.ctx, l.deployer, append(slices.Clone(l.timelockBytecode), ctor...)); err != nil {
		l.t.Fatal(err)
	}
	l.transferLP(l.timelock, amount)
}

// TestUniswapV2 launches tokens on a genuine Uniswap V2 (WETH9, factory
// and router from their npm builds) and does to each launch's liquidity
// what a deployer does: burn it, keep it, share it, pull it, lock it.
// Each subtest has its own deployer and token on one devnet; what Read
// answers is compared with what the test measured at the block read.
func TestUniswapV2(t *testing.T) {
	t.Parallel()
	r := newRun(t)
	v := tradingtest.UniswapV2(t, r.c, r.c.Account(devnet.ScenarioAccount))
	_, pairABI, err := devnet.LoadArtifact("UniswapV2Pair")
	if err != nil {
		t.Fatal(err)
	}
	_, routerABI, err := devnet.LoadArtifact("UniswapV2Router02")
	if err != nil {
		t.Fatal(err)
	}
	tlABI, tlCode := timelock(t)
	owner := r.c.Account(1)

	for k, tc := range []struct {
		name string
		// fate does to the deployer's LP tokens (all of them: all) what
		// the case is about.
		fate func(l *v2Launch, all *big.Int)
		// want are the shares, from the test's own measures at block.
		want func(l *v2Launch, block *big.Int) shares
		// locked: the case's timelock holds liquidity.
		locked bool
	}{
		{"burned to dead", func(l *v2Launch, all *big.Int) { l.transferLP(dead, all) },
			func(l *v2Launch, b *big.Int) shares { return shares{Burned: l.shareOf(dead, b)} }, false},
		{"held by the deployer", func(l *v2Launch, all *big.Int) {},
			func(l *v2Launch, b *big.Int) shares { return shares{Deployer: l.shareOf(l.deployer.Address, b)} }, false},
		{"shared: deployer, owner, dead, a holder", func(l *v2Launch, all *big.Int) {
			quarter := new(big.Int).Div(all, big.NewInt(4))
			l.transferLP(l.owner.Address, quarter)
			l.transferLP(dead, quarter)
			l.transferLP(l.c.Account(0).Address, new(big.Int).Div(quarter, big.NewInt(2)))
		}, func(l *v2Launch, b *big.Int) shares {
			return shares{Burned: l.shareOf(dead, b), Deployer: l.shareOf(l.deployer.Address, b), Owner: l.shareOf(l.owner.Address, b),
				Other: l.shareOf(l.c.Account(0).Address, b)}
		}, false},
		{"pulled through the router", func(l *v2Launch, all *big.Int) { l.pull(all) },
			func(l *v2Launch, b *big.Int) shares { return shares{} }, false},
		{"partly pulled, the rest burned", func(l *v2Launch, all *big.Int) {
			third := new(big.Int).Div(all, big.NewInt(3))
			l.pull(third)
			l.transferLP(dead, l.lp(l.deployer.Address, nil))
		}, func(l *v2Launch, b *big.Int) shares { return shares{Burned: l.shareOf(dead, b)} }, false},
		{"locked in a timelock, some kept", func(l *v2Launch, all *big.Int) {
			l.lock(new(big.Int).Div(new(big.Int).Mul(all, big.NewInt(9)), big.NewInt(10)))
		}, func(l *v2Launch, b *big.Int) shares {
			return shares{Locked: l.shareOf(l.timelock, b), Deployer: l.shareOf(l.deployer.Address, b)}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rr := r.on(t)
			deployer := r.c.Account(2 + k) // each case its own deployer
			l := &v2Launch{run: rr, v: v, deployer: deployer, owner: owner, pairABI: pairABI, router: routerABI,
				timelockABI: tlABI, timelockBytecode: tlCode, removedETH: new(big.Int), minimumLiquidity: big.NewInt(1000)}
			l.token, _ = rr.deploy(deployer, "LaunchToken", "Liquidity "+tc.name, "LIQ", ether(1_000_000_000))
			l.created = rr.head()
			l.seededETH = ether(10)
			l.pair = v.AddLiquidity(t, deployer, l.token, ether(100_000_000), l.seededETH)
			tc.fate(l, l.lp(deployer.Address, nil))
			block := rr.head()
			at := new(big.Int).SetUint64(block)

			got := rr.read(liquidity.Input{Token: l.token, Block: block, Deployer: &deployer.Address, Owner: &owner.Address,
				Pools: []liquidity.Pool{{ID: l.pair.Hex(), Venue: whales.UniswapV2, Holder: l.pair, Quote: v.WETH, Created: l.created}}})[0]

			if got.ID != l.pair.Hex() || got.Venue != whales.UniswapV2 || got.Time == 0 {
				t.Errorf("pool %s %s at time %d", got.ID, got.Venue, got.Time)
			}
			if got.QuoteAtCreation == nil || got.QuoteAtCreation.Cmp(l.seededETH) != 0 {
				t.Errorf("quote at creation %v, seeded %v", got.QuoteAtCreation, l.seededETH)
			}
			if want := l.wethReserve(at); got.QuoteReserve == nil || got.QuoteReserve.Cmp(want) != 0 {
				t.Errorf("quote reserve %v, the pair's %v", got.QuoteReserve, want)
			}
			if got.QuoteRemoved == nil || got.QuoteRemoved.Cmp(l.removedETH) != 0 {
				t.Errorf("quote removed %v, the pair lost %v", got.QuoteRemoved, l.removedETH)
			}
			want := tc.want(l, at)
			if sum := want.Burned + want.Locked + want.Deployer + want.Owner + want.Other; sum > 0 && sum < 1-1e-12 {
				t.Fatalf("the case's shares sum to %g: a holder is missing from want", sum)
			}
			if !sharesOf(got).near(want, 1e-12) {
				t.Errorf("shares %+v, measured %+v (unread %q)", sharesOf(got), want, got.Unread)
			}
			if !tc.locked {
				if len(got.Locks) != 0 {
					t.Errorf("locks %+v, none made", got.Locks)
				}
				return
			}
			wantLock := liquidity.Lock{Locker: l.timelock, Name: "releaseTime()", Share: l.shareOf(l.timelock, at), Until: l.releaseTime}
			if len(got.Locks) != 1 || !near(got.Locks[0].Share, wantLock.Share, 1e-12) || got.Locks[0].Locker != wantLock.Locker ||
				got.Locks[0].Name != wantLock.Name || got.Locks[0].Recognised || got.Locks[0].Until != wantLock.Until || got.Locks[0].Expired {
				t.Errorf("locks %+v, want %+v", got.Locks, wantLock)
			}
			if onChain := rr.view(l.timelock, tlABI, "releaseTime", at)[0].(*big.Int); onChain.Uint64() != got.Locks[0].Until {
				t.Errorf("release time %d, the timelock's %d", got.Locks[0].Until, onChain)
			}
		})
	}
}
