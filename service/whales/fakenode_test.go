package whales_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/rpc"
)

// fakeNode is a JSON-RPC node over a fixed log history: eth_blockNumber
// and eth_getLogs on the wire, served by go-ethereum's own RPC server. It
// enforces a provider's caps (a block range of at most rangeCap blocks,
// at most resultCap logs an answer, refused with the messages providers
// send) and counts what it was asked and what it answered, so a test can
// hold the scan to its documented cost.
type fakeNode struct {
	rangeCap, resultCap uint64
	head                atomic.Uint64

	logs      []types.Log // by block, then index
	byAddress map[common.Address][]int
	// noise are the transactions the scan must never be given: traffic
	// of pools it does not follow, transfers between wallets.
	noise map[common.Hash]bool

	blockNumbers, getLogs, refused atomic.Int64
	// batches are JSON-RPC batches (the pools' creators), one round trip
	// each however many requests they hold.
	batches             atomic.Int64
	served, noiseServed atomic.Int64
	mu                  sync.Mutex
	maxRange            uint64 // the widest range answered
}

// newFakeNode serves logs (any order) with the head at head.
func newFakeNode(t testing.TB, logs []types.Log, noise map[common.Hash]bool, head uint64) (*fakeNode, *rpc.Client) {
	t.Helper()
	n := &fakeNode{rangeCap: 10_000, resultCap: 10_000, logs: logs, noise: noise, byAddress: map[common.Address][]int{}}
	slices.SortStableFunc(n.logs, func(a, b types.Log) int {
		if c := cmp.Compare(a.BlockNumber, b.BlockNumber); c != 0 {
			return c
		}
		return cmp.Compare(a.Index, b.Index)
	})
	for i, l := range n.logs {
		n.byAddress[l.Address] = append(n.byAddress[l.Address], i)
	}
	n.head.Store(head)
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", &fakeEth{n}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 && body[0] == '[' {
			n.batches.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		srv.ServeHTTP(w, r)
	}))
	c, err := rpc.Dial(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); hs.Close(); srv.Stop() })
	return n, c
}

// calls is every round trip answered or refused.
func (n *fakeNode) calls() int64 { return n.blockNumbers.Load() + n.getLogs.Load() + n.batches.Load() }

// fakeEth is the node's eth namespace.
type fakeEth struct{ n *fakeNode }

// BlockNumber is eth_blockNumber.
func (e *fakeEth) BlockNumber() hexutil.Uint64 {
	e.n.blockNumbers.Add(1)
	return hexutil.Uint64(e.n.head.Load())
}

// GetTransactionByHash is eth_getTransactionByHash: every transaction
// sent by one account.
func (e *fakeEth) GetTransactionByHash(common.Hash) map[string]any {
	return map[string]any{"from": fakeCreator}
}

// fakeCreator sends every transaction of a fake node.
var fakeCreator = common.HexToAddress("0xc0ffee")

// GetLogs is eth_getLogs over explicit block numbers, refusing what a
// provider with these caps refuses.
func (e *fakeEth) GetLogs(_ context.Context, q filters.FilterCriteria) ([]*types.Log, error) {
	n := e.n
	n.getLogs.Add(1)
	if q.FromBlock == nil || q.ToBlock == nil || q.FromBlock.Sign() < 0 || q.ToBlock.Sign() < 0 {
		return nil, errors.New("fake node: explicit fromBlock and toBlock only")
	}
	from, to := q.FromBlock.Uint64(), min(q.ToBlock.Uint64(), n.head.Load())
	if to >= from && to-from+1 > n.rangeCap {
		n.refused.Add(1)
		return nil, fmt.Errorf("eth_getLogs is limited to a %d range", n.rangeCap)
	}
	if len(q.Addresses) == 0 {
		return nil, errors.New("fake node: an address filter is required")
	}
	filter := topicSets(q.Topics)
	var idx []int
	for _, a := range q.Addresses {
		list := n.byAddress[a]
		start, _ := slices.BinarySearchFunc(list, from, func(i int, b uint64) int { return cmp.Compare(n.logs[i].BlockNumber, b) })
		for _, i := range list[start:] {
			if n.logs[i].BlockNumber > to {
				break
			}
			if matchTopics(n.logs[i].Topics, filter) {
				idx = append(idx, i)
			}
		}
	}
	if uint64(len(idx)) > n.resultCap {
		n.refused.Add(1)
		return nil, fmt.Errorf("query returned more than %d results", n.resultCap)
	}
	slices.Sort(idx)
	out := make([]*types.Log, len(idx))
	noise := 0
	for k, i := range idx {
		out[k] = &n.logs[i]
		if n.noise[n.logs[i].TxHash] {
			noise++
		}
	}
	n.served.Add(int64(len(out)))
	n.noiseServed.Add(int64(noise))
	n.mu.Lock()
	n.maxRange = max(n.maxRange, to-from+1)
	n.mu.Unlock()
	return out, nil
}

// topicSets turns eth_getLogs' topic filter into sets, position by
// position; nil matches anything.
func topicSets(filter [][]common.Hash) []map[common.Hash]bool {
	sets := make([]map[common.Hash]bool, len(filter))
	for i, alts := range filter {
		if len(alts) > 0 {
			sets[i] = map[common.Hash]bool{}
			for _, h := range alts {
				sets[i][h] = true
			}
		}
	}
	return sets
}

// matchTopics: every position with a set holds one of its topics.
func matchTopics(topics []common.Hash, filter []map[common.Hash]bool) bool {
	if len(filter) > len(topics) {
		return false
	}
	for i, set := range filter {
		if set != nil && !set[topics[i]] {
			return false
		}
	}
	return true
}
