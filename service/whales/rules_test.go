package whales

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

func words(vals ...*big.Int) []byte {
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

func n(x int64) *big.Int { return big.NewInt(x) }

var (
	alice = common.HexToAddress("0xa11ce")
	bob   = common.HexToAddress("0xb0b")
	poolA = common.HexToAddress("0x9001")
)

func addrTopic(a common.Address) common.Hash { return common.BytesToHash(a[:]) }

// TestDecode: each dialect's swap, reserve and removal events reduce to
// token/quote deltas, recipient and price, with the token on either side.
func TestDecode(t *testing.T) {
	t.Parallel()
	sqrtP := new(big.Int).Lsh(n(2), 96) // price token1/token0 = 4
	tests := []struct {
		name         string
		log          types.Log
		tokenIs0     bool
		kind         eventKind
		token, quote int64
		to           common.Address
		price        float64
		quoteOut     int64
	}{
		{"v2 buy, token is token1", types.Log{Topics: []common.Hash{v2Swap, addrTopic(poolA), addrTopic(alice)}, Data: words(n(100), n(0), n(0), n(40))},
			false, evSwap, -40, 100, alice, 0, 0},
		{"v2 sell, token is token0", types.Log{Topics: []common.Hash{v2Swap, addrTopic(poolA), addrTopic(bob)}, Data: words(n(30), n(0), n(0), n(7))},
			true, evSwap, 30, -7, bob, 0, 0},
		{"aerodrome buy", types.Log{Topics: []common.Hash{aeroSwap, addrTopic(poolA), addrTopic(alice)}, Data: words(n(0), n(5), n(9), n(0))},
			true, evSwap, -9, 5, alice, 0, 0},
		{"v3 buy of token0", types.Log{Topics: []common.Hash{v3Swap, addrTopic(poolA), addrTopic(alice)}, Data: words(n(-25), n(100), sqrtP, n(1), n(0))},
			true, evSwap, -25, 100, alice, 4, 0},
		{"v3 buy of token1 (price inverted)", types.Log{Topics: []common.Hash{v3Swap, addrTopic(poolA), addrTopic(alice)}, Data: words(n(100), n(-25), sqrtP, n(1), n(0))},
			false, evSwap, -25, 100, alice, 0.25, 0},
		{"v2 sync", types.Log{Topics: []common.Hash{v2Sync}, Data: words(n(1000), n(50))}, true, evSync, 0, 0, common.Address{}, 0.05, 50},
		{"aerodrome sync", types.Log{Topics: []common.Hash{aeroSync}, Data: words(n(50), n(1000))}, false, evSync, 0, 0, common.Address{}, 0.05, 50},
		{"v2 burn", types.Log{Topics: []common.Hash{v2Burn, addrTopic(poolA), addrTopic(bob)}, Data: words(n(900), n(45))}, true, evBurn, 0, 0, common.Address{}, 0, 45},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok, err := decode(tt.log, tt.tokenIs0)
			if err != nil || !ok || e.kind != tt.kind {
				t.Fatalf("decode: %+v %v %v", e, ok, err)
			}
			if tt.kind == evSwap && (e.tokenDelta.Int64() != tt.token || e.quoteDelta.Int64() != tt.quote || e.to != tt.to) {
				t.Errorf("swap token %s quote %s to %s", e.tokenDelta, e.quoteDelta, e.to)
			}
			if e.price != tt.price || (tt.quoteOut != 0 && e.quoteOut.Int64() != tt.quoteOut) {
				t.Errorf("price %v quote %v", e.price, e.quoteOut)
			}
		})
	}
	if _, _, err := decode(types.Log{Topics: []common.Hash{v2Swap}, Data: words(n(1))}, true); err == nil {
		t.Error("a short swap log decoded")
	}
	if _, ok, _ := decode(types.Log{Topics: []common.Hash{topicTransfer}}, true); ok {
		t.Error("a transfer decoded as a pool event")
	}
}

// TestCollapseRules: what collapses a pool and who dodged it.
func TestCollapseRules(t *testing.T) {
	t.Parallel()
	r := DefaultRules()
	buy := func(who common.Address, tokens int64) event {
		return event{kind: evSwap, tokenDelta: n(-tokens), quoteDelta: n(1), to: who}
	}
	sell := func(tokens int64) event { return event{kind: evSwap, tokenDelta: n(tokens), quoteDelta: n(-1)} }
	sync := func(quote, token int64) event {
		return event{kind: evSync, quoteOut: n(quote), price: float64(quote) / float64(token)}
	}
	burn := func(quote int64) event { return event{kind: evBurn, quoteOut: n(quote)} }
	type step struct {
		tx     int
		e      event
		seller common.Address
	}
	tests := []struct {
		name      string
		steps     []step
		collapsed string
		alice     int // outcome
		bob       int
	}{
		{"drawdown of 70 % collapses; a 50 % seller dodged, a holder is caught",
			[]step{{1, sync(100, 100), common.Address{}}, {2, buy(alice, 10), common.Address{}}, {3, buy(bob, 10), common.Address{}},
				{4, sell(5), alice}, {5, sync(30, 100), common.Address{}}},
			"drawdown", outcomeDodged, outcomeCaught},
		{"drawdown of 60 % is no collapse",
			[]step{{1, sync(100, 100), common.Address{}}, {2, buy(alice, 10), common.Address{}}, {5, sync(40, 100), common.Address{}}},
			"", outcomeNone, outcomeNone},
		{"removal of half the quote reserve collapses (V2 order: Sync, then Burn)",
			[]step{{1, sync(100, 100), common.Address{}}, {2, buy(alice, 10), common.Address{}}, {3, buy(bob, 10), common.Address{}},
				{4, sync(50, 50), common.Address{}}, {4, burn(50), common.Address{}}},
			"liquidity", outcomeCaught, outcomeCaught},
		{"removal of 40 % is no collapse",
			[]step{{1, sync(100, 100), common.Address{}}, {2, buy(alice, 10), common.Address{}}, {4, sync(60, 60), common.Address{}}, {4, burn(40), common.Address{}}},
			"", outcomeNone, outcomeNone},
		{"a sale in the collapsing transaction counts as before it",
			[]step{{1, sync(100, 100), common.Address{}}, {2, buy(alice, 10), common.Address{}}, {3, buy(bob, 10), common.Address{}},
				{4, sync(20, 130), common.Address{}}, {4, sell(10), bob}},
			"drawdown", outcomeCaught, outcomeDodged},
		{"sales after the collapse do not dodge it",
			[]step{{1, sync(100, 100), common.Address{}}, {2, buy(alice, 10), common.Address{}}, {3, sync(10, 100), common.Address{}}, {4, sell(10), alice}},
			"drawdown", outcomeCaught, outcomeNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(poolA, common.HexToAddress("0x70c"), UniswapV2, true, 1)
			for _, s := range tt.steps {
				p.apply(common.BigToHash(n(int64(s.tx))), s.e, s.seller, r)
			}
			p.settle(r)
			outcome := func(a common.Address) int {
				if pos := p.positions[a]; pos != nil {
					return pos.outcome
				}
				return outcomeNone
			}
			if p.collapsed != tt.collapsed || outcome(alice) != tt.alice || outcome(bob) != tt.bob {
				t.Errorf("collapsed %q alice %d bob %d", p.collapsed, outcome(alice), outcome(bob))
			}
		})
	}
}

// TestEarlyBuyers: the first five distinct buyers are early; a second buy
// does not take a place; the pool itself is never a buyer.
func TestEarlyBuyers(t *testing.T) {
	t.Parallel()
	r := DefaultRules()
	p := newPool(poolA, common.HexToAddress("0x70c"), UniswapV2, true, 1)
	var addrs []common.Address
	for i := range 7 {
		addrs = append(addrs, common.BigToAddress(n(int64(0x100+i))))
	}
	order := []common.Address{addrs[0], addrs[0], poolA, addrs[1], addrs[2], addrs[3], addrs[4], addrs[5], addrs[6]}
	for i, a := range order {
		p.apply(common.BigToHash(n(int64(i))), event{kind: evSwap, tokenDelta: n(-1), quoteDelta: n(1), to: a}, common.Address{}, r)
	}
	for i, a := range addrs {
		if got := p.positions[a].early; got != (i < 5) {
			t.Errorf("buyer %d early %v", i, got)
		}
	}
	if p.positions[poolA] != nil {
		t.Error("the pool counted as a buyer")
	}
}
