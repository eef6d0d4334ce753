package devnet

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// V4Exchange is Uniswap V4 on the devnet: v4-core's PoolManager and the
// test routers that trade and provide liquidity through it, deployed
// from the npm build (devnet/contracts/prebuilt.txt). The routers pay
// and are paid by their caller: an ERC-20 from the caller's allowance,
// native ETH from the call's value (the rest is refunded).
type V4Exchange struct {
	PoolManager common.Address `json:"poolManager"`
	// SwapRouter is v4-core's PoolSwapTest.
	SwapRouter common.Address `json:"swapRouter"`
	// LiquidityRouter is v4-core's PoolModifyLiquidityTest.
	LiquidityRouter common.Address `json:"liquidityRouter"`
}

// V4PoolKey is Uniswap V4's PoolKey, as its ABI tuple (for the devnet's
// history and for tests driving the PoolManager).
type V4PoolKey struct {
	Currency0, Currency1 common.Address
	Fee, TickSpacing     *big.Int
	Hooks                common.Address
}

// ID is the pool's id in its PoolManager: keccak256(abi.encode(key)).
func (k V4PoolKey) ID() common.Hash {
	word := func(b []byte) []byte { return common.LeftPadBytes(b, 32) }
	return crypto.Keccak256Hash(word(k.Currency0[:]), word(k.Currency1[:]), word(k.Fee.Bytes()), word(k.TickSpacing.Bytes()), word(k.Hooks[:]))
}

// V4ModifyParams is V4's ModifyLiquidityParams.
type V4ModifyParams struct {
	TickLower, TickUpper, LiquidityDelta *big.Int
	Salt                                 [32]byte
}

// v4SwapParams is V4's SwapParams; v4TestSettings PoolSwapTest's
// settings (plain ERC-20 and ETH transfers, no ERC-6909 claims).
type (
	v4SwapParams struct {
		ZeroForOne        bool
		AmountSpecified   *big.Int
		SqrtPriceLimitX96 *big.Int
	}
	v4TestSettings struct{ TakeClaims, SettleUsingBurn bool }
)

// The full tick range of tick spacing 60, and the price limits a swap
// may run to (TickMath's MIN_SQRT_PRICE + 1 and MAX_SQRT_PRICE − 1).
var (
	v4MinTick, v4MaxTick = big.NewInt(-887220), big.NewInt(887220)
	v4MinSqrtLimit       = big.NewInt(4295128740)
	v4MaxSqrtLimit, _    = new(big.Int).SetString("1461446703485210103287273052203988822378723970341", 10)
)

// v4History deploys the V4 exchange and runs its one launch, VAPR, in a
// pool against native ETH (currency0 = 0x0, no hook), as the V2 launches
// run: seeded with 100,000,000 tokens against 20 ETH over the full range,
// buys of 1 ETH, the smart trader out before the deployer pulls all the
// liquidity.
func (c *Chain) v4History(ctx context.Context) error {
	d := c.Accounts[ScenarioAccount]
	ether := func(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }
	manager, managerABI, err := c.deploy(ctx, d, "PoolManager", d.Address)
	if err != nil {
		return err
	}
	swapper, swapABI, err := c.deploy(ctx, d, "PoolSwapTest", manager)
	if err != nil {
		return err
	}
	liquidity, liquidityABI, err := c.deploy(ctx, d, "PoolModifyLiquidityTest", manager)
	if err != nil {
		return err
	}
	c.Dex.V4 = &V4Exchange{PoolManager: manager, SwapRouter: swapper, LiquidityRouter: liquidity}
	modify := overload(liquidityABI, "modifyLiquidity", 3) // (key, params, hookData)

	const name, symbol, fate = "Vapor Four", "VAPR", "rug"
	token, tokenABI, err := c.deploy(ctx, d, "LaunchToken", name, symbol, ether(1_000_000_000))
	if err != nil {
		return err
	}
	key := V4PoolKey{Currency0: common.Address{}, Currency1: token, Fee: big.NewInt(3000), TickSpacing: big.NewInt(60)}
	// 5,000,000 tokens (currency1) per ETH (currency0), as Q64.96.
	sqrtPrice := new(big.Float).SetPrec(256).Sqrt(new(big.Float).SetPrec(256).SetInt64(5_000_000))
	sqrtPriceX96, _ := sqrtPrice.Mul(sqrtPrice, new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96))).Int(nil)
	initialize := callTx(d, manager, managerABI, "initialize", key, sqrtPriceX96)
	if initialize.err != nil {
		return initialize.err
	}
	if _, err := c.send(ctx, d, initialize.to, initialize.data); err != nil {
		return fmt.Errorf("%s: initialize: %w", symbol, err)
	}
	// Full-range liquidity sqrt(tokens · ETH) holds 100,000,000 tokens
	// against 20 ETH at this price; 21 ETH go along, the router refunds
	// what the pool does not take.
	seeded := new(big.Int).Sqrt(new(big.Int).Mul(ether(100_000_000), ether(20)))
	seed := callTx(d, liquidity, liquidityABI, modify, key, V4ModifyParams{v4MinTick, v4MaxTick, seeded, [32]byte{}}, []byte{})
	seed.value, seed.gas = ether(21), v4Gas
	if err := c.sendBlock(ctx, callTx(d, token, tokenABI, "approve", liquidity, ether(100_000_001)), seed); err != nil {
		return fmt.Errorf("%s: seed: %w", symbol, err)
	}

	lt := LaunchedToken{Name: symbol, Token: token, Venue: VenueV4, PoolID: key.ID(), Fate: fate}
	for _, who := range []int{SmartTrader, HolderTrader, crowdFirst, crowdFirst + 1, crowdFirst + 2, LateTrader} {
		a := c.Accounts[who]
		buy := callTx(a, swapper, swapABI, "swap", key, v4SwapParams{true, new(big.Int).Neg(ether(1)), v4MinSqrtLimit}, v4TestSettings{}, []byte{})
		buy.value, buy.gas = ether(1), v4Gas
		if err := c.sendBlock(ctx, buy); err != nil {
			return fmt.Errorf("%s buy by #%d: %w", symbol, who, err)
		}
		lt.Buyers = append(lt.Buyers, a.Address.Hex())
	}
	smart := c.Accounts[SmartTrader]
	bag, err := c.callView(ctx, token, tokenABI, "balanceOf", smart.Address)
	if err != nil {
		return err
	}
	sell := callTx(smart, swapper, swapABI, "swap", key, v4SwapParams{false, new(big.Int).Neg(bag[0].(*big.Int)), v4MaxSqrtLimit}, v4TestSettings{}, []byte{})
	sell.gas = v4Gas
	if err := c.sendBlock(ctx, callTx(smart, token, tokenABI, "approve", swapper, bag[0].(*big.Int)), sell); err != nil {
		return fmt.Errorf("%s sell by #%d: %w", symbol, SmartTrader, err)
	}
	rug := callTx(d, liquidity, liquidityABI, modify, key, V4ModifyParams{v4MinTick, v4MaxTick, new(big.Int).Neg(seeded), [32]byte{}}, []byte{})
	rug.gas = v4Gas
	if err := c.sendBlock(ctx, rug); err != nil {
		return fmt.Errorf("%s: rug: %w", symbol, err)
	}
	c.Dex.Tokens = append(c.Dex.Tokens, lt)
	return nil
}

// v4Gas is the gas limit of a scripted V4 router call: above what any
// takes (the first full-range position, which initialises both its ticks,
// about 930,000).
const v4Gas = 2_000_000

// overload is the name go-ethereum gives the overload of method with
// inputs arguments ("modifyLiquidity", "modifyLiquidity0", ...).
func overload(parsed abi.ABI, method string, inputs int) string {
	for name, m := range parsed.Methods {
		if m.RawName == method && len(m.Inputs) == inputs {
			return name
		}
	}
	return method
}
