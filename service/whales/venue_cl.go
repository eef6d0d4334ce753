package whales

import (
	"fmt"
	"math"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// clVenue is a concentrated-liquidity venue whose pools are their own
// contracts and speak Uniswap V3's events (Uniswap V3, PancakeSwap V3,
// Aerodrome Slipstream): the price at creation from Initialize, trades
// from Swap, liquidity from Mint and Burn with their token amounts.
type clVenue struct{ d clEvents }

// clEvents are what differs between the concentrated-liquidity dialects:
// the factory's creation event (and the data word holding the pool's
// address), and the pool's Swap.
type clEvents struct {
	creation common.Hash
	poolWord int
	swap     common.Hash
	// swapWords is how many data words Swap has (PancakeSwap V3 adds
	// the protocol fees of each side to Uniswap V3's five).
	swapWords int
}

var (
	uniswapV3Dialect = clEvents{
		creation: topic("PoolCreated(address,address,uint24,int24,address)"), poolWord: 1,
		swap: topic("Swap(address,address,int256,int256,uint160,uint128,int24)"), swapWords: 5,
	}
	pancakeV3Dialect = clEvents{
		creation: uniswapV3Dialect.creation, poolWord: 1,
		swap: topic("Swap(address,address,int256,int256,uint160,uint128,int24,uint128,uint128)"), swapWords: 7,
	}
	// Slipstream's CLFactory indexes the tick spacing: the pool is the
	// only data word. Its pools emit Uniswap V3's events.
	slipstreamDialect = clEvents{
		creation: topic("PoolCreated(address,address,int24,address)"), poolWord: 0,
		swap: uniswapV3Dialect.swap, swapWords: 5,
	}

	clInitialize = topic("Initialize(uint160,int24)")
	clMint       = topic("Mint(address,address,int24,int24,uint128,uint256,uint256)")
	clBurn       = topic("Burn(address,int24,int24,uint128,uint256,uint256)")
)

func (v clVenue) creationTopic() common.Hash { return v.d.creation }
func (v clVenue) eventTopics() []common.Hash {
	return []common.Hash{v.d.swap, clInitialize, clMint, clBurn}
}
func (clVenue) singleton() bool { return false }

func (v clVenue) created(_ common.Address, l types.Log) (creation, error) {
	w, err := dataWords(l, v.d.poolWord+1, 3)
	if err != nil {
		return creation{}, err
	}
	return creation{ref: poolRef{emitter: common.BigToAddress(w(v.d.poolWord))},
		currency0: topicAddress(l.Topics[1]), currency1: topicAddress(l.Topics[2])}, nil
}

// decode: amounts are the pool's (positive: into the pool). The quote
// reserve follows every amount in and out; a Burn's amounts are the
// liquidity's principal at the price of the moment (its fees stay owed
// until collected), judged as a removal.
func (v clVenue) decode(l types.Log, p *pool, tx []types.Log) ([]event, error) {
	switch l.Topics[0] {
	case v.d.swap:
		w, err := dataWords(l, v.d.swapWords, 3)
		if err != nil {
			return nil, err
		}
		t, q := p.side(signed(w(0)), signed(w(1)))
		e := event{kind: evSwap, tokenDelta: t, quoteDelta: q, price: p.quotePrice(sqrtPrice(w(2)))}
		e.attribute(topicAddress(l.Topics[2]), tx, p)
		return []event{e, {kind: evReserveDelta, quote: q}}, nil
	case clInitialize:
		w, err := dataWords(l, 2, 1)
		if err != nil {
			return nil, err
		}
		return []event{{kind: evPrice, price: p.quotePrice(sqrtPrice(w(0)))}}, nil
	case clMint:
		w, err := dataWords(l, 4, 4)
		if err != nil {
			return nil, err
		}
		_, q := p.side(w(2), w(3))
		return []event{{kind: evReserveDelta, quote: q}}, nil
	case clBurn:
		w, err := dataWords(l, 3, 4)
		if err != nil {
			return nil, err
		}
		_, q := p.side(w(1), w(2))
		if q.Sign() == 0 {
			return nil, nil // a poke (fees only) or a range holding no quote
		}
		return []event{{kind: evReserveDelta, quote: new(big.Int).Neg(q)}, {kind: evRemove, quote: q}}, nil
	}
	return nil, fmt.Errorf("log %s is no event of this venue", l.Topics[0])
}

// sqrtPrice reads a Q64.96 square-root price as a real number.
func sqrtPrice(x96 *big.Int) float64 {
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(x96), new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96))).Float64()
	return finite(f)
}

// quotePrice turns a square-root price (token1 per token0) into quote per
// token for p.
func (p *pool) quotePrice(sqrtP float64) float64 {
	price := sqrtP * sqrtP
	if !p.tokenIs0 && price > 0 {
		price = 1 / price
	}
	return finite(price)
}

func finite(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	return f
}

func ratio(num, den *big.Int) float64 {
	if den.Sign() == 0 {
		return 0
	}
	r, _ := new(big.Float).Quo(new(big.Float).SetInt(num), new(big.Float).SetInt(den)).Float64()
	return finite(r)
}
