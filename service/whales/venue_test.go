package whales

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// data encodes words as a log's data (two's complement for negatives).
func data(vals ...*big.Int) []byte {
	var out []byte
	for _, v := range vals {
		w := make([]byte, 32)
		if v.Sign() < 0 {
			v = new(big.Int).Add(v, new(big.Int).Lsh(big.NewInt(1), 256))
		}
		v.FillBytes(w)
		out = append(out, w...)
	}
	return out
}

func addrTopic(a common.Address) common.Hash { return common.BytesToHash(a[:]) }

func addrWord(a common.Address) *big.Int { return new(big.Int).SetBytes(a[:]) }

var (
	token   = common.HexToAddress("0x70c")
	manager = common.HexToAddress("0x4444")
	hook    = common.HexToAddress("0x0000000000000000000000000000000000000fc4")
	router  = common.HexToAddress("0x7007e7")
	// sqrtX96 is a square-root price of 2 (token1 per token0 = 4).
	sqrtX96 = new(big.Int).Lsh(n(2), 96)
)

// transfer is the token's Transfer(from, to, amount).
func transfer(from, to common.Address, amount int64) types.Log {
	return types.Log{Address: token, Topics: []common.Hash{topicTransfer, addrTopic(from), addrTopic(to)}, Data: data(n(amount))}
}

// TestDecode: each venue's logs reduce to the rules' events: the pool's
// token and quote amounts with the token on either side, the wallet, the
// price, the reserve and the removals.
func TestDecode(t *testing.T) {
	t.Parallel()
	v4ID := common.HexToHash("0x1d")
	type decodeCase struct {
		name     string
		kind     Kind
		tokenIs0 bool
		hooks    common.Address
		log      types.Log
		tx       []types.Log
		want     []event
	}
	tests := []decodeCase{
		{"v2 buy, token is token1", UniswapV2, false, common.Address{},
			types.Log{Topics: []common.Hash{v2Dialect.swap, addrTopic(router), addrTopic(alice)}, Data: data(n(100), n(0), n(0), n(40))}, nil,
			[]event{{kind: evSwap, tokenDelta: n(-40), quoteDelta: n(100), buyer: alice}}},
		{"v2 sell, the seller from the transfer into the pool", UniswapV2, true, common.Address{},
			types.Log{Topics: []common.Hash{v2Dialect.swap, addrTopic(router), addrTopic(router)}, Data: data(n(30), n(0), n(0), n(7))},
			[]types.Log{transfer(alice, router, 30), transfer(bob, poolA, 30)},
			[]event{{kind: evSwap, tokenDelta: n(30), quoteDelta: n(-7), seller: bob}}},
		{"aerodrome buy", Aerodrome, true, common.Address{},
			types.Log{Topics: []common.Hash{aeroDialect.swap, addrTopic(router), addrTopic(alice)}, Data: data(n(0), n(5), n(9), n(0))}, nil,
			[]event{{kind: evSwap, tokenDelta: n(-9), quoteDelta: n(5), buyer: alice}}},
		{"v2 sync", UniswapV2, true, common.Address{}, types.Log{Topics: []common.Hash{v2Dialect.sync}, Data: data(n(1000), n(50))}, nil,
			[]event{{kind: evReserve, quote: n(50), price: 0.05}}},
		{"aerodrome burn", Aerodrome, false, common.Address{},
			types.Log{Topics: []common.Hash{aeroDialect.burn, addrTopic(router), addrTopic(bob)}, Data: data(n(45), n(900))}, nil,
			[]event{{kind: evRemove, quote: n(45)}}},
		{"v3 buy of token0", UniswapV3, true, common.Address{},
			types.Log{Topics: []common.Hash{uniswapV3Dialect.swap, addrTopic(router), addrTopic(alice)}, Data: data(n(-25), n(100), sqrtX96, n(1), n(0))}, nil,
			[]event{{kind: evSwap, tokenDelta: n(-25), quoteDelta: n(100), buyer: alice, price: 4}, {kind: evReserveDelta, quote: n(100)}}},
		{"pancakev3 buy of token1 (price inverted), two more words", PancakeV3, false, common.Address{},
			types.Log{Topics: []common.Hash{pancakeV3Dialect.swap, addrTopic(router), addrTopic(alice)},
				Data: data(n(100), n(-25), sqrtX96, n(1), n(0), n(3), n(0))}, nil,
			[]event{{kind: evSwap, tokenDelta: n(-25), quoteDelta: n(100), buyer: alice, price: 0.25}, {kind: evReserveDelta, quote: n(100)}}},
		{"slipstream initialize: the price at creation", Slipstream, true, common.Address{},
			types.Log{Topics: []common.Hash{clInitialize}, Data: data(sqrtX96, n(13863))}, nil,
			[]event{{kind: evPrice, price: 4}}},
		{"v3 mint adds its quote to the reserve", UniswapV3, true, common.Address{},
			types.Log{Topics: []common.Hash{clMint, addrTopic(bob), {}, {}}, Data: data(addrWord(router), n(1000), n(500), n(80))}, nil,
			[]event{{kind: evReserveDelta, quote: n(80)}}},
		{"v3 burn takes its quote out and is judged as a removal", UniswapV3, false, common.Address{},
			types.Log{Topics: []common.Hash{clBurn, addrTopic(bob), {}, {}}, Data: data(n(1000), n(70), n(3))}, nil,
			[]event{{kind: evReserveDelta, quote: n(-70)}, {kind: evRemove, quote: n(70)}}},
		{"v3 burn of no quote (a fee poke) is nothing", UniswapV3, true, common.Address{},
			types.Log{Topics: []common.Hash{clBurn, addrTopic(bob), {}, {}}, Data: data(n(0), n(0), n(0))}, nil, nil},
		{"v4 buy: the swapper's amounts negated, the buyer from the transfer out of the PoolManager", UniswapV4, false, hook,
			types.Log{Address: manager, Topics: []common.Hash{v4Swap, v4ID, addrTopic(router)}, Data: data(n(-100), n(25), sqrtX96, n(1), n(0), n(3000))},
			[]types.Log{transfer(manager, hook, 1), transfer(manager, alice, 24)},
			[]event{{kind: evSwap, tokenDelta: n(-25), quoteDelta: n(100), buyer: alice, price: 0.25}, {kind: evReserveDelta, quote: n(100)}}},
		{"v4 sell: the seller from the transfer into the PoolManager", UniswapV4, true, common.Address{},
			types.Log{Address: manager, Topics: []common.Hash{v4Swap, v4ID, addrTopic(router)}, Data: data(n(-30), n(7), sqrtX96, n(1), n(0), n(3000))},
			[]types.Log{transfer(bob, manager, 30)},
			[]event{{kind: evSwap, tokenDelta: n(30), quoteDelta: n(-7), seller: bob, price: 4}, {kind: evReserveDelta, quote: n(-7)}}},
		{"v4 swap by the pool's own hook buys for nobody", UniswapV4, false, hook,
			types.Log{Address: manager, Topics: []common.Hash{v4Swap, v4ID, addrTopic(hook)}, Data: data(n(-100), n(25), sqrtX96, n(1), n(0), n(0))},
			[]types.Log{transfer(manager, hook, 25), transfer(hook, alice, 25)},
			[]event{{kind: evSwap, tokenDelta: n(-25), quoteDelta: n(100), price: 0.25}, {kind: evReserveDelta, quote: n(100)}}},
		{"v4 buy whose tokens only reach the hook has no buyer", UniswapV4, false, hook,
			types.Log{Address: manager, Topics: []common.Hash{v4Swap, v4ID, addrTopic(router)}, Data: data(n(-100), n(25), sqrtX96, n(1), n(0), n(0))},
			[]types.Log{transfer(manager, hook, 25)},
			[]event{{kind: evSwap, tokenDelta: n(-25), quoteDelta: n(100), price: 0.25}, {kind: evReserveDelta, quote: n(100)}}},
	}
	// ModifyLiquidity of 1e18 over ticks [-600, 600] at price 1: the quote
	// side (currency0, native ETH) holds 1e18·(1 − 1.0001^-300).
	L := new(big.Int).Exp(n(10), n(18), nil)
	q0, _ := liquidityAmounts(L, 1, -600, 600)
	modify := func(delta *big.Int) types.Log {
		return types.Log{Address: manager, Topics: []common.Hash{v4ModifyLiquidity, v4ID, addrTopic(router)}, Data: data(n(-600), n(600), delta, n(0))}
	}
	tests = append(tests, []decodeCase{
		{"v4 liquidity added: its quote at the pool's price joins the reserve", UniswapV4, false, common.Address{}, modify(L), nil,
			[]event{{kind: evReserveDelta, quote: q0}}},
		{"v4 liquidity removed: its quote leaves the reserve and is judged", UniswapV4, false, common.Address{}, modify(new(big.Int).Neg(L)), nil,
			[]event{{kind: evReserveDelta, quote: new(big.Int).Neg(q0)}, {kind: evRemove, quote: q0}}},
	}...)
	if want := 1e18 * (1 - math.Pow(1.0001, -300)); math.Abs(float64(q0.Int64())-want) > want*1e-9 {
		t.Fatalf("quote of the range: %s, want %.0f", q0, want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := poolRef{emitter: poolA}
			if venues[tt.kind].singleton() {
				ref = poolRef{emitter: manager, id: v4ID}
			}
			p := newPool(creation{ref: ref, hooks: tt.hooks, sqrtPrice: 1}, token, tt.kind, tt.tokenIs0, 1)
			got, err := venues[tt.kind].decode(tt.log, p, tt.tx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d events %+v, want %+v", len(got), got, tt.want)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.kind != w.kind || !sameInt(g.tokenDelta, w.tokenDelta) || !sameInt(g.quoteDelta, w.quoteDelta) || !sameInt(g.quote, w.quote) ||
					g.buyer != w.buyer || g.seller != w.seller || math.Abs(g.price-w.price) > 1e-12 {
					t.Errorf("event %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
	short := types.Log{Topics: []common.Hash{v2Dialect.swap}, Data: data(n(1))}
	if _, err := venues[UniswapV2].decode(short, testPool(true), nil); err == nil {
		t.Error("a short swap log decoded")
	}
}

func sameInt(a, b *big.Int) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Cmp(b) == 0
}

// TestCreated: each venue's creation log gives the pool (its address, or
// its V4 id in the PoolManager), the two currencies, the hook and the
// price at creation.
func TestCreated(t *testing.T) {
	t.Parallel()
	quote, pool := common.HexToAddress("0x4200000000000000000000000000000000000006"), common.HexToAddress("0xbeef")
	factory := common.HexToAddress("0xfac")
	id := common.HexToHash("0x1d")
	tests := []struct {
		kind Kind
		log  types.Log
		want creation
	}{
		{UniswapV2, types.Log{Topics: []common.Hash{v2Dialect.creation, addrTopic(token), addrTopic(quote)}, Data: data(addrWord(pool), n(1))},
			creation{ref: poolRef{emitter: pool}, currency0: token, currency1: quote}},
		{Aerodrome, types.Log{Topics: []common.Hash{aeroDialect.creation, addrTopic(token), addrTopic(quote), {}}, Data: data(addrWord(pool), n(1))},
			creation{ref: poolRef{emitter: pool}, currency0: token, currency1: quote}},
		{UniswapV3, types.Log{Topics: []common.Hash{uniswapV3Dialect.creation, addrTopic(token), addrTopic(quote), {}}, Data: data(n(60), addrWord(pool))},
			creation{ref: poolRef{emitter: pool}, currency0: token, currency1: quote}},
		{PancakeV3, types.Log{Topics: []common.Hash{pancakeV3Dialect.creation, addrTopic(token), addrTopic(quote), {}}, Data: data(n(60), addrWord(pool))},
			creation{ref: poolRef{emitter: pool}, currency0: token, currency1: quote}},
		{Slipstream, types.Log{Topics: []common.Hash{slipstreamDialect.creation, addrTopic(token), addrTopic(quote), {}}, Data: data(addrWord(pool))},
			creation{ref: poolRef{emitter: pool}, currency0: token, currency1: quote}},
		{UniswapV4, types.Log{Topics: []common.Hash{v4Initialize, id, {}, addrTopic(token)}, Data: data(n(3000), n(60), addrWord(hook), sqrtX96, n(13863))},
			creation{ref: poolRef{emitter: factory, id: id}, currency0: common.Address{}, currency1: token, hooks: hook, sqrtPrice: 2}},
	}
	for _, tt := range tests {
		got, err := venues[tt.kind].created(factory, tt.log)
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v %v, want %+v", tt.kind, got, err, tt.want)
		}
	}
}

// TestLiquidityAmounts: the standard concentrated-liquidity math, against
// Uniswap's SqrtPriceMath figures (1e18 liquidity between square-root
// prices 1 and 1.1 holds 0.0909…e18 token0 at the bottom, 0.1e18 token1
// at the top) and the three positions of a price against a range.
func TestLiquidityAmounts(t *testing.T) {
	t.Parallel()
	L := new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil)
	// tick 1906 is just below sqrt price 1.1 (1.0001^953 = 1.09996…).
	upper := 1906
	sb := tickSqrtPrice(upper)
	near := func(got *big.Int, want float64) bool {
		g, _ := new(big.Float).SetInt(got).Float64()
		return math.Abs(g-want) <= want*1e-9
	}
	a0, a1 := liquidityAmounts(L, 1, 0, upper)
	if !near(a0, 1e18*(sb-1)/sb) || a1.Sign() != 0 {
		t.Errorf("at the bottom: %s token0, %s token1", a0, a1)
	}
	a0, a1 = liquidityAmounts(L, 2, 0, upper)
	if a0.Sign() != 0 || !near(a1, 1e18*(sb-1)) {
		t.Errorf("above the range: %s token0, %s token1", a0, a1)
	}
	a0, a1 = liquidityAmounts(L, 1.05, 0, upper)
	if !near(a0, 1e18*(sb-1.05)/(1.05*sb)) || !near(a1, 1e18*0.05) {
		t.Errorf("inside: %s token0, %s token1", a0, a1)
	}
	if a0, a1 = liquidityAmounts(L, 0.5, 0, upper); !near(a0, 1e18*(sb-1)/sb) || a1.Sign() != 0 {
		t.Errorf("below the range: %s token0, %s token1", a0, a1)
	}
}

// TestParseFactory: --dex-factories takes kind:address for every venue
// kind and refuses an unknown kind or a malformed address, naming it.
func TestParseFactory(t *testing.T) {
	t.Parallel()
	addr := "0x498581fF718922c3f8e6A244956aF099B2652b2b"
	for _, k := range Kinds() {
		f, err := ParseFactory(string(k) + ":" + addr)
		if err != nil || f.Kind != k || f.Address != common.HexToAddress(addr) {
			t.Errorf("%s: %+v %v", k, f, err)
		}
	}
	for _, tc := range []struct{ in, mention string }{
		{"uniswap:" + addr, `unknown kind "uniswap"`},
		{addr, "want kind:address"},
		{"v4:" + addr[2:], "is not a 0x-prefixed"},
		{"v4:" + addr[:41], "is not a 0x-prefixed"},
		{"v4:0x1", "is not a 0x-prefixed"},
		{"slipstream:" + addr[:41] + "z", "is not a 0x-prefixed"},
	} {
		_, err := ParseFactory(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.in, err, tc.mention)
		}
	}
}
