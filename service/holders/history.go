package holders

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/tollgate/tollgate/service/chain"
)

// Bounds of one Read's cost, whatever the token's history: at most
// MaxQueries eth_getLogs (and one more for each chunk a provider refuses
// as too large, which the chain client halves), about MaxLogs Transfer
// logs, and one batch of at most MaxBatch calls.
const (
	// MaxBlocks bounds the blocks of history read: a week of Base blocks
	// (2 s each), the whale scan's window. Most tokens checked are
	// younger, and are read whole.
	MaxBlocks = 7 * 24 * 3600 / 2
	// MaxLogs is the Transfer logs a read aims at: about 13 MB of JSON,
	// two answers of a provider's 10,000. A chunk is sized from the
	// density of the one before it, so a read passes the aim by what its
	// last chunk holds above its expected share.
	MaxLogs = 20_000
	// MaxQueries bounds the chunks of history asked for: what an empty
	// history of MaxBlocks takes, 19 each way (chunks of 10, 80, 640 and
	// 5,120 blocks, then of 10,000, the chain client's default log range,
	// so that a chunk is one eth_getLogs).
	MaxQueries = 2 * (4 + (MaxBlocks/2-widening+maxChunk-1)/maxChunk)
	// MaxBatch bounds the calls of the one balanceOf batch (totalSupply,
	// the burn addresses, the token, owner, deployer, exclusions, then the
	// candidates): go-ethereum's default batch limit
	// (--rpc.batch-request-limit), which public Base nodes keep.
	MaxBatch = 1_000
	// TopN is how many holders are ranked.
	TopN = 10
)

// Chunking of the history: the first chunk each way is small (20 s of
// Base), as a launch is often the densest part of a history and nothing
// is known of the density before it: at a hundred transfers a block it
// holds a thousand. Each next one is at most growth times as wide, and
// at most maxChunk; widening are the blocks of the chunks narrower than
// maxChunk (four).
const (
	firstChunk = 10
	growth     = 8
	maxChunk   = 10_000
	widening   = firstChunk * (1 + growth + growth*growth + growth*growth*growth)
)

// Span is a range of blocks, both ends included.
type Span struct{ From, To uint64 }

// Blocks is the number of blocks in s.
func (s Span) Blocks() uint64 { return s.To - s.From + 1 }

// history is the part of a token's Transfer logs a read saw.
type history struct {
	whole Span  // the token's history: From to the inspected block
	head  *Span // read forward from whole.From; nil: none
	tail  *Span // read back from whole.To; nil: none
	logs  []types.Log
}

// complete: every block of the history was read.
func (h history) complete() bool {
	n := uint64(0)
	for _, s := range []*Span{h.head, h.tail} {
		if s != nil {
			n += s.Blocks()
		}
	}
	return n == h.whole.Blocks()
}

// spans are the ranges read, in block order; one when complete.
func (h history) spans() []Span {
	if h.complete() {
		return []Span{h.whole}
	}
	var out []Span
	for _, s := range []*Span{h.head, h.tail} {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// readHistory reads token's Transfer logs over whole within the bounds: a
// history of at most maxChunk blocks in one query when it holds at most
// MaxLogs logs; otherwise in chunks. When the token's creation is known (whole.From > 0) the first half of
// the budget goes forward from it, which sees the mint and the first
// distribution (team wallets, the pool, airdrops); the rest goes back
// from the inspected block, which sees today's traders. When creation is
// not known, all of it goes back from the inspected block.
func readHistory(ctx context.Context, c Chain, token common.Address, whole Span) (history, error) {
	h := history{whole: whole}
	if whole.Blocks() <= maxChunk {
		// A young token (or a short chain): its whole history in one
		// eth_getLogs, kept when it stays within the logs' bound.
		logs, err := c.Logs(ctx, chain.LogQuery{From: whole.From, To: whole.To, Addresses: []common.Address{token}, Topics: [][]common.Hash{{chain.TopicTransfer}}})
		if err != nil {
			return history{}, fmt.Errorf("holders: Transfer logs of %s, blocks %d-%d: %w", token, whole.From, whole.To, err)
		}
		if len(logs) <= MaxLogs {
			h.head, h.logs = &whole, logs
			return h, nil
		}
	}
	var headLogs, headQueries int
	if whole.From > 0 {
		n, q, logs, err := scan(ctx, c, token, whole, true, budget{MaxBlocks / 2, MaxLogs / 2, MaxQueries / 2})
		if err != nil {
			return history{}, err
		}
		headQueries = q
		if n > 0 {
			h.head = &Span{whole.From, whole.From + n - 1}
		}
		h.logs, headLogs = logs, len(logs)
	}
	rest := whole
	if h.head != nil {
		rest.From = h.head.To + 1
	}
	if h.head != nil && h.head.To == whole.To {
		return h, nil
	}
	// The tail keeps its half of the logs even when the head overshot
	// its own, and has whatever the head left unused.
	b := budget{MaxBlocks, MaxLogs - min(headLogs, MaxLogs/2), MaxQueries - headQueries}
	if h.head != nil {
		b.blocks -= h.head.Blocks()
	}
	n, _, logs, err := scan(ctx, c, token, rest, false, b)
	if err != nil {
		return history{}, err
	}
	if n > 0 {
		h.tail = &Span{whole.To - n + 1, whole.To}
	}
	h.logs = append(h.logs, logs...)
	return h, nil
}

// budget is what a scan may read.
type budget struct {
	blocks  uint64
	logs    int
	queries int
}

// scan reads token's Transfer logs over s in chunks, forward from s.From
// or back from s.To, until it has spent a part of its budget or read all
// of s, and returns how many blocks it read in how many queries. Each
// chunk is at most growth times as wide as the one before, and no wider
// than the logs left to read at the last chunk's density.
func scan(ctx context.Context, c Chain, token common.Address, s Span, forward bool, b budget) (uint64, int, []types.Log, error) {
	var logs []types.Log
	read, width, queries := uint64(0), uint64(firstChunk), 0
	for read < min(b.blocks, s.Blocks()) && len(logs) < b.logs && queries < b.queries {
		w := min(width, b.blocks-read, s.Blocks()-read)
		q := chain.LogQuery{Addresses: []common.Address{token}, Topics: [][]common.Hash{{chain.TopicTransfer}}}
		if forward {
			q.From = s.From + read
			q.To = q.From + w - 1
		} else {
			q.To = s.To - read
			q.From = q.To - w + 1
		}
		got, err := c.Logs(ctx, q)
		queries++
		if err != nil {
			return 0, 0, nil, fmt.Errorf("holders: Transfer logs of %s, blocks %d-%d: %w", token, q.From, q.To, err)
		}
		logs = append(logs, got...)
		read += w
		width = min(maxChunk, w*growth)
		if n, left := uint64(len(got)), b.logs-len(logs); n > 0 && left > 0 {
			width = min(width, max(1, uint64(left)*w/n))
		}
	}
	return read, queries, logs, nil
}

// transfer is a Transfer log decoded.
type transfer struct {
	from, to common.Address
	value    *big.Int
	block    uint64
}

// decode reads l as token's ERC-20 Transfer; false for anything else (an
// ERC-721 Transfer has its token id as a fourth topic and no data).
func decode(l types.Log, token common.Address) (transfer, bool) {
	if l.Removed || l.Address != token || len(l.Topics) != 3 || l.Topics[0] != chain.TopicTransfer || len(l.Data) != 32 {
		return transfer{}, false
	}
	return transfer{
		from:  common.BytesToAddress(l.Topics[1][12:]),
		to:    common.BytesToAddress(l.Topics[2][12:]),
		value: new(big.Int).SetBytes(l.Data),
		block: l.BlockNumber,
	}, true
}
