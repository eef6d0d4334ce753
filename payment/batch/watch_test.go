package batch_test

import (
	"context"
	"errors"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

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
			len(q.Topics) > 0 && !slices.Contains(q.Topics[0], lg.Topics[0]) {
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
	other.Topics[0] = common.HexToHash("0x4ac7f3d9c5bc1d7e1d4a5cfb2e4f29ef9bbbc4a4a4ee1c5a2a27ab2f6c5cd3ee") // an event not followed
	chain.logs = []types.Log{withdrawLog(t, 3000, ours, finalize-10), withdrawLog(t, 4100, stranger, finalize), other, withdrawLog(t, 4500, ours, finalize)}
	var woken []common.Hash
	wt, err := batch.NewWatcher(batch.WatcherConfig{Escrow: batch.EscrowAddress, Poll: 1, Lookback: 1000, MaxRange: 400,
		OnWithdraw: func(id common.Hash) { woken = append(woken, id) }}, chain, w.db, claimQuiet())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := wt.Once(ctx)
	if err != nil || len(rep.Withdrawing) != 1 || rep.Withdrawing[0] != ours || len(woken) != 1 {
		t.Fatalf("first pass: marked %v, woke %v (%v)", rep.Withdrawing, woken, err)
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
	if rep, err := wt.Once(ctx); err != nil || len(rep.Withdrawing) != 0 || len(chain.ranges) != 2 || chain.ranges[1] != [2]uint64{5001, 5010} {
		t.Errorf("the next passes: marked %v, ranges %v (%v)", rep.Withdrawing, chain.ranges, err)
	}

	// A claimer claims the marked channel at once.
	f := &claimFake{}
	if rep, err := w.claimer(f, nil).Once(ctx); err != nil || rep.Due != "withdrawal" {
		t.Errorf("the claim after the watcher: %+v %v", rep, err)
	}
}

// claimedLog is the escrow's Claimed log, encoded with the devnet
// contract's ABI.
func claimedLog(t *testing.T, block uint64, id common.Hash, amount, newTotal int64) types.Log {
	t.Helper()
	_, escrowABI, err := devnet.LoadArtifact("x402BatchSettlement")
	if err != nil {
		t.Fatal(err)
	}
	ev := escrowABI.Events["Claimed"]
	if ev.ID != common.HexToHash("0x36bd546bb573e8921fdbfd934bbed62d872796b01792cd240cce27f79dd3eddd") {
		t.Fatalf("Claimed's topic is %s", ev.ID)
	}
	data, err := ev.Inputs.NonIndexed().Pack(big.NewInt(amount), big.NewInt(newTotal))
	if err != nil {
		t.Fatal(err)
	}
	sender := common.HexToHash("0x000000000000000000000000f39fd6e51aad88f6f4ce6ab8827279cfffb92266")
	return types.Log{Address: batch.EscrowAddress, Topics: []common.Hash{ev.ID, id, sender}, Data: data, BlockNumber: block}
}

// TestWatcherClaimed: a Claimed event raises the channel's mirrored
// claimed total (never lowering it; its unclaimed age is kept until
// everything is claimed, then cleared); a newTotalClaimed beyond what the
// store claimed stops the channel as claimed by a stranger, once, and is
// counted once; a stranger's channel is not created.
func TestWatcherClaimed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	ours := w.put(1, claimSpec{charged: 100, claimed: 40, ownClaimed: 100, age: time.Hour}) // our claimer is claiming it
	robbed := w.put(2, claimSpec{charged: 50, claimed: 50})
	stranger := common.HexToHash("0x5757")
	chain := &watchLogs{head: 100}
	obs := &claimCounts{}
	wt, err := batch.NewWatcher(batch.WatcherConfig{Escrow: batch.EscrowAddress, Poll: 1, Lookback: 1000, Observer: obs, Now: w.clock},
		chain, w.db, claimQuiet())
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name        string
		logs        []types.Log
		wantClaimed map[common.Hash]int64
		since       time.Time // ours' unclaimed age
		mirrored    int
		foreign     []common.Hash
		counted     int
	}{
		{name: "part of ours claimed", logs: []types.Log{claimedLog(t, 10, ours, 30, 70), claimedLog(t, 11, stranger, 5, 5)},
			wantClaimed: map[common.Hash]int64{ours: 70, robbed: 50}, since: clT0.Add(-time.Hour), mirrored: 1},
		{name: "an old event read again", logs: []types.Log{claimedLog(t, 20, ours, 10, 50)},
			wantClaimed: map[common.Hash]int64{ours: 70, robbed: 50}, since: clT0.Add(-time.Hour)},
		{name: "the rest of ours claimed", logs: []types.Log{claimedLog(t, 30, ours, 30, 100)},
			wantClaimed: map[common.Hash]int64{ours: 100, robbed: 50}, mirrored: 1},
		{name: "a stranger claims beyond what we charged", logs: []types.Log{claimedLog(t, 40, robbed, 20, 70)},
			wantClaimed: map[common.Hash]int64{ours: 100, robbed: 70}, mirrored: 1, foreign: []common.Hash{robbed}, counted: 1},
		{name: "and again", logs: []types.Log{claimedLog(t, 50, robbed, 10, 80)},
			wantClaimed: map[common.Hash]int64{ours: 100, robbed: 80}, mirrored: 1, counted: 1},
	} {
		chain.mu.Lock()
		chain.logs = append(chain.logs, step.logs...)
		chain.head = step.logs[0].BlockNumber + 1
		chain.mu.Unlock()
		rep, err := wt.Once(ctx)
		if err != nil || len(rep.Mirrored) != step.mirrored || !slices.Equal(rep.Foreign, step.foreign) || len(rep.Withdrawing) != 0 {
			t.Fatalf("%s: %+v %v", step.name, rep, err)
		}
		for id, want := range step.wantClaimed {
			if got := w.channel(id).TotalClaimed.Int64(); got != want {
				t.Errorf("%s: channel %s claimed %d, want %d", step.name, id, got, want)
			}
		}
		if got := w.channel(ours).UnclaimedSince; !got.Equal(step.since) {
			t.Errorf("%s: unclaimed since %v, want %v", step.name, got, step.since)
		}
		if obs.foreign != step.counted {
			t.Errorf("%s: %d foreign claims counted, want %d", step.name, obs.foreign, step.counted)
		}
	}
	if ch := w.channel(robbed); !ch.StoppedAt.Equal(clT0) || ch.StopEvidence != batch.EvidenceClaimedElsewhere {
		t.Errorf("stopped at %v on %q, want %v on a foreign claim", ch.StoppedAt, ch.StopEvidence, clT0)
	}
	if !w.channel(ours).StoppedAt.IsZero() {
		t.Error("our own claims taken as foreign")
	}
	if _, found, _ := w.db.Channel(ctx, stranger); found {
		t.Error("a stranger's channel was created")
	}
	// The claimer does not claim the channel a stranger claimed.
	if rep, err := w.claimer(&claimFake{}, nil).Once(ctx); err != nil || rep.Channels != 0 {
		t.Errorf("the claimer after a foreign claim: %+v %v", rep, err)
	}
}

// TestWatcherObserver: Run says the watch started; each pass is reported,
// a failed read as an error.
func TestWatcherObserver(t *testing.T) {
	t.Parallel()
	w := newClaimWorld(t)
	chain := &watchLogs{head: 10}
	obs := &claimCounts{}
	wt, err := batch.NewWatcher(batch.WatcherConfig{Escrow: batch.EscrowAddress, Poll: time.Hour, Observer: obs}, chain, w.db, claimQuiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { wt.Run(ctx); close(done) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		obs.mu.Lock()
		ran := obs.started == 1 && obs.watchOK == 1
		obs.mu.Unlock()
		if ran {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run reported no start and no pass")
		}
	}
	cancel()
	<-done
	chain.mu.Lock()
	chain.head, chain.fail = 20, errors.New("query returned more than 10000 results")
	chain.mu.Unlock()
	if _, err := wt.Once(context.Background()); err == nil || obs.watchErr != 1 || obs.watchOK != 1 {
		t.Errorf("a failed pass: %v; %d errors, %d passes reported", err, obs.watchErr, obs.watchOK)
	}
}
