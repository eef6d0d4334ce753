package batch_test

import (
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment/batch"
)

// watchLogs is a chain's logs as eth_getLogs filters them, with a head.
type watchLogs struct {
	mu     sync.Mutex
	head   uint64
	logs   []types.Log
	ranges [][2]uint64 // the ranges asked for
	fail   error
}

func (l *watchLogs) BlockNumber(context.Context) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head, nil
}

func (l *watchLogs) FilterLogs(_ context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from, to := q.FromBlock.Uint64(), q.ToBlock.Uint64()
	l.ranges = append(l.ranges, [2]uint64{from, to})
	if l.fail != nil {
		return nil, l.fail
	}
	var out []types.Log
	for _, lg := range l.logs {
		if lg.BlockNumber < from || lg.BlockNumber > to || len(q.Addresses) > 0 && lg.Address != q.Addresses[0] ||
			len(q.Topics) > 0 && lg.Topics[0] != q.Topics[0][0] {
			continue
		}
		out = append(out, lg)
	}
	return out, nil
}

// withdrawLog is the escrow's WithdrawInitiated log, encoded with the
// devnet contract's ABI.
func withdrawLog(t *testing.T, block uint64, id common.Hash, finalizeAfter uint64) types.Log {
	t.Helper()
	_, escrowABI, err := devnet.LoadArtifact("x402BatchSettlement")
	if err != nil {
		t.Fatal(err)
	}
	ev := escrowABI.Events["WithdrawInitiated"]
	data, err := ev.Inputs.NonIndexed().Pack(big.NewInt(500), new(big.Int).SetUint64(finalizeAfter))
	if err != nil {
		t.Fatal(err)
	}
	return types.Log{Address: batch.EscrowAddress, Topics: []common.Hash{ev.ID, id}, Data: data, BlockNumber: block}
}

// TestWatcher: a WithdrawInitiated of one of our channels marks it as
// withdrawing since finalizeAfter − its delay and wakes the claimer;
// others' channels and other events are ignored; each block is read once,
// in ranges of at most MaxRange, and a failed read is read again.
func TestWatcher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	ours := w.put(1, claimSpec{charged: 10, age: -1})
	idle := w.put(2, claimSpec{charged: 10, age: -1})
	stranger := common.HexToHash("0x5757")
	const finalize = 1_900_000_900
	chain := &watchLogs{head: 5000}
	other := withdrawLog(t, 4990, ours, finalize)
	other.Topics[0] = common.HexToHash("0x36bd546bb573e8921fdbfd934bbed62d872796b01792cd240cce27f79dd3eddd") // Claimed
	chain.logs = []types.Log{withdrawLog(t, 3000, ours, finalize-10), withdrawLog(t, 4100, stranger, finalize), other, withdrawLog(t, 4500, ours, finalize)}
	var woken []common.Hash
	wt, err := batch.NewWatcher(batch.WatcherConfig{Escrow: batch.EscrowAddress, Poll: 1, Lookback: 1000, MaxRange: 400,
		OnWithdraw: func(id common.Hash) { woken = append(woken, id) }}, chain, w.db, claimQuiet())
	if err != nil {
		t.Fatal(err)
	}
	marked, err := wt.Once(ctx)
	if err != nil || len(marked) != 1 || marked[0] != ours || len(woken) != 1 {
		t.Fatalf("first pass: marked %v, woke %v (%v)", marked, woken, err)
	}
	if got := w.channel(ours).WithdrawRequestedAt; got != finalize-900 {
		t.Errorf("withdraw requested at %d, want %d", got, finalize-900)
	}
	if w.channel(idle).WithdrawRequestedAt != 0 {
		t.Error("a channel without a withdrawal is marked")
	}
	if _, found, _ := w.db.Channel(ctx, stranger); found {
		t.Error("a stranger's channel was created")
	}
	want := [][2]uint64{{4000, 4399}, {4400, 4799}, {4800, 5000}}
	if len(chain.ranges) != len(want) {
		t.Fatalf("ranges %v, want %v", chain.ranges, want)
	}
	for i := range want {
		if chain.ranges[i] != want[i] {
			t.Errorf("ranges %v, want %v", chain.ranges, want)
		}
	}

	// New blocks only; a failed read is asked again.
	chain.ranges, chain.head, chain.fail = nil, 5010, errors.New("rate limited")
	if _, err := wt.Once(ctx); err == nil {
		t.Fatal("a failed read passed")
	}
	chain.fail = nil
	if marked, err := wt.Once(ctx); err != nil || len(marked) != 0 || len(chain.ranges) != 2 || chain.ranges[1] != [2]uint64{5001, 5010} {
		t.Errorf("the next passes: marked %v, ranges %v (%v)", marked, chain.ranges, err)
	}

	// A claimer claims the marked channel at once.
	f := &claimFake{}
	if rep, err := w.claimer(f, nil).Once(ctx); err != nil || rep.Due != "withdrawal" {
		t.Errorf("the claim after the watcher: %+v %v", rep, err)
	}
}
