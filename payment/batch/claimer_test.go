package batch_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store"
)

var (
	clEscrow   = batch.Escrow{ChainID: big.NewInt(8453), Address: batch.EscrowAddress}
	clReceiver = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	clToken    = common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35")
	clT0       = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
)

func claimQuiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// claimFake answers claims and settles through its function
// fields, by default successfully, and keeps what it was asked.
type claimFake struct {
	batch.Facilitator // Verify, Deposit, Refund: not the claimer's

	t          *testing.T
	authorizer common.Address
	claim      func(rows []batch.Claim) (batch.Outcome, error)
	settle     func(receiver, token common.Address) (batch.Outcome, error)

	mu      sync.Mutex
	claims  [][]batch.Claim
	settles []common.Address
	txs     byte
}

// Claim checks the claim's signature, as claimWithSignature does.
func (f *claimFake) Claim(_ context.Context, rows []batch.Claim, sig []byte) (batch.Outcome, error) {
	entries := make([]batch.ClaimEntry, len(rows))
	for i, r := range rows {
		entries[i] = batch.ClaimEntry{ChannelID: clEscrow.ChannelID(r.Config), MaxClaimableAmount: r.MaxClaimable, TotalClaimed: r.TotalClaimed}
		if r.Config.ReceiverAuthorizer != f.authorizer {
			f.t.Errorf("a claim row of receiverAuthorizer %s", r.Config.ReceiverAuthorizer)
		}
	}
	if signer, err := payment.RecoverDigest(clEscrow.ClaimBatchDigest(entries), sig); err != nil || signer != f.authorizer {
		f.t.Errorf("the claim is signed by %s (%v), want %s", signer, err, f.authorizer)
	}
	f.mu.Lock()
	f.claims = append(f.claims, rows)
	f.txs++
	tx := common.BytesToHash([]byte{0xc0, f.txs})
	f.mu.Unlock()
	if f.claim != nil {
		return f.claim(rows)
	}
	return batch.Outcome{Success: true, Tx: tx}, nil
}

func (f *claimFake) Settle(_ context.Context, r, tok common.Address) (batch.Outcome, error) {
	f.mu.Lock()
	f.settles = append(f.settles, r)
	f.txs++
	tx := common.BytesToHash([]byte{0x5e, f.txs})
	f.mu.Unlock()
	if f.settle != nil {
		return f.settle(r, tok)
	}
	return batch.Outcome{Success: true, Tx: tx, Amount: big.NewInt(1)}, nil
}

// claimed is every channel claimed so far, with the total claimed.
func (f *claimFake) claimed() map[common.Hash]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[common.Hash]int64{}
	for _, rows := range f.claims {
		for _, r := range rows {
			out[clEscrow.ChannelID(r.Config)] = r.TotalClaimed.Int64()
		}
	}
	return out
}

// claimRefuse makes a claim refused, as its simulation is, when it holds
// one of bad.
func claimRefuse(bad ...common.Hash) func(rows []batch.Claim) (batch.Outcome, error) {
	return func(rows []batch.Claim) (batch.Outcome, error) {
		for _, r := range rows {
			if slices.Contains(bad, clEscrow.ChannelID(r.Config)) {
				return batch.Outcome{Reason: "invalid_batch_settlement_evm_claim_simulation_failed", Message: "ClaimExceedsBalance"}, nil
			}
		}
		return batch.Outcome{Success: true, Tx: common.HexToHash("0xc1")}, nil
	}
}

// claimWorld is a store of channels and the claimer's key.
type claimWorld struct {
	t     *testing.T
	db    *store.DB
	key   *ecdsa.PrivateKey
	now   time.Time
	clock func() time.Time
}

func newClaimWorld(t *testing.T) *claimWorld {
	t.Helper()
	db, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	w := &claimWorld{t: t, db: db, key: key, now: clT0}
	w.clock = func() time.Time { return w.now }
	return w
}

func (w *claimWorld) authorizer() common.Address { return crypto.PubkeyToAddress(w.key.PublicKey) }

// claimSpec is a channel to put in the store.
type claimSpec struct {
	charged, claimed int64
	ownClaimed       int64         // what this store asked to claim (default claimed)
	age              time.Duration // how long its value has waited, before clT0 (negative: unknown)
	withdrawAt       uint64
	authorizer       *common.Address // default the claimer's
	receiver         common.Address  // default clReceiver
}

// put stores channel n as s says and returns its id.
func (w *claimWorld) put(n byte, s claimSpec) common.Hash {
	w.t.Helper()
	cfg := batch.Config{Payer: common.BytesToAddress([]byte{0xaa, n}), PayerAuthorizer: common.BytesToAddress([]byte{0xaa, n}),
		Receiver: clReceiver, ReceiverAuthorizer: w.authorizer(), Token: clToken, WithdrawDelay: 900, Salt: common.BytesToHash([]byte{n})}
	if s.authorizer != nil {
		cfg.ReceiverAuthorizer = *s.authorizer
	}
	if s.receiver != (common.Address{}) {
		cfg.Receiver = s.receiver
	}
	id := clEscrow.ChannelID(cfg)
	if _, err := w.db.UpdateChannel(context.Background(), id, func(c *batch.Channel, _ bool) (batch.Change, error) {
		c.Config, c.Charged, c.SignedMax, c.Signature = cfg, big.NewInt(s.charged), big.NewInt(s.charged), []byte{n, 1, 2}
		c.Balance, c.TotalClaimed, c.RefundNonce = big.NewInt(1_000_000), big.NewInt(s.claimed), new(big.Int)
		c.WithdrawRequestedAt = s.withdrawAt
		c.Opened, c.OwnClaimed = true, big.NewInt(max(s.ownClaimed, s.claimed))
		if s.charged > s.claimed && s.age >= 0 {
			c.UnclaimedSince = clT0.Add(-s.age)
		}
		return batch.Save, nil
	}); err != nil {
		w.t.Fatal(err)
	}
	return id
}

func (w *claimWorld) channel(id common.Hash) batch.Channel {
	w.t.Helper()
	c, found, err := w.db.Channel(context.Background(), id)
	if err != nil || !found {
		w.t.Fatalf("channel %s: found %v, %v", id, found, err)
	}
	return c
}

func (w *claimWorld) claimer(f *claimFake, edit func(*batch.ClaimerConfig)) *batch.Claimer {
	w.t.Helper()
	f.t, f.authorizer = w.t, w.authorizer()
	cfg := batch.ClaimerConfig{Escrow: clEscrow, Authorizer: w.key, Period: time.Hour, Poll: time.Millisecond, Now: w.clock}
	if edit != nil {
		edit(&cfg)
	}
	c, err := batch.NewClaimer(cfg, w.db, f, claimQuiet())
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// TestClaimerTriggers: a pass claims every claimable channel when one of
// its triggers is due, and nothing otherwise.
func TestClaimerTriggers(t *testing.T) {
	t.Parallel()
	other := common.HexToAddress("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc")
	for _, tt := range []struct {
		name      string
		channels  []claimSpec
		threshold int64
		later     time.Duration // the clock moves this far past clT0
		wantDue   string
		want      []int // the channels claimed, by index
	}{
		{name: "nothing unclaimed", channels: []claimSpec{{charged: 50, claimed: 50}}},
		{name: "young value waits", channels: []claimSpec{{charged: 100, claimed: 50, age: time.Minute}, {charged: 50, age: 30 * time.Minute}}},
		{name: "period", channels: []claimSpec{{charged: 100, claimed: 50, age: time.Minute}, {charged: 50, age: 30 * time.Minute}, {charged: 50, claimed: 50}},
			later: 30 * time.Minute, wantDue: "period", want: []int{0, 1}},
		{name: "a value of unknown age is old", channels: []claimSpec{{charged: 100, claimed: 50, age: -1}}, wantDue: "period", want: []int{0}},
		{name: "below the threshold", channels: []claimSpec{{charged: 60, age: time.Minute}, {charged: 39, age: time.Minute}}, threshold: 100},
		{name: "threshold", channels: []claimSpec{{charged: 60, age: time.Minute}, {charged: 40, age: time.Minute}}, threshold: 100,
			wantDue: "threshold", want: []int{0, 1}},
		{name: "withdrawal", channels: []claimSpec{{charged: 10, age: time.Second}, {charged: 20, claimed: 10, age: time.Second, withdrawAt: uint64(clT0.Unix())}},
			wantDue: "withdrawal", want: []int{0, 1}},
		{name: "a withdrawal with all claimed", channels: []claimSpec{{charged: 10, age: time.Second}, {charged: 20, claimed: 20, withdrawAt: uint64(clT0.Unix())}}},
		{name: "another authorizer's channel is skipped", channels: []claimSpec{{charged: 10, age: 2 * time.Hour, authorizer: &other}, {charged: 10, age: time.Hour}},
			wantDue: "period", want: []int{1}},
		{name: "only another authorizer's", channels: []claimSpec{{charged: 10, age: 2 * time.Hour, authorizer: &other}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newClaimWorld(t)
			var ids []common.Hash
			for i, s := range tt.channels {
				ids = append(ids, w.put(byte(i), s))
			}
			w.now = clT0.Add(tt.later)
			f := &claimFake{}
			c := w.claimer(f, func(cfg *batch.ClaimerConfig) {
				if tt.threshold > 0 {
					cfg.Threshold = big.NewInt(tt.threshold)
				}
			})
			rep, err := c.Once(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Due != tt.wantDue || rep.Claimed != len(tt.want) {
				t.Errorf("due %q, %d claimed; want %q, %d", rep.Due, rep.Claimed, tt.wantDue, len(tt.want))
			}
			got := f.claimed()
			if len(got) != len(tt.want) {
				t.Errorf("claimed %v, want channels %v", got, tt.want)
			}
			for _, i := range tt.want {
				if got[ids[i]] != tt.channels[i].charged {
					t.Errorf("channel %d claimed up to %d, want %d (charged)", i, got[ids[i]], tt.channels[i].charged)
				}
			}
			// The first pass settles once what it claimed, and what the
			// store shows ours claimed before it (the one pair here).
			settles := 0
			for _, s := range tt.channels {
				if s.claimed > 0 && s.authorizer == nil {
					settles = 1
				}
			}
			if len(tt.want) > 0 {
				settles = 1
			}
			if len(f.settles) != settles {
				t.Errorf("settled %d times, want %d", len(f.settles), settles)
			}
			if len(tt.want) == 0 && len(f.claims) != 0 {
				t.Errorf("%d claims when nothing was due", len(f.claims))
			}
		})
	}
}

// TestClaimerMirrors: a claim raises the channel's claimed total to what
// it charged and clears its unclaimed age, touching neither charged nor a
// reservation; a channel charged meanwhile keeps an age; the claim and
// the settle are in the history.
func TestClaimerMirrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	a := w.put(1, claimSpec{charged: 150, claimed: 50, age: 2 * time.Hour})
	b := w.put(2, claimSpec{charged: 70, age: 2 * time.Hour})
	// Channel a is being served: a request holds it.
	if _, err := w.db.UpdateChannel(ctx, a, func(c *batch.Channel, _ bool) (batch.Change, error) {
		return batch.Save, batch.Reserve(c, "r1", big.NewInt(200), clT0, clT0.Add(time.Minute))
	}); err != nil {
		t.Fatal(err)
	}
	f := &claimFake{}
	f.claim = func(rows []batch.Claim) (batch.Outcome, error) {
		// Channel b is charged again while the claim is in flight.
		if _, err := w.db.UpdateChannel(ctx, b, func(c *batch.Channel, _ bool) (batch.Change, error) {
			if err := batch.Reserve(c, "r2", big.NewInt(90), clT0, clT0.Add(time.Minute)); err != nil {
				return batch.Keep, err
			}
			return batch.Save, batch.Commit(c, "r2", big.NewInt(20), big.NewInt(90), []byte{9}, clT0)
		}); err != nil {
			t.Error(err)
		}
		return batch.Outcome{Success: true, Tx: common.HexToHash("0xc1")}, nil
	}
	f.settle = func(common.Address, common.Address) (batch.Outcome, error) {
		return batch.Outcome{Success: true, Tx: common.HexToHash("0x5e"), Amount: big.NewInt(170)}, nil
	}
	w.now = clT0.Add(time.Minute)
	rep, err := w.claimer(f, nil).Once(ctx)
	if err != nil || rep.Claimed != 2 || rep.Amount.Int64() != 170 || len(rep.Settled) != 1 {
		t.Fatalf("pass: %+v %v", rep, err)
	}
	ca := w.channel(a)
	if ca.TotalClaimed.Int64() != 150 || !ca.UnclaimedSince.IsZero() || ca.Charged.Int64() != 150 || ca.Pending == nil || ca.Pending.ID != "r1" {
		t.Errorf("channel a after its claim: claimed %s, unclaimed since %v, charged %s, pending %+v", ca.TotalClaimed, ca.UnclaimedSince, ca.Charged, ca.Pending)
	}
	cb := w.channel(b)
	if cb.TotalClaimed.Int64() != 70 || cb.Charged.Int64() != 90 || !cb.UnclaimedSince.Equal(w.now) {
		t.Errorf("channel b, charged during the claim: claimed %s, charged %s, unclaimed since %v (want %v)", cb.TotalClaimed, cb.Charged, cb.UnclaimedSince, w.now)
	}
	txs, err := w.db.BatchTxs(ctx, 0)
	if err != nil || len(txs) != 2 {
		t.Fatalf("history: %+v %v", txs, err)
	}
	kinds := map[string]batch.TxRecord{txs[0].Kind: txs[0], txs[1].Kind: txs[1]}
	if c := kinds[batch.KindClaim]; c.Rows != 2 || c.Amount.Int64() != 170 || c.Result != batch.ResultOK || c.Tx != common.HexToHash("0xc1") {
		t.Errorf("claim in the history: %+v", c)
	}
	if s := kinds[batch.KindSettle]; s.Receiver != clReceiver || s.Token != clToken || s.Amount.Int64() != 170 || s.Tx != common.HexToHash("0x5e") {
		t.Errorf("settle in the history: %+v", s)
	}
	// The 20 charged meanwhile is young: the next pass leaves it.
	if rep, err := w.claimer(f, nil).Once(ctx); err != nil || rep.Due != "" || rep.Unclaimed.Int64() != 20 {
		t.Errorf("the next pass: %+v %v", rep, err)
	}
}

// TestCommitUnclaimedSince: a commit starts the unclaimed age when the
// channel had everything claimed, and keeps it otherwise.
func TestCommitUnclaimedSince(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name             string
		charged, claimed int64
		since            time.Time
		want             time.Time
	}{
		{"all claimed", 100, 100, time.Time{}, clT0},
		{"a new channel", 0, 0, time.Time{}, clT0},
		{"value waiting already", 100, 50, clT0.Add(-time.Hour), clT0.Add(-time.Hour)},
		{"written before ages were kept", 100, 50, time.Time{}, clT0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &batch.Channel{Charged: big.NewInt(tt.charged), TotalClaimed: big.NewInt(tt.claimed), UnclaimedSince: tt.since}
			if err := batch.Reserve(c, "r", big.NewInt(tt.charged+10), clT0, clT0.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if err := batch.Commit(c, "r", big.NewInt(10), big.NewInt(tt.charged+10), []byte{1}, clT0); err != nil {
				t.Fatal(err)
			}
			if !c.UnclaimedSince.Equal(tt.want) {
				t.Errorf("unclaimed since %v, want %v", c.UnclaimedSince, tt.want)
			}
		})
	}
}

// TestClaimerIsolatesBadRows: rows the clEscrow refuses are split from
// their batch, the others are claimed, and the bad ones are left out
// until charged again.
func TestClaimerIsolatesBadRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	var ids []common.Hash
	for i := range 7 {
		ids = append(ids, w.put(byte(i), claimSpec{charged: int64(10 * (i + 1)), age: 2 * time.Hour}))
	}
	bad := []common.Hash{ids[2], ids[5]}
	f := &claimFake{claim: claimRefuse(bad...)}
	c := w.claimer(f, func(cfg *batch.ClaimerConfig) { cfg.MaxRows = 4 })
	rep, err := c.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rep.Refused, func(a, b common.Hash) int { return a.Cmp(b) })
	slices.SortFunc(bad, func(a, b common.Hash) int { return a.Cmp(b) })
	if rep.Claimed != 5 || !slices.Equal(rep.Refused, bad) {
		t.Errorf("claimed %d, refused %v; want 5 and %v", rep.Claimed, rep.Refused, bad)
	}
	for i, id := range ids {
		got := w.channel(id).TotalClaimed.Int64()
		want := int64(10 * (i + 1))
		if slices.Contains(bad, id) {
			want = 0
		}
		if got != want {
			t.Errorf("channel %d: claimed total %d, want %d", i, got, want)
		}
	}
	for _, rows := range f.claims {
		if len(rows) > 4 {
			t.Errorf("a claim of %d rows, above MaxRows", len(rows))
		}
	}
	// The bad rows wait; a new charge brings one back.
	calls := len(f.claims)
	if rep, err := c.Once(ctx); err != nil || rep.Channels != 0 || len(f.claims) != calls {
		t.Errorf("the next pass: %+v %v, %d claims", rep, err, len(f.claims)-calls)
	}
	if _, err := w.db.UpdateChannel(ctx, bad[0], func(ch *batch.Channel, _ bool) (batch.Change, error) {
		ch.Charged.Add(ch.Charged, big.NewInt(5))
		ch.SignedMax = new(big.Int).Set(ch.Charged)
		return batch.Save, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.claim = nil
	if rep, err := c.Once(ctx); err != nil || rep.Claimed != 1 {
		t.Errorf("a bad row charged again: %+v %v", rep, err)
	}
	// The retry delay brings back the other.
	w.now = w.now.Add(time.Hour)
	if rep, err := c.Once(ctx); err != nil || rep.Claimed != 1 || w.channel(bad[1]).TotalClaimed.Sign() == 0 {
		t.Errorf("after the retry delay: %+v %v", rep, err)
	}
}

// TestClaimerRestart: what a claimer left unclaimed (its facilitator
// down, or it stopped) a new one claims from the store alone; rows
// claimed already are sent again only for their new charges.
func TestClaimerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	a := w.put(1, claimSpec{charged: 100, age: 2 * time.Hour})
	b := w.put(2, claimSpec{charged: 30, age: 2 * time.Hour})
	down := errors.New("connection refused")
	f1 := &claimFake{claim: func([]batch.Claim) (batch.Outcome, error) { return batch.Outcome{}, down }}
	if _, err := w.claimer(f1, nil).Once(ctx); !errors.Is(err, down) {
		t.Fatalf("a pass with the facilitator down: %v", err)
	}
	if w.channel(a).TotalClaimed.Sign() != 0 {
		t.Fatal("a failed claim was mirrored")
	}
	f2 := &claimFake{}
	if rep, err := w.claimer(f2, nil).Once(ctx); err != nil || rep.Claimed != 2 {
		t.Fatalf("the new claimer: %+v %v", rep, err)
	}
	// Channel a is charged again: the next claimer claims that alone.
	if _, err := w.db.UpdateChannel(ctx, a, func(c *batch.Channel, _ bool) (batch.Change, error) {
		if err := batch.Reserve(c, "r", big.NewInt(150), w.now, w.now.Add(time.Minute)); err != nil {
			return batch.Keep, err
		}
		return batch.Save, batch.Commit(c, "r", big.NewInt(50), big.NewInt(150), []byte{7}, w.now)
	}); err != nil {
		t.Fatal(err)
	}
	w.now = w.now.Add(time.Hour)
	f3 := &claimFake{}
	rep, err := w.claimer(f3, nil).Once(ctx)
	if err != nil || rep.Claimed != 1 || rep.Amount.Int64() != 50 {
		t.Fatalf("the third claimer: %+v %v", rep, err)
	}
	if got := f3.claimed(); len(got) != 1 || got[a] != 150 {
		t.Errorf("the third claimer claimed %v, want channel a up to 150", got)
	}
	if w.channel(b).TotalClaimed.Int64() != 30 || w.channel(a).TotalClaimed.Int64() != 150 {
		t.Error("claimed totals lost")
	}
}

// TestClaimerSettles: each receiver and token claimed for is settled once
// per pass; nothing_to_settle is done; a refused settle is asked again at
// the next pass, without a new claim.
func TestClaimerSettles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	other := common.HexToAddress("0x90f79bf6eb2c4f870365e785982e1f101e93b906")
	w.put(1, claimSpec{charged: 10, age: 2 * time.Hour})
	w.put(2, claimSpec{charged: 20, age: 2 * time.Hour})
	w.put(3, claimSpec{charged: 30, age: 2 * time.Hour, receiver: other})
	f := &claimFake{}
	f.settle = func(r, _ common.Address) (batch.Outcome, error) {
		if r == other {
			return batch.Outcome{Reason: "invalid_batch_settlement_evm_settle_simulation_failed"}, nil
		}
		return batch.Outcome{Reason: "invalid_batch_settlement_evm_nothing_to_settle"}, nil
	}
	c := w.claimer(f, nil)
	rep, err := c.Once(ctx)
	if err != nil || rep.Claimed != 3 || len(f.claims) != 1 {
		t.Fatalf("pass: %+v %v", rep, err)
	}
	if len(f.settles) != 2 {
		t.Fatalf("settled %v, want each receiver once", f.settles)
	}
	f.settle = nil
	if rep, err := c.Once(ctx); err != nil || len(rep.Settled) != 1 || len(f.claims) != 1 || len(f.settles) != 3 || f.settles[2] != other {
		t.Errorf("the next pass: %+v %v, settles %v", rep, err, f.settles)
	}
	if rep, err := c.Once(ctx); err != nil || len(rep.Settled) != 0 || len(f.settles) != 3 {
		t.Errorf("a pass with nothing to do settled: %+v %v", rep, err)
	}
}

// TestClaimerTurn: Run claims only when Turn says so.
func TestClaimerTurn(t *testing.T) {
	t.Parallel()
	for _, mine := range []bool{false, true} {
		w := newClaimWorld(t)
		id := w.put(1, claimSpec{charged: 10, age: 2 * time.Hour})
		asked := make(chan struct{}, 100)
		f := &claimFake{}
		c := w.claimer(f, func(cfg *batch.ClaimerConfig) {
			cfg.Turn = func(context.Context) (bool, error) {
				asked <- struct{}{}
				return mine, nil
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { c.Run(ctx); close(done) }()
		for range 3 {
			<-asked
		}
		cancel()
		<-done
		if got := w.channel(id).TotalClaimed.Int64(); mine != (got == 10) {
			t.Errorf("turn %v: claimed total %d", mine, got)
		}
		if !mine && len(f.claims)+len(f.settles) != 0 {
			t.Errorf("without the turn: %d claims, %d settles", len(f.claims), len(f.settles))
		}
	}
}

// TestClaimerWake: Wake runs a pass before the next poll.
func TestClaimerWake(t *testing.T) {
	t.Parallel()
	w := newClaimWorld(t)
	passes := make(chan struct{}, 10)
	c := w.claimer(&claimFake{}, func(cfg *batch.ClaimerConfig) {
		cfg.Poll = time.Hour
		cfg.Turn = func(context.Context) (bool, error) { passes <- struct{}{}; return true, nil }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	<-passes
	c.Wake()
	select {
	case <-passes:
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not start a pass")
	}
}

func TestClaimerConfig(t *testing.T) {
	t.Parallel()
	key, _ := crypto.GenerateKey()
	good := batch.ClaimerConfig{Escrow: clEscrow, Authorizer: key, Period: time.Hour, Poll: time.Second}
	for _, tt := range []struct {
		name string
		edit func(*batch.ClaimerConfig)
	}{
		{"no clEscrow", func(c *batch.ClaimerConfig) { c.Escrow = batch.Escrow{} }},
		{"no key", func(c *batch.ClaimerConfig) { c.Authorizer = nil }},
		{"no period", func(c *batch.ClaimerConfig) { c.Period = 0 }},
		{"zero threshold", func(c *batch.ClaimerConfig) { c.Threshold = new(big.Int) }},
	} {
		cfg := good
		tt.edit(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: valid", tt.name)
		}
	}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}

// claimCounts counts what the claimer and the watcher observe.
type claimCounts struct {
	mu                sync.Mutex
	txs               map[string]int // kind/result
	foreign           int
	started, watchErr int
	watchOK           int
}

func (o *claimCounts) BatchTransaction(kind, result string, _ float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.txs == nil {
		o.txs = map[string]int{}
	}
	o.txs[kind+"/"+result]++
}

func (o *claimCounts) BatchChannelStopped(evidence string) {
	o.mu.Lock()
	if evidence == batch.EvidenceClaimedElsewhere {
		o.foreign++
	}
	o.mu.Unlock()
}
func (o *claimCounts) EscrowWatchStarted() { o.mu.Lock(); o.started++; o.mu.Unlock() }

func (o *claimCounts) EscrowWatched(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.watchErr++
		return
	}
	o.watchOK++
}

// TestClaimerSettlesAfterRestart: what a claimer claimed and could not
// settle (every settle failed) a new claimer over the same store settles
// at its first pass, without a new claim: once per receiver and token of
// ours with something claimed, none of another authorizer's; a pair
// swept already (nothing_to_settle) is done.
func TestClaimerSettlesAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newClaimWorld(t)
	other := common.HexToAddress("0x90f79bf6eb2c4f870365e785982e1f101e93b906")
	stranger := common.HexToAddress("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc")
	w.put(1, claimSpec{charged: 10, age: 2 * time.Hour})
	w.put(2, claimSpec{charged: 20, age: 2 * time.Hour, receiver: other})
	w.put(3, claimSpec{charged: 30, claimed: 30, authorizer: &stranger, receiver: stranger})
	down := errors.New("connection refused")
	f1 := &claimFake{settle: func(r, _ common.Address) (batch.Outcome, error) {
		if r == other {
			return batch.Outcome{Reason: "invalid_batch_settlement_evm_settle_simulation_failed"}, nil
		}
		return batch.Outcome{}, down
	}}
	if rep, err := w.claimer(f1, nil).Once(ctx); !errors.Is(err, down) || rep.Claimed != 2 || len(rep.Settled) != 0 {
		t.Fatalf("the first claimer: %+v %v", rep, err)
	}

	// Restarted: nothing is due, but both pairs are settled.
	f2 := &claimFake{}
	f2.settle = func(r, _ common.Address) (batch.Outcome, error) {
		if r == other {
			return batch.Outcome{Reason: "invalid_batch_settlement_evm_nothing_to_settle"}, nil
		}
		return batch.Outcome{Success: true, Tx: common.HexToHash("0x5e"), Amount: big.NewInt(10)}, nil
	}
	c := w.claimer(f2, nil)
	rep, err := c.Once(ctx)
	if err != nil || rep.Due != "" || len(f2.claims) != 0 || len(rep.Settled) != 1 {
		t.Fatalf("the restarted claimer: %+v %v, %d claims", rep, err, len(f2.claims))
	}
	got := slices.Clone(f2.settles)
	slices.SortFunc(got, func(a, b common.Address) int { return a.Cmp(b) })
	want := []common.Address{clReceiver, other}
	slices.SortFunc(want, func(a, b common.Address) int { return a.Cmp(b) })
	if !slices.Equal(got, want) {
		t.Errorf("settled %v, want %v (ours, once each)", got, want)
	}
	// Both are done: the next pass settles nothing.
	if rep, err := c.Once(ctx); err != nil || len(f2.settles) != 2 {
		t.Errorf("the next pass: %+v %v, settles %v", rep, err, f2.settles)
	}
}

// chainFake is the escrow's claimed totals as the claimer reads them.
type chainFake struct {
	mu    sync.Mutex
	total map[common.Hash]*big.Int
	fail  map[common.Hash]bool
	reads int
}

func (c *chainFake) ChannelState(_ context.Context, id common.Hash) (batch.OnChain, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	if c.fail[id] {
		return batch.OnChain{}, errors.New("eth_call: connection refused")
	}
	return batch.OnChain{Balance: big.NewInt(1_000_000), TotalClaimed: orZero(c.total[id])}, nil
}

func orZero(x *big.Int) *big.Int {
	if x == nil {
		return new(big.Int)
	}
	return x
}

// TestClaimerReadsTheChain: with a chain reader, a claim the facilitator
// reports landed counts as far as the escrow shows it: the mirror is the
// escrow's total, the claim's amount what the total rose by; a row the
// escrow shows short is refused and left out; a total beyond what the
// store claimed stops the channel as claimed by a stranger, once; a read
// that fails leaves the row out, unmirrored.
func TestClaimerReadsTheChain(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		onChain     int64 // the escrow's total after the claim (charged 100, claimed 40 before)
		fail        bool
		wantMirror  int64
		wantAmount  int64
		claimed     int
		refused     bool
		foreign     bool
		wantSettles int
	}{
		{name: "the claim landed", onChain: 100, wantMirror: 100, wantAmount: 60, claimed: 1, wantSettles: 1},
		{name: "the claim moved nothing", onChain: 40, wantMirror: 40, refused: true},
		{name: "the claim moved part", onChain: 70, wantMirror: 70, wantAmount: 30, refused: true, wantSettles: 1},
		{name: "a stranger claimed more", onChain: 130, wantMirror: 130, wantAmount: 90, claimed: 1, foreign: true, wantSettles: 1},
		{name: "the escrow cannot be read", fail: true, wantMirror: 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newClaimWorld(t)
			id := w.put(1, claimSpec{charged: 100, claimed: 40, age: time.Minute})
			chain := &chainFake{total: map[common.Hash]*big.Int{id: big.NewInt(40)}, fail: map[common.Hash]bool{id: tt.fail}}
			f := &claimFake{}
			f.claim = func([]batch.Claim) (batch.Outcome, error) {
				chain.mu.Lock()
				chain.total[id] = big.NewInt(tt.onChain)
				chain.mu.Unlock()
				return batch.Outcome{Success: true, Tx: common.HexToHash("0xc1")}, nil
			}
			obs := &claimCounts{}
			c := w.claimer(f, func(cfg *batch.ClaimerConfig) { cfg.Chain, cfg.Observer = chain, obs })
			// A first pass, before the value is due, settles what the
			// store shows claimed; the second claims.
			if rep, err := c.Once(ctx); err != nil || rep.Due != "" || len(f.settles) != 1 {
				t.Fatalf("the first pass: %+v %v, %d settles", rep, err, len(f.settles))
			}
			f.settles = nil
			w.now = clT0.Add(time.Hour)
			rep, err := c.Once(ctx)
			if err != nil || rep.Claimed != tt.claimed || rep.Amount.Int64() != tt.wantAmount ||
				(len(rep.Refused) == 1) != tt.refused || (len(rep.Foreign) == 1) != tt.foreign {
				t.Fatalf("pass: %+v %v", rep, err)
			}
			ch := w.channel(id)
			if ch.TotalClaimed.Int64() != tt.wantMirror || !ch.StoppedAt.IsZero() != tt.foreign || ch.OwnClaimed.Int64() != 100 {
				t.Errorf("mirror %s, stopped at %v, own claimed %s (want 100: recorded before the claim was sent)", ch.TotalClaimed, ch.StoppedAt, ch.OwnClaimed)
			}
			if tt.foreign && (!ch.StoppedAt.Equal(w.now) || ch.StopEvidence != batch.EvidenceClaimedElsewhere || !ch.UnclaimedSince.IsZero()) {
				t.Errorf("stopped at %v on %q (want %v on a foreign claim), unclaimed since %v", ch.StoppedAt, ch.StopEvidence, w.now, ch.UnclaimedSince)
			}
			if obs.txs[batch.KindClaim+"/"+batch.ResultOK] != 1 {
				t.Errorf("claims observed: %v, want one ok", obs.txs)
			}
			if want := map[bool]int{true: 1}[tt.foreign]; obs.foreign != want {
				t.Errorf("%d foreign claims counted, want %d", obs.foreign, want)
			}
			if len(f.settles) != tt.wantSettles {
				t.Errorf("%d settles, want %d", len(f.settles), tt.wantSettles)
			}
			txs, err := w.db.BatchTxs(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range txs {
				if r.Kind == batch.KindClaim && (r.Result != batch.ResultOK || r.Amount.Int64() != tt.wantAmount) {
					t.Errorf("the claim in the history: %+v, want ok for %d", r, tt.wantAmount)
				}
			}
			// Nothing is sent again at the next pass: the row is claimed,
			// foreign, or left out until charged again.
			if rep, err := c.Once(ctx); err != nil || len(f.claims) != 1 || obs.foreign > 1 {
				t.Errorf("the next pass: %+v %v, %d claims, %d foreign", rep, err, len(f.claims), obs.foreign)
			}
		})
	}
}
