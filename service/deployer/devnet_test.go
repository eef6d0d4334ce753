package deployer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/deployer"
	"github.com/tollgate/tollgate/service/whales"
)

// launchEnv is a devnet with the launch fixtures (testdata/launch.json)
// and a launchpad, a forwarder and a DEX factory deployed.
type launchEnv struct {
	d    *devnet.Chain
	eth  *ethclient.Client
	cc   *chain.Client
	abis map[string]abi.ABI
	code map[string][]byte
	// pad is the launchpad, forwarder calls it, pools creates pools.
	pad, forwarder, pools common.Address
}

func startLaunchEnv(t *testing.T) *launchEnv {
	t.Helper()
	raw, err := os.ReadFile("testdata/launch.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Contracts map[string]struct {
			ABI      json.RawMessage `json:"abi"`
			Bytecode string          `json:"bytecode"`
		}
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	d, eth := devnettest.Start(t)
	rc, err := rpc.Dial(d.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	cc, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &launchEnv{d: d, eth: eth, cc: cc, abis: map[string]abi.ABI{}, code: map[string][]byte{}}
	for name, c := range fixture.Contracts {
		if e.abis[name], err = abi.JSON(bytes.NewReader(c.ABI)); err != nil {
			t.Fatal(err)
		}
		e.code[name] = common.FromHex(c.Bytecode)
	}
	// One block for the three: each from its own account.
	var wg sync.WaitGroup
	for i, dst := range []*common.Address{&e.pad, &e.forwarder, &e.pools} {
		wg.Go(func() { *dst = e.deploy(t, d.Account(2+i), []string{"Launchpad", "Forwarder", "Pools"}[i]) })
	}
	wg.Wait()
	return e
}

// deploy deploys the fixture contract name with constructor args.
func (e *launchEnv) deploy(t *testing.T, from devnet.Account, name string, args ...any) common.Address {
	t.Helper()
	ctor, err := e.abis[name].Pack("", args...)
	if err != nil {
		t.Error(err)
		return common.Address{}
	}
	a, err := e.d.DeployCode(context.Background(), from, append(bytes.Clone(e.code[name]), ctor...))
	if err != nil {
		t.Errorf("deploy %s: %v", name, err)
	}
	return a
}

// call sends method of the fixture contract name at to, and returns its
// successful receipt.
func (e *launchEnv) call(t *testing.T, from devnet.Account, to common.Address, name, method string, args ...any) *types.Receipt {
	t.Helper()
	data, err := e.abis[name].Pack(method, args...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.d.Transact(context.Background(), from, to, data)
	if err != nil || r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("%s.%s: %v (receipt %+v)", name, method, err, r)
	}
	return r
}

// sender is who signed transaction h, as the chain has it.
func (e *launchEnv) sender(t *testing.T, h common.Hash) common.Address {
	t.Helper()
	tx, _, err := e.eth.TransactionByHash(context.Background(), h)
	if err != nil {
		t.Fatalf("transaction %s: %v", h, err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(devnet.ChainID)), tx)
	if err != nil {
		t.Fatal(err)
	}
	return from
}

// poolOf is a pool created in receipt r, as the whale scan records it:
// its creator is the sender the chain has for r's transaction.
func (e *launchEnv) poolOf(t *testing.T, r *types.Receipt, pool common.Address) whales.Pool {
	return whales.Pool{ID: pool.Hex(), Holder: pool, Venue: whales.UniswapV2, Created: r.BlockNumber.Uint64(),
		CreatedTx: r.TxHash, Creator: e.sender(t, r.TxHash)}
}

// launched is a token and its pool, as launched on the devnet.
type launched struct {
	token common.Address
	pool  whales.Pool
}

var supply = new(big.Int).Mul(big.NewInt(1_000_000_000), big.NewInt(1e18))

// direct deploys the fixture token name from `from` (its supply to
// `from`), then pools it through the DEX factory.
func (e *launchEnv) direct(t *testing.T, from devnet.Account, name string) launched {
	token := e.deploy(t, from, name, from.Address, supply)
	if t.Failed() {
		t.FailNow()
	}
	r := e.call(t, from, e.pools, "Pools", "create", token)
	for _, l := range r.Logs {
		if l.Address == e.pools && len(l.Topics) == 2 && len(l.Data) == 32 {
			return launched{token: token, pool: e.poolOf(t, r, common.BytesToAddress(l.Data))}
		}
	}
	t.Fatalf("no pool created in %s", r.TxHash)
	return launched{}
}

// onLaunchpad launches a token through the launchpad, called directly or
// through the forwarder.
func (e *launchEnv) onLaunchpad(t *testing.T, from devnet.Account, forwarded bool) launched {
	var r *types.Receipt
	if forwarded {
		r = e.call(t, from, e.forwarder, "Forwarder", "launch", e.pad, supply)
	} else {
		r = e.call(t, from, e.pad, "Launchpad", "launch", supply)
	}
	for _, l := range r.Logs {
		if l.Address == e.pad && len(l.Topics) == 4 {
			return launched{token: common.BytesToAddress(l.Topics[1][:]), pool: e.poolOf(t, r, common.BytesToAddress(l.Topics[2][:]))}
		}
	}
	t.Fatalf("no launch in %s", r.TxHash)
	return launched{}
}

// TestReadOnDevnet reads the deployer of tokens launched on the devnet,
// directly, on a launchpad the test names, through a forwarder, and with
// no mint to find, and checks each record against what the chain says:
// the sender of the transaction it names, and that the transaction
// minted (or pooled) the token.
func TestReadOnDevnet(t *testing.T) {
	t.Parallel()
	e := startLaunchEnv(t)
	const recent = 10 // blocks: the devnet's history is short
	// earlier builds the snapshot of a deployer with two earlier tokens
	// (one collapsed `ago` blocks before head) beside a stranger's
	// collapsed token, as the whale scan would hold them.
	earlier := func(dev common.Address, ago uint64) func(l launched, head uint64) *whales.Snapshot {
		return func(l launched, head uint64) *whales.Snapshot {
			a, b, stranger := common.HexToAddress("0xa1"), common.HexToAddress("0xa2"), common.HexToAddress("0xa3")
			pool := func(id string, created uint64, creator common.Address) []whales.Pool {
				return []whales.Pool{{ID: id, Venue: whales.UniswapV2, Created: created, Creator: creator}}
			}
			return &whales.Snapshot{Block: head,
				Pools: map[common.Address][]whales.Pool{l.token: {l.pool}, a: pool("pa", l.pool.Created-3, dev), b: pool("pb", l.pool.Created-2, dev),
					stranger: pool("ps", l.pool.Created-1, e.d.Account(0).Address)},
				Collapses: map[common.Address]whales.Collapse{a: {Pool: "pa", Venue: whales.UniswapV2, Kind: "liquidity", Block: head - ago},
					stranger: {Pool: "ps", Venue: whales.UniswapV2, Kind: "drawdown", Block: head}},
			}
		}
	}
	type want struct {
		source, launchpad string
		factory           common.Address // zero: none
		tokens            int            // the deployer's other tokens
		pulled            bool
		note              string
	}
	direct := func(name string) func(*testing.T, devnet.Account) launched {
		return func(t *testing.T, from devnet.Account) launched { return e.direct(t, from, name) }
	}
	onPad := func(forwarded bool) func(*testing.T, devnet.Account) launched {
		return func(t *testing.T, from devnet.Account) launched { return e.onLaunchpad(t, from, forwarded) }
	}
	tests := []struct {
		name    string
		account int
		launch  func(t *testing.T, from devnet.Account) launched
		window  uint64 // the creation window; 0: the default
		// others, when set, builds the snapshot for the deployer.
		others func(dev common.Address) func(l launched, head uint64) *whales.Snapshot
		want   want
	}{
		{name: "deployed directly", account: 10, launch: direct("Token"),
			want: want{source: deployer.SourceCreation}},
		{name: "launched on a launchpad", account: 11, launch: onPad(false),
			want: want{source: deployer.SourceCreation, launchpad: "devnet pad", factory: e.pad}},
		{name: "launched on a launchpad through a forwarder", account: 12, launch: onPad(true),
			want: want{source: deployer.SourceCreation, launchpad: "devnet pad", factory: e.pad, note: "called by contract " + e.forwarder.Hex()}},
		{name: "a deployer who pulled a pool recently", account: 13, launch: direct("Token"),
			others: func(dev common.Address) func(launched, uint64) *whales.Snapshot { return earlier(dev, recent) },
			want:   want{source: deployer.SourceCreation, tokens: 2, pulled: true}},
		{name: "a deployer whose pool collapsed long ago", account: 14, launch: direct("Token"),
			others: func(dev common.Address) func(launched, uint64) *whales.Snapshot { return earlier(dev, recent+1) },
			want:   want{source: deployer.SourceCreation, tokens: 2}},
		{name: "no mint: a token that sets its supply silently", account: 15, launch: direct("SilentToken"),
			want: want{source: deployer.SourcePoolCreator, note: "no mint"}},
		{name: "no mint in the window: minted a block before its pool", account: 8, launch: direct("Token"), window: 1,
			want: want{source: deployer.SourcePoolCreator, note: "no mint"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			from := e.d.Account(tt.account)
			l := tt.launch(t, from)
			head, err := e.eth.BlockNumber(ctx)
			if err != nil {
				t.Fatal(err)
			}
			cfg := deployer.DefaultConfig()
			cfg.Launchpads, cfg.RecentWindow = map[common.Address]string{e.pad: "devnet pad"}, recent
			if tt.window > 0 {
				cfg.CreationWindow = tt.window
			}
			in := deployer.Input{Token: l.token, Block: head, Pools: []whales.Pool{l.pool},
				Snapshot: &whales.Snapshot{Block: head, Pools: map[common.Address][]whales.Pool{l.token: {l.pool}}}}
			if tt.others != nil {
				in.Snapshot = tt.others(from.Address)(l, head)
			}
			r, err := deployer.Read(ctx, e.cc, in, cfg)
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			t.Logf("record: deployer %v source %s tx %s block %d factory %v %q searched %+v tokens %d pulled %v note %q",
				r.Deployer, r.Source, r.Tx, r.Block, r.Factory, r.Launchpad, r.Searched, len(r.Tokens), r.PulledRecently, r.Note)
			// The record against the chain: the deployer is the sender of
			// the transaction it names, the test's account.
			if r.Deployer == nil {
				t.Fatalf("no deployer (note %q)", r.Note)
			}
			if s := e.sender(t, r.Tx); *r.Deployer != s || s != from.Address {
				t.Errorf("deployer %s, the sender of %s is %s, the test's account %s", *r.Deployer, r.Tx, s, from.Address)
			}
			receipt, err := e.eth.TransactionReceipt(ctx, r.Tx)
			if err != nil {
				t.Fatal(err)
			}
			if receipt.BlockNumber.Uint64() != r.Block {
				t.Errorf("block %d, the chain's %d", r.Block, receipt.BlockNumber)
			}
			switch r.Source {
			case deployer.SourceCreation:
				if !minted(receipt, l.token) {
					t.Errorf("transaction %s did not mint %s", r.Tx, l.token)
				}
				if w.factory == (common.Address{}) && receipt.ContractAddress != l.token {
					t.Errorf("transaction %s created %s, not %s", r.Tx, receipt.ContractAddress, l.token)
				}
			case deployer.SourcePoolCreator:
				if r.Tx != l.pool.CreatedTx || minted(receipt, l.token) {
					t.Errorf("transaction %s, want the pool's creation %s (which mints nothing)", r.Tx, l.pool.CreatedTx)
				}
			}
			if r.Source != w.source || r.Launchpad != w.launchpad {
				t.Errorf("source %q launchpad %q, want %q %q (note %q)", r.Source, r.Launchpad, w.source, w.launchpad, r.Note)
			}
			if deref(r.Factory) != w.factory {
				t.Errorf("factory %v, want %s", r.Factory, w.factory)
			}
			if r.Searched.To != l.pool.Created || r.Searched.To-r.Searched.From+1 != cfg.CreationWindow && r.Searched.From != 0 {
				t.Errorf("searched %+v, want the window ending at the pool's block %d", r.Searched, l.pool.Created)
			}
			if len(r.Tokens) != w.tokens || r.PulledRecently != w.pulled {
				t.Errorf("%d other tokens %+v, pulled %v; want %d, %v", len(r.Tokens), r.Tokens, r.PulledRecently, w.tokens, w.pulled)
			}
			if !strings.Contains(r.Note, w.note) {
				t.Errorf("note %q lacks %q", r.Note, w.note)
			}
		})
	}
}

// minted: the receipt holds a Transfer from 0x0 of token.
func minted(r *types.Receipt, token common.Address) bool {
	for _, l := range r.Logs {
		if l.Address == token && len(l.Topics) == 3 && l.Topics[0] == topicTransfer && l.Topics[1] == (common.Hash{}) {
			return true
		}
	}
	return false
}
