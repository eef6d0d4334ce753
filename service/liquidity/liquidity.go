package liquidity

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/whales"
)

// Chain is what Read needs of a node; *chain.Client provides it.
type Chain interface {
	// Batch sends elems in one round trip; per-call errors stay in each
	// elem's Error.
	Batch(ctx context.Context, elems []rpc.BatchElem) error
	// Logs returns the logs of q in block order.
	Logs(ctx context.Context, q chain.LogQuery) ([]types.Log, error)
}

// Bounds of one Read (see the package documentation for what happens
// past each).
const (
	// maxLogBlocks is the widest block range a pool's logs are read over:
	// seven days of Base blocks, the whale scan's window. An older pool's
	// logs are read over the last maxLogBlocks only.
	maxLogBlocks = 302_400
	// maxHolders is how many holders of a V2-style pair's LP token, the
	// largest by their transfers, are confirmed with balanceOf besides the
	// known addresses (burn, deployer, owner, lockers).
	maxHolders = 32
	// maxPositions is how many positions of a concentrated-liquidity or
	// V4 pool, the largest first, have their owner read.
	maxPositions = 32
	// maxMintBlocks is how many blocks of concentrated-liquidity Mints a
	// Read asks the minting contracts' logs of, to name NFT positions.
	maxMintBlocks = 16
	// maxLocksPerOwner is how many locks of one lock owner a locker is
	// asked for, per pool.
	maxLocksPerOwner = 3
	// maxTokenLocks is how many locks of one LP token PinkLock is asked
	// for.
	maxTokenLocks = 8
)

// Pool is one pool of the token, as the whale scan's snapshot gives it
// (whales.Pool).
type Pool struct {
	// ID is the pool's address, or a V4 pool's id in its PoolManager.
	ID    string
	Venue whales.Kind
	// Holder holds the pool's tokens: the pool, or the V4 PoolManager.
	Holder common.Address
	// Quote is the pool's quote asset (zero: native ETH, V4 only).
	Quote common.Address
	// Created is the block of the pool's creation.
	Created uint64
	// Creator sent the pool's creation (zero: unknown). It is asked of the
	// lockers as a lock owner, with the deployer and the owner.
	Creator common.Address
}

// Input is what Read reads.
type Input struct {
	Token common.Address
	// Block is the block every read is made at.
	Block uint64
	Pools []Pool
	// Deployer and Owner name the token's deployer and owner (nil:
	// unknown); an address that is both counts as the deployer.
	Deployer, Owner *common.Address
}

// PoolLiquidity is how one pool's liquidity is held, and what became of
// it since the pool's creation.
type PoolLiquidity struct {
	ID    string
	Venue whales.Kind
	// Time is the timestamp of the block read; a lock whose Until is not
	// after it has expired.
	Time uint64
	// QuoteReserve is the quote the pool holds now, QuoteAtCreation what
	// the first liquidity added brought, QuoteRemoved the quote taken out
	// by liquidity removals since; raw units of the quote, nil when not
	// read (Unread says why).
	QuoteReserve, QuoteAtCreation, QuoteRemoved *big.Int
	// Shares of the pool's liquidity (V2-style pairs: of the LP supply
	// less the minimum the pair locks at its first mint; concentrated
	// liquidity and V4: of the value of the positions at the pool's
	// price): burned (held by 0x0 or 0x…dEaD), locked (in a recognised
	// locker, or in a contract answering releaseTime(), until a time not
	// yet reached), held by the deployer, by the owner, and the rest. They
	// sum to 1, or are all 0 when the pool holds no liquidity.
	Burned, Locked, Deployer, Owner, Other float64
	// Locks are the locks found, expired ones included (counted in
	// Other).
	Locks []Lock
	// Unread says what could not be read or was estimated, and why.
	Unread []string
}

// Lock is liquidity in a locker.
type Lock struct {
	// Locker holds the liquidity; Name is the recognised locker's name
	// (Lockers), or "releaseTime()" for another contract that answers it.
	Locker common.Address
	Name   string
	// Recognised: Locker is a known locker deployment, not a contract
	// taken at its word.
	Recognised bool
	// Share of the pool's liquidity.
	Share float64
	// Until is the release time (unix seconds), 0 when unknown; Expired
	// when it is not after the block read.
	Until   uint64
	Expired bool
}

// Read reads, at in.Block, how each of in.Pools holds its liquidity and
// what was added and removed since its creation: one logs query per kind
// of venue (V2-style, concentrated liquidity, each V4 PoolManager), for a
// concentrated-liquidity or V4 pool with NFT positions one batch of
// block logs and one logs query more (which NFT holds which position,
// and where it went), then one batch of calls for everything confirmed at
// the block (balances, supplies, reserves, prices, owners, release
// times). The pools come back in order.
func Read(ctx context.Context, c Chain, in Input) ([]PoolLiquidity, error) {
	r := &reader{c: c, in: in, out: make([]PoolLiquidity, len(in.Pools)), lockers: recognised()}
	r.known = knownAddresses(in, r.lockers)
	var v2s, cls []int
	v4s := map[common.Address][]int{}
	for i, p := range in.Pools {
		r.out[i] = PoolLiquidity{ID: p.ID, Venue: p.Venue}
		switch {
		case p.Created > in.Block:
			r.unread(i, "the pool was created after the block read")
		case p.Venue == whales.UniswapV2 || p.Venue == whales.Aerodrome:
			v2s = append(v2s, i)
		case p.Venue == whales.UniswapV3 || p.Venue == whales.PancakeV3 || p.Venue == whales.Slipstream:
			cls = append(cls, i)
		case p.Venue == whales.UniswapV4:
			v4s[p.Holder] = append(v4s[p.Holder], i)
		default:
			r.unread(i, fmt.Sprintf("venue %q is not read", p.Venue))
		}
	}

	// One logs query per kind, at once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	run := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	var v2 []*v2Pool
	var cl []*clPool
	var v4 []*v4Pool
	if len(v2s) > 0 {
		run(func() (err error) { v2, err = r.v2Logs(ctx, v2s); return err })
	}
	if len(cls) > 0 {
		run(func() (err error) { cl, err = r.clLogs(ctx, cls); return err })
	}
	poolManagers := slices.SortedFunc(maps.Keys(v4s), func(a, b common.Address) int { return a.Cmp(b) })
	v4parts := make([][]*v4Pool, len(poolManagers))
	for k, m := range poolManagers {
		run(func() (err error) { v4parts[k], err = r.v4Logs(ctx, m, v4s[m]); return err })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, part := range v4parts {
		v4 = append(v4, part...)
	}

	// Concentrated liquidity: name the NFT positions (block logs), then
	// follow the NFTs, and V4's, to their holders.
	if err := r.nameNFTs(ctx, cl); err != nil {
		return nil, err
	}
	if err := r.followNFTs(ctx, cl, v4); err != nil {
		return nil, err
	}

	// One batch confirms everything at the block.
	b := &batch{block: hexutil.EncodeUint64(in.Block)}
	var header struct {
		Number    *hexutil.Uint64 `json:"number"`
		Timestamp hexutil.Uint64  `json:"timestamp"`
	}
	b.elems = append(b.elems, rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{b.block, false}, Result: &header})
	b.rets = append(b.rets, nil)
	for _, p := range v2 {
		r.v2Calls(b, p)
	}
	for _, p := range cl {
		r.clCalls(b, p)
	}
	for _, p := range v4 {
		r.v4Calls(b, p)
	}
	r.v3LockerCalls(b, cl)
	if err := c.Batch(ctx, b.elems); err != nil {
		return nil, fmt.Errorf("liquidity: %w", err)
	}
	if e := b.elems[0].Error; e != nil {
		return nil, fmt.Errorf("liquidity: block %d: %w", in.Block, e)
	}
	if header.Number == nil {
		return nil, fmt.Errorf("liquidity: block %d not found", in.Block)
	}
	if err := b.failed(); err != nil {
		return nil, fmt.Errorf("liquidity: %w", err)
	}
	r.time = uint64(header.Timestamp)
	for _, p := range v2 {
		r.v2Shares(b, p)
	}
	unlocks := r.v3Unlocks(b)
	for _, p := range cl {
		r.clShares(b, p, unlocks)
	}
	for _, p := range v4 {
		r.v4Shares(b, p)
	}
	for i := range r.out {
		r.out[i].Time = r.time
	}
	return r.out, nil
}

// reader is one Read.
type reader struct {
	c     Chain
	in    Input
	out   []PoolLiquidity
	known map[common.Address]role
	// lockers are the recognised lockers.
	lockers map[common.Address]locker
	time    uint64
	// v3LockAt are the calls asking the UNCX V3 locker for locks.
	v3LockAt []int
}

func (r *reader) unread(i int, why string) { r.out[i].Unread = append(r.out[i].Unread, why) }

// logRange is the block range a pool's logs are read over, and whether
// it starts after the pool's creation (maxLogBlocks).
func (r *reader) logRange(p Pool) (from uint64, clipped bool) {
	from = p.Created
	if r.in.Block-from >= maxLogBlocks {
		return r.in.Block - maxLogBlocks + 1, true
	}
	return from, false
}

// since is pool i's first block to read logs from (logRange), saying
// in its Unread when that is after its creation.
func (r *reader) since(i int) (from uint64, clipped bool) {
	from, clipped = r.logRange(r.in.Pools[i])
	if clipped {
		r.unread(i, clippedNote(from))
	}
	return from, clipped
}

// clippedNote is said of a pool whose logs start after its creation.
func clippedNote(from uint64) string {
	return fmt.Sprintf("logs read from block %d only (the last %d blocks): the liquidity at creation and removals before are not read, "+
		"and holders who got their share before and never moved it are found only among the known addresses", from, maxLogBlocks)
}
