package devnet

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
)

// Dex is the devnet's exchanges and their scripted history: a
// Uniswap-V2-style factory with its router and WETH, and Uniswap V4.
type Dex struct {
	Factory common.Address `json:"factory"`
	Router  common.Address `json:"router"`
	WETH    common.Address `json:"weth"`
	// V4 is Uniswap V4 (nil on devnets that predate it).
	V4 *V4Exchange `json:"v4,omitempty"`
	// Tokens launched on them, in launch order, with what happened to them.
	Tokens []LaunchedToken `json:"tokens"`
}

// Venues of LaunchedToken: the whale scan's names for them
// (--dex-factories kinds).
const (
	VenueV2 = "v2" // the V2-style factory
	VenueV4 = "v4" // the V4 PoolManager
)

// LaunchedToken is one token of the trading history.
type LaunchedToken struct {
	Name  string         `json:"name"`
	Token common.Address `json:"token"`
	// Venue is VenueV2 or VenueV4 (empty on devnets that predate V4: V2).
	Venue string `json:"venue,omitempty"`
	// Pair is its V2 pair; PoolID its pool's id in the V4 PoolManager.
	Pair   common.Address `json:"pair,omitzero"`
	PoolID common.Hash    `json:"poolId,omitzero"`
	Fate   string         `json:"fate"` // "rug" (liquidity pulled), "dump" (price collapse) or "alive"
	Buyers []string       `json:"buyers"`
}

// Pool is the token's pool as the whale scan names it: its pair's
// address, or its V4 pool id.
func (t LaunchedToken) Pool() string {
	if t.PoolID != (common.Hash{}) {
		return t.PoolID.Hex()
	}
	return t.Pair.Hex()
}

// Trader roles of the history (test accounts; the crowd is #10-#15).
const (
	SmartTrader  = 2 // early on every launch, out before every collapse
	HolderTrader = 3 // early on every launch, never sells: caught by every collapse
	LuckyTrader  = 4 // early on two launches, out before one collapse only
	LateTrader   = 5 // buys after the early buyers, never early
	crowdFirst   = 10
	crowdSize    = 6
)

// dexHistory runs the scripted trading: four launches, early buyers, exits
// before collapses, two rugs (liquidity removed) and a dump (price down
// over 90 %), one launch that stays alive.
func (c *Chain) dexHistory(ctx context.Context) error {
	d := c.Accounts[ScenarioAccount]
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)
	ether := func(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), unit) }

	deploy := func(name string, args ...any) (common.Address, abi.ABI, error) {
		return c.deploy(ctx, d, name, args...)
	}
	_, pairABI, err := LoadArtifact("MiniPair")
	if err != nil {
		return err
	}
	_, tokenABI, err := LoadArtifact("LaunchToken")
	if err != nil {
		return err
	}
	weth, wethABI, err := deploy("BaseToken", "Wrapped Ether", "WETH", ether(1_000_000))
	if err != nil {
		return err
	}
	factory, factoryABI, err := deploy("MiniFactory")
	if err != nil {
		return err
	}
	traders := []int{SmartTrader, HolderTrader, LuckyTrader, LateTrader}
	for i := range crowdSize {
		traders = append(traders, crowdFirst+i)
	}
	var funding []pendingTx
	for _, i := range traders {
		funding = append(funding, callTx(d, weth, wethABI, "transfer", c.Accounts[i].Address, ether(100)))
	}
	if err := c.sendBlock(ctx, funding...); err != nil {
		return fmt.Errorf("fund traders: %w", err)
	}
	c.Dex = &Dex{Factory: factory, WETH: weth}

	router, routerABI, err := deploy("MiniRouter", factory)
	if err != nil {
		return err
	}
	c.Dex.Router = router
	// swap trades amountIn of `in` for `out` through the router, which
	// pays the pair from who's allowance in the same transaction.
	swap := func(who Account, in, out common.Address, amountIn *big.Int) error {
		inABI := wethABI
		if in != weth {
			inABI = tokenABI
		}
		return c.sendBlock(ctx, callTx(who, in, inABI, "approve", router, amountIn),
			callTx(who, router, routerABI, "swapExact", in, out, amountIn, big.NewInt(0), who.Address))
	}

	type step struct {
		who  int
		sell bool // sell the whole bag; otherwise buy with 1 WETH
	}
	buy := func(who int) step { return step{who: who} }
	sell := func(who int) step { return step{who: who, sell: true} }
	crowd := func(i int) int { return crowdFirst + i }
	launches := []struct {
		name, symbol, fate string
		steps              []step
	}{
		{"Moon Cat", "MCAT", "rug", []step{buy(SmartTrader), buy(HolderTrader), buy(LuckyTrader), buy(crowd(0)), buy(crowd(1)),
			buy(LateTrader), buy(crowd(2)), sell(SmartTrader), sell(LuckyTrader)}},
		{"Rocket Dog", "RDOG", "rug", []step{buy(SmartTrader), buy(HolderTrader), buy(crowd(1)), buy(crowd(2)), buy(crowd(3)),
			buy(LateTrader), sell(SmartTrader)}},
		{"Steady Eddy", "EDDY", "alive", []step{buy(SmartTrader), buy(HolderTrader), buy(crowd(3)), buy(crowd(4)), buy(crowd(5)), buy(LateTrader)}},
		{"Slow Burn", "BURN", "dump", []step{buy(SmartTrader), buy(HolderTrader), buy(LuckyTrader), buy(crowd(4)), buy(crowd(5)),
			buy(LateTrader), sell(SmartTrader)}},
	}
	for _, l := range launches {
		token, _, err := deploy("LaunchToken", l.name, l.symbol, ether(1_000_000_000))
		if err != nil {
			return err
		}
		create := callTx(d, factory, factoryABI, "createPair", token, weth)
		if create.err != nil {
			return create.err
		}
		if _, err := c.send(ctx, d, create.to, create.data); err != nil { // deploys a pair: gas estimated
			return fmt.Errorf("%s: createPair: %w", l.symbol, err)
		}
		out, err := c.callView(ctx, factory, factoryABI, "getPair", token, weth)
		if err != nil {
			return err
		}
		pair := out[0].(common.Address)
		// The deployer seeds the pool: 100,000,000 tokens against 20 WETH.
		if err := c.sendBlock(ctx,
			callTx(d, token, tokenABI, "transfer", pair, ether(100_000_000)),
			callTx(d, weth, wethABI, "transfer", pair, ether(20)),
			callTx(d, pair, pairABI, "mint", d.Address)); err != nil {
			return fmt.Errorf("%s: seed: %w", l.symbol, err)
		}
		lt := LaunchedToken{Name: l.symbol, Token: token, Venue: VenueV2, Pair: pair, Fate: l.fate}
		for _, s := range l.steps {
			who := c.Accounts[s.who]
			if !s.sell {
				if err := swap(who, weth, token, ether(1)); err != nil {
					return fmt.Errorf("%s buy by #%d: %w", l.symbol, s.who, err)
				}
				lt.Buyers = append(lt.Buyers, who.Address.Hex())
				continue
			}
			bag, err := c.callView(ctx, token, tokenABI, "balanceOf", who.Address)
			if err != nil {
				return err
			}
			if err := swap(who, token, weth, bag[0].(*big.Int)); err != nil {
				return fmt.Errorf("%s sell by #%d: %w", l.symbol, s.who, err)
			}
		}
		switch l.fate {
		case "rug": // the deployer pulls the liquidity
			lp, err := c.callView(ctx, pair, pairABI, "balanceOf", d.Address)
			if err != nil {
				return err
			}
			if err := c.sendBlock(ctx, callTx(d, pair, pairABI, "transfer", pair, lp[0].(*big.Int)), callTx(d, pair, pairABI, "burn", d.Address)); err != nil {
				return fmt.Errorf("%s: rug: %w", l.symbol, err)
			}
		case "dump": // the deployer sells a huge bag into the pool
			if err := swap(d, token, weth, ether(800_000_000)); err != nil {
				return fmt.Errorf("%s: dump: %w", l.symbol, err)
			}
		}
		c.Dex.Tokens = append(c.Dex.Tokens, lt)
	}
	return nil
}

// callTx is a scripted call of method on to from `from`; a packing error
// travels in it, for sendTxs to report.
func callTx(from Account, to common.Address, parsed abi.ABI, method string, args ...any) pendingTx {
	data, err := parsed.Pack(method, args...)
	if err != nil {
		err = fmt.Errorf("%s: %w", method, err)
	}
	return pendingTx{from: from, to: &to, data: data, err: err}
}

// callView makes a read-only call and unpacks its outputs.
func (c *Chain) callView(ctx context.Context, to common.Address, parsed abi.ABI, method string, args ...any) ([]any, error) {
	data, err := parsed.Pack(method, args...)
	if err != nil {
		return nil, err
	}
	out, err := c.client.CallContract(ctx, callMsg(to, data), nil)
	if err != nil {
		return nil, err
	}
	return parsed.Unpack(method, out)
}
