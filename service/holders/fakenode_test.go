package holders_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
)

// fakeNode is a JSON-RPC node over one token's synthetic history:
// eth_getLogs and eth_call (balanceOf, totalSupply) on the wire, served
// by go-ethereum's own RPC server over HTTP. The token is a plain ERC-20:
// a balance is what Transfer logs credited less what they debited, a
// transfer to the zero address burns (the zero address holds nothing),
// one to 0x…dEaD accrues there. The node keeps a provider's caps (a block
// range of at most 10,000 blocks, at most 10,000 logs an answer, refused
// with the messages providers send), and counts what it was asked and
// what it answered, so a test can hold a read to its documented cost.
type fakeNode struct {
	token common.Address
	head  uint64
	addrs []common.Address // an index of moves -> address
	index map[common.Address]uint32
	moves []move // by block

	rangeCap, resultCap uint64

	getLogs, refused, served atomic.Int64
	// batches are JSON-RPC batches, one round trip each; lone are calls
	// sent outside a batch.
	batches, lone, calls, bytes atomic.Int64
	mu                          sync.Mutex
	atBlocks                    map[string]bool // the blocks eth_call was asked at
	balances                    map[uint64][]uint64
}

// move is one Transfer of the history.
type move struct {
	block    uint64
	from, to uint32
	value    uint64
}

// Indexes of the addresses every history has.
const (
	iZero = iota
	iDead
	iDeployer
	iPool
	iFirstHolder
)

var (
	fakeToken = common.HexToAddress("0x7070707070707070707070707070707070707070")
	deadAddr  = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
)

// holderAddr is the address of index i.
func holderAddr(i uint32) common.Address {
	switch i {
	case iZero:
		return common.Address{}
	case iDead:
		return deadAddr
	}
	var a common.Address
	copy(a[:], "holder")
	binary.BigEndian.PutUint32(a[16:], i)
	return a
}

// newFakeNode serves moves (in block order) of fakeToken with its head at
// head, until the test ends.
func newFakeNode(t testing.TB, moves []move, head uint64) (*fakeNode, *chain.Client) {
	t.Helper()
	n := &fakeNode{token: fakeToken, head: head, moves: moves, index: map[common.Address]uint32{},
		rangeCap: 10_000, resultCap: 10_000, atBlocks: map[string]bool{}, balances: map[uint64][]uint64{}}
	top := uint32(0)
	for _, m := range moves {
		top = max(top, m.from, m.to)
	}
	for i := range top + 1 {
		a := holderAddr(i)
		n.addrs = append(n.addrs, a)
		n.index[a] = i
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", &fakeEth{n}); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 && body[0] == '[' {
			n.batches.Add(1)
		} else {
			var one struct{ Method string }
			if json.Unmarshal(body, &one) == nil && one.Method == "eth_call" {
				n.lone.Add(1)
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		srv.ServeHTTP(countingWriter{w, &n.bytes}, r)
	}))
	rc, err := rpc.Dial(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close(); hs.Close(); srv.Stop() })
	c, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

// countingWriter counts the bytes of the node's answers.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return w.ResponseWriter.Write(p)
}

// balancesAt is every index's balance at block (cached).
func (n *fakeNode) balancesAt(block uint64) []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if b, ok := n.balances[block]; ok {
		return b
	}
	b := make([]uint64, len(n.addrs))
	for _, m := range n.moves {
		if m.block > block {
			break
		}
		if m.from != iZero {
			b[m.from] -= m.value
		}
		if m.to != iZero {
			b[m.to] += m.value
		}
	}
	n.balances[block] = b
	return b
}

// balance is a's balance at block.
func (n *fakeNode) balance(a common.Address, block uint64) *big.Int {
	i, ok := n.index[a]
	if !ok {
		return new(big.Int)
	}
	return new(big.Int).SetUint64(n.balancesAt(block)[i])
}

// supply is the total supply at block: minted less burned.
func (n *fakeNode) supply(block uint64) *big.Int {
	var s uint64
	for _, m := range n.moves {
		if m.block > block {
			break
		}
		if m.from == iZero {
			s += m.value
		}
		if m.to == iZero {
			s -= m.value
		}
	}
	return new(big.Int).SetUint64(s)
}

// log is move i as the token's Transfer log.
func (n *fakeNode) log(i int) *types.Log {
	m := n.moves[i]
	from, to := n.addrs[m.from], n.addrs[m.to]
	return &types.Log{
		Address:     n.token,
		Topics:      []common.Hash{transferTopic, common.BytesToHash(from[:]), common.BytesToHash(to[:])},
		Data:        common.LeftPadBytes(new(big.Int).SetUint64(m.value).Bytes(), 32),
		BlockNumber: m.block,
		TxHash:      common.BigToHash(big.NewInt(int64(i) + 1)),
		BlockHash:   common.BigToHash(new(big.Int).SetUint64(m.block + 1<<40)),
		Index:       uint(i % 1000),
	}
}

var transferTopic = common.HexToHash("0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef")

// fakeEth is the node's eth namespace.
type fakeEth struct{ n *fakeNode }

// GetLogs is eth_getLogs over explicit block numbers, refusing what a
// provider with the node's caps refuses.
func (e *fakeEth) GetLogs(_ context.Context, q filters.FilterCriteria) ([]*types.Log, error) {
	n := e.n
	n.getLogs.Add(1)
	if q.FromBlock == nil || q.ToBlock == nil || q.FromBlock.Sign() < 0 || q.ToBlock.Sign() < 0 {
		return nil, errors.New("fake node: explicit fromBlock and toBlock only")
	}
	from, to := q.FromBlock.Uint64(), min(q.ToBlock.Uint64(), n.head)
	if to >= from && to-from+1 > n.rangeCap {
		n.refused.Add(1)
		return nil, fmt.Errorf("eth_getLogs is limited to a %d range", n.rangeCap)
	}
	if len(q.Addresses) != 1 || q.Addresses[0] != n.token || len(q.Topics) != 1 || len(q.Topics[0]) != 1 || q.Topics[0][0] != transferTopic {
		return nil, errors.New("fake node: the token's Transfer logs only")
	}
	lo := sort.Search(len(n.moves), func(i int) bool { return n.moves[i].block >= from })
	hi := sort.Search(len(n.moves), func(i int) bool { return n.moves[i].block > to })
	if hi-lo > int(n.resultCap) {
		n.refused.Add(1)
		return nil, fmt.Errorf("query returned more than %d results", n.resultCap)
	}
	out := make([]*types.Log, 0, max(0, hi-lo))
	for i := lo; i < hi; i++ {
		out = append(out, n.log(i))
	}
	n.served.Add(int64(len(out)))
	return out, nil
}

// callArgs are the fields of eth_call's transaction the node reads.
type callArgs struct {
	To   *common.Address `json:"to"`
	Data hexutil.Bytes   `json:"data"`
}

// Call is eth_call of the token's balanceOf and totalSupply.
func (e *fakeEth) Call(args callArgs, at rpc.BlockNumberOrHash) (hexutil.Bytes, error) {
	n := e.n
	n.calls.Add(1)
	num, ok := at.Number()
	if !ok || num < 0 {
		return nil, errors.New("fake node: a block number only")
	}
	n.mu.Lock()
	n.atBlocks[fmt.Sprint(int64(num))] = true
	n.mu.Unlock()
	if args.To == nil || *args.To != n.token {
		return nil, errors.New("execution reverted")
	}
	block := uint64(num)
	switch {
	case len(args.Data) == 36 && bytes.Equal(args.Data[:4], hexutil.MustDecode("0x70a08231")):
		return common.LeftPadBytes(n.balance(common.BytesToAddress(args.Data[4:]), block).Bytes(), 32), nil
	case len(args.Data) == 4 && bytes.Equal(args.Data, hexutil.MustDecode("0x18160ddd")):
		return common.LeftPadBytes(n.supply(block).Bytes(), 32), nil
	}
	return nil, errors.New("execution reverted")
}

// Shape of a synthetic history.
type synth struct {
	moves int
	// span are the blocks the moves spread over, evenly; burst puts the
	// given share of them in its first burstBlocks instead.
	span        [2]uint64
	burst       float64
	burstBlocks uint64
	// holders is the population of wallets that trade.
	holders int
	seed    uint64
}

// fakeSupply is the synthetic token's supply: 10^9 tokens of 9 decimals.
const fakeSupply = 1_000_000_000_000_000_000

// history generates a plausible token history: the supply minted to the
// deployer, 60 % of it put in the pool, 2 % to each of five team
// wallets, then buys from the pool, sales to it, transfers between
// wallets and burns to 0x…dEaD, older wallets trading more often.
func (s synth) history() []move {
	rng := rand.New(rand.NewPCG(s.seed, 0x401de75))
	pop := uint32(iFirstHolder + s.holders)
	bal := make([]uint64, pop)
	out := make([]move, 0, s.moves)
	add := func(from, to uint32, v uint64) {
		if from != iZero {
			bal[from] -= v
		}
		bal[to] += v
		out = append(out, move{from: from, to: to, value: v})
	}
	add(iZero, iDeployer, fakeSupply)
	add(iDeployer, iPool, fakeSupply/100*60)
	for k := range uint32(5) {
		add(iDeployer, iFirstHolder+k, fakeSupply/100*2)
	}
	wallet := func() uint32 {
		// arrivals: the population known so far grows with the history
		known := min(uint64(s.holders), 10+uint64(len(out))/3)
		return iFirstHolder + uint32(min(rng.Uint64N(known), rng.Uint64N(known)))
	}
	for len(out) < s.moves {
		switch r := rng.IntN(100); {
		case r < 45: // a buy
			if bal[iPool] < 500 {
				continue
			}
			add(iPool, wallet(), 1+rng.Uint64N(bal[iPool]/500))
		case r < 80: // a sale
			w := wallet()
			if bal[w] == 0 {
				continue
			}
			add(w, iPool, 1+rng.Uint64N(bal[w]))
		case r < 95: // a transfer between wallets
			w, to := wallet(), wallet()
			if bal[w] == 0 || w == to {
				continue
			}
			add(w, to, 1+rng.Uint64N(bal[w]))
		default: // a burn
			w := wallet()
			if bal[w] < 10 {
				continue
			}
			add(w, iDead, bal[w]/10)
		}
	}
	from, blocks := s.span[0], s.span[1]-s.span[0]+1
	burst := int(s.burst * float64(len(out)))
	for i := range out {
		if i < burst {
			out[i].block = from + uint64(i)*s.burstBlocks/uint64(burst)
		} else {
			j, n := uint64(i-burst), uint64(len(out)-burst)
			out[i].block = from + s.burstBlocks + j*(blocks-s.burstBlocks)/n
		}
	}
	return out
}

// truth is what the node holds at block: each non-zero balance but the
// burn addresses', and the addresses credited in spans.
func (n *fakeNode) truth(block uint64, spans [][2]uint64) (holders int, credited map[common.Address]bool) {
	bals := n.balancesAt(block)
	for i, b := range bals {
		if i != iZero && i != iDead && b > 0 {
			holders++
		}
	}
	credited = map[common.Address]bool{}
	for _, m := range n.moves {
		for _, s := range spans {
			if m.block >= s[0] && m.block <= s[1] {
				credited[n.addrs[m.to]] = true
			}
		}
	}
	return holders, credited
}

// largest are the n largest non-zero balances at block among addrs, left
// out those in skip.
func (n *fakeNode) largest(block uint64, addrs map[common.Address]bool, skip map[common.Address]bool, k int) []common.Address {
	var out []common.Address
	for a := range addrs {
		if !skip[a] && n.balance(a, block).Sign() > 0 {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b common.Address) int {
		if c := n.balance(b, block).Cmp(n.balance(a, block)); c != 0 {
			return c
		}
		return bytes.Compare(a[:], b[:])
	})
	return out[:min(k, len(out))]
}

// byBlock sorts moves by block (a generated history is).
func byBlock(moves []move) {
	slices.SortStableFunc(moves, func(a, b move) int { return cmp.Compare(a.block, b.block) })
}
