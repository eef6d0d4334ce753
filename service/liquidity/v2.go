package liquidity

import (
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/whales"
)

// V2-style pairs (Uniswap V2, Aerodrome classic): the pair is its own LP
// token. Mint and Burn carry the amounts added and removed; the LP
// token's Transfer logs name the holders, whose balances balanceOf
// confirms.
var (
	topicV2Mint   = topic("Mint(address,uint256,uint256)") // both dialects
	topicV2Burn   = topic("Burn(address,uint256,uint256,address)")
	topicAeroBurn = topic("Burn(address,address,uint256,uint256)")
)

// minimumLiquidity is what a V2-style pair mints to a dead address at its
// first mint and never releases: to 0x0 (Uniswap V2), to 0x…01
// (Aerodrome, whose ERC-20 refuses 0x0). It is no one's liquidity, and
// is left out of the supply the shares divide.
const minimumLiquidity = 1000

// v2Pool is one V2-style pair being read.
type v2Pool struct {
	i        int
	p        Pool
	pair     common.Address
	quoteIs0 bool
	from     uint64
	clipped  bool
	// balances are the LP balances the Transfer logs give (0x0's is
	// wrong: a burn is a transfer to it, not a credit).
	balances map[common.Address]*big.Int
	// the calls of the batch
	supply, reserves int
	holders          []common.Address
	balanceAt        []int
	releaseAt        map[common.Address]int
	lockAt           map[common.Address][]int // by recognised locker
}

// minimumHolder is where p's venue puts the minimum liquidity.
func (p *v2Pool) minimumHolder() common.Address {
	if p.p.Venue == whales.Aerodrome {
		return common.BytesToAddress([]byte{1})
	}
	return zeroAddress
}

// v2Logs reads the Transfer, Mint and Burn logs of the V2-style pairs at
// pools, in one query.
func (r *reader) v2Logs(ctx context.Context, pools []int) ([]*v2Pool, error) {
	byPair := map[common.Address]*v2Pool{}
	var out []*v2Pool
	q := chain.LogQuery{From: r.in.Block, To: r.in.Block, Topics: [][]common.Hash{{chain.TopicTransfer, topicV2Mint, topicV2Burn, topicAeroBurn}}}
	for _, i := range pools {
		p := r.in.Pools[i]
		vp := &v2Pool{i: i, p: p, pair: p.Holder, quoteIs0: quoteIs0(r.in.Token, p.Quote), balances: map[common.Address]*big.Int{}}
		vp.from, vp.clipped = r.since(i)
		if byPair[vp.pair] != nil {
			r.unread(i, "the pair is listed twice: read once")
			continue
		}
		byPair[vp.pair] = vp
		out = append(out, vp)
		q.Addresses = append(q.Addresses, vp.pair)
		q.From = min(q.From, vp.from)
	}
	logs, err := r.c.Logs(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("liquidity: v2 logs: %w", err)
	}
	for _, vp := range out {
		vp.out(r).QuoteRemoved = new(big.Int)
	}
	for _, l := range logs {
		vp := byPair[l.Address]
		if vp == nil || l.BlockNumber < vp.from || len(l.Topics) == 0 || l.Removed {
			continue
		}
		switch l.Topics[0] {
		case chain.TopicTransfer:
			if len(l.Topics) != 3 || len(l.Data) != 32 {
				continue
			}
			from, to := common.BytesToAddress(l.Topics[1][:]), common.BytesToAddress(l.Topics[2][:])
			v := new(big.Int).SetBytes(l.Data)
			if from != zeroAddress {
				vp.credit(from, new(big.Int).Neg(v))
			}
			vp.credit(to, v)
		case topicV2Mint:
			w, ok := dataWords(l.Data, 2)
			if !ok {
				continue
			}
			if o := vp.out(r); o.QuoteAtCreation == nil && !vp.clipped {
				_, o.QuoteAtCreation = side(vp.quoteIs0, w(0), w(1))
			}
		case topicV2Burn, topicAeroBurn:
			w, ok := dataWords(l.Data, 2)
			if !ok {
				continue
			}
			_, q := side(vp.quoteIs0, w(0), w(1))
			vp.out(r).QuoteRemoved.Add(vp.out(r).QuoteRemoved, q)
		}
	}
	return out, nil
}

func (p *v2Pool) out(r *reader) *PoolLiquidity { return &r.out[p.i] }

func (p *v2Pool) credit(a common.Address, v *big.Int) {
	b := p.balances[a]
	if b == nil {
		b = new(big.Int)
		p.balances[a] = b
	}
	b.Add(b, v)
}

// v2Calls adds p's confirmations to the batch: the LP supply, the
// reserves, the balances of the known addresses and of the largest other
// holders, whether those answer releaseTime(), and the locks the lockers
// holding some tell.
func (r *reader) v2Calls(b *batch, p *v2Pool) {
	p.supply = b.must(p.pair, calldata("totalSupply()"))
	p.reserves = b.must(p.pair, calldata("getReserves()"))
	lockers := r.lockers
	// The known addresses, always; a recognised locker when the logs
	// show it received some, or the logs do not reach the creation.
	for a, k := range r.known {
		if k == roleLocker {
			if l := lockers[a]; !(l.kind == uncxV2Kind || l.kind == pinkV2Kind) || (!p.clipped && !positive(p.balances[a])) {
				continue
			}
		}
		p.holders = append(p.holders, a)
	}
	if m := p.minimumHolder(); !slices.Contains(p.holders, m) {
		p.holders = append(p.holders, m)
	}
	slices.SortFunc(p.holders, func(a, b common.Address) int { return a.Cmp(b) })
	// The largest others, by what their transfers leave them.
	var others []common.Address
	for a, v := range p.balances {
		if _, known := r.known[a]; !known && v.Sign() > 0 && a != p.pair && a != p.minimumHolder() {
			others = append(others, a)
		}
	}
	slices.SortFunc(others, func(a, b common.Address) int {
		if c := p.balances[b].Cmp(p.balances[a]); c != 0 {
			return c
		}
		return a.Cmp(b)
	})
	if len(others) > maxHolders {
		r.unread(p.i, fmt.Sprintf("%d holders of the LP token: the largest %d are read, the rest counted as other", len(others), maxHolders))
		others = others[:maxHolders]
	}
	p.holders = append(p.holders, others...)
	p.releaseAt = map[common.Address]int{}
	for _, a := range p.holders {
		p.balanceAt = append(p.balanceAt, b.call(p.pair, calldata("balanceOf(address)", a)))
	}
	for _, a := range others {
		p.releaseAt[a] = b.call(a, calldata("releaseTime()"))
	}
	p.lockAt = map[common.Address][]int{}
	for _, a := range p.holders {
		switch lockers[a].kind {
		case uncxV2Kind:
			for _, owner := range r.lockOwners(p.p) {
				for k := range maxLocksPerOwner {
					p.lockAt[a] = append(p.lockAt[a], b.call(a, calldata("getUserLockForTokenAtIndex(address,address,uint256)", owner, p.pair, k)))
				}
			}
		case pinkV2Kind:
			p.lockAt[a] = append(p.lockAt[a], b.call(a, calldata("getLocksForToken(address,uint256,uint256)", p.pair, 0, maxTokenLocks-1)))
		}
	}
}

// v2Shares reads p's confirmations into its answer.
func (r *reader) v2Shares(b *batch, p *v2Pool) {
	out := p.out(r)
	supply := b.word(p.supply, 0)
	if supply == nil {
		r.unread(p.i, "totalSupply(): "+b.why(p.supply))
		return
	}
	if r0, r1 := b.word(p.reserves, 0), b.word(p.reserves, 1); r0 != nil && r1 != nil {
		_, out.QuoteReserve = side(p.quoteIs0, r0, r1)
	} else {
		r.unread(p.i, "getReserves(): "+b.why(p.reserves))
	}
	balances := map[common.Address]*big.Int{}
	for k, a := range p.holders {
		v := b.word(p.balanceAt[k], 0)
		if v == nil {
			r.unread(p.i, fmt.Sprintf("balanceOf(%s): %s", a, b.why(p.balanceAt[k])))
			continue
		}
		balances[a] = v
	}
	// The minimum liquidity is nobody's.
	denominator := new(big.Int).Set(supply)
	if m := balances[p.minimumHolder()]; m != nil && m.Cmp(big.NewInt(minimumLiquidity)) >= 0 {
		denominator.Sub(denominator, big.NewInt(minimumLiquidity))
		balances[p.minimumHolder()] = new(big.Int).Sub(m, big.NewInt(minimumLiquidity))
	}
	t := tally{total: bigFloat(denominator)}
	if denominator.Sign() <= 0 {
		return // no liquidity left
	}
	for _, a := range p.holders {
		v := balances[a]
		if v == nil || v.Sign() <= 0 {
			continue
		}
		if _, ok := r.lockers[a]; ok {
			for _, l := range splitLocks(v, r.v2Locks(b, p, a)) {
				t.lock(r, a, bigFloat(l.amount), l.until)
			}
			continue
		}
		t.add(r, a, bigFloat(v), releaseTime(b, indexOr(p.releaseAt, a)))
	}
	t.finish(out)
}

// v2Locks are the locks of p's LP token the recognised locker at a told
// of.
func (r *reader) v2Locks(b *batch, p *v2Pool, a common.Address) []foundLock {
	var found []foundLock
	for _, i := range p.lockAt[a] {
		ret, err := b.result(i)
		if err != nil {
			continue // past the owner's locks, or none
		}
		switch r.lockers[a].kind {
		case uncxV2Kind:
			if l, ok := uncxV2Lock(ret, p.pair); ok && l.amount.Sign() > 0 {
				found = append(found, l)
			}
		case pinkV2Kind:
			if ls, ok := pinkLocks(ret, p.pair); ok {
				found = append(found, ls...)
			}
		}
	}
	return found
}

func indexOr(m map[common.Address]int, a common.Address) int {
	if i, ok := m[a]; ok {
		return i
	}
	return -1
}
