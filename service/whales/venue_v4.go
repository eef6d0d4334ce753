package whales

import (
	"fmt"
	"math"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// v4Venue is Uniswap V4: every pool lives in the PoolManager (the
// "factory" of --dex-factories v4:<PoolManager>), which emits its logs
// with the pool id as topic1 and holds its tokens.
//
//   - Pools come from Initialize (id, currencies, fee, tick spacing,
//     hooks, the price at creation); native ETH is currency 0x0.
//   - Swap's amounts are the swapper's (negative: paid in), the opposite
//     of the pool's; its sender is a router, or the pool's hook swapping
//     on its own account.
//   - ModifyLiquidity carries a liquidity delta and a tick range, no
//     amounts: the quote it moves is the standard liquidity math at the
//     pool's price of the moment.
//   - Buyers and sellers are the other parties of the token's transfers
//     out of and into the PoolManager in the swap's transaction, never
//     the pool's hook.
type v4Venue struct{}

var (
	v4Initialize      = topic("Initialize(bytes32,address,address,uint24,int24,address,uint160,int24)")
	v4Swap            = topic("Swap(bytes32,address,int128,int128,uint160,uint128,int24,uint24)")
	v4ModifyLiquidity = topic("ModifyLiquidity(bytes32,address,int24,int24,int256,bytes32)")
)

func (v4Venue) creationTopic() common.Hash { return v4Initialize }
func (v4Venue) eventTopics() []common.Hash { return []common.Hash{v4Swap, v4ModifyLiquidity} }
func (v4Venue) singleton() bool            { return true }

// created: Initialize(id, currency0, currency1 indexed; fee, tickSpacing,
// hooks, sqrtPriceX96, tick).
func (v4Venue) created(manager common.Address, l types.Log) (creation, error) {
	w, err := dataWords(l, 5, 4)
	if err != nil {
		return creation{}, err
	}
	return creation{ref: poolRef{emitter: manager, id: l.Topics[1]}, currency0: topicAddress(l.Topics[2]),
		currency1: topicAddress(l.Topics[3]), hooks: common.BigToAddress(w(2)), sqrtPrice: sqrtPrice(w(3))}, nil
}

func (v4Venue) decode(l types.Log, p *pool, tx []types.Log) ([]event, error) {
	switch l.Topics[0] {
	case v4Swap:
		w, err := dataWords(l, 6, 3)
		if err != nil {
			return nil, err
		}
		// The swapper's amounts, negated: the pool's.
		t, q := p.side(new(big.Int).Neg(signed(w(0))), new(big.Int).Neg(signed(w(1))))
		p.sqrtP = sqrtPrice(w(2))
		e := event{kind: evSwap, tokenDelta: t, quoteDelta: q, price: p.quotePrice(p.sqrtP)}
		if sender := topicAddress(l.Topics[2]); sender != p.hooks || p.hooks == (common.Address{}) {
			switch {
			case t.Sign() < 0:
				e.buyer = transferParty(tx, p, true, new(big.Int).Neg(t), p.hooks)
			case t.Sign() > 0:
				e.seller = transferParty(tx, p, false, t, p.hooks)
			}
		} // a hook's own swap is nobody's trade
		return []event{e, {kind: evReserveDelta, quote: q}}, nil
	case v4ModifyLiquidity:
		w, err := dataWords(l, 3, 2)
		if err != nil {
			return nil, err
		}
		lower, upper := int24(w(0)), int24(w(1))
		delta := signed(w(2))
		amount0, amount1 := liquidityAmounts(new(big.Int).Abs(delta), p.sqrtP, lower, upper)
		q := amount1
		if !p.tokenIs0 {
			q = amount0
		}
		if q.Sign() == 0 {
			return nil, nil
		}
		if delta.Sign() > 0 {
			return []event{{kind: evReserveDelta, quote: q}}, nil
		}
		return []event{{kind: evReserveDelta, quote: new(big.Int).Neg(q)}, {kind: evRemove, quote: q}}, nil
	}
	return nil, fmt.Errorf("log %s is no event of this venue", l.Topics[0])
}

// int24 reads an ABI-encoded int24 (sign-extended to 256 bits).
func int24(x *big.Int) int { return int(signed(x).Int64()) }

// liquidityAmounts are the token amounts that liquidity L holds in the
// tick range [lower, upper) at square-root price sqrtP (token1 per
// token0), the standard concentrated-liquidity math (Uniswap V3
// whitepaper, 6.29–6.30): below the range all token0, above it all
// token1, inside it both. Computed in float64 and rounded down: the rule
// it feeds compares a removal with the reserve at 50 %.
func liquidityAmounts(L *big.Int, sqrtP float64, lower, upper int) (amount0, amount1 *big.Int) {
	sa, sb := tickSqrtPrice(lower), tickSqrtPrice(upper)
	l, _ := new(big.Float).SetInt(L).Float64()
	sp := math.Min(math.Max(sqrtP, sa), sb)
	a0 := l * (sb - sp) / (sp * sb)
	a1 := l * (sp - sa)
	return floatAmount(a0), floatAmount(a1)
}

// tickSqrtPrice is sqrt(1.0001^tick).
func tickSqrtPrice(tick int) float64 { return math.Pow(1.0001, float64(tick)/2) }

func floatAmount(f float64) *big.Int {
	if !(f > 0) || math.IsInf(f, 0) {
		return new(big.Int)
	}
	out, _ := new(big.Float).SetFloat64(math.Floor(f)).Int(nil)
	return out
}
