package liquidity_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/liquidity"
)

var _ liquidity.Chain = (*chain.Client)(nil)

var dead = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// farDeadline is a deadline no devnet block reaches.
var farDeadline = new(big.Int).Lsh(big.NewInt(1), 40)

// run is one test's devnet, with the calls the scripts need.
type run struct {
	t      *testing.T
	ctx    context.Context
	c      *devnet.Chain
	client *ethclient.Client
	node   *chain.Client
	erc20  abi.ABI
}

func newRun(t *testing.T) *run {
	t.Helper()
	c, client := devnettest.Start(t)
	rc, err := rpc.Dial(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	node, err := chain.New(rc, chain.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, erc20, err := devnet.LoadArtifact("LaunchToken")
	if err != nil {
		t.Fatal(err)
	}
	return &run{t: t, ctx: context.Background(), c: c, client: client, node: node, erc20: erc20}
}

// on is r for subtest t.
func (r *run) on(t *testing.T) *run {
	sub := *r
	sub.t = t
	return &sub
}

func (r *run) deploy(from devnet.Account, name string, args ...any) (common.Address, abi.ABI) {
	r.t.Helper()
	addr, parsed, err := r.c.Deploy(r.ctx, from, name, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	return addr, parsed
}

// send calls method on `to` from `from` with value wei (nil: none) and
// fails the test if it reverts.
func (r *run) send(from devnet.Account, to common.Address, value *big.Int, parsed abi.ABI, method string, args ...any) *types.Receipt {
	r.t.Helper()
	data, err := parsed.Pack(method, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	rcpt, err := r.c.TransactValue(r.ctx, from, to, value, data)
	if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
		r.t.Fatalf("%s: %v (receipt %+v)", method, err, rcpt)
	}
	return rcpt
}

// view reads method on `to` at block (nil: the head).
func (r *run) view(to common.Address, parsed abi.ABI, method string, block *big.Int, args ...any) []any {
	r.t.Helper()
	data, err := parsed.Pack(method, args...)
	if err != nil {
		r.t.Fatalf("%s: %v", method, err)
	}
	out, err := r.client.CallContract(r.ctx, ethereum.CallMsg{To: &to, Data: data}, block)
	if err != nil {
		r.t.Fatalf("%s on %s: %v", method, to, err)
	}
	vals, err := parsed.Unpack(method, out)
	if err != nil {
		r.t.Fatalf("%s on %s: %v", method, to, err)
	}
	return vals
}

func (r *run) balance(token, who common.Address, block *big.Int) *big.Int {
	r.t.Helper()
	return r.view(token, r.erc20, "balanceOf", block, who)[0].(*big.Int)
}

func (r *run) head() uint64 {
	r.t.Helper()
	n, err := r.client.BlockNumber(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *run) headTime() uint64 {
	r.t.Helper()
	h, err := r.client.HeaderByNumber(r.ctx, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return h.Time
}

// read runs liquidity.Read and fails the test on an error.
func (r *run) read(in liquidity.Input) []liquidity.PoolLiquidity {
	r.t.Helper()
	out, err := liquidity.Read(r.ctx, r.node, in)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(out) != len(in.Pools) {
		r.t.Fatalf("%d answers for %d pools", len(out), len(in.Pools))
	}
	return out
}

// waitPast waits until the head's timestamp is after ts (the devnet
// cannot move its clock ahead of the wall clock).
func (r *run) waitPast(ts uint64) {
	r.t.Helper()
	for r.headTime() <= ts {
		time.Sleep(100 * time.Millisecond)
	}
}

func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }

func ratio(a, b *big.Int) float64 {
	f, _ := new(big.Float).Quo(new(big.Float).SetInt(a), new(big.Float).SetInt(b)).Float64()
	return f
}

// near tells got from want within a relative tolerance.
func near(got, want, tolerance float64) bool {
	return math.Abs(got-want) <= tolerance*math.Max(1, math.Abs(want))
}

// nearInt tells two amounts apart by at most a relative tolerance.
func nearInt(got, want *big.Int, tolerance float64) bool {
	if got == nil || want == nil {
		return got == want
	}
	if want.Sign() == 0 {
		return got.Sign() == 0
	}
	d := new(big.Int).Abs(new(big.Int).Sub(got, want))
	return ratio(d, new(big.Int).Abs(want)) <= tolerance
}

// shares are a PoolLiquidity's five shares, for comparison.
type shares struct{ Burned, Locked, Deployer, Owner, Other float64 }

func sharesOf(p liquidity.PoolLiquidity) shares {
	return shares{p.Burned, p.Locked, p.Deployer, p.Owner, p.Other}
}

func (s shares) near(o shares, tolerance float64) bool {
	return near(s.Burned, o.Burned, tolerance) && near(s.Locked, o.Locked, tolerance) && near(s.Deployer, o.Deployer, tolerance) &&
		near(s.Owner, o.Owner, tolerance) && near(s.Other, o.Other, tolerance)
}

// timelock is testdata/timelock.json's LPTimelock.
func timelock(t *testing.T) (abi.ABI, []byte) {
	t.Helper()
	raw, err := os.ReadFile("testdata/timelock.json")
	if err != nil {
		t.Fatal(err)
	}
	var build struct {
		Contracts map[string]struct {
			ABI      json.RawMessage `json:"abi"`
			Bytecode string          `json:"bytecode"`
		} `json:"contracts"`
	}
	if err := json.Unmarshal(raw, &build); err != nil {
		t.Fatal(err)
	}
	c, ok := build.Contracts["LPTimelock"]
	if !ok {
		t.Fatal("no LPTimelock in testdata/timelock.json")
	}
	parsed, err := abi.JSON(bytes.NewReader(c.ABI))
	if err != nil {
		t.Fatal(err)
	}
	return parsed, common.FromHex(c.Bytecode)
}
