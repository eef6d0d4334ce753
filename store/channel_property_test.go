package store_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ethereum "github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store"
)

// The property test of the batch-settlement channel update (issue 20,
// item 7): random interleavings of vouchers, deposits, cooperative
// refunds, timed withdrawals, third-party deposits, claims and crashes,
// driven through payment.Gate and batch.Server over a real store (one
// server on SQLite; two replicas, each with its own store.DB handle, on
// one PostgreSQL database; and two servers with books of their own, on
// two SQLite files or two PostgreSQL databases: issue 32), against a Go
// model of the escrow
// (docs/batch-settlement.md §1.3) that plays the facilitator. At the end
// of each run every channel's stored voucher is claimed, and for every
// channel:
//
//   - no claim of a stored voucher was ever refused with
//     ClaimExceedsBalance, ClaimExceedsCeiling or InvalidSignature;
//   - what the escrow paid out to payTo (its totalClaimed) equals the
//     channel's charged total (summed over the stores), the prices of the
//     answers served, and the prices of the answers the payer got;
//   - with separate books, no store serves a channel another opened.
//
// A seed fixes every actor's choices and the channels' keys, not how
// the goroutines interleave: a failing run names its seed, and its trace
// the interleaving; rerun one with
// go test ./store/ -run 'Property/sqlite/seed=7$' -count=5 -v.

const (
	propPrice    = 50_000 // "0.05" at 6 decimals
	propDelay    = 900    // the channels' withdrawDelay, seconds
	propStart    = 1_900_000_000
	propChainID  = 8453
	propPublic   = "http://tollgate.test"
	propResource = propPublic + "/regime"
)

var (
	propToken = common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35")
	propPayTo = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	// The escrow's errors that a claim of a stored voucher must never
	// meet: the server served what the escrow will not pay.
	propForbidden = []string{"ClaimExceedsBalance", "ClaimExceedsCeiling", "InvalidSignature"}
)

func TestBatchChannelProperty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		engine   string
		replicas int
		separate bool // each replica with a store of its own
		runs     uint64
	}{
		{"sqlite", "sqlite", 1, false, 20},
		{"postgres", "postgres", 2, false, 10},
		{"sqlite-separate", "sqlite", 2, true, 10},
		{"postgres-separate", "postgres", 2, true, 6},
	} {
		e := propEngine(t, tc.engine)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(1); seed <= tc.runs; seed++ {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					t.Parallel()
					newPropRun(t, e, tc.replicas, tc.separate, seed).run()
				})
			}
		})
	}
}

func propEngine(t *testing.T, name string) engine {
	t.Helper()
	for _, e := range engines {
		if e.name == name {
			return e
		}
	}
	t.Fatalf("no engine %q", name)
	return engine{}
}

// propClock is a run's clock, shared by the servers, the claimer and the
// escrow model; only the run's clock actor (and its end) moves it.
type propClock struct{ ns atomic.Int64 }

func (c *propClock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *propClock) unix() uint64        { return uint64(c.ns.Load() / int64(time.Second)) }
func (c *propClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *propClock) since() time.Duration {
	return time.Duration(c.ns.Load() - propStart*int64(time.Second))
}

// propRand is one actor's random choices, from the run's seed.
type propRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newPropRand(seed, stream uint64) *propRand {
	return &propRand{r: rand.New(rand.NewPCG(seed, stream))}
}

func (p *propRand) intn(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r.IntN(n)
}

func (p *propRand) chance(f float64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.r.Float64() < f
}

func (p *propRand) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(p.intn(int(hi-lo)+1))
}

// propTrace is what happened in a run, printed when it fails.
type propTrace struct {
	mu    sync.Mutex
	clock *propClock
	lines []string
}

// add appends a line and returns its index.
func (tr *propTrace) add(who, format string, args ...any) int {
	line := fmt.Sprintf("%7.1fs %-10s %s", tr.clock.since().Seconds(), who, fmt.Sprintf(format, args...))
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, line)
	return len(tr.lines) - 1
}

// Write takes the servers' log lines (one slog record per call).
func (tr *propTrace) Write(p []byte) (int, error) {
	tr.add("log", "%s", strings.TrimSpace(string(p)))
	return len(p), nil
}

// logger writes log records to the trace, without their (wall clock)
// time.
func (tr *propTrace) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(tr, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// about returns the lines naming any of tags (all lines when none) up
// to line until and a few after it, at most the last n of them.
func (tr *propTrace) about(n, until int, tags ...string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, l := range tr.lines[:min(until+5, len(tr.lines))] {
		if len(tags) == 0 || slices.ContainsFunc(tags, func(tag string) bool { return strings.Contains(l, tag) }) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = append([]string{fmt.Sprintf("… %d earlier lines", len(out)-n)}, out[len(out)-n:]...)
	}
	return strings.Join(out, "\n")
}

func propShort(id common.Hash) string { return strings.ToLower(id.Hex()[:10]) }

// propRecover is the escrow's ECDSA.recoverCalldata (OpenZeppelin 5.7):
// 65 bytes, v 27 or 28, s in the lower half of the order; written here
// from the contract's rules rather than taken from the server's code.
func propRecover(digest common.Hash, sig []byte) (common.Address, bool) {
	if len(sig) != 65 || sig[64] != 27 && sig[64] != 28 {
		return common.Address{}, false
	}
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	if r.Sign() == 0 || s.Sign() == 0 || s.Cmp(new(big.Int).Rsh(crypto.S256().Params().N, 1)) > 0 {
		return common.Address{}, false
	}
	plain := slices.Clone(sig)
	plain[64] -= 27
	pub, err := crypto.SigToPub(digest[:], plain)
	if err != nil {
		return common.Address{}, false
	}
	return crypto.PubkeyToAddress(*pub), true
}

func propWord(x *big.Int) []byte { return common.LeftPadBytes(x.Bytes(), 32) }

func propMin(a, b *big.Int) *big.Int {
	if a.Cmp(b) < 0 {
		return new(big.Int).Set(a)
	}
	return new(big.Int).Set(b)
}

// The escrow's events the watcher follows (watch.go).
var (
	propWithdrawInitiated = crypto.Keccak256Hash([]byte("WithdrawInitiated(bytes32,uint128,uint40)"))
	propClaimed           = crypto.Keccak256Hash([]byte("Claimed(bytes32,address,uint128,uint128)"))
)

// propEscrow is the model of the escrow x402BatchSettlement
// (docs/batch-settlement.md §1.3) and of a facilitator relaying to it
// (batch.Facilitator, the claimer's batch.ChannelReader and the
// watcher's batch.Logs). Reads race writes: Verify takes its snapshot,
// then sleeps before answering. With faults on, a facilitator call may
// fail before it sends anything, or after its transaction landed (the
// outcome unknown to the server), and a refund may be sent without a
// receipt and land later, in the order the facilitator sent its
// transactions (or revert then).
type propEscrow struct {
	escrow batch.Escrow
	clock  *propClock
	rng    *propRand
	tr     *propTrace
	faults atomic.Bool

	mu       sync.Mutex
	chans    map[common.Hash]*propChan
	claimed  *big.Int // receivers[payTo][token].totalClaimed
	settled  *big.Int // receivers[payTo][token].totalSettled
	used     map[common.Hash]bool
	delayed  []batch.RefundOrder // refunds sent without a receipt
	logs     []types.Log
	refusals []propRefusal // claims of stored vouchers refused for a forbidden reason
	txs      uint64
}

// propRefusal is a claim of a stored voucher refused for a forbidden
// reason, and where in the trace.
type propRefusal struct {
	what, ch string
	at       int
}

// propChan is a channel in the escrow: channels(id), its pending
// withdrawal and refund nonce, and what came in and went back to the
// payer (refunds, withdrawals).
type propChan struct {
	cfg                     batch.Config
	balance, claimed, nonce *big.Int
	wAmount                 *big.Int
	wAt                     uint64
	deposited, toPayer      *big.Int
}

func newPropEscrow(escrow batch.Escrow, clock *propClock, rng *propRand, tr *propTrace) *propEscrow {
	return &propEscrow{escrow: escrow, clock: clock, rng: rng, tr: tr, chans: map[common.Hash]*propChan{},
		claimed: new(big.Int), settled: new(big.Int), used: map[common.Hash]bool{}}
}

func (m *propEscrow) tx() common.Hash {
	m.txs++
	return common.BigToHash(new(big.Int).SetUint64(m.txs))
}

// channel returns cfg's channel, created empty when new.
func (m *propEscrow) channel(cfg batch.Config) (*propChan, common.Hash) {
	id := m.escrow.ChannelID(cfg)
	ch := m.chans[id]
	if ch == nil {
		ch = &propChan{cfg: cfg, balance: new(big.Int), claimed: new(big.Int), nonce: new(big.Int), wAmount: new(big.Int),
			deposited: new(big.Int), toPayer: new(big.Int)}
		m.chans[id] = ch
	}
	return ch, id
}

func (m *propEscrow) stateLocked(id common.Hash) batch.OnChain {
	ch := m.chans[id]
	if ch == nil {
		return batch.OnChain{Balance: new(big.Int), TotalClaimed: new(big.Int), RefundNonce: new(big.Int)}
	}
	return batch.OnChain{Balance: new(big.Int).Set(ch.balance), TotalClaimed: new(big.Int).Set(ch.claimed),
		WithdrawRequestedAt: ch.wAt, RefundNonce: new(big.Int).Set(ch.nonce)}
}

// view is a channel's state as anyone reads it.
func (m *propEscrow) view(id common.Hash) (batch.OnChain, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateLocked(id), m.chans[id] != nil
}

func (m *propEscrow) fault(p float64) bool { return m.faults.Load() && m.rng.chance(p) }

// checkPayment is the facilitator's verification (Local.check's
// signature rule, checkState), against st.
func (m *propEscrow) checkPayment(p *batch.Payment, st batch.OnChain) string {
	if p.Config.PayerAuthorizer == (common.Address{}) {
		return batch.ReasonVoucherSignature
	}
	if signer, ok := propRecover(m.escrow.VoucherDigest(p.ChannelID, p.MaxClaimable), p.Signature); !ok || signer != p.Config.PayerAuthorizer {
		return batch.ReasonVoucherSignature
	}
	max := p.MaxClaimable
	switch p.Type {
	case batch.TypeDeposit:
		if m.used[batch.DepositNonce(p.ChannelID, p.Deposit.Salt)] {
			return batch.ReasonDepositSimulationFailed // the authorization is used: the eth_call reverts
		}
		if max.Cmp(new(big.Int).Add(st.Balance, p.Deposit.Amount)) > 0 {
			return batch.ReasonCumulativeExceedsBalance
		}
	default:
		if st.Balance.Sign() == 0 {
			return batch.ReasonChannelNotFound
		}
		if max.Cmp(st.Balance) > 0 {
			return batch.ReasonCumulativeExceedsBalance
		}
	}
	if p.Type == batch.TypeRefund && max.Cmp(st.TotalClaimed) < 0 || p.Type != batch.TypeRefund && max.Cmp(st.TotalClaimed) <= 0 {
		return batch.ReasonCumulativeBelowClaimed
	}
	return ""
}

// Verify implements batch.Facilitator.
func (m *propEscrow) Verify(_ context.Context, p *batch.Payment, _ payment.RequirementsV2, _ []byte) (batch.Verdict, error) {
	if m.fault(0.02) {
		return batch.Verdict{}, errors.New("model: verify: connection refused")
	}
	m.mu.Lock()
	st := m.stateLocked(p.ChannelID)
	reason := m.checkPayment(p, st)
	m.mu.Unlock()
	time.Sleep(m.rng.dur(0, 3*time.Millisecond)) // the read is old by the time the server uses it
	v := batch.Verdict{Valid: reason == "", Reason: reason, Payer: p.Config.Payer, State: st}
	m.tr.add("chain", "verify %s ch=%s max=%s -> %q (read: balance %s claimed %s nonce %s withdraw %d)", p.Type, propShort(p.ChannelID),
		p.MaxClaimable, reason, st.Balance, st.TotalClaimed, st.RefundNonce, st.WithdrawRequestedAt)
	return v, nil
}

// Deposit implements batch.Facilitator: verify again, then deposit.
func (m *propEscrow) Deposit(_ context.Context, p *batch.Payment, _ payment.RequirementsV2, _ []byte) (batch.Outcome, error) {
	if m.fault(0.02) {
		return batch.Outcome{}, errors.New("model: deposit: connection refused")
	}
	m.mu.Lock()
	if reason := m.checkPayment(p, m.stateLocked(p.ChannelID)); reason != "" {
		m.mu.Unlock()
		m.tr.add("chain", "deposit ch=%s refused: %s", propShort(p.ChannelID), reason)
		return batch.Outcome{Reason: reason}, nil
	}
	ch, id := m.channel(p.Config)
	opened := ch.balance.Sign() == 0 && ch.claimed.Sign() == 0
	ch.balance.Add(ch.balance, p.Deposit.Amount)
	ch.deposited.Add(ch.deposited, p.Deposit.Amount)
	m.used[batch.DepositNonce(id, p.Deposit.Salt)] = true
	after, tx := m.stateLocked(id), m.tx()
	m.mu.Unlock()
	m.tr.add("chain", "deposit ch=%s +%s -> balance %s (opened %v)", propShort(id), p.Deposit.Amount, after.Balance, opened)
	if m.fault(0.03) {
		return batch.Outcome{}, errors.New("model: deposit: sent, no receipt")
	}
	return batch.Outcome{Success: true, Tx: tx, Amount: new(big.Int).Set(p.Deposit.Amount), State: &after, Opened: opened}, nil
}

// stageClaims checks claimWithSignature(rows, sig) against the state
// (claimed totals already raised by staged taken into account) and
// returns the claimed totals it leaves, or the escrow's error and the
// row it is about (-1: the batch).
func (m *propEscrow) stageClaims(rows []batch.Claim, sig []byte) (map[common.Hash]*big.Int, string, int) {
	if len(rows) == 0 {
		return nil, "EmptyBatch", -1
	}
	auth := rows[0].Config.ReceiverAuthorizer
	entries := make([]batch.ClaimEntry, len(rows))
	for i, r := range rows {
		if r.Config.ReceiverAuthorizer != auth {
			return nil, "NotReceiverAuthorizer", i
		}
		entries[i] = batch.ClaimEntry{ChannelID: m.escrow.ChannelID(r.Config), MaxClaimableAmount: r.MaxClaimable, TotalClaimed: r.TotalClaimed}
	}
	if signer, ok := propRecover(m.escrow.ClaimBatchDigest(entries), sig); !ok || signer != auth {
		return nil, "InvalidSignature", -1
	}
	staged := map[common.Hash]*big.Int{}
	for i, r := range rows {
		id := entries[i].ChannelID
		claimed, balance := new(big.Int), new(big.Int)
		if ch := m.chans[id]; ch != nil {
			claimed, balance = ch.claimed, ch.balance
		}
		if s, ok := staged[id]; ok {
			claimed = s
		}
		switch {
		case r.TotalClaimed.Cmp(claimed) <= 0:
			continue // a no-op, unchecked
		case r.TotalClaimed.Cmp(r.MaxClaimable) > 0:
			return nil, "ClaimExceedsCeiling", i
		case r.TotalClaimed.Cmp(balance) > 0:
			return nil, "ClaimExceedsBalance", i
		}
		signer, ok := propRecover(m.escrow.VoucherDigest(id, r.MaxClaimable), r.Signature)
		want := r.Config.PayerAuthorizer
		if want == (common.Address{}) {
			want = r.Config.Payer
		}
		if !ok || signer != want {
			return nil, "InvalidSignature", i
		}
		staged[id] = new(big.Int).Set(r.TotalClaimed)
	}
	return staged, "", -1
}

func (m *propEscrow) applyClaims(staged map[common.Hash]*big.Int, sender common.Address) {
	for id, total := range staged {
		ch := m.chans[id]
		delta := new(big.Int).Sub(total, ch.claimed)
		ch.claimed.Set(total)
		m.claimed.Add(m.claimed, delta)
		m.logs = append(m.logs, types.Log{Address: m.escrow.Address, BlockNumber: uint64(len(m.logs) + 1),
			Topics: []common.Hash{propClaimed, id, common.BytesToHash(sender.Bytes())}, Data: append(propWord(delta), propWord(total)...)})
		m.tr.add("chain", "claimed ch=%s +%s -> claimed %s (balance %s)", propShort(id), delta, total, ch.balance)
	}
}

// refused records a claim the escrow refused: a forbidden reason is a
// stored voucher the escrow will not pay.
func (m *propEscrow) refused(who string, rows []batch.Claim, row int, reason string) {
	what, tag := fmt.Sprintf("%s of %d rows refused: %s", who, len(rows), reason), ""
	if row >= 0 {
		r := rows[row]
		id := m.escrow.ChannelID(r.Config)
		st := m.stateLocked(id)
		tag = propShort(id)
		what += fmt.Sprintf(" (ch=%s claims %s under a voucher of %s; the escrow holds %s, claimed %s)", tag, r.TotalClaimed, r.MaxClaimable,
			st.Balance, st.TotalClaimed)
	}
	at := m.tr.add("chain", "%s", what)
	if slices.Contains(propForbidden, reason) {
		m.refusals = append(m.refusals, propRefusal{what: what, at: at, ch: tag})
	}
}

// Claim implements batch.Facilitator.
func (m *propEscrow) Claim(_ context.Context, rows []batch.Claim, sig []byte) (batch.Outcome, error) {
	if m.fault(0.03) {
		return batch.Outcome{}, errors.New("model: claim: connection refused")
	}
	m.mu.Lock()
	staged, reason, row := m.stageClaims(rows, sig)
	if reason != "" {
		m.refused("claim", rows, row, reason)
		m.mu.Unlock()
		return batch.Outcome{Reason: batch.ReasonClaimSimulationFailed, Message: reason}, nil
	}
	m.applyClaims(staged, propPayTo)
	tx := m.tx()
	m.mu.Unlock()
	if m.fault(0.03) {
		return batch.Outcome{}, errors.New("model: claim: sent, no receipt")
	}
	return batch.Outcome{Success: true, Tx: tx}, nil
}

// claimStored claims rows without faults (the operator's claim before a
// withdrawal is finalized, the run's final claim); "" when it landed.
func (m *propEscrow) claimStored(who string, rows []batch.Claim, key *ecdsa.PrivateKey) string {
	entries := make([]batch.ClaimEntry, len(rows))
	for i, r := range rows {
		entries[i] = batch.ClaimEntry{ChannelID: m.escrow.ChannelID(r.Config), MaxClaimableAmount: r.MaxClaimable, TotalClaimed: r.TotalClaimed}
	}
	sig, err := payment.SignDigest(m.escrow.ClaimBatchDigest(entries), key)
	if err != nil {
		return err.Error()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	staged, reason, row := m.stageClaims(rows, sig)
	if reason != "" {
		m.refused(who, rows, row, reason)
		return reason
	}
	m.applyClaims(staged, propPayTo)
	return ""
}

// Settle implements batch.Facilitator.
func (m *propEscrow) Settle(_ context.Context, receiver, token common.Address) (batch.Outcome, error) {
	if m.fault(0.03) {
		return batch.Outcome{}, errors.New("model: settle: connection refused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	amount := new(big.Int).Sub(m.claimed, m.settled)
	if receiver != propPayTo || token != propToken || amount.Sign() <= 0 {
		return batch.Outcome{Reason: batch.ReasonNothingToSettle}, nil
	}
	m.settled.Set(m.claimed)
	m.tr.add("chain", "settled %s to payTo", amount)
	return batch.Outcome{Success: true, Tx: m.tx(), Amount: amount}, nil
}

// checkRefund checks multicall(claimWithSignature(o.Claims),
// refundWithSignature(o)) against the state: the claims it stages, or
// the escrow's error.
func (m *propEscrow) checkRefund(o batch.RefundOrder) (map[common.Hash]*big.Int, string) {
	id := m.escrow.ChannelID(o.Config)
	ch := m.chans[id]
	if ch == nil {
		return nil, "InvalidChannel"
	}
	staged := map[common.Hash]*big.Int{}
	if len(o.Claims) > 0 {
		var reason string
		var row int
		if staged, reason, row = m.stageClaims(o.Claims, o.ClaimSig); reason != "" {
			m.refused("refund's claim", o.Claims, row, reason)
			return nil, reason
		}
	}
	switch {
	case o.Nonce == nil || o.Nonce.Cmp(ch.nonce) != 0:
		return nil, "InvalidRefundNonce"
	case o.Amount.Sign() == 0:
		return nil, "ZeroRefund"
	}
	if signer, ok := propRecover(m.escrow.RefundDigest(id, o.Nonce, o.Amount), o.RefundSig); !ok || signer != ch.cfg.ReceiverAuthorizer {
		return nil, "InvalidSignature"
	}
	return staged, ""
}

// applyRefund lands o (checked): the claims, then _executeRefund.
func (m *propEscrow) applyRefund(o batch.RefundOrder, staged map[common.Hash]*big.Int) (*big.Int, batch.OnChain) {
	m.applyClaims(staged, propPayTo)
	id := m.escrow.ChannelID(o.Config)
	ch := m.chans[id]
	ch.nonce.Add(ch.nonce, big.NewInt(1))
	amount := propMin(o.Amount, new(big.Int).Sub(ch.balance, ch.claimed))
	if amount.Sign() > 0 {
		ch.balance.Sub(ch.balance, amount)
		ch.toPayer.Add(ch.toPayer, amount)
		if ch.wAt != 0 {
			if amount.Cmp(ch.wAmount) >= 0 {
				ch.wAmount, ch.wAt = new(big.Int), 0
			} else {
				ch.wAmount.Sub(ch.wAmount, amount)
			}
		}
	}
	m.tr.add("chain", "refund landed ch=%s nonce %s asked %s refunded %s -> balance %s claimed %s", propShort(id), o.Nonce, o.Amount, amount,
		ch.balance, ch.claimed)
	return amount, m.stateLocked(id)
}

// Refund implements batch.Facilitator (as Local.Refund does it).
func (m *propEscrow) Refund(_ context.Context, o batch.RefundOrder) (batch.Outcome, error) {
	if o.Amount == nil || o.Amount.Sign() <= 0 {
		return batch.Outcome{Reason: batch.ReasonRefundAmountInvalid}, nil
	}
	if m.fault(0.1) {
		return batch.Outcome{}, errors.New("model: refund: connection reset before sending")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.escrow.ChannelID(o.Config)
	ch := m.chans[id]
	if ch == nil {
		return batch.Outcome{Reason: batch.ReasonRefundNoBalance}, nil
	}
	for _, d := range m.delayed {
		if m.escrow.ChannelID(d.Config) == id && d.Nonce.Cmp(o.Nonce) == 0 {
			m.tr.add("chain", "ch=%s: a refund of %s at nonce %s is asked while one of %s at that nonce waits", propShort(id), o.Amount, o.Nonce, d.Amount)
		}
	}
	claimed := new(big.Int).Set(ch.claimed)
	if c := o.Claimed(); c.Cmp(claimed) > 0 {
		claimed = c
	}
	if new(big.Int).Sub(ch.balance, claimed).Sign() <= 0 {
		m.tr.add("chain", "refund ch=%s nonce %s: nothing to refund", propShort(id), o.Nonce)
		return batch.Outcome{Reason: batch.ReasonRefundNoBalance}, nil
	}
	staged, reason := m.checkRefund(o)
	if reason != "" {
		m.tr.add("chain", "refund ch=%s nonce %s amount %s: simulation fails %s", propShort(id), o.Nonce, o.Amount, reason)
		return batch.Outcome{Reason: batch.ReasonRefundSimulationFailed, Message: reason}, nil
	}
	tx := m.tx()
	if len(m.delayed) > 0 || m.fault(0.25) {
		// Sent, no receipt yet: it lands later, if it still can. The
		// facilitator's transactions are mined in the order it sent them
		// (its account's nonce): one sent behind a refund still waiting
		// waits too.
		m.delayed = append(m.delayed, o)
		m.tr.add("chain", "refund ch=%s nonce %s amount %s: sent, no receipt", propShort(id), o.Nonce, o.Amount)
		return batch.Outcome{Reason: payment.ReasonSettlementPending, Message: "sent; no receipt", Tx: tx}, nil
	}
	amount, after := m.applyRefund(o, staged)
	if m.fault(0.07) {
		m.tr.add("chain", "refund ch=%s: landed, the facilitator's answer is lost", propShort(id))
		return batch.Outcome{}, errors.New("model: refund: sent, the answer was lost")
	}
	return batch.Outcome{Success: true, Tx: tx, Amount: amount, State: &after}, nil
}

// landDelayed lands the oldest refund sent without a receipt (all of
// them when all), or reverts it if it no longer can land.
func (m *propEscrow) landDelayed(all bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.delayed) > 0 {
		o := m.delayed[0]
		m.delayed = m.delayed[1:]
		if staged, reason := m.checkRefund(o); reason != "" {
			m.tr.add("chain", "a refund sent earlier reverts: ch=%s nonce %s: %s", propShort(m.escrow.ChannelID(o.Config)), o.Nonce, reason)
		} else {
			m.applyRefund(o, staged)
		}
		if !all {
			return
		}
	}
}

// ChannelState implements batch.ChannelReader.
func (m *propEscrow) ChannelState(_ context.Context, id common.Hash) (batch.OnChain, error) {
	if m.fault(0.02) {
		return batch.OnChain{}, errors.New("model: read: connection refused")
	}
	st, _ := m.view(id)
	return st, nil
}

// BlockNumber implements batch.Logs: one block per event.
func (m *propEscrow) BlockNumber(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.logs)), nil
}

// FilterLogs implements batch.Logs.
func (m *propEscrow) FilterLogs(_ context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.Log
	for _, l := range m.logs {
		if l.BlockNumber >= q.FromBlock.Uint64() && l.BlockNumber <= q.ToBlock.Uint64() {
			out = append(out, l)
		}
	}
	return out, nil
}

// depositFor is a deposit a third party lands for the channel's payer.
func (m *propEscrow) depositFor(cfg batch.Config, amount *big.Int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, id := m.channel(cfg)
	if ch.balance.Sign() == 0 {
		return // tops up channels the payer opened (a stranger's first deposit is TestServeRefusals')
	}
	ch.balance.Add(ch.balance, amount)
	ch.deposited.Add(ch.deposited, amount)
	m.tr.add("chain", "third-party deposit ch=%s +%s -> balance %s", propShort(id), amount, ch.balance)
}

// initiateWithdraw is the payer's initiateWithdraw(config, amount).
func (m *propEscrow) initiateWithdraw(cfg batch.Config, amount *big.Int) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, id := m.channel(cfg)
	switch {
	case amount.Sign() == 0:
		return 0, errors.New("NothingToWithdraw")
	case ch.wAt != 0:
		return 0, errors.New("WithdrawalAlreadyPending")
	case amount.Cmp(new(big.Int).Sub(ch.balance, ch.claimed)) > 0:
		return 0, errors.New("WithdrawAmountExceedsAvailable")
	}
	now := m.clock.unix()
	ch.wAmount, ch.wAt = new(big.Int).Set(amount), now
	m.logs = append(m.logs, types.Log{Address: m.escrow.Address, BlockNumber: uint64(len(m.logs) + 1),
		Topics: []common.Hash{propWithdrawInitiated, id}, Data: append(propWord(amount), propWord(new(big.Int).SetUint64(now+cfg.WithdrawDelay))...)})
	m.tr.add("chain", "withdrawal initiated ch=%s amount %s, finalizable at %+ds", propShort(id), amount, now+cfg.WithdrawDelay-propStart)
	return now, nil
}

// finalizeWithdraw is the payer's finalizeWithdraw(config).
func (m *propEscrow) finalizeWithdraw(cfg batch.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, id := m.channel(cfg)
	switch {
	case ch.wAt == 0:
		return errors.New("WithdrawalNotPending")
	case m.clock.unix() < ch.wAt+cfg.WithdrawDelay:
		return errors.New("WithdrawDelayNotElapsed")
	}
	amount := propMin(ch.wAmount, new(big.Int).Sub(ch.balance, ch.claimed))
	ch.wAmount, ch.wAt = new(big.Int), 0
	ch.balance.Sub(ch.balance, amount)
	ch.toPayer.Add(ch.toPayer, amount)
	m.tr.add("chain", "withdrawal finalized ch=%s: %s to the payer -> balance %s claimed %s", propShort(id), amount, ch.balance, ch.claimed)
	return nil
}

// pendingWithdrawals are the channels whose timed withdrawal is pending.
func (m *propEscrow) pendingWithdrawals() map[common.Hash]batch.Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[common.Hash]batch.Config{}
	for id, ch := range m.chans {
		if ch.wAt != 0 {
			out[id] = ch.cfg
		}
	}
	return out
}

// propStore is a replica process's view of its store: once the process
// is dead (crashed), every call fails, an update in progress rolls back,
// and one that committed is not seen to.
type propStore struct {
	db   *store.DB
	dead *atomic.Bool
	tr   *propTrace
	name string // the process, in the trace
}

var errPropCrashed = errors.New("the replica crashed")

func (s propStore) Channel(ctx context.Context, id common.Hash) (batch.Channel, bool, error) {
	if s.dead.Load() {
		return batch.Channel{}, false, errPropCrashed
	}
	return s.db.Channel(ctx, id)
}

func (s propStore) Channels(ctx context.Context) ([]batch.Channel, error) {
	if s.dead.Load() {
		return nil, errPropCrashed
	}
	return s.db.Channels(ctx)
}

func (s propStore) RecordBatchTx(ctx context.Context, r batch.TxRecord) error {
	if s.dead.Load() {
		return errPropCrashed
	}
	return s.db.RecordBatchTx(ctx, r)
}

func (s propStore) UpdateChannel(ctx context.Context, id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	return s.update(id, fn, func(fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
		return s.db.UpdateChannel(ctx, id, fn)
	})
}

func (s propStore) UpdateChannelFrom(ctx context.Context, from batch.Channel, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	return s.update(from.ID, fn, func(fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
		return s.db.UpdateChannelFrom(ctx, from, fn)
	})
}

// update runs fn through run (one of the store's updates) as a replica
// that may die before or after the commit, and traces the charges.
func (s propStore) update(id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error),
	run func(func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error)) (batch.Channel, error) {
	if s.dead.Load() {
		return batch.Channel{}, errPropCrashed
	}
	var before batch.Channel
	c, err := run(func(c *batch.Channel, found bool) (batch.Change, error) {
		before = *c
		change, err := fn(c, found)
		if s.dead.Load() {
			return batch.Keep, errPropCrashed // died before the commit
		}
		return change, err
	})
	if err == nil && propZero(c.Charged).Cmp(propZero(before.Charged)) != 0 {
		withdrawal := "none"
		if c.WithdrawRequestedAt != 0 {
			withdrawal = fmt.Sprintf("requested at %+ds", int64(c.WithdrawRequestedAt)-propStart)
		}
		s.tr.add("store", "%s: ch=%s charged %s -> %s (withdrawal %s)", s.name, propShort(id), propZero(before.Charged), c.Charged, withdrawal)
	}
	if err == nil && s.dead.Load() {
		return batch.Channel{}, errPropCrashed // committed, died before seeing it
	}
	return c, err
}

// propFacilitator is a replica process's facilitator client: a dead
// process sends nothing more (what it sent may still land).
type propFacilitator struct {
	m    *propEscrow
	dead *atomic.Bool
}

func (f propFacilitator) alive() error {
	if f.dead.Load() {
		return errPropCrashed
	}
	return nil
}

func (f propFacilitator) Verify(ctx context.Context, p *batch.Payment, req payment.RequirementsV2, raw []byte) (batch.Verdict, error) {
	if err := f.alive(); err != nil {
		return batch.Verdict{}, err
	}
	return f.m.Verify(ctx, p, req, raw)
}

func (f propFacilitator) Deposit(ctx context.Context, p *batch.Payment, req payment.RequirementsV2, raw []byte) (batch.Outcome, error) {
	if err := f.alive(); err != nil {
		return batch.Outcome{}, err
	}
	return f.m.Deposit(ctx, p, req, raw)
}

func (f propFacilitator) Claim(ctx context.Context, rows []batch.Claim, sig []byte) (batch.Outcome, error) {
	if err := f.alive(); err != nil {
		return batch.Outcome{}, err
	}
	return f.m.Claim(ctx, rows, sig)
}

func (f propFacilitator) Settle(ctx context.Context, receiver, token common.Address) (batch.Outcome, error) {
	if err := f.alive(); err != nil {
		return batch.Outcome{}, err
	}
	return f.m.Settle(ctx, receiver, token)
}

func (f propFacilitator) Refund(ctx context.Context, o batch.RefundOrder) (batch.Outcome, error) {
	if err := f.alive(); err != nil {
		return batch.Outcome{}, err
	}
	return f.m.Refund(ctx, o)
}

func (f propFacilitator) ChannelState(ctx context.Context, id common.Hash) (batch.OnChain, error) {
	if err := f.alive(); err != nil {
		return batch.OnChain{}, err
	}
	return f.m.ChannelState(ctx, id)
}

// propProcess is one life of a replica: its server, gate and claimer.
type propProcess struct {
	gen     int
	dead    atomic.Bool
	handler http.Handler
	claimMu sync.Mutex // a Claimer runs one pass at a time
	claimer *batch.Claimer
}

// propReplica is one replica: an HTTP server in front of its current
// process, which a crash replaces. A dead process's answers are never
// sent: the connection is cut.
type propReplica struct {
	run      *propRun
	name     string
	db       *store.DB
	srv      *httptest.Server
	cur      atomic.Pointer[propProcess]
	inflight sync.WaitGroup
}

func (rep *propReplica) start(gen int) (*propProcess, error) {
	r := rep.run
	p := &propProcess{gen: gen}
	st := propStore{db: rep.db, dead: &p.dead, tr: r.tr, name: fmt.Sprintf("%s/%d", rep.name, gen)}
	f := propFacilitator{m: r.chain, dead: &p.dead}
	logger := r.tr.logger().With("replica", fmt.Sprintf("%s/%d", rep.name, gen))
	scheme, err := batch.NewServer(batch.ServerConfig{Escrow: r.escrow, Authorizer: r.authorizer, WithdrawDelay: propDelay,
		MinDeposit: big.NewInt(5 * propPrice), StateTTL: time.Minute, WithdrawMargin: 5 * time.Minute, MinRefund: big.NewInt(10_000),
		RefundInterval: 30 * time.Second, Now: r.clock.Now}, st, f)
	if err != nil {
		return nil, err
	}
	gate, err := payment.NewGate(payment.GateConfig{
		PublicURL: propPublic, Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(propChainID),
		Asset: propToken, AssetName: "USD Coin", AssetVersion: "2", Decimals: 6, PayTo: propPayTo, MaxTimeout: 60,
		Schemes: []payment.Scheme{scheme},
	}, []payment.Route{{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.05", Description: "regime", Valid: func(*http.Request) bool { return true }}},
		nil, logger)
	if err != nil {
		return nil, err
	}
	p.handler = gate.Handler(http.HandlerFunc(r.service))
	if p.claimer, err = batch.NewClaimer(batch.ClaimerConfig{Escrow: r.escrow, Authorizer: r.authorizer, Period: time.Minute, Poll: time.Second,
		Threshold: big.NewInt(1), Chain: f, Now: r.clock.Now}, st, f, logger); err != nil {
		return nil, err
	}
	return p, nil
}

// crash kills the replica's process and starts a new one on its store.
func (rep *propReplica) crash() {
	old := rep.cur.Load()
	p, err := rep.start(old.gen + 1)
	if err != nil {
		rep.run.t.Errorf("seed %d: replica %s: %v", rep.run.seed, rep.name, err)
		return
	}
	rep.cur.Store(p)
	old.dead.Store(true)
	rep.run.tr.add("crash", "replica %s/%d crashed; %s/%d started", rep.name, old.gen, rep.name, old.gen+1)
}

func (rep *propReplica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rep.inflight.Add(1)
	defer rep.inflight.Done()
	p := rep.cur.Load()
	what := propPayloadOf(req.Header.Get(payment.HeaderPaymentV2))
	rec := httptest.NewRecorder()
	p.handler.ServeHTTP(rec, req)
	if p.dead.Load() {
		rep.run.tr.add("server", "%s/%d: %s: died before answering", rep.name, p.gen, what)
		panic(http.ErrAbortHandler) // the process is gone: no answer
	}
	a := propAnswerOf(rec.Header(), rec.Code)
	rep.run.tr.add("server", "%s/%d: %s: answered %d %s", rep.name, p.gen, what, a.status, a.reason())
	rep.run.served(rec)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// propPaid is what a paid answer's PAYMENT-RESPONSE says of its charge.
type propPaid struct {
	channel, cumulative string
}

func propPaidOf(s *payment.SettleResponse) (propPaid, bool) {
	if s == nil || !s.Success {
		return propPaid{}, false
	}
	b, _ := json.Marshal(s.Extra)
	var e struct {
		ChargedAmount string              `json:"chargedAmount"`
		ChannelState  *batch.ChannelState `json:"channelState"`
	}
	if json.Unmarshal(b, &e) != nil || e.ChargedAmount == "" || e.ChannelState == nil {
		return propPaid{}, false // a refund's acknowledgment
	}
	return propPaid{strings.ToLower(e.ChannelState.ChannelID), e.ChannelState.ChargedCumulativeAmount}, true
}

// propAnswer is an answer as the client reads it.
type propAnswer struct {
	status     int
	settlement *payment.SettleResponse
	required   *payment.RequiredV2
}

func (a propAnswer) reason() string {
	if a.required != nil {
		return a.required.Error
	}
	return ""
}

func propDecodeHeader(v string, out any) bool {
	b, err := base64.StdEncoding.DecodeString(v)
	return err == nil && json.Unmarshal(b, out) == nil
}

func propAnswerOf(h http.Header, status int) propAnswer {
	a := propAnswer{status: status}
	if v := h.Get(payment.HeaderPaymentResponseV2); v != "" {
		a.settlement = new(payment.SettleResponse)
		if !propDecodeHeader(v, a.settlement) {
			a.settlement = nil
		}
	}
	if v := h.Get(payment.HeaderPaymentRequired); v != "" {
		a.required = new(payment.RequiredV2)
		if !propDecodeHeader(v, a.required) {
			a.required = nil
		}
	}
	return a
}

// propPayerChan is one of a payer's channels: a payer key (salt zero:
// one channel per key).
type propPayerChan struct {
	payer batch.Payer
	cfg   batch.Config
	id    common.Hash
}

// propPayer is one payer: its channels, the current one last (a payer
// moves to a new channel once its old one is no longer served).
type propPayer struct {
	idx   int
	mu    sync.Mutex
	chans []*propPayerChan
}

func (p *propPayer) current() *propPayerChan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.chans[len(p.chans)-1]
}

func (p *propPayer) all() []*propPayerChan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.chans)
}

// propRun is one seed's run.
type propRun struct {
	t          *testing.T
	seed       uint64
	clock      *propClock
	tr         *propTrace
	chain      *propEscrow
	escrow     batch.Escrow
	authorizer *ecdsa.PrivateKey
	terms      batch.Terms
	entry      payment.RequirementsV2
	replicas   []*propReplica
	payers     []*propPayer
	http       *http.Client
	watchMu    sync.Mutex
	serviceRng *propRand
	stop       chan struct{}

	mu       sync.Mutex
	separate bool                           // each replica keeps books of its own
	stores   []*store.DB                    // the distinct stores: one, or one per replica
	watchers []*batch.Watcher               // one per store
	serve    map[string]map[string]bool     // channel -> cumulative amounts of the paid answers served
	received map[string]map[string]bool     // channel -> cumulative amounts of the paid answers the payer got
	attempts map[string]map[string][]string // channel -> cumulative -> what each payment signing it got
	problems []string                       // what the actors saw that must never happen
}

// propKey is a key derived from the seed: a run's channel ids are the
// same every time it runs.
func propKey(t *testing.T, seed uint64, who string, n int) *ecdsa.PrivateKey {
	t.Helper()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	k, err := crypto.ToECDSA(crypto.Keccak256([]byte("tollgate property"), b[:], []byte(who), big.NewInt(int64(n)).Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newPropRun(t *testing.T, e engine, replicas int, separate bool, seed uint64) *propRun {
	t.Helper()
	r := &propRun{t: t, seed: seed, clock: new(propClock), escrow: batch.Escrow{ChainID: big.NewInt(propChainID), Address: batch.EscrowAddress},
		authorizer: propKey(t, seed, "authorizer", 0), serviceRng: newPropRand(seed, 100), stop: make(chan struct{}),
		serve: map[string]map[string]bool{}, received: map[string]map[string]bool{},
		attempts: map[string]map[string][]string{}, separate: separate}
	r.clock.ns.Store(propStart * int64(time.Second))
	r.tr = &propTrace{clock: r.clock}
	r.chain = newPropEscrow(r.escrow, r.clock, newPropRand(seed, 101), r.tr)
	r.terms = batch.Terms{Escrow: r.escrow, Receiver: propPayTo, ReceiverAuthorizer: crypto.PubkeyToAddress(r.authorizer.PublicKey),
		Token: propToken, WithdrawDelay: propDelay, Price: big.NewInt(propPrice)}
	// No connection is reused: net/http would resend a GET whose reused
	// connection broke, unseen by the client's own bookkeeping.
	transport := &http.Transport{DisableKeepAlives: true}
	r.http = &http.Client{Transport: transport}
	t.Cleanup(transport.CloseIdleConnections)

	ctx := context.Background()
	place := e.place(t)
	for i := range replicas {
		if separate && i > 0 {
			place = e.place(t)
		}
		db, err := e.open(ctx, place)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if separate || i == 0 {
			r.stores = append(r.stores, db)
		}
		rep := &propReplica{run: r, name: string(rune('a' + i)), db: db}
		p, err := rep.start(0)
		if err != nil {
			t.Fatal(err)
		}
		rep.cur.Store(p)
		rep.srv = httptest.NewServer(rep)
		t.Cleanup(rep.srv.Close)
		r.replicas = append(r.replicas, rep)
	}
	for _, db := range r.stores {
		w, err := batch.NewWatcher(batch.WatcherConfig{Escrow: r.escrow.Address, Poll: time.Second, Now: r.clock.Now}, r.chain, db, r.tr.logger())
		if err != nil {
			t.Fatal(err)
		}
		r.watchers = append(r.watchers, w)
	}
	for i := range 2 {
		p := &propPayer{idx: i}
		p.chans = append(p.chans, r.newChannel(p))
		r.payers = append(r.payers, p)
	}
	r.entry = r.offer()
	return r
}

func (r *propRun) newChannel(p *propPayer) *propPayerChan {
	payer := batch.Payer{Key: propKey(r.t, r.seed, fmt.Sprintf("payer %d", p.idx), len(p.chans)), Escrow: r.escrow}
	cfg, id := payer.Channel(r.terms)
	r.tr.add(fmt.Sprintf("payer%d", p.idx), "uses channel ch=%s", propShort(id))
	return &propPayerChan{payer: payer, cfg: cfg, id: id}
}

// offer reads the batch-settlement entry of the route's challenge.
func (r *propRun) offer() payment.RequirementsV2 {
	resp, err := r.http.Get(r.replicas[0].srv.URL + "/regime")
	if err != nil {
		r.t.Fatal(err)
	}
	resp.Body.Close()
	a := propAnswerOf(resp.Header, resp.StatusCode)
	if a.required != nil {
		for _, e := range a.required.Accepts {
			if e.Scheme == batch.Scheme {
				return e
			}
		}
	}
	r.t.Fatalf("no batch-settlement entry in the challenge (%d)", resp.StatusCode)
	return payment.RequirementsV2{}
}

// service is the paid handler: it fails now and then (status 500).
func (r *propRun) service(w http.ResponseWriter, _ *http.Request) {
	if r.serviceRng.chance(0.07) {
		http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"regime":"calm"}`))
}

// served records a paid answer a live replica sends.
func (r *propRun) served(rec *httptest.ResponseRecorder) {
	a := propAnswerOf(rec.Header(), rec.Code)
	if paid, ok := propPaidOf(a.settlement); ok && a.status == http.StatusOK {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.serve[paid.channel] == nil {
			r.serve[paid.channel] = map[string]bool{}
		}
		r.serve[paid.channel][paid.cumulative] = true
	}
}

func (r *propRun) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.tr.add("PROBLEM", "%s", msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, msg)
}

// sleep waits d, or until the run stops; false when it stopped.
func (r *propRun) sleep(d time.Duration) bool {
	select {
	case <-r.stop:
		return false
	case <-time.After(d):
		return true
	}
}

func (r *propRun) replica(rng *propRand) *propReplica { return r.replicas[rng.intn(len(r.replicas))] }

// send sends a payment header to rep; a canceled or cut request is an
// error: the answer, if any, is lost.
func (r *propRun) send(ctx context.Context, rep *propReplica, header string) (propAnswer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rep.srv.URL+"/regime", nil)
	if err != nil {
		return propAnswer{}, err
	}
	req.Header.Set(payment.HeaderPaymentV2, header)
	resp, err := r.http.Do(req)
	if err != nil {
		return propAnswer{}, err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return propAnswer{}, err
	}
	return propAnswerOf(resp.Header, resp.StatusCode), nil
}

// requestContext is a request's context: now and then the client gives
// up on it after a few milliseconds (it crashed, or timed out).
func (r *propRun) requestContext(rng *propRand, p float64) (context.Context, context.CancelFunc) {
	if rng.chance(p) {
		return context.WithTimeout(context.Background(), rng.dur(0, 4*time.Millisecond))
	}
	return context.WithCancel(context.Background())
}

// client is a payer's client: it pays for calls with vouchers (and
// deposits when its channel needs them) through batch.Session, keeping
// its cumulative itself, recovering from corrective 402s, resending a
// payment whose answer it lost until it is answered, now and then
// forgetting its state, and moving to a new channel when its channel is
// no longer served.
func (r *propRun) client(p *propPayer, rng *propRand, calls int, deadline time.Time) {
	who := fmt.Sprintf("client%d", p.idx)
	resource := &payment.ResourceV2{URL: propResource}
	ch := p.current()
	sess := &batch.Session{Payer: ch.payer}
	var lost string // a payment whose answer was lost, sent again until answered
	lostSince := 0  // the call that lost the answer
	for call := 0; call < calls || lost != ""; call++ {
		if call > calls+400 {
			r.problem("%s: a payment whose answer was lost is still not answered after 400 resends", who)
			return
		}
		if call < calls && time.Now().After(deadline) {
			calls = call
		}
		if call >= calls {
			time.Sleep(2 * time.Millisecond) // draining: let holds expire
		} else {
			time.Sleep(rng.dur(0, 2*time.Millisecond))
		}
		header := lost
		if header == "" {
			if rng.chance(0.02) {
				sess.Charged, sess.Balance = nil, nil
				r.tr.add(who, "forgets its state ch=%s", propShort(ch.id))
			}
			var err error
			if header, err = sess.Envelope(r.entry, resource, big.NewInt(propChainID), r.clock.Now()); err != nil {
				r.t.Errorf("seed %d: %s: %v", r.seed, who, err)
				return
			}
		}
		cancelP := 0.1
		if call >= calls {
			cancelP = 0
		}
		ctx, cancel := r.requestContext(rng, cancelP)
		rep := r.replica(rng)
		sent := propPayloadOf(header)
		if header == lost {
			sent = "again: " + sent
		}
		a, err := r.send(ctx, rep, header)
		cancel()
		if err != nil {
			if header != lost {
				lostSince = call
			}
			lost = header
			r.tr.add(who, "%s via %s: answer lost (%v)", sent, rep.name, errors.Unwrap(err))
			r.attempt(header, fmt.Sprintf("%s via %s: lost", sent, rep.name))
			continue
		}
		r.tr.add(who, "%s via %s: %d %s", sent, rep.name, a.status, a.reason())
		r.attempt(header, fmt.Sprintf("%s via %s: %d %s", sent, rep.name, a.status, a.reason()))
		// A payment whose answer was lost is sent again until it is
		// answered or refused: a 5xx to the resend says nothing of the
		// first (it may still be served on another replica), and the
		// resend gets its answer once it is recorded.
		// With books of their own, a refusal because the server did not
		// open the channel says nothing of the first sending: it is sent
		// again, for a while, until it reaches the server that did. (A
		// refusal for another reason by a server that did not serve it,
		// e.g. its deposit's authorization used by the sending the other
		// served, ends the resends: that answer stays lost, recorded by
		// the server that served it; check counts it.)
		elsewhere := r.separate && header == lost && a.reason() == batch.ReasonChannelOpenedElsewhere && call < lostSince+50
		if a.status == http.StatusOK || a.status == http.StatusPaymentRequired && a.reason() != batch.ReasonChannelBusy && !elsewhere {
			lost = ""
		}
		if elsewhere && a.status != http.StatusOK {
			continue
		}
		switch {
		case a.status == http.StatusOK:
			paid, ok := propPaidOf(a.settlement)
			if !ok || paid.channel != strings.ToLower(ch.id.Hex()) {
				r.problem("%s: a paid answer without its charge: %+v", who, a.settlement)
				continue
			}
			r.mu.Lock()
			if r.received[paid.channel] == nil {
				r.received[paid.channel] = map[string]bool{}
			}
			r.received[paid.channel][paid.cumulative] = true
			r.mu.Unlock()
			if err := sess.Settled(*a.settlement, big.NewInt(propPrice)); err != nil {
				r.problem("%s: %v", who, err)
			}
		case a.status != http.StatusPaymentRequired:
			// 500: the handler failed; 502, 503: nothing was charged.
		case a.reason() == batch.ReasonChannelBusy:
		case a.reason() == batch.ReasonCumulativeAmountMismatch || a.reason() == batch.ReasonCumulativeBelowClaimed:
			if a.required == nil || !sess.Recover(*a.required) {
				r.tr.add(who, "cannot recover from the 402; starts over")
				sess.Charged, sess.Balance = nil, nil
			}
		case a.reason() == batch.ReasonChannelOpenedElsewhere && propZero(sess.Charged).Sign() > 0:
			// Another server opened it and serves it: nothing charged here.
		case a.reason() == batch.ReasonWithdrawalPending || a.reason() == batch.ReasonChannelClaimedElsewhere ||
			a.reason() == batch.ReasonChannelChargedElsewhere || a.reason() == batch.ReasonChannelOpenedElsewhere:
			p.mu.Lock()
			p.chans = append(p.chans, r.newChannel(p))
			p.mu.Unlock()
			ch = p.current()
			sess = &batch.Session{Payer: ch.payer}
		case a.reason() == batch.ReasonCumulativeExceedsBalance || a.reason() == batch.ReasonChannelNotFound:
			sess.Balance = new(big.Int).Set(propZero(sess.Charged)) // the next call deposits
		default:
			// A deposit refused, its authorization used: another one.
			sess.Balance = new(big.Int).Set(propZero(sess.Charged))
		}
	}
}

// attempt records what a payment the client sent got, under its
// channel and the cumulative amount its voucher signs.
func (r *propRun) attempt(header, what string) {
	p, err := propDecodePayment(header)
	if err != nil {
		return
	}
	key := strings.ToLower(p.ChannelID.Hex())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attempts[key] == nil {
		r.attempts[key] = map[string][]string{}
	}
	r.attempts[key][p.MaxClaimable.String()] = append(r.attempts[key][p.MaxClaimable.String()], fmt.Sprintf("%.1fs %s", r.clock.since().Seconds(), what))
}

func propDecodePayment(header string) (*batch.Payment, error) {
	env, err := payment.DecodeEnvelope(header, 2)
	if err != nil {
		return nil, err
	}
	return batch.DecodePayload(env.Payload)
}

// payloadOf describes a payment header: its channel, type and cumulative.
func propPayloadOf(header string) string {
	if header == "" {
		return "no payment"
	}
	p, err := propDecodePayment(header)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("ch=%s %s of cumulative %s", propShort(p.ChannelID), p.Type, p.MaxClaimable)
}

func propZero(x *big.Int) *big.Int {
	if x == nil {
		return new(big.Int)
	}
	return x
}

// refunder asks cooperative refunds of the payer's current channel, all
// that is left or part of it, from whatever it believes was charged,
// recovering from the corrective 402. Once a refund's outcome is not
// known (no receipt, no answer), it asks the smallest refund next: a
// payer probing whether the server still counts the first one.
func (r *propRun) refunder(p *propPayer, rng *propRand) {
	who := fmt.Sprintf("refunder%d", p.idx)
	resource := &payment.ResourceV2{URL: propResource}
	var cur *propPayerChan
	var sess *batch.Session
	unknown := false
	for r.sleep(rng.dur(5*time.Millisecond, 25*time.Millisecond)) {
		if ch := p.current(); ch != cur {
			cur, sess = ch, &batch.Session{Payer: ch.payer}
		}
		var amount *big.Int
		switch {
		case unknown:
			amount = big.NewInt(10_000)
		case rng.chance(0.4):
			amount = big.NewInt(int64(10_000 + rng.intn(6)*propPrice))
		}
		for try := 0; try < 3; try++ {
			header, err := sess.RefundEnvelope(r.entry, resource, big.NewInt(propChainID), amount)
			if err != nil {
				r.t.Errorf("seed %d: %s: %v", r.seed, who, err)
				return
			}
			ctx, cancel := r.requestContext(rng, 0.1)
			rep := r.replica(rng)
			a, err := r.send(ctx, rep, header)
			cancel()
			if err != nil {
				r.tr.add(who, "ch=%s refund of %v signing %s via %s: answer lost", propShort(cur.id), amount, propZero(sess.Charged), rep.name)
				break
			}
			r.tr.add(who, "ch=%s refund of %v signing %s via %s: %d %s", propShort(cur.id), amount, propZero(sess.Charged), rep.name, a.status, a.reason())
			switch {
			case a.reason() == payment.ReasonSettlementPending || a.status == http.StatusBadGateway:
				unknown = true
			case a.status == http.StatusOK:
				unknown = false
			}
			if a.status != http.StatusPaymentRequired || a.required == nil || !sess.Recover(*a.required) {
				break
			}
		}
	}
}

// withdrawer starts timed withdrawals of the payer's channels and
// finalizes them once the delay has passed. The escrow watcher sees each
// withdrawal at once, and the operator's claimer claims the channel
// before the withdrawal can be finalized: the guarantee the server's
// withdrawal margin builds on.
func (r *propRun) withdrawer(p *propPayer, rng *propRand) {
	who := fmt.Sprintf("withdraw%d", p.idx)
	for r.sleep(rng.dur(20*time.Millisecond, 80*time.Millisecond)) {
		if !rng.chance(0.4) {
			continue
		}
		chans := p.all()
		ch := chans[len(chans)-1]
		if len(chans) > 1 && rng.chance(0.3) {
			ch = chans[rng.intn(len(chans))]
		}
		st, ok := r.chain.view(ch.id)
		avail := new(big.Int).Sub(st.Balance, st.TotalClaimed)
		if !ok || avail.Sign() <= 0 || st.WithdrawRequestedAt != 0 {
			continue
		}
		amount := avail
		if rng.chance(0.5) {
			amount = big.NewInt(1 + int64(rng.intn(int(min(avail.Int64(), 1<<30)))))
		}
		at, err := r.chain.initiateWithdraw(ch.cfg, amount)
		if err != nil {
			r.tr.add(who, "ch=%s initiateWithdraw(%s): %v", propShort(ch.id), amount, err)
			continue
		}
		r.watch()
		for r.clock.unix() < at+propDelay {
			if !r.sleep(2 * time.Millisecond) {
				return // the run's end finalizes it
			}
		}
		r.finalize(who, ch.id, ch.cfg)
	}
}

// finalize finalizes a channel's withdrawal, after the operator's last
// claim of it.
func (r *propRun) finalize(who string, id common.Hash, cfg batch.Config) {
	r.claimChannel("operator", id)
	if err := r.chain.finalizeWithdraw(cfg); err != nil {
		r.tr.add(who, "ch=%s finalizeWithdraw: %v", propShort(id), err)
	}
}

// claimChannel claims a channel's stored voucher in every store, without
// faults.
func (r *propRun) claimChannel(who string, id common.Hash) {
	for _, db := range r.stores {
		c, found, err := db.Channel(context.Background(), id)
		if err != nil {
			r.t.Errorf("seed %d: %s: %v", r.seed, who, err)
			return
		}
		if !found || propZero(c.Charged).Sign() == 0 || c.SignedMax == nil || !r.intend(db, c) {
			continue
		}
		reason := r.chain.claimStored(who, []batch.Claim{{Config: c.Config, MaxClaimable: c.SignedMax, Signature: c.Signature, TotalClaimed: c.Charged}}, r.authorizer)
		r.tr.add(who, "ch=%s claims its stored charge %s (voucher %s): %q", propShort(id), c.Charged, c.SignedMax, reason)
	}
}

// intend records in db, as the store's claimer does before it sends a
// claim, that c's charged total is about to be claimed: a claim made
// outside the claimer (the operator's, or one whose sender died before
// recording its effect) is still this store's own.
func (r *propRun) intend(db *store.DB, c batch.Channel) bool {
	if _, err := db.UpdateChannel(context.Background(), c.ID, func(ch *batch.Channel, found bool) (batch.Change, error) {
		if !found || propZero(ch.OwnClaimed).Cmp(c.Charged) >= 0 {
			return batch.Keep, nil
		}
		ch.OwnClaimed = new(big.Int).Set(c.Charged)
		return batch.Save, nil
	}); err != nil {
		r.t.Errorf("seed %d: record a claim: %v", r.seed, err)
		return false
	}
	return true
}

// depositor is a third party landing deposits for the payers' channels
// straight on chain, unknown to the server.
func (r *propRun) depositor(rng *propRand) {
	for r.sleep(rng.dur(10*time.Millisecond, 40*time.Millisecond)) {
		ch := r.payers[rng.intn(len(r.payers))].current()
		r.chain.depositFor(ch.cfg, big.NewInt(int64(1+rng.intn(4))*propPrice))
	}
}

// claimer claims: a replica's batch.Claimer pass, a direct claim of a
// stored channel the store does not hear of (the watcher mirrors it), or
// a pass of the escrow watcher.
func (r *propRun) claimer(rng *propRand) {
	ctx := context.Background()
	for r.sleep(rng.dur(15*time.Millisecond, 60*time.Millisecond)) {
		switch n := rng.intn(10); {
		case n < 6:
			p := r.replica(rng).cur.Load()
			p.claimMu.Lock()
			rep, err := p.claimer.Once(ctx)
			p.claimMu.Unlock()
			if rep.Claimed > 0 || len(rep.Refused) > 0 || len(rep.Foreign) > 0 || err != nil {
				r.tr.add("claimer", "pass: due %q claimed %d (+%s) refused %d foreign %d err %v", rep.Due, rep.Claimed, rep.Amount,
					len(rep.Refused), len(rep.Foreign), err)
			}
		case n < 9:
			db := r.stores[rng.intn(len(r.stores))]
			chans, err := db.Channels(ctx)
			if err != nil {
				r.t.Errorf("seed %d: claimer: %v", r.seed, err)
				return
			}
			if len(chans) == 0 {
				continue
			}
			c := chans[rng.intn(len(chans))]
			if c.SignedMax == nil || propZero(c.Charged).Cmp(propZero(c.TotalClaimed)) <= 0 || !r.intend(db, c) {
				continue
			}
			row := batch.Claim{Config: c.Config, MaxClaimable: c.SignedMax, Signature: c.Signature, TotalClaimed: c.Charged}
			sig, err := payment.SignDigest(r.escrow.ClaimBatchDigest([]batch.ClaimEntry{{ChannelID: c.ID, MaxClaimableAmount: c.SignedMax,
				TotalClaimed: c.Charged}}), r.authorizer)
			if err != nil {
				r.t.Error(err)
				return
			}
			out, err := r.chain.Claim(ctx, []batch.Claim{row}, sig)
			r.tr.add("claimer", "direct claim ch=%s of %s: %v %s %v", propShort(c.ID), c.Charged, out.Success, out.Message, err)
		default:
			r.watch()
		}
	}
}

// watch runs one pass of each store's escrow watcher.
func (r *propRun) watch() {
	r.watchMu.Lock()
	defer r.watchMu.Unlock()
	for i, w := range r.watchers {
		rep, err := w.Once(context.Background())
		if len(rep.Withdrawing)+len(rep.Foreign) > 0 || err != nil {
			r.tr.add("watcher", "withdrawing %d foreign %d err %v", len(rep.Withdrawing), len(rep.Foreign), err)
		}
		for _, id := range rep.Foreign {
			// With separate books, a store that opened a channel, charged
			// nothing and saw it withdrawn to nothing sees the claims of
			// the store that opened it again.
			if c, _, err := r.stores[i].Channel(context.Background(), id); err == nil && r.separate && propZero(c.Charged).Sign() == 0 {
				continue
			}
			r.problem("the watcher found ch=%s claimed beyond what the store claimed", propShort(id))
		}
	}
}

// crasher crashes replicas: a process dies mid-request and a new one
// starts on the same store.
func (r *propRun) crasher(rng *propRand) {
	for r.sleep(rng.dur(20*time.Millisecond, 70*time.Millisecond)) {
		r.replica(rng).crash()
	}
}

// ticker moves the clock, and lands refunds sent without a receipt.
func (r *propRun) ticker(rng *propRand) {
	for r.sleep(rng.dur(time.Millisecond, 3*time.Millisecond)) {
		r.clock.add(rng.dur(time.Second, 6*time.Second))
		if rng.chance(0.03) {
			r.chain.landDelayed(false)
		}
	}
}

// run runs the actors until the clients are done, ends every pending
// action, claims every stored voucher and checks the invariant.
func (r *propRun) run() {
	start := time.Now()
	r.chain.faults.Store(true)
	var actors, clients sync.WaitGroup
	stream := uint64(0)
	next := func() *propRand { stream++; return newPropRand(r.seed, stream) }
	deadline := time.Now().Add(2 * time.Second) // bounds a run on a loaded machine
	for _, p := range r.payers {
		rc, rr, rw := next(), next(), next()
		clients.Go(func() { r.client(p, rc, 160, deadline) })
		actors.Go(func() { r.refunder(p, rr) })
		actors.Go(func() { r.withdrawer(p, rw) })
	}
	for _, f := range []func(*propRand){r.depositor, r.claimer, r.crasher, r.ticker} {
		rng := next()
		actors.Go(func() { f(rng) })
	}
	clients.Wait()
	close(r.stop)
	actors.Wait()
	for _, rep := range r.replicas {
		rep.inflight.Wait() // answers of requests their clients gave up on
	}
	r.chain.faults.Store(false)

	// The end: refunds sent land (or revert); every pending withdrawal is
	// finalized after the operator's claim; then every stored voucher is
	// claimed, and what the escrow paid is settled to payTo.
	r.chain.landDelayed(true)
	r.clock.add(propDelay * time.Second)
	for id, cfg := range r.chain.pendingWithdrawals() {
		r.finalize("end", id, cfg)
	}
	ctx := context.Background()
	var chans []batch.Channel
	for _, db := range r.stores {
		some, err := db.Channels(ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		chans = append(chans, some...)
	}
	for _, c := range chans {
		r.claimChannel("final", c.ID)
	}
	if _, err := r.chain.Settle(ctx, propPayTo, propToken); err != nil {
		r.t.Fatal(err)
	}
	r.check(chans, time.Since(start))
}

// check checks the invariant of every channel.
func (r *propRun) check(chans []batch.Channel, took time.Duration) {
	m := r.chain
	m.mu.Lock()
	defer m.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	price := big.NewInt(propPrice)
	stored := map[common.Hash]*big.Int{} // what the stores charged, summed
	openers := map[common.Hash]int{}
	for _, c := range chans {
		if stored[c.ID] == nil {
			stored[c.ID] = new(big.Int)
		}
		stored[c.ID].Add(stored[c.ID], propZero(c.Charged))
		if c.Opened && propZero(c.Charged).Sign() > 0 {
			// A channel withdrawn to nothing with nothing claimed is empty
			// again, and another store may open it: harmless while only
			// one of them charged it.
			openers[c.ID]++
		}
	}
	var bad []string
	var tags []string
	fail := func(id common.Hash, format string, args ...any) {
		bad = append(bad, fmt.Sprintf("ch=%s: ", propShort(id))+fmt.Sprintf(format, args...))
		tags = append(tags, propShort(id))
	}
	served, answered, total, lostAnswers := 0, 0, new(big.Int), int64(0)
	ids := map[common.Hash]bool{}
	for id := range m.chans {
		ids[id] = true
	}
	for id := range stored {
		ids[id] = true
	}
	for id := range ids {
		key := strings.ToLower(id.Hex())
		claimed, charged := new(big.Int), propZero(stored[id])
		if openers[id] > 1 {
			fail(id, "%d stores opened it and charged it", openers[id])
		}
		if ch := m.chans[id]; ch != nil {
			claimed = ch.claimed
			if sum := new(big.Int).Add(ch.balance, ch.toPayer); sum.Cmp(ch.deposited) != 0 {
				fail(id, "the model lost money: deposited %s, holds %s, paid the payer %s", ch.deposited, ch.balance, ch.toPayer)
			}
		}
		total.Add(total, claimed)
		srv := new(big.Int).Mul(price, big.NewInt(int64(len(r.serve[key]))))
		got := new(big.Int).Mul(price, big.NewInt(int64(len(r.received[key]))))
		served += len(r.serve[key])
		answered += len(r.received[key])
		if charged.Cmp(claimed) != 0 {
			fail(id, "the server charged %s; the escrow paid payTo %s for it", charged, claimed)
		}
		for cum := range r.received[key] {
			if !r.serve[key][cum] {
				fail(id, "the payer got an answer at cumulative %s no live replica served", cum)
			}
		}
		if r.separate {
			// Books of their own: every answer served is paid, once (the
			// stores' charges add up to the payout, and only one store
			// charged the channel), and an answer charged but lost on the
			// way is recorded by the store that served it, for a resend
			// that reaches it (docs/batch-settlement.md §11).
			if srv.Cmp(claimed) > 0 || got.Cmp(srv) > 0 {
				fail(id, "%d paid answers were served (%s), %d got, the escrow paid %s", len(r.serve[key]), srv, len(r.received[key]), claimed)
			}
			lostAnswers += new(big.Int).Div(new(big.Int).Sub(claimed, srv), price).Int64()
			continue
		}
		if srv.Cmp(claimed) != 0 {
			fail(id, "%d paid answers were served (%s); the escrow paid payTo %s for them", len(r.serve[key]), srv, claimed)
		}
		if got.Cmp(claimed) != 0 {
			var missing []string
			for cum := new(big.Int).Set(price); cum.Cmp(claimed) <= 0; cum.Add(cum, price) {
				if !r.received[key][cum.String()] {
					missing = append(missing, fmt.Sprintf("%s (the payments signing it: %s)", cum, strings.Join(r.attempts[key][cum.String()], "; ")))
				}
			}
			fail(id, "the payer got %d paid answers (%s) and paid %s for them; no answer at cumulative %s", len(r.received[key]), got, claimed,
				strings.Join(missing, ", "))
		}
	}
	if m.settled.Cmp(total) != 0 || m.claimed.Cmp(total) != 0 {
		bad = append(bad, fmt.Sprintf("payTo was settled %s of %s claimed; the channels' claims add up to %s", m.settled, m.claimed, total))
	}
	until := len(r.tr.lines)
	if len(m.refusals) > 0 {
		// The trace up to the first: what made a voucher unclaimable.
		until = m.refusals[0].at
		if m.refusals[0].ch != "" {
			tags = append(tags, m.refusals[0].ch)
		}
		bad = append(bad, fmt.Sprintf("a stored voucher's claim was refused (%d times), first: %s", len(m.refusals), m.refusals[0].what))
	}
	if served == 0 {
		bad = append(bad, "no paid answer was served: the run tests nothing")
	}
	bad = append(bad, r.problems...)
	r.t.Logf("seed %d: %d channels, %d paid answers served, %d got, %s claimed, %d charged and lost on the way, %s", r.seed, len(ids), served,
		answered, total, lostAnswers, took.Round(time.Millisecond))
	if len(bad) > 0 {
		r.t.Errorf("seed %d: the invariant does not hold:\n  %s\ntrace:\n%s", r.seed, strings.Join(bad, "\n  "), r.tr.about(150, until, tags...))
	}
}
