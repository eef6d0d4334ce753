package whales

import (
	"fmt"
	"math"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Kind is the event dialect of a DEX factory and its pools.
type Kind string

// Supported dialects.
const (
	// UniswapV2 is Uniswap V2 and the forks that keep its events
	// (PairCreated, Swap, Sync, Burn).
	UniswapV2 Kind = "v2"
	// UniswapV3 is Uniswap V3 (PoolCreated, Swap with sqrtPriceX96).
	UniswapV3 Kind = "v3"
	// Aerodrome is Aerodrome's classic pools (V2 economics, own signatures).
	Aerodrome Kind = "aerodrome"
)

func topic(sig string) common.Hash { return crypto.Keccak256Hash([]byte(sig)) }

var (
	topicTransfer = topic("Transfer(address,address,uint256)")

	v2PairCreated = topic("PairCreated(address,address,address,uint256)")
	v2Swap        = topic("Swap(address,uint256,uint256,uint256,uint256,address)")
	v2Sync        = topic("Sync(uint112,uint112)")
	v2Burn        = topic("Burn(address,uint256,uint256,address)")

	aeroPoolCreated = topic("PoolCreated(address,address,bool,address,uint256)")
	aeroSwap        = topic("Swap(address,address,uint256,uint256,uint256,uint256)")
	aeroSync        = topic("Sync(uint256,uint256)")
	aeroBurn        = topic("Burn(address,address,uint256,uint256)")

	v3PoolCreated = topic("PoolCreated(address,address,uint24,int24,address)")
	v3Swap        = topic("Swap(address,address,int256,int256,uint160,uint128,int24)")
)

// creationTopic is the pool-creation event of a kind.
func creationTopic(k Kind) common.Hash {
	switch k {
	case UniswapV3:
		return v3PoolCreated
	case Aerodrome:
		return aeroPoolCreated
	}
	return v2PairCreated
}

// poolTopics are the pool events the scanner reads, over every kind.
var poolTopics = []common.Hash{v2Swap, v2Sync, v2Burn, aeroSwap, aeroSync, aeroBurn, v3Swap}

// created decodes a pool-creation log: token0 and token1 are indexed in
// every dialect; the pool address is the first data word (V2, Aerodrome)
// or the second (V3, after tickSpacing).
func created(k Kind, l types.Log) (token0, token1, pool common.Address, err error) {
	if len(l.Topics) < 3 {
		return token0, token1, pool, fmt.Errorf("creation log with %d topics", len(l.Topics))
	}
	word := 0
	if k == UniswapV3 {
		word = 1
	}
	if len(l.Data) < 32*(word+1) {
		return token0, token1, pool, fmt.Errorf("creation log with %d data bytes", len(l.Data))
	}
	return common.BytesToAddress(l.Topics[1][:]), common.BytesToAddress(l.Topics[2][:]),
		common.BytesToAddress(l.Data[32*word : 32*word+32]), nil
}

// event is a pool event reduced to what the rules need.
type event struct {
	kind eventKind
	// swaps: token and quote amounts in (positive) or out (negative) of
	// the pool, in raw units; the recipient of the output.
	tokenDelta, quoteDelta *big.Int
	to                     common.Address
	// price is quote per token after the event (raw units), 0 if unknown.
	price float64
	// burns: quote taken out of the pool, and the quote left after it.
	quoteOut *big.Int
}

type eventKind int

const (
	evSwap eventKind = iota + 1
	evSync
	evBurn
)

// decode reduces a pool log; tokenIs0 says which side is the token. ok is
// false for logs the rules do not use.
func decode(l types.Log, tokenIs0 bool) (e event, ok bool, err error) {
	if len(l.Topics) == 0 {
		return e, false, nil
	}
	word := func(i int) *big.Int { return new(big.Int).SetBytes(l.Data[32*i : 32*i+32]) }
	side := func(a0, a1 *big.Int) (token, quote *big.Int) {
		if tokenIs0 {
			return a0, a1
		}
		return a1, a0
	}
	need := func(words, topics int) error {
		if len(l.Data) < 32*words || len(l.Topics) < topics {
			return fmt.Errorf("log %s: %d data bytes, %d topics", l.Topics[0], len(l.Data), len(l.Topics))
		}
		return nil
	}
	switch l.Topics[0] {
	case v2Swap, aeroSwap:
		if err := need(4, 3); err != nil {
			return e, false, err
		}
		to := l.Topics[2]
		tIn, qIn := side(word(0), word(1))
		tOut, qOut := side(word(2), word(3))
		return event{kind: evSwap, tokenDelta: new(big.Int).Sub(tIn, tOut), quoteDelta: new(big.Int).Sub(qIn, qOut),
			to: common.BytesToAddress(to[:])}, true, nil
	case v3Swap:
		if err := need(5, 3); err != nil {
			return e, false, err
		}
		a0, a1 := signed(word(0)), signed(word(1))
		t, q := side(a0, a1)
		sqrt, _ := new(big.Float).Quo(new(big.Float).SetInt(word(2)), new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96))).Float64()
		p := sqrt * sqrt // token1 per token0
		if !tokenIs0 && p > 0 {
			p = 1 / p
		}
		return event{kind: evSwap, tokenDelta: t, quoteDelta: q, to: common.BytesToAddress(l.Topics[2][:]), price: finite(p)}, true, nil
	case v2Sync, aeroSync:
		if err := need(2, 1); err != nil {
			return e, false, err
		}
		t, q := side(word(0), word(1))
		return event{kind: evSync, price: ratio(q, t), quoteOut: q}, true, nil
	case v2Burn, aeroBurn:
		if err := need(2, 1); err != nil {
			return e, false, err
		}
		_, q := side(word(0), word(1))
		return event{kind: evBurn, quoteOut: q}, true, nil
	}
	return e, false, nil
}

// signed reads a 256-bit two's-complement word.
func signed(x *big.Int) *big.Int {
	if x.Bit(255) == 1 {
		return x.Sub(x, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	return x
}

func ratio(num, den *big.Int) float64 {
	if den.Sign() == 0 {
		return 0
	}
	r, _ := new(big.Float).Quo(new(big.Float).SetInt(num), new(big.Float).SetInt(den)).Float64()
	return finite(r)
}

func finite(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return 0
	}
	return f
}
