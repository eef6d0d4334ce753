package whales

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

func n(x int64) *big.Int { return big.NewInt(x) }

var (
	alice = common.HexToAddress("0xa11ce")
	bob   = common.HexToAddress("0xb0b")
	poolA = common.HexToAddress("0x9001")
)

func testPool(tokenIs0 bool) *pool {
	return newPool(creation{ref: poolRef{emitter: poolA}}, common.HexToAddress("0x70c"), UniswapV2, tokenIs0, 1)
}

// TestCollapseRules: what collapses a pool and who dodged it, for the
// constant-product order of events (Sync, then Burn) and the
// concentrated-liquidity one (the reserve followed by amounts, a removal
// taken from it).
func TestCollapseRules(t *testing.T) {
	t.Parallel()
	r := DefaultRules()
	buy := func(who common.Address, tokens int64) event {
		return event{kind: evSwap, tokenDelta: n(-tokens), quoteDelta: n(1), buyer: who}
	}
	sell := func(who common.Address, tokens int64) event {
		return event{kind: evSwap, tokenDelta: n(tokens), quoteDelta: n(-1), seller: who}
	}
	sync := func(quote, token int64) event {
		return event{kind: evReserve, quote: n(quote), price: float64(quote) / float64(token)}
	}
	burn := func(quote int64) event { return event{kind: evRemove, quote: n(quote)} }
	created := func(price float64) event { return event{kind: evPrice, price: price} }
	add := func(quote int64) event { return event{kind: evReserveDelta, quote: n(quote)} }
	// a concentrated-liquidity removal: the reserve falls, then the removal.
	remove := func(quote int64) []event { return []event{add(-quote), burn(quote)} }
	type step struct {
		tx int
		e  []event
	}
	one := func(tx int, e event) step { return step{tx, []event{e}} }
	tests := []struct {
		name      string
		steps     []step
		collapsed string
		alice     int // outcome
		bob       int
	}{
		{"drawdown of 70 % collapses; a 50 % seller dodged, a holder is caught",
			[]step{one(1, sync(100, 100)), one(2, buy(alice, 10)), one(3, buy(bob, 10)), one(4, sell(alice, 5)), one(5, sync(30, 100))},
			"drawdown", outcomeDodged, outcomeCaught},
		{"drawdown of 60 % is no collapse",
			[]step{one(1, sync(100, 100)), one(2, buy(alice, 10)), one(5, sync(40, 100))},
			"", outcomeNone, outcomeNone},
		{"removal of half the quote reserve collapses (V2 order: Sync, then Burn)",
			[]step{one(1, sync(100, 100)), one(2, buy(alice, 10)), one(3, buy(bob, 10)), {4, []event{sync(50, 50), burn(50)}}},
			"liquidity", outcomeCaught, outcomeCaught},
		{"removal of 40 % is no collapse",
			[]step{one(1, sync(100, 100)), one(2, buy(alice, 10)), {4, []event{sync(60, 60), burn(40)}}},
			"", outcomeNone, outcomeNone},
		{"a sale in the collapsing transaction counts as before it",
			[]step{one(1, sync(100, 100)), one(2, buy(alice, 10)), one(3, buy(bob, 10)), {4, []event{sync(20, 130), sell(bob, 10)}}},
			"drawdown", outcomeCaught, outcomeDodged},
		{"sales after the collapse do not dodge it",
			[]step{one(1, sync(100, 100)), one(2, buy(alice, 10)), one(3, sync(10, 100)), one(4, sell(alice, 10))},
			"drawdown", outcomeCaught, outcomeNone},
		{"concentrated liquidity: pulling 60 % of the quote reserve collapses",
			[]step{one(1, created(1)), one(1, add(100)), one(2, buy(alice, 10)), one(2, add(20)), {3, remove(72)}},
			"liquidity", outcomeCaught, outcomeNone},
		{"concentrated liquidity: a 10 % removal is no collapse, nor are several in turn",
			[]step{one(1, created(1)), one(1, add(100)), one(2, buy(alice, 10)), {3, remove(10)}, {4, remove(9)}, {5, remove(8)}},
			"", outcomeNone, outcomeNone},
		{"concentrated liquidity: a dump as the first swap collapses from the price at creation",
			[]step{one(1, created(1)), one(1, add(100)), {2, []event{{kind: evSwap, tokenDelta: n(1000), quoteDelta: n(-90), price: 0.2}}},
				one(3, buy(alice, 10))},
			"drawdown", outcomeNone, outcomeNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(true)
			for _, s := range tt.steps {
				for _, e := range s.e {
					p.apply(common.BigToHash(n(int64(s.tx))), e, r)
				}
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
// does not take a place; the pool itself is never a buyer; a buyer after
// the collapse is not early.
func TestEarlyBuyers(t *testing.T) {
	t.Parallel()
	r := DefaultRules()
	p := testPool(true)
	var addrs []common.Address
	for i := range 7 {
		addrs = append(addrs, common.BigToAddress(n(int64(0x100+i))))
	}
	order := []common.Address{addrs[0], addrs[0], poolA, addrs[1], addrs[2], addrs[3], addrs[4], addrs[5], addrs[6]}
	for i, a := range order {
		p.apply(common.BigToHash(n(int64(i))), event{kind: evSwap, tokenDelta: n(-1), quoteDelta: n(1), buyer: a}, r)
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
