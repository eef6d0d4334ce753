package whales

import (
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// v2Venue is a constant-product venue (Uniswap V2 and its forks,
// Aerodrome classic): each pool its own contract, reserves reported by
// Sync, liquidity removed by Burn.
type v2Venue struct{ d v2Events }

// v2Events are the signatures of one constant-product dialect.
type v2Events struct{ creation, swap, sync, burn common.Hash }

var (
	v2Dialect = v2Events{
		creation: topic("PairCreated(address,address,address,uint256)"),
		swap:     topic("Swap(address,uint256,uint256,uint256,uint256,address)"),
		sync:     topic("Sync(uint112,uint112)"),
		burn:     topic("Burn(address,uint256,uint256,address)"),
	}
	aeroDialect = v2Events{
		creation: topic("PoolCreated(address,address,bool,address,uint256)"),
		swap:     topic("Swap(address,address,uint256,uint256,uint256,uint256)"),
		sync:     topic("Sync(uint256,uint256)"),
		burn:     topic("Burn(address,address,uint256,uint256)"),
	}
)

func (v v2Venue) creationTopic() common.Hash { return v.d.creation }
func (v v2Venue) eventTopics() []common.Hash { return []common.Hash{v.d.swap, v.d.sync, v.d.burn} }
func (v2Venue) singleton() bool              { return false }

// created: token0 and token1 are indexed; the pool is the first data
// word.
func (v v2Venue) created(_ common.Address, l types.Log) (creation, error) {
	w, err := dataWords(l, 1, 3)
	if err != nil {
		return creation{}, err
	}
	return creation{ref: poolRef{emitter: common.BigToAddress(w(0))},
		currency0: topicAddress(l.Topics[1]), currency1: topicAddress(l.Topics[2])}, nil
}

func (v v2Venue) decode(l types.Log, p *pool, tx []types.Log) ([]event, error) {
	switch l.Topics[0] {
	case v.d.swap:
		w, err := dataWords(l, 4, 3)
		if err != nil {
			return nil, err
		}
		tIn, qIn := p.side(w(0), w(1))
		tOut, qOut := p.side(w(2), w(3))
		e := event{kind: evSwap, tokenDelta: new(big.Int).Sub(tIn, tOut), quoteDelta: new(big.Int).Sub(qIn, qOut)}
		e.attribute(topicAddress(l.Topics[2]), tx, p)
		return []event{e}, nil
	case v.d.sync:
		w, err := dataWords(l, 2, 1)
		if err != nil {
			return nil, err
		}
		t, q := p.side(w(0), w(1))
		return []event{{kind: evReserve, quote: q, price: ratio(q, t)}}, nil
	case v.d.burn:
		w, err := dataWords(l, 2, 1)
		if err != nil {
			return nil, err
		}
		_, q := p.side(w(0), w(1))
		return []event{{kind: evRemove, quote: q}}, nil
	}
	return nil, fmt.Errorf("log %s is no event of this venue", l.Topics[0])
}

// attribute names the swap's wallet on a venue whose pools are their own
// contracts: a buyer is the swap's recipient (the first wallet the tokens
// reach), a seller the sender of the token transfer into the pool in the
// same transaction (the swap's sender is usually a router).
func (e *event) attribute(recipient common.Address, tx []types.Log, p *pool) {
	switch {
	case e.tokenDelta.Sign() < 0:
		e.buyer = recipient
	case e.tokenDelta.Sign() > 0:
		e.seller = transferParty(tx, p, false, e.tokenDelta, common.Address{})
	}
}

// transferParty picks, among the token transfers of tx into the pool's
// holder (out of it: out), the other party: the one of amount when one
// matches it, else the largest; never the holder, the zero address or
// skip (a V4 pool's hook, whose own transfers are no trade).
func transferParty(tx []types.Log, p *pool, out bool, amount *big.Int, skip common.Address) common.Address {
	holder := p.ref.holder()
	var best common.Address
	var bestAmount *big.Int
	for _, t := range tx {
		if t.Address != p.token || len(t.Topics) != 3 || len(t.Data) != 32 {
			continue
		}
		from, to := topicAddress(t.Topics[1]), topicAddress(t.Topics[2])
		party := from
		if out {
			if from != holder {
				continue
			}
			party = to
		} else if to != holder {
			continue
		}
		if party == holder || party == (common.Address{}) || party == skip {
			continue
		}
		v := new(big.Int).SetBytes(t.Data)
		if v.Cmp(amount) == 0 {
			return party
		}
		if bestAmount == nil || v.Cmp(bestAmount) > 0 {
			best, bestAmount = party, v
		}
	}
	return best
}
