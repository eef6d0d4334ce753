package liquidity

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/service/chain"
)

// Uniswap V4: every pool lives in a PoolManager, which emits its logs
// with the pool id as topic1. A position is (sender, tickLower,
// tickUpper, salt), its liquidity the sum of its ModifyLiquidity deltas;
// V4's PositionManager is the sender of its NFTs' positions, each salted
// with its token id.
var (
	topicV4Initialize      = topic("Initialize(bytes32,address,address,uint24,int24,address,uint160,int24)")
	topicV4ModifyLiquidity = topic("ModifyLiquidity(bytes32,address,int24,int24,int256,bytes32)")
)

// v4PoolsSlot is the PoolManager's storage slot of its pools mapping
// (v4-core StateLibrary.POOLS_SLOT); a pool's Slot0 (its square-root
// price in the low 160 bits) is the first word of its entry.
const v4PoolsSlot = 6

// v4Key is a V4 position.
type v4Key struct {
	sender       common.Address
	lower, upper int
	salt         common.Hash
}

// v4Position is a position of a V4 pool with liquidity; nft is set when
// its salt may be an NFT's id at its sender.
type v4Position struct {
	key       v4Key
	liquidity *big.Int
	nft       *nft
}

// v4Change is a liquidity change, valued at a price.
type v4Change struct {
	liquidity    *big.Int
	lower, upper int
}

// v4Pool is one V4 pool being read.
type v4Pool struct {
	i        int
	p        Pool
	id       common.Hash
	quoteIs0 bool
	from     uint64
	clipped  bool
	// initPrice is the square-root price Initialize set (0: not read).
	initPrice float64
	ledger    map[v4Key]*big.Int
	first     *v4Change
	removals  []v4Change
	// the calls of the batch
	slot0     int
	read      []*v4Position
	releaseAt map[common.Address]int
}

// v4Logs reads the Initialize and ModifyLiquidity logs of the pools at
// pools, all in manager, in one query.
func (r *reader) v4Logs(ctx context.Context, manager common.Address, pools []int) ([]*v4Pool, error) {
	byID := map[common.Hash]*v4Pool{}
	var out []*v4Pool
	q := chain.LogQuery{From: r.in.Block, To: r.in.Block, Addresses: []common.Address{manager},
		Topics: [][]common.Hash{{topicV4Initialize, topicV4ModifyLiquidity}, nil}}
	for _, i := range pools {
		p := r.in.Pools[i]
		vp := &v4Pool{i: i, p: p, id: common.HexToHash(p.ID), quoteIs0: quoteIs0(r.in.Token, p.Quote), ledger: map[v4Key]*big.Int{}}
		vp.from, vp.clipped = r.since(i)
		if byID[vp.id] != nil {
			r.unread(i, "the pool is listed twice: read once")
			continue
		}
		byID[vp.id] = vp
		out = append(out, vp)
		q.Topics[1] = append(q.Topics[1], vp.id)
		q.From = min(q.From, vp.from)
	}
	logs, err := r.c.Logs(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("liquidity: v4 logs: %w", err)
	}
	for _, l := range logs {
		if len(l.Topics) < 2 {
			continue
		}
		vp := byID[l.Topics[1]]
		if vp == nil || l.BlockNumber < vp.from {
			continue
		}
		switch l.Topics[0] {
		case topicV4Initialize: // data: fee, tickSpacing, hooks, sqrtPriceX96, tick
			if w, ok := dataWords(l.Data, 5); ok {
				vp.initPrice = sqrtPriceX96(w(3))
			}
		case topicV4ModifyLiquidity: // data: tickLower, tickUpper, liquidityDelta, salt
			w, ok := dataWords(l.Data, 4)
			if !ok || len(l.Topics) != 3 {
				continue
			}
			key := v4Key{common.BytesToAddress(l.Topics[2][:]), tick(w(0)), tick(w(1)), common.BigToHash(w(3))}
			delta := signed(w(2))
			if vp.ledger[key] == nil {
				vp.ledger[key] = new(big.Int)
			}
			vp.ledger[key].Add(vp.ledger[key], delta)
			change := v4Change{new(big.Int).Abs(delta), key.lower, key.upper}
			switch {
			case delta.Sign() > 0 && vp.first == nil && !vp.clipped:
				vp.first = &change
			case delta.Sign() < 0:
				vp.removals = append(vp.removals, change)
			}
		}
	}
	for _, vp := range out {
		vp.rankPositions(r)
	}
	return out, nil
}

// rankPositions keeps the largest maxPositions positions with liquidity,
// each with a salt taken as a possible NFT.
func (p *v4Pool) rankPositions(r *reader) {
	var all []*v4Position
	for k, l := range p.ledger {
		if l.Sign() > 0 {
			pos := &v4Position{key: k, liquidity: l}
			if k.salt != (common.Hash{}) {
				id := hashWord(k.salt)
				pos.nft = &nft{key: nftKey{k.sender, id.String()}, id: id, size: l, ownerAt: -1, positionAt: -1}
			}
			all = append(all, pos)
		}
	}
	slices.SortFunc(all, func(a, b *v4Position) int {
		if c := b.liquidity.Cmp(a.liquidity); c != 0 {
			return c
		}
		if c := a.key.sender.Cmp(b.key.sender); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.key.lower, b.key.lower), cmp.Compare(a.key.upper, b.key.upper), a.key.salt.Cmp(b.key.salt))
	})
	if len(all) > maxPositions {
		r.unread(p.i, fmt.Sprintf("%d positions: the largest %d have their holder read, the rest count as other", len(all), maxPositions))
	}
	p.read = all
}

// v4Calls adds p's confirmations to the batch: the pool's price (its
// Slot0, through the PoolManager's extsload), the owner of each salted
// position's would-be NFT, and releaseTime() of the holders that are not
// known.
func (r *reader) v4Calls(b *batch, p *v4Pool) {
	slot := crypto.Keccak256Hash(p.id[:], common.BigToHash(big.NewInt(v4PoolsSlot)).Bytes())
	p.slot0 = b.must(p.p.Holder, calldata("extsload(bytes32)", slot))
	p.releaseAt = map[common.Address]int{}
	for k, pos := range p.read {
		if k == maxPositions {
			break
		}
		holder := pos.key.sender
		if pos.nft != nil {
			pos.nft.ownerAt = b.call(pos.key.sender, calldata("ownerOf(uint256)", pos.nft.id))
			if pos.nft.holder != (common.Address{}) {
				holder = pos.nft.holder
			}
		}
		if _, known := r.known[holder]; known {
			continue
		}
		if _, asked := p.releaseAt[holder]; !asked {
			p.releaseAt[holder] = b.call(holder, calldata("releaseTime()"))
		}
	}
}

// v4Shares reads p's confirmations into its answer. V4's logs carry no
// amounts: the quote of each position, of the first liquidity and of
// each removal is the liquidity math at a price (see the package
// documentation).
func (r *reader) v4Shares(b *batch, p *v4Pool) {
	out := &r.out[p.i]
	w := b.word(p.slot0, 0)
	if w == nil {
		r.unread(p.i, "the pool's Slot0 (extsload): "+b.why(p.slot0)+": no amounts or shares without the price")
		return
	}
	sqrtW := new(big.Int).And(w, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 160), big.NewInt(1)))
	if sqrtW.Sign() == 0 {
		r.unread(p.i, "the pool is not initialized in its PoolManager")
		return
	}
	sqrtP := sqrtPriceX96(sqrtW)
	var reserve float64
	var t tally
	for k, pos := range p.read {
		v, q := value(p.quoteIs0, bigFloat(pos.liquidity), sqrtP, pos.key.lower, pos.key.upper)
		reserve += q
		t.total += v
		if k >= maxPositions {
			continue // other
		}
		holder, timelock := pos.key.sender, releaseTime(b, indexOr(p.releaseAt, pos.key.sender))
		if n := pos.nft; n != nil {
			if ret, err := b.result(n.ownerAt); err == nil && len(ret) == 32 {
				holder = common.BytesToAddress(ret)
				timelock = 0
				if holder == n.holder {
					timelock = releaseTime(b, indexOr(p.releaseAt, holder))
				}
			}
		}
		t.add(r, holder, v, timelock)
	}
	out.QuoteReserve = floatAmount(reserve)
	price := sqrtP
	if p.first != nil {
		if p.initPrice > 0 {
			price = p.initPrice
		} else {
			r.unread(p.i, "no Initialize log: the liquidity at creation is valued at the pool's price now")
		}
		_, q := value(p.quoteIs0, bigFloat(p.first.liquidity), price, p.first.lower, p.first.upper)
		out.QuoteAtCreation = floatAmount(q)
	}
	removed := 0.0
	for _, c := range p.removals {
		_, q := value(p.quoteIs0, bigFloat(c.liquidity), sqrtP, c.lower, c.upper)
		removed += q
	}
	out.QuoteRemoved = floatAmount(removed)
	if len(p.removals) > 0 {
		r.unread(p.i, "V4 removals carry no amounts: QuoteRemoved is their liquidity valued at the pool's price now")
	}
	t.finish(out)
}
