package deployer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/deployer"
	"github.com/tollgate/tollgate/service/whales"
)

var _ deployer.Chain = (*chain.Client)(nil)

// fakeChain answers a Read as a node would: the logs it holds in the
// range asked, and the transactions and receipts it knows (JSON null for
// the others). It counts what it was asked.
type fakeChain struct {
	logs     []types.Log
	txs      map[common.Hash]any
	receipts map[common.Hash]any
	// failLogs and failCall make eth_getLogs, and one method of a batch,
	// fail.
	failLogs error
	failCall string
	queries  []chain.LogQuery
	batches  int
}

func (f *fakeChain) Logs(_ context.Context, q chain.LogQuery) ([]types.Log, error) {
	f.queries = append(f.queries, q)
	if f.failLogs != nil {
		return nil, f.failLogs
	}
	var out []types.Log
	for _, l := range f.logs {
		if l.BlockNumber >= q.From && l.BlockNumber <= q.To && l.Address == q.Addresses[0] {
			out = append(out, l)
		}
	}
	return out, nil
}

func (f *fakeChain) Batch(_ context.Context, b []rpc.BatchElem) error {
	f.batches++
	for i, e := range b {
		if e.Method == f.failCall {
			b[i].Error = errors.New("429 too many requests")
			continue
		}
		var v any
		switch h := e.Args[0].(common.Hash); e.Method {
		case "eth_getTransactionByHash":
			v = f.txs[h]
		case "eth_getTransactionReceipt":
			v = f.receipts[h]
		default:
			return fmt.Errorf("unexpected %s", e.Method)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, e.Result); err != nil {
			return err
		}
	}
	return nil
}

func addr(n int) common.Address { return common.BigToAddress(big.NewInt(int64(0x1000 + n))) }
func hash(n int) common.Hash    { return common.BigToHash(big.NewInt(int64(0x1000 + n))) }
func ptr[T any](v T) *T         { return &v }

var (
	topicTransfer = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	topicUserOp   = crypto.Keccak256Hash([]byte("UserOperationEvent(bytes32,address,address,uint256,bool,uint256,uint256)"))
)

// mint is the token's Transfer from 0x0 at block and index, in tx.
func mint(token common.Address, block uint64, index uint, tx common.Hash) types.Log {
	return types.Log{Address: token, Topics: []common.Hash{topicTransfer, {}, common.BytesToHash(addr(99).Bytes())},
		BlockNumber: block, Index: index, TxHash: tx}
}

func txJSON(from common.Address, to *common.Address, nonce uint64) map[string]any {
	return map[string]any{"from": from, "to": to, "nonce": fmt.Sprintf("%#x", nonce)}
}

// logJSON is a receipt's log of emitter at index, with topics.
func logJSON(emitter common.Address, index uint, topics ...common.Hash) map[string]any {
	return map[string]any{"address": emitter, "topics": topics, "logIndex": fmt.Sprintf("%#x", index)}
}

func receiptJSON(contract *common.Address, logs ...map[string]any) map[string]any {
	if logs == nil {
		logs = []map[string]any{}
	}
	return map[string]any{"contractAddress": contract, "logs": logs}
}

// userOp is an entry point's UserOperationEvent for account's operation.
func userOp(entryPoint common.Address, index uint, account common.Address) map[string]any {
	return logJSON(entryPoint, index, topicUserOp, hash(50), common.BytesToHash(account.Bytes()), common.Hash{})
}

func TestRead(t *testing.T) {
	t.Parallel()
	var (
		token, other                    = addr(1), addr(2)
		dev, bundler, account, account2 = addr(3), addr(4), addr(5), addr(6)
		pad, router, entryPoint         = addr(7), addr(8), addr(9)
		unknownFactory                  = addr(10)
		mintTx, poolTx                  = hash(1), hash(2)
		transferTopic                   = logJSON(token, 3, topicTransfer, common.Hash{}, common.BytesToHash(dev.Bytes()))
		launched                        = crypto.Keccak256Hash([]byte("Launched(address,address,address)"))
	)
	const block = 1_000_000
	pool := whales.Pool{ID: addr(20).Hex(), Holder: addr(20), Venue: whales.UniswapV2, Created: 900_000, CreatedTx: poolTx, Creator: addr(21)}
	cfg := deployer.Config{Launchpads: map[common.Address]string{pad: "pad v1"}, CreationWindow: 100, RecentWindow: 50, MaxTokens: 2}

	type want struct {
		deployer  common.Address // zero: none
		source    string
		tx        common.Hash
		factory   common.Address // zero: none
		launchpad string
		searched  deployer.Range
		notes     []string // substrings of Note
		batches   int
	}
	tests := []struct {
		name  string
		token common.Address // zero: token
		chain fakeChain
		pools []whales.Pool
		want  want
	}{
		{
			name: "direct deployment",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 899_950, 0, mintTx)},
				txs:      map[common.Hash]any{mintTx: txJSON(dev, nil, 7)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(&token, transferTopic)},
			},
			pools: []whales.Pool{pool},
			want:  want{deployer: dev, source: deployer.SourceCreation, tx: mintTx, searched: deployer.Range{From: 899_901, To: 900_000}, batches: 1},
		},
		{
			name:  "direct deployment, no receipt: the address from sender and nonce",
			token: crypto.CreateAddress(dev, 7),
			chain: fakeChain{
				logs: []types.Log{mint(crypto.CreateAddress(dev, 7), 899_950, 0, mintTx)},
				txs:  map[common.Hash]any{mintTx: txJSON(dev, nil, 7)},
			},
			pools: []whales.Pool{pool},
			want:  want{deployer: dev, source: deployer.SourceCreation, tx: mintTx, searched: deployer.Range{From: 899_901, To: 900_000}, batches: 1},
		},
		{
			name: "created by a contract's constructor",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 899_950, 0, mintTx)},
				txs:      map[common.Hash]any{mintTx: txJSON(dev, nil, 7)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(&unknownFactory)},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: dev, source: deployer.SourceCreation, tx: mintTx, factory: unknownFactory, searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"while deploying contract " + unknownFactory.Hex()}, batches: 1},
		},
		{
			name: "the earliest mint of several, the pools' earliest",
			chain: fakeChain{
				logs: []types.Log{mint(token, 899_990, 1, hash(9)), mint(token, 899_960, 5, mintTx), mint(token, 899_960, 2, hash(8)),
					mint(token, 899_800, 0, hash(7)), {Address: token, Topics: []common.Hash{topicTransfer, common.BytesToHash(dev.Bytes()), {}}, BlockNumber: 899_901}},
				txs:      map[common.Hash]any{hash(8): txJSON(dev, &pad, 1)},
				receipts: map[common.Hash]any{hash(8): receiptJSON(nil)},
			},
			pools: []whales.Pool{{Created: 950_000}, pool},
			want:  want{deployer: dev, source: deployer.SourceCreation, tx: hash(8), factory: pad, launchpad: "pad v1", searched: deployer.Range{From: 899_901, To: 900_000}, batches: 1},
		},
		{
			name: "a known launchpad called",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 900_000, 4, mintTx)},
				txs:      map[common.Hash]any{mintTx: txJSON(dev, &pad, 1)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(nil, logJSON(pad, 6, launched))},
			},
			pools: []whales.Pool{pool},
			want:  want{deployer: dev, source: deployer.SourceCreation, tx: mintTx, factory: pad, launchpad: "pad v1", searched: deployer.Range{From: 899_901, To: 900_000}, batches: 1},
		},
		{
			name: "a known launchpad called through a router",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 900_000, 4, mintTx)},
				txs:      map[common.Hash]any{mintTx: txJSON(dev, &router, 1)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(nil, logJSON(router, 2, hash(40)), logJSON(pad, 6, launched))},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: dev, source: deployer.SourceCreation, tx: mintTx, factory: pad, launchpad: "pad v1", searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"called by contract " + router.Hex()}, batches: 1},
		},
		{
			name: "an unknown factory",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 900_000, 4, mintTx)},
				txs:      map[common.Hash]any{mintTx: txJSON(dev, &unknownFactory, 1)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(nil)},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: dev, source: deployer.SourceCreation, tx: mintTx, factory: unknownFactory, searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"not a known launchpad"}, batches: 1},
		},
		{
			name: "a later mint called on the token",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 899_990, 0, mintTx)},
				txs:      map[common.Hash]any{mintTx: txJSON(dev, &token, 1)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(nil, logJSON(pad, 1, launched))},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: dev, source: deployer.SourceMint, tx: mintTx, searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"called the token itself"}, batches: 1},
		},
		{
			name: "a bundle: the account of the operation after the mint, its own launchpad log",
			chain: fakeChain{
				logs: []types.Log{mint(token, 900_000, 4, mintTx)},
				txs:  map[common.Hash]any{mintTx: txJSON(bundler, &entryPoint, 1)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(nil,
					logJSON(unknownFactory, 1, launched), userOp(entryPoint, 2, account2),
					logJSON(pad, 3, launched), logJSON(token, 4, topicTransfer), userOp(entryPoint, 5, account),
					logJSON(unknownFactory, 6, launched), userOp(entryPoint, 7, account2))},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: account, source: deployer.SourceCreation, tx: mintTx, factory: pad, launchpad: "pad v1", searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"sent by bundler " + bundler.Hex()}, batches: 1},
		},
		{
			name: "a bundle whose operation names no launchpad",
			chain: fakeChain{
				logs: []types.Log{mint(token, 900_000, 4, mintTx)},
				txs:  map[common.Hash]any{mintTx: txJSON(bundler, &entryPoint, 1)},
				receipts: map[common.Hash]any{mintTx: receiptJSON(nil,
					logJSON(pad, 1, launched), userOp(entryPoint, 2, account2), logJSON(token, 4, topicTransfer), userOp(entryPoint, 5, account))},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: account, source: deployer.SourceCreation, tx: mintTx, searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"ERC-4337"}, batches: 1},
		},
		{
			name: "no mint in range: the pool's creation, which called a launchpad",
			chain: fakeChain{
				logs:     []types.Log{mint(token, 899_900, 0, mintTx), mint(token, 900_001, 0, hash(9))},
				txs:      map[common.Hash]any{poolTx: txJSON(dev, &pad, 3)},
				receipts: map[common.Hash]any{poolTx: receiptJSON(nil)},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: dev, source: deployer.SourcePoolCreator, tx: poolTx, factory: pad, launchpad: "pad v1", searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"no mint (Transfer from 0x0) in blocks 899901-900000", "creator of the first pool"}, batches: 1},
		},
		{
			name: "no mint in range: the pool's creation by one user operation",
			chain: fakeChain{
				txs:      map[common.Hash]any{poolTx: txJSON(bundler, &entryPoint, 3)},
				receipts: map[common.Hash]any{poolTx: receiptJSON(nil, logJSON(pad, 1, launched), userOp(entryPoint, 2, account))},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: account, source: deployer.SourcePoolCreator, tx: poolTx, factory: pad, launchpad: "pad v1", searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"user operation"}, batches: 1},
		},
		{
			name: "no mint in range: the pool's creation in a bundle of several",
			chain: fakeChain{
				txs:      map[common.Hash]any{poolTx: txJSON(bundler, &entryPoint, 3)},
				receipts: map[common.Hash]any{poolTx: receiptJSON(nil, userOp(entryPoint, 2, account), userOp(entryPoint, 3, account2))},
			},
			pools: []whales.Pool{pool},
			want:  want{searched: deployer.Range{From: 899_901, To: 900_000}, notes: []string{"bundle of 2", "deployer is not known"}, batches: 1},
		},
		{
			name:  "no mint, the pool's transaction not known: its creator in the snapshot",
			chain: fakeChain{},
			pools: []whales.Pool{pool},
			want:  want{deployer: pool.Creator, source: deployer.SourcePoolCreator, tx: poolTx, searched: deployer.Range{From: 899_901, To: 900_000}, batches: 1},
		},
		{
			name:  "no mint, no creation transaction: the snapshot's creator, no batch",
			chain: fakeChain{},
			pools: []whales.Pool{{ID: "p", Created: 900_000, Creator: addr(21)}},
			want:  want{deployer: addr(21), source: deployer.SourcePoolCreator, searched: deployer.Range{From: 899_901, To: 900_000}, batches: 0},
		},
		{
			name: "the mint's transaction not known: the snapshot's creator, no second batch",
			chain: fakeChain{
				logs: []types.Log{mint(token, 899_950, 0, mintTx)},
				txs:  map[common.Hash]any{poolTx: txJSON(dev, &pad, 3)},
			},
			pools: []whales.Pool{pool},
			want: want{deployer: pool.Creator, source: deployer.SourcePoolCreator, tx: poolTx, searched: deployer.Range{From: 899_901, To: 900_000},
				notes: []string{"did not return the mint's transaction"}, batches: 1},
		},
		{
			name:  "no pool: the window ends at the read block",
			chain: fakeChain{},
			want:  want{searched: deployer.Range{From: block - 99, To: block}, notes: []string{"no followed pool", "not known"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := tt.chain
			tok := tt.token
			if tok == (common.Address{}) {
				tok = token
			}
			in := deployer.Input{Token: tok, Block: block, Pools: tt.pools,
				Snapshot: &whales.Snapshot{Pools: map[common.Address][]whales.Pool{other: {{Created: 1, Creator: addr(77)}}}}}
			r, err := deployer.Read(context.Background(), &c, in, cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if got := deref(r.Deployer); got != w.deployer || r.Source != w.source || r.Tx != w.tx {
				t.Errorf("deployer %s from %q in %s, want %s from %q in %s (note %q)", got, r.Source, r.Tx, w.deployer, w.source, w.tx, r.Note)
			}
			if got := deref(r.Factory); got != w.factory || r.Launchpad != w.launchpad {
				t.Errorf("factory %s %q, want %s %q", got, r.Launchpad, w.factory, w.launchpad)
			}
			if r.Searched != w.searched {
				t.Errorf("searched %+v, want %+v", r.Searched, w.searched)
			}
			for _, n := range w.notes {
				if !strings.Contains(r.Note, n) {
					t.Errorf("note %q lacks %q", r.Note, n)
				}
			}
			if len(c.queries) != 1 || c.batches != w.batches {
				t.Errorf("%d log queries and %d batches, want 1 and %d", len(c.queries), c.batches, w.batches)
			}
			if q := c.queries[0]; len(q.Topics) != 2 || q.Topics[0][0] != topicTransfer || q.Topics[1][0] != (common.Hash{}) {
				t.Errorf("query %+v: want Transfer from 0x0", q)
			}
		})
	}
}

func deref(a *common.Address) common.Address {
	if a == nil {
		return common.Address{}
	}
	return *a
}

// TestReadOthers: the deployer's other tokens in the snapshot, by pool
// creator or known deployer, newest first and capped, and the window of
// a recent collapse, both ends named.
func TestReadOthers(t *testing.T) {
	t.Parallel()
	token, dev, stranger := addr(1), addr(3), addr(4)
	const block, window = 1_000_000, 50
	pools := func(created uint64, creators ...common.Address) []whales.Pool {
		var ps []whales.Pool
		for i, c := range creators {
			ps = append(ps, whales.Pool{ID: fmt.Sprint(created, i), Created: created + uint64(i), Creator: c})
		}
		return ps
	}
	collapse := func(at uint64) whales.Collapse { return whales.Collapse{Pool: "p", Kind: "liquidity", Block: at} }
	tests := []struct {
		name      string
		snapshot  *whales.Snapshot
		known     map[common.Address]common.Address
		tokens    []common.Address
		recent    []bool
		more      int
		pulled    bool
		noteParts []string
	}{
		{
			name: "a collapse on the window's edge is recent",
			snapshot: &whales.Snapshot{
				Pools:     map[common.Address][]whales.Pool{token: pools(10, dev), addr(11): pools(100, dev), addr(12): pools(200, stranger, dev), addr(13): pools(300, stranger)},
				Collapses: map[common.Address]whales.Collapse{addr(11): collapse(block - window), addr(13): collapse(block)},
			},
			tokens: []common.Address{addr(12), addr(11)}, recent: []bool{false, true}, pulled: true,
		},
		{
			name: "a collapse past the window is not",
			snapshot: &whales.Snapshot{
				Pools:     map[common.Address][]whales.Pool{addr(11): pools(100, dev), addr(12): pools(200, dev), addr(13): pools(300, stranger)},
				Collapses: map[common.Address]whales.Collapse{addr(11): collapse(block - window - 1), addr(13): collapse(block)},
			},
			tokens: []common.Address{addr(12), addr(11)}, recent: []bool{false, false},
		},
		{
			name: "a known deployer, and the cap: the newest listed, every one judged",
			snapshot: &whales.Snapshot{
				Pools:     map[common.Address][]whales.Pool{addr(11): pools(100, dev), addr(12): pools(200, dev), addr(13): pools(300, stranger)},
				Collapses: map[common.Address]whales.Collapse{addr(11): collapse(block - 1)},
			},
			known:  map[common.Address]common.Address{addr(13): dev},
			tokens: []common.Address{addr(13), addr(12)}, recent: []bool{false, false}, more: 1, pulled: true,
		},
		{
			name:      "no snapshot",
			noteParts: []string{"no whale snapshot"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &fakeChain{}
			in := deployer.Input{Token: token, Block: block, Pools: []whales.Pool{{ID: "mine", Created: 10, Creator: dev}}, Snapshot: tt.snapshot, Known: tt.known}
			r, err := deployer.Read(context.Background(), c, in, deployer.Config{CreationWindow: 100, RecentWindow: window, MaxTokens: 2})
			if err != nil {
				t.Fatal(err)
			}
			if deref(r.Deployer) != dev {
				t.Fatalf("deployer %v, want %s", r.Deployer, dev)
			}
			var got []common.Address
			var recent []bool
			for _, tok := range r.Tokens {
				got, recent = append(got, tok.Address), append(recent, tok.Recent)
				if tok.Created != tok.Pool.Created || (tok.Collapse != nil) != (tt.snapshot.Collapses[tok.Address] != whales.Collapse{}) {
					t.Errorf("%s: created %d, pool %+v, collapse %v", tok.Address, tok.Created, tok.Pool, tok.Collapse)
				}
			}
			if fmt.Sprint(got, recent) != fmt.Sprint(tt.tokens, tt.recent) || r.More != tt.more || r.PulledRecently != tt.pulled {
				t.Errorf("tokens %v recent %v (+%d), pulled %v; want %v %v (+%d), %v", got, recent, r.More, r.PulledRecently, tt.tokens, tt.recent, tt.more, tt.pulled)
			}
			for _, n := range tt.noteParts {
				if !strings.Contains(r.Note, n) {
					t.Errorf("note %q lacks %q", r.Note, n)
				}
			}
		})
	}
}

// TestReadErrors: what a Read refuses, and the node's failures it
// passes up.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	token, mintTx := addr(1), hash(1)
	good := deployer.DefaultConfig()
	pool := whales.Pool{ID: "p", Created: 100, CreatedTx: hash(2), Creator: addr(3)}
	down := errors.New("node down")
	tests := []struct {
		name  string
		chain *fakeChain
		in    deployer.Input
		cfg   deployer.Config
		want  error  // errors.Is, or nil
		text  string // in the message
	}{
		{name: "no token", chain: &fakeChain{}, in: deployer.Input{Block: 1}, cfg: good, want: deployer.ErrInput},
		{name: "no block", chain: &fakeChain{}, in: deployer.Input{Token: token}, cfg: good, want: deployer.ErrInput},
		{name: "bad config", chain: &fakeChain{}, in: deployer.Input{Token: token, Block: 1},
			cfg: deployer.Config{Launchpads: map[common.Address]string{{}: ""}}, text: "must be positive"},
		{name: "logs fail", chain: &fakeChain{failLogs: down}, in: deployer.Input{Token: token, Block: 100}, cfg: good, want: down},
		{name: "a call of the batch fails", chain: &fakeChain{logs: []types.Log{mint(token, 100, 0, mintTx)}, failCall: "eth_getTransactionReceipt"},
			in: deployer.Input{Token: token, Block: 100, Pools: []whales.Pool{pool}}, cfg: good, text: "eth_getTransactionReceipt"},
		{name: "the pool's creation fails", chain: &fakeChain{failCall: "eth_getTransactionByHash"},
			in: deployer.Input{Token: token, Block: 100, Pools: []whales.Pool{pool}}, cfg: good, text: "too many requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := deployer.Read(context.Background(), tt.chain, tt.in, tt.cfg)
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err %v, want %v containing %q", err, tt.want, tt.text)
			}
		})
	}
}

// TestBaseLaunchpads: the default list names every launchpad family the
// package documents, and a fresh map each time.
func TestBaseLaunchpads(t *testing.T) {
	t.Parallel()
	if err := deployer.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	a, b := deployer.BaseLaunchpads(), deployer.BaseLaunchpads()
	families := map[string]int{}
	for addr, name := range a {
		families[strings.Fields(name)[0]]++
		delete(b, addr)
	}
	if len(b) != 0 {
		t.Errorf("BaseLaunchpads shares its map")
	}
	for _, f := range []string{"clanker", "zora", "flaunch", "virtuals"} {
		if families[f] == 0 {
			t.Errorf("no %s factory", f)
		}
	}
}
