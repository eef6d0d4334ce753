package liquidity

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
)

// batch is the one batch of calls a Read confirms its findings with, all
// at one block.
type batch struct {
	block string
	elems []rpc.BatchElem
	rets  []*hexutil.Bytes
	// essential are the calls on the pools themselves: a node failing
	// one (not a revert) fails the Read.
	essential []int
}

// call adds an eth_call of data on `to` and returns its index.
func (b *batch) call(to common.Address, data []byte) int {
	ret := new(hexutil.Bytes)
	b.elems = append(b.elems, rpc.BatchElem{Method: "eth_call",
		Args: []any{map[string]any{"to": to, "data": hexutil.Bytes(data)}, b.block}, Result: ret})
	b.rets = append(b.rets, ret)
	return len(b.elems) - 1
}

// must adds an essential call (see batch.essential).
func (b *batch) must(to common.Address, data []byte) int {
	i := b.call(to, data)
	b.essential = append(b.essential, i)
	return i
}

// failed is the first essential call the node failed to run.
func (b *batch) failed() error {
	for _, i := range b.essential {
		if err := b.elems[i].Error; err != nil && !reverted(err) {
			return fmt.Errorf("%w: eth_call %d: %v", chain.ErrUnavailable, i, err)
		}
	}
	return nil
}

// result is what call i returned; its error is the call's own (a revert,
// or the node's). An index below 0 is a call not made.
func (b *batch) result(i int) ([]byte, error) {
	if i < 0 {
		return nil, errNotCalled
	}
	if e := b.elems[i].Error; e != nil {
		return nil, e
	}
	return *b.rets[i], nil
}

// word is word w of call i's return data, nil when the call failed or
// returned less.
func (b *batch) word(i, w int) *big.Int {
	ret, err := b.result(i)
	if err != nil || len(ret) < 32*(w+1) {
		return nil
	}
	return new(big.Int).SetBytes(ret[32*w : 32*w+32])
}

// why words a failed call for Unread.
func (b *batch) why(i int) string {
	ret, err := b.result(i)
	if err != nil {
		return err.Error()
	}
	return "returned " + hexutil.Encode(ret)
}

var errNotCalled = errors.New("not called")

// reverted tells a call that reverted (or hit no code that answers) from
// a node that failed to run it.
func reverted(err error) bool {
	var de rpc.DataError
	if errors.As(err, &de) {
		return true
	}
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "revert")
}

// calldata is the selector of sig and its arguments, each one word.
func calldata(sig string, args ...any) []byte {
	out := crypto.Keccak256([]byte(sig))[:4]
	for _, a := range args {
		var w [32]byte
		switch v := a.(type) {
		case common.Address:
			copy(w[12:], v[:])
		case common.Hash:
			w = v
		case *big.Int:
			v.FillBytes(w[:])
		case int:
			new(big.Int).SetInt64(int64(v)).FillBytes(w[:])
		}
		out = append(out, w[:]...)
	}
	return out
}

func topic(sig string) common.Hash { return crypto.Keccak256Hash([]byte(sig)) }

// signed reads a 256-bit two's-complement word.
func signed(x *big.Int) *big.Int {
	if x.Bit(255) == 1 {
		return new(big.Int).Sub(x, new(big.Int).Lsh(big.NewInt(1), 256))
	}
	return x
}

func hashWord(h common.Hash) *big.Int { return new(big.Int).SetBytes(h[:]) }

// tick reads an ABI-encoded int24 (sign-extended to a word).
func tick(x *big.Int) int { return int(signed(x).Int64()) }

// dataWords reads a log's data as n 32-byte words; ok is false when it
// has fewer.
func dataWords(data []byte, n int) (func(i int) *big.Int, bool) {
	if len(data) < 32*n {
		return nil, false
	}
	return func(i int) *big.Int { return new(big.Int).SetBytes(data[32*i : 32*i+32]) }, true
}

// sqrtPriceX96 reads a Q64.96 square-root price (token1 per token0) as a
// real number.
func sqrtPriceX96(x *big.Int) float64 {
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(x), new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), 96))).Float64()
	return f
}

// amounts are the token amounts liquidity L holds in the tick range
// [lower, upper) at square-root price sqrtP (token1 per token0), the
// standard concentrated-liquidity math (Uniswap V3 whitepaper, 6.29 and
// 6.30): below the range all token0, above it all token1, inside it both.
// In float64: they feed shares and V4's estimated amounts.
func amounts(L, sqrtP float64, lower, upper int) (a0, a1 float64) {
	sa, sb := math.Pow(1.0001, float64(lower)/2), math.Pow(1.0001, float64(upper)/2)
	sp := math.Min(math.Max(sqrtP, sa), sb)
	return L * (sb - sp) / (sp * sb), L * (sp - sa)
}

// side splits a pair of currency amounts into (token, quote).
func side(quoteIs0 bool, a0, a1 *big.Int) (tokenAmount, quoteAmount *big.Int) {
	if quoteIs0 {
		return a1, a0
	}
	return a0, a1
}

// value is a position's worth in quote at square-root price sqrtP: its
// quote plus its tokens at the price (quote per token).
func value(quoteIs0 bool, L, sqrtP float64, lower, upper int) (v, quote float64) {
	a0, a1 := amounts(L, sqrtP, lower, upper)
	if quoteIs0 {
		price := 1 / (sqrtP * sqrtP) // token1 is the token: quote (token0) per token
		return a0 + a1*price, a0
	}
	return a1 + a0*sqrtP*sqrtP, a1
}

func bigFloat(x *big.Int) float64 {
	f, _ := new(big.Float).SetInt(x).Float64()
	return f
}

// floatAmount rounds a non-negative amount down to an integer.
func floatAmount(f float64) *big.Int {
	if !(f > 0) || math.IsInf(f, 0) {
		return new(big.Int)
	}
	out, _ := new(big.Float).SetFloat64(math.Floor(f)).Int(nil)
	return out
}

// quoteIs0 tells whether the quote is a pool's currency 0: every venue
// read orders its two currencies by address (native ETH, 0x0, first).
func quoteIs0(token, quote common.Address) bool { return quote.Cmp(token) < 0 }

// positive tells an amount above zero; nil is none.
func positive(x *big.Int) bool { return x != nil && x.Sign() > 0 }
