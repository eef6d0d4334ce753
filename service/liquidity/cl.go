package liquidity

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
)

// Concentrated-liquidity pools that speak Uniswap V3's events (Uniswap
// V3, PancakeSwap V3, Aerodrome Slipstream): a position is (owner,
// tickLower, tickUpper), its liquidity the sum of its Mints less its
// Burns. An NFT position manager owns the positions of its NFTs; the
// manager's IncreaseLiquidity, in the Mint's transaction, names the NFT,
// and the NFT's Transfer logs its holder.
var (
	topicCLMint            = topic("Mint(address,address,int24,int24,uint128,uint256,uint256)")
	topicCLBurn            = topic("Burn(address,int24,int24,uint128,uint256,uint256)")
	topicIncreaseLiquidity = topic("IncreaseLiquidity(uint256,uint128,uint256,uint256)")
)

// clKey is a position in a concentrated-liquidity pool.
type clKey struct {
	owner        common.Address
	lower, upper int
}

// clMint is a Mint log, kept to find the NFT it made.
type clMint struct {
	blockHash, tx  common.Hash
	owner          common.Address
	amount, a0, a1 *big.Int
	share          float64 // of all the pool's minted liquidity
	pool           *clPool
}

// nftKey is an NFT: its contract (a position manager) and its id.
type nftKey struct {
	manager common.Address
	id      string
}

// nft is an NFT position of a pool.
type nft struct {
	key  nftKey
	id   *big.Int
	size *big.Int // liquidity its mints added, to rank it
	// holder is where its Transfer logs leave it (zero: not seen).
	holder              common.Address
	ownerAt, positionAt int
}

// clPool is one concentrated-liquidity pool being read.
type clPool struct {
	i        int
	p        Pool
	pool     common.Address
	quoteIs0 bool
	from     uint64
	clipped  bool
	ledger   map[clKey]*big.Int
	mints    []*clMint
	nfts     map[nftKey]*nft
	// the calls of the batch
	slot0, quoteBalance int
	read                []*nft
	releaseAt           map[common.Address]int
}

// clLogs reads the Mint and Burn logs of the pools at pools, in one
// query.
func (r *reader) clLogs(ctx context.Context, pools []int) ([]*clPool, error) {
	byPool := map[common.Address]*clPool{}
	var out []*clPool
	q := chain.LogQuery{From: r.in.Block, To: r.in.Block, Topics: [][]common.Hash{{topicCLMint, topicCLBurn}}}
	for _, i := range pools {
		p := r.in.Pools[i]
		cp := &clPool{i: i, p: p, pool: p.Holder, quoteIs0: quoteIs0(r.in.Token, p.Quote), ledger: map[clKey]*big.Int{}, nfts: map[nftKey]*nft{}}
		cp.from, cp.clipped = r.since(i)
		if byPool[cp.pool] != nil {
			r.unread(i, "the pool is listed twice: read once")
			continue
		}
		byPool[cp.pool] = cp
		out = append(out, cp)
		q.Addresses = append(q.Addresses, cp.pool)
		q.From = min(q.From, cp.from)
	}
	logs, err := r.c.Logs(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("liquidity: concentrated-liquidity logs: %w", err)
	}
	minted := map[*clPool]*big.Int{}
	for _, cp := range out {
		r.out[cp.i].QuoteRemoved = new(big.Int)
		minted[cp] = new(big.Int)
	}
	for _, l := range logs {
		cp := byPool[l.Address]
		if cp == nil || l.BlockNumber < cp.from || len(l.Topics) != 4 {
			continue
		}
		key := clKey{common.BytesToAddress(l.Topics[1][:]), tick(hashWord(l.Topics[2])), tick(hashWord(l.Topics[3]))}
		o := &r.out[cp.i]
		switch l.Topics[0] {
		case topicCLMint: // data: sender, amount, amount0, amount1
			w, ok := dataWords(l.Data, 4)
			if !ok {
				continue
			}
			cp.add(key, w(1))
			if o.QuoteAtCreation == nil && !cp.clipped {
				_, o.QuoteAtCreation = side(cp.quoteIs0, w(2), w(3))
			}
			m := &clMint{blockHash: l.BlockHash, tx: l.TxHash, owner: key.owner, amount: w(1), a0: w(2), a1: w(3), pool: cp}
			cp.mints = append(cp.mints, m)
			minted[cp].Add(minted[cp], w(1))
		case topicCLBurn: // data: amount, amount0, amount1
			w, ok := dataWords(l.Data, 3)
			if !ok {
				continue
			}
			cp.add(key, new(big.Int).Neg(w(0)))
			_, q := side(cp.quoteIs0, w(1), w(2))
			o.QuoteRemoved.Add(o.QuoteRemoved, q)
		}
	}
	for _, cp := range out {
		for _, m := range cp.mints {
			if t := bigFloat(minted[cp]); t > 0 {
				m.share = bigFloat(m.amount) / t
			}
		}
	}
	return out, nil
}

func (p *clPool) add(k clKey, delta *big.Int) {
	l := p.ledger[k]
	if l == nil {
		l = new(big.Int)
		p.ledger[k] = l
	}
	l.Add(l, delta)
}

// nameNFTs finds which Mints were an NFT position manager's: in one batch
// of block logs, the IncreaseLiquidity logs the Mints' owners emitted in
// the Mints' blocks, each matched to its Mint by transaction and amounts.
// The blocks whose Mints carry the most of their pool's liquidity go
// first, maxMintBlocks of them.
func (r *reader) nameNFTs(ctx context.Context, pools []*clPool) error {
	type block struct {
		hash   common.Hash
		owners []common.Address
		mints  []*clMint
		weight float64
	}
	blocks := map[common.Hash]*block{}
	for _, cp := range pools {
		for _, m := range cp.mints {
			bl := blocks[m.blockHash]
			if bl == nil {
				bl = &block{hash: m.blockHash}
				blocks[m.blockHash] = bl
			}
			if !slices.Contains(bl.owners, m.owner) {
				bl.owners = append(bl.owners, m.owner)
			}
			bl.mints = append(bl.mints, m)
			bl.weight = max(bl.weight, m.share)
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	order := make([]*block, 0, len(blocks))
	for _, bl := range blocks {
		order = append(order, bl)
	}
	slices.SortFunc(order, func(a, b *block) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		return a.hash.Cmp(b.hash)
	})
	if len(order) > maxMintBlocks {
		skipped := map[*clPool]int{}
		for _, bl := range order[maxMintBlocks:] {
			for _, m := range bl.mints {
				skipped[m.pool]++
			}
		}
		for cp, n := range skipped {
			r.unread(cp.i, fmt.Sprintf("%d mints past the first %d blocks read: their NFTs, if any, are not named and count as other", n, maxMintBlocks))
		}
		order = order[:maxMintBlocks]
	}
	elems := make([]rpc.BatchElem, len(order))
	results := make([][]types.Log, len(order))
	for k, bl := range order {
		slices.SortFunc(bl.owners, func(a, b common.Address) int { return a.Cmp(b) })
		elems[k] = rpc.BatchElem{Method: "eth_getLogs", Result: &results[k], Args: []any{map[string]any{
			"blockHash": bl.hash, "address": bl.owners, "topics": []any{[]common.Hash{topicIncreaseLiquidity}}}}}
	}
	if err := r.c.Batch(ctx, elems); err != nil {
		return fmt.Errorf("liquidity: position manager logs: %w", err)
	}
	for k, bl := range order {
		if elems[k].Error != nil {
			for _, m := range bl.mints {
				r.unread(m.pool.i, fmt.Sprintf("logs of block %s: %v", bl.hash, elems[k].Error))
			}
			continue
		}
		for _, l := range results[k] {
			w, ok := dataWords(l.Data, 3)
			if !ok || len(l.Topics) != 2 {
				continue
			}
			for _, m := range bl.mints {
				if m.owner != l.Address || m.tx != l.TxHash || m.amount.Cmp(w(0)) != 0 || m.a0.Cmp(w(1)) != 0 || m.a1.Cmp(w(2)) != 0 {
					continue
				}
				id := hashWord(l.Topics[1])
				key := nftKey{l.Address, id.String()}
				n := m.pool.nfts[key]
				if n == nil {
					n = &nft{key: key, id: id, size: new(big.Int), ownerAt: -1, positionAt: -1}
					m.pool.nfts[key] = n
				}
				n.size.Add(n.size, m.amount)
				break
			}
		}
	}
	return nil
}

// managers are the NFT position managers of the pools: the owners of the
// Mints their IncreaseLiquidity named.
func managers(pools []*clPool) map[common.Address]bool {
	out := map[common.Address]bool{}
	for _, cp := range pools {
		for k := range cp.nfts {
			out[k.manager] = true
		}
	}
	return out
}

// followNFTs keeps the largest maxPositions NFTs of each pool and reads,
// in one logs query, their Transfer logs: the last names its holder.
func (r *reader) followNFTs(ctx context.Context, cls []*clPool, v4s []*v4Pool) error {
	var all []*nft
	from := r.in.Block
	for _, cp := range cls {
		ns := rank(cp.nfts)
		if len(ns) > maxPositions {
			r.unread(cp.i, fmt.Sprintf("%d NFT positions: the largest %d are read, the rest count as other", len(ns), maxPositions))
			ns = ns[:maxPositions]
		}
		cp.read = ns
		all = append(all, ns...)
		from = min(from, cp.from)
	}
	for _, vp := range v4s {
		for _, pos := range vp.read[:min(len(vp.read), maxPositions)] {
			if pos.nft != nil {
				all = append(all, pos.nft)
				from = min(from, vp.from)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	q := chain.LogQuery{From: from, To: r.in.Block, Topics: [][]common.Hash{{chain.TopicTransfer}, nil, nil, nil}}
	byKey := map[nftKey][]*nft{}
	for _, n := range all {
		if !slices.Contains(q.Addresses, n.key.manager) {
			q.Addresses = append(q.Addresses, n.key.manager)
		}
		id := common.BigToHash(n.id)
		if !slices.Contains(q.Topics[3], id) {
			q.Topics[3] = append(q.Topics[3], id)
		}
		byKey[n.key] = append(byKey[n.key], n)
	}
	slices.SortFunc(q.Addresses, func(a, b common.Address) int { return a.Cmp(b) })
	slices.SortFunc(q.Topics[3], func(a, b common.Hash) int { return a.Cmp(b) })
	logs, err := r.c.Logs(ctx, q)
	if err != nil {
		return fmt.Errorf("liquidity: NFT transfers: %w", err)
	}
	for _, l := range logs {
		if len(l.Topics) != 4 {
			continue // an ERC-20 Transfer
		}
		for _, n := range byKey[nftKey{l.Address, hashWord(l.Topics[3]).String()}] {
			n.holder = common.BytesToAddress(l.Topics[2][:])
		}
	}
	return nil
}

// rank orders NFTs largest first (then by id).
func rank(m map[nftKey]*nft) []*nft {
	out := make([]*nft, 0, len(m))
	for _, n := range m {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *nft) int {
		if c := b.size.Cmp(a.size); c != 0 {
			return c
		}
		if c := a.key.manager.Cmp(b.key.manager); c != 0 {
			return c
		}
		return a.id.Cmp(b.id)
	})
	return out
}

// clCalls adds p's confirmations to the batch: the pool's price and quote
// balance, each NFT's owner and position, and releaseTime() of the
// holders that are neither known nor managers.
func (r *reader) clCalls(b *batch, p *clPool) {
	p.slot0 = b.must(p.pool, calldata("slot0()"))
	p.quoteBalance = b.must(p.p.Quote, calldata("balanceOf(address)", p.pool))
	p.releaseAt = map[common.Address]int{}
	ask := func(a common.Address) {
		if _, known := r.known[a]; known || a == (common.Address{}) {
			return
		}
		if _, asked := p.releaseAt[a]; !asked {
			p.releaseAt[a] = b.call(a, calldata("releaseTime()"))
		}
	}
	for _, n := range p.read {
		n.ownerAt = b.call(n.key.manager, calldata("ownerOf(uint256)", n.id))
		n.positionAt = b.call(n.key.manager, calldata("positions(uint256)", n.id))
		ask(n.holder)
	}
	mgrs := managers([]*clPool{p})
	var direct []clKey
	for k, l := range p.ledger {
		if !mgrs[k.owner] && l.Sign() > 0 {
			direct = append(direct, k)
		}
	}
	slices.SortFunc(direct, func(a, b clKey) int { return p.ledger[b].Cmp(p.ledger[a]) })
	for k, key := range direct {
		if k == maxPositions {
			break
		}
		ask(key.owner)
	}
}

// v3LockerCalls asks the UNCX V3 locker, when it holds one of the NFTs,
// for the locks of the lock owners.
func (r *reader) v3LockerCalls(b *batch, pools []*clPool) {
	var locker common.Address
	for a, l := range r.lockers {
		if l.kind == uncxV3Kind {
			locker = a
		}
	}
	var creators []Pool
	held := false
	for _, cp := range pools {
		creators = append(creators, cp.p)
		for _, n := range cp.read {
			held = held || n.holder == locker
		}
	}
	if !held {
		return
	}
	for _, owner := range r.lockOwners(creators...) {
		for k := range maxLocksPerOwner {
			r.v3LockAt = append(r.v3LockAt, b.call(locker, calldata("getUserLockAtIndex(address,uint256)", owner, k)))
		}
	}
}

// v3Unlocks are the unlock dates of the NFTs the UNCX V3 locker's locks
// told of.
func (r *reader) v3Unlocks(b *batch) map[nftKey]uint64 {
	out := map[nftKey]uint64{}
	for _, i := range r.v3LockAt {
		ret, err := b.result(i)
		if err != nil {
			continue
		}
		if key, until, ok := uncxV3Lock(ret); ok {
			out[key] = until
		}
	}
	return out
}

// clShares reads p's confirmations into its answer: each position's
// value at the pool's price, by who holds it.
func (r *reader) clShares(b *batch, p *clPool, unlocks map[nftKey]uint64) {
	out := &r.out[p.i]
	if q := b.word(p.quoteBalance, 0); q != nil {
		out.QuoteReserve = q
	} else {
		r.unread(p.i, "the quote balance of the pool: "+b.why(p.quoteBalance))
	}
	sqrtW := b.word(p.slot0, 0)
	if sqrtW == nil || sqrtW.Sign() == 0 {
		r.unread(p.i, "slot0(): "+b.why(p.slot0)+": no shares without the price")
		return
	}
	sqrtP := sqrtPriceX96(sqrtW)
	left := map[clKey]*big.Int{}
	for k, l := range p.ledger {
		left[k] = new(big.Int).Set(l)
	}
	var t tally
	for _, n := range p.read {
		ownerRet, err := b.result(n.ownerAt)
		if err != nil || len(ownerRet) < 32 {
			if err != nil && !reverted(err) {
				r.unread(p.i, fmt.Sprintf("ownerOf(%s) on %s: %v", n.id, n.key.manager.Hex(), err))
			}
			continue // burned: it holds nothing
		}
		owner := common.BytesToAddress(ownerRet[:32])
		w := func(i int) *big.Int { return b.word(n.positionAt, i) }
		if w(7) == nil {
			r.unread(p.i, fmt.Sprintf("positions(%s) on %s: %s", n.id, n.key.manager.Hex(), b.why(n.positionAt)))
			continue
		}
		lower, upper, L := tick(w(5)), tick(w(6)), w(7)
		if l := left[clKey{n.key.manager, lower, upper}]; l != nil {
			l.Sub(l, L)
		}
		v, _ := value(p.quoteIs0, bigFloat(L), sqrtP, lower, upper)
		t.total += v
		switch {
		case r.lockers[owner].kind == uncxV3Kind:
			t.lock(r, owner, v, unlocks[n.key])
		case owner == n.holder:
			t.add(r, owner, v, releaseTime(b, indexOr(p.releaseAt, owner)))
		default:
			t.add(r, owner, v, 0)
		}
	}
	mgrs := managers([]*clPool{p})
	unnamed := 0.0
	for k, l := range left {
		if l.Sign() <= 0 {
			continue
		}
		v, _ := value(p.quoteIs0, bigFloat(l), sqrtP, k.lower, k.upper)
		t.total += v
		if mgrs[k.owner] {
			unnamed += v
			continue
		}
		t.add(r, k.owner, v, releaseTime(b, indexOr(p.releaseAt, k.owner)))
	}
	if unnamed > 0 && t.total > 0 {
		r.unread(p.i, fmt.Sprintf("%.4g of the liquidity is in NFT positions not read: counted as other", unnamed/t.total))
	}
	t.finish(out)
}
