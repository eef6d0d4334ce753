package batch_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// memStore is batch.Store in memory, serialized by one mutex; every
// write gives the channel a new Version.
type memStore struct {
	mu     sync.Mutex
	m      map[common.Hash]batch.Channel
	writes int
	// reads counts Channel; fromHits the updates written from the
	// caller's copy.
	reads, fromHits int
}

func (s *memStore) Channel(_ context.Context, id common.Hash) (batch.Channel, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	c, ok := s.m[id]
	return c, ok, nil
}

func (s *memStore) Channels(context.Context) ([]batch.Channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []batch.Channel
	for _, c := range s.m {
		out = append(out, c)
	}
	return out, nil
}

func (s *memStore) UpdateChannel(_ context.Context, id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.update(id, fn)
}

func (s *memStore) update(id common.Hash, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	c, found := s.m[id]
	if !found {
		c = batch.Channel{ID: id}
	}
	change, err := fn(&c, found)
	if err != nil {
		return batch.Channel{}, err
	}
	switch change {
	case batch.Save:
		s.writes++
		c.ID, c.NewCharge, c.Version = id, nil, fmt.Sprint(s.writes)
		s.m[id] = c
	case batch.Delete:
		delete(s.m, id)
	}
	return c, nil
}

func (s *memStore) UpdateChannelFrom(_ context.Context, from batch.Channel, fn func(c *batch.Channel, found bool) (batch.Change, error)) (batch.Channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[from.ID]; ok && from.Version != "" && cur.Version == from.Version {
		c := from
		if change, err := fn(&c, true); err == nil && change == batch.Save {
			s.writes++
			s.fromHits++
			c.NewCharge, c.Version = nil, fmt.Sprint(s.writes)
			s.m[from.ID] = c
			return c, nil
		}
	}
	c, err := s.update(from.ID, fn)
	c.Version = "" // as the store does: read again, the new version unknown
	return c, err
}

// fakeFacilitator plays the chain: one channel's balance and claims.
type fakeFacilitator struct {
	mu       sync.Mutex
	state    batch.OnChain
	verifies atomic.Int32
	refunds  []batch.RefundOrder
	// afterRead, when set, runs in Verify after the state was read and
	// before it is returned: a read that races a refund.
	afterRead func()
	// refundErr, when set, is Refund's answer: nothing known of it.
	refundErr error
	// racer, when set, is another server's deposit landing just before
	// the next one.
	racer *big.Int
}

func (f *fakeFacilitator) snapshot() batch.OnChain {
	return batch.OnChain{Balance: new(big.Int).Set(f.state.Balance), TotalClaimed: new(big.Int).Set(f.state.TotalClaimed),
		WithdrawRequestedAt: f.state.WithdrawRequestedAt, RefundNonce: new(big.Int).Set(f.state.RefundNonce)}
}

func (f *fakeFacilitator) Verify(_ context.Context, p *batch.Payment, _ payment.RequirementsV2, _ []byte) (batch.Verdict, error) {
	f.verifies.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	v := batch.Verdict{Valid: true, Payer: p.Config.Payer, State: f.snapshot()}
	if hook := f.afterRead; hook != nil {
		f.afterRead = nil
		f.mu.Unlock()
		hook()
		f.mu.Lock()
	}
	bal := new(big.Int).Set(v.State.Balance)
	if p.Deposit != nil {
		bal.Add(bal, p.Deposit.Amount)
	}
	if p.MaxClaimable.Cmp(bal) > 0 {
		v.Valid, v.Reason = false, batch.ReasonCumulativeExceedsBalance
	}
	return v, nil
}

func (f *fakeFacilitator) Deposit(_ context.Context, p *batch.Payment, _ payment.RequirementsV2, _ []byte) (batch.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.racer != nil {
		// Another server's deposit lands first, in the same block.
		f.state.Balance.Add(f.state.Balance, f.racer)
		f.racer = nil
	}
	f.state.Balance.Add(f.state.Balance, p.Deposit.Amount)
	st := f.snapshot()
	opened := st.Balance.Cmp(p.Deposit.Amount) == 0 && st.TotalClaimed.Sign() == 0
	return batch.Outcome{Success: true, Tx: common.HexToHash("0xd0"), Amount: p.Deposit.Amount, State: &st, Opened: opened}, nil
}

func (f *fakeFacilitator) Claim(context.Context, []batch.Claim, []byte) (batch.Outcome, error) {
	return batch.Outcome{}, nil
}

func (f *fakeFacilitator) Settle(context.Context, common.Address, common.Address) (batch.Outcome, error) {
	return batch.Outcome{}, nil
}

func (f *fakeFacilitator) Refund(_ context.Context, o batch.RefundOrder) (batch.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refunds = append(f.refunds, o)
	if f.refundErr != nil {
		return batch.Outcome{}, f.refundErr
	}
	if c := o.Claimed(); c.Cmp(f.state.TotalClaimed) > 0 {
		f.state.TotalClaimed = c
	}
	f.state.Balance.Sub(f.state.Balance, o.Amount)
	f.state.RefundNonce.Add(f.state.RefundNonce, big.NewInt(1))
	st := f.snapshot()
	return batch.Outcome{Success: true, Tx: common.HexToHash("0xef"), Amount: o.Amount, State: &st}, nil
}

type harness struct {
	srv        *httptest.Server
	fac        *fakeFacilitator
	store      *memStore
	payer      batch.Payer
	authorizer *ecdsa.PrivateKey
	escrow     batch.Escrow
	terms      batch.Terms
	now        *atomic.Int64 // unix seconds
	handled    atomic.Int32
	failNext   atomic.Bool
	stops      *stopCounts
	// inHandler, when set, is told when the handler starts and holds it
	// until release is closed.
	inHandler chan struct{}
	release   chan struct{}
	// extensions, when set, go with every payment (the
	// payment-identifier extension's id).
	extensions map[string]any
}

// stopCounts counts the channels stopped, by evidence.
type stopCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *stopCounts) BatchChannelStopped(evidence string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[evidence]++
}

func (o *stopCounts) count(evidence string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[evidence]
}

var (
	token = common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35")
	payTo = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	price = big.NewInt(50_000)
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessIDs(t, nil)
}

// newHarnessIDs is newHarness with the gate keeping payment identifiers
// in ids.
func newHarnessIDs(t *testing.T, ids payment.IDBook) *harness {
	t.Helper()
	h := &harness{fac: &fakeFacilitator{state: batch.OnChain{Balance: new(big.Int), TotalClaimed: new(big.Int), RefundNonce: new(big.Int)}},
		store: &memStore{m: map[common.Hash]batch.Channel{}}, now: new(atomic.Int64), stops: &stopCounts{}}
	h.now.Store(1_900_000_000)
	clock := func() time.Time { return time.Unix(h.now.Load(), 0) }
	h.escrow = batch.Escrow{ChainID: big.NewInt(8453), Address: batch.EscrowAddress}
	var err error
	if h.authorizer, err = crypto.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	payerKey, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	h.payer = batch.Payer{Key: payerKey, Escrow: h.escrow}
	scheme, err := batch.NewServer(batch.ServerConfig{Escrow: h.escrow, Authorizer: h.authorizer, WithdrawDelay: 3600,
		MinDeposit: big.NewInt(5_000_000), Now: clock, Observer: h.stops}, h.store, h.fac)
	if err != nil {
		t.Fatal(err)
	}
	h.terms = batch.Terms{Escrow: h.escrow, Receiver: payTo, ReceiverAuthorizer: scheme.ReceiverAuthorizer(), Token: token, WithdrawDelay: 3600, Price: price}
	gate, err := payment.NewGate(payment.GateConfig{
		PublicURL: "http://tollgate.test", Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453),
		Asset: token, AssetName: "USD Coin", AssetVersion: "2", Decimals: 6, PayTo: payTo, MaxTimeout: 60,
		Schemes: []payment.Scheme{scheme}, IDs: ids,
	}, []payment.Route{{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.05", Description: "regime", Valid: func(*http.Request) bool { return true }}},
		nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h.srv = httptest.NewServer(gate.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.handled.Add(1)
		if h.inHandler != nil {
			h.inHandler <- struct{}{}
			<-h.release
		}
		if h.failNext.Swap(false) {
			http.Error(w, `{"error":"boom"}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"regime":"calm"}`))
	})))
	t.Cleanup(h.srv.Close)
	return h
}

// accepts reads the batch-settlement entry of a 402.
func (h *harness) accepts(t *testing.T) map[string]any {
	t.Helper()
	resp, err := http.Get(h.srv.URL + "/regime")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req := decode(t, resp.Header.Get(payment.HeaderPaymentRequired))
	for _, e := range req["accepts"].([]any) {
		if e.(map[string]any)["scheme"] == batch.Scheme {
			return e.(map[string]any)
		}
	}
	t.Fatalf("no batch-settlement entry in %v", req)
	return nil
}

func decode(t *testing.T, header string) map[string]any {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(header)
	if err != nil {
		t.Fatalf("header %q: %v", header, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

type answer struct {
	status     int
	body       string
	settlement map[string]any // PAYMENT-RESPONSE
	required   map[string]any // PAYMENT-REQUIRED
}

// pay sends a payload of typ signing max, as the official client would.
func (h *harness) pay(t *testing.T, typ string, max int64, deposit int64, refund *big.Int) answer {
	t.Helper()
	return h.payAt(t, "/regime", nil, typ, max, deposit, refund)
}

// payAt sends a payload of typ signing max for path on the payer's
// channel, its voucher signed by signer when not nil (a stranger).
func (h *harness) payAt(t *testing.T, path string, signer *ecdsa.PrivateKey, typ string, max int64, deposit int64, refund *big.Int) answer {
	t.Helper()
	entry := h.accepts(t)
	var dep *batch.DepositRequest
	if deposit > 0 {
		dep = &batch.DepositRequest{Amount: big.NewInt(deposit), Token: payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(8453), VerifyingContract: token},
			ValidBefore: big.NewInt(h.now.Load() + 60), Salt: big.NewInt(h.now.Load())}
	}
	inner, err := h.payer.Payload(h.terms, typ, big.NewInt(max), dep, refund)
	if err != nil {
		t.Fatal(err)
	}
	if signer != nil {
		var m map[string]any
		_ = json.Unmarshal(inner, &m)
		_, id := h.payer.Channel(h.terms)
		sig, err := payment.SignDigest(h.escrow.VoucherDigest(id, big.NewInt(max)), signer)
		if err != nil {
			t.Fatal(err)
		}
		m["voucher"].(map[string]any)["signature"] = hexutil.Encode(sig)
		inner, _ = json.Marshal(m)
	}
	env, _ := json.Marshal(map[string]any{"x402Version": 2, "accepted": entry, "payload": json.RawMessage(inner),
		"resource": map[string]any{"url": "http://tollgate.test" + path}, "extensions": h.extensions})
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+path, nil)
	req.Header.Set(payment.HeaderPaymentV2, base64.StdEncoding.EncodeToString(env))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, body: string(body)}
	if v := resp.Header.Get(payment.HeaderPaymentResponseV2); v != "" {
		a.settlement = decode(t, v)
	}
	if v := resp.Header.Get(payment.HeaderPaymentRequired); v != "" {
		a.required = decode(t, v)
	}
	return a
}

func channelState(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	st, ok := m["channelState"].(map[string]any)
	if !ok {
		t.Fatalf("no channelState in %v", m)
	}
	return st
}

// TestServeChallengeOffersScheme: the gate offers the scheme's entry, with
// its extra, to v2 clients only (cmd/tollgate's serve tests check exact's
// entry comes first beside it).
func TestServeChallengeOffersScheme(t *testing.T) {
	h := newHarness(t)
	resp, err := http.Get(h.srv.URL + "/regime")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	req := decode(t, resp.Header.Get(payment.HeaderPaymentRequired))
	accepts := req["accepts"].([]any)
	if len(accepts) != 1 || accepts[0].(map[string]any)["scheme"] != batch.Scheme {
		t.Fatalf("accepts = %v, want batch-settlement", accepts)
	}
	extra := accepts[0].(map[string]any)["extra"].(map[string]any)
	want := map[string]any{"name": "USD Coin", "version": "2", "receiverAuthorizer": h.terms.ReceiverAuthorizer.Hex(),
		"withdrawDelay": float64(3600), "minDeposit": "5000000"}
	for k, v := range want {
		if extra[k] != v {
			t.Errorf("extra.%s = %v, want %v", k, extra[k], v)
		}
	}
	var v1 map[string]any
	if err := json.Unmarshal(body, &v1); err != nil {
		t.Fatal(err)
	}
	if n := len(v1["accepts"].([]any)); n != 0 {
		t.Errorf("the v1 body offers %d entries; batch-settlement is v2 only", n)
	}
}

func TestServeChannelLifecycle(t *testing.T) {
	h := newHarness(t)
	p := price.Int64()

	// The first call deposits and pays for itself.
	a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil)
	if a.status != http.StatusOK || a.body != `{"regime":"calm"}` {
		t.Fatalf("deposit call: %d %s %v", a.status, a.body, a.required)
	}
	if a.settlement["transaction"] == "" || a.settlement["amount"] != "5000000" || a.settlement["success"] != true {
		t.Errorf("deposit settlement = %v", a.settlement)
	}
	extra := a.settlement["extra"].(map[string]any)
	st := channelState(t, extra)
	if extra["chargedAmount"] != "50000" || st["chargedCumulativeAmount"] != "50000" || st["balance"] != "5000000" {
		t.Errorf("deposit extra = %v", extra)
	}

	// Vouchers are served from the mirror: the facilitator is not asked.
	before := h.fac.verifies.Load()
	for i := int64(2); i <= 4; i++ {
		a = h.pay(t, batch.TypeVoucher, i*p, 0, nil)
		if a.status != http.StatusOK {
			t.Fatalf("voucher %d: %d %s %v", i, a.status, a.body, a.required["error"])
		}
		st := channelState(t, a.settlement["extra"].(map[string]any))
		if a.settlement["transaction"] != "" || st["chargedCumulativeAmount"] != big.NewInt(i*p).String() {
			t.Errorf("voucher %d settlement = %v", i, a.settlement)
		}
	}
	if n := h.fac.verifies.Load() - before; n != 0 {
		t.Errorf("the facilitator verified %d vouchers; a fresh mirror needs none", n)
	}

	// A resent voucher (its answer was lost) gets the recorded answer
	// again, uncharged and without running the handler.
	handled := h.handled.Load()
	a = h.pay(t, batch.TypeVoucher, 4*p, 0, nil)
	if a.status != http.StatusOK || a.body != `{"regime":"calm"}` || channelState(t, a.settlement["extra"].(map[string]any))["chargedCumulativeAmount"] != "200000" {
		t.Fatalf("resent voucher: %d %s %v %v", a.status, a.body, a.settlement, a.required["error"])
	}
	if h.handled.Load() != handled {
		t.Error("the handler ran again for a resent voucher")
	}

	// The same voucher for another resource, or an older voucher, gets
	// the corrective 402 with the state to recover from.
	for _, tt := range []struct {
		path string
		max  int64
	}{{"/regime?product=BTC-USD", 4 * p}, {"/regime", 3 * p}} {
		a = h.payAt(t, tt.path, nil, batch.TypeVoucher, tt.max, 0, nil)
		if a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonCumulativeAmountMismatch {
			t.Fatalf("%s signing %d: %d %v", tt.path, tt.max, a.status, a.required["error"])
		}
		if a.settlement != nil {
			t.Error("a corrective 402 must not carry PAYMENT-RESPONSE")
		}
		entry := a.required["accepts"].([]any)[0].(map[string]any)["extra"].(map[string]any)
		if st := channelState(t, entry); st["chargedCumulativeAmount"] != "200000" {
			t.Errorf("corrective channelState = %v", st)
		}
		if vs := entry["voucherState"].(map[string]any); vs["signedMaxClaimable"] != "200000" || vs["signature"] == "" {
			t.Errorf("corrective voucherState = %v", vs)
		}
	}
	if h.handled.Load() != handled {
		t.Error("the handler ran for a refused voucher")
	}

	// A stranger naming the channel learns nothing of it: a voucher not
	// signed by its payer authorizer is refused before its state is read.
	stranger, _ := crypto.GenerateKey()
	a = h.payAt(t, "/regime", stranger, batch.TypeVoucher, 3*p, 0, nil)
	if a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonVoucherSignature {
		t.Fatalf("stranger's voucher: %d %v", a.status, a.required["error"])
	}
	if extra := a.required["accepts"].([]any)[0].(map[string]any)["extra"].(map[string]any); extra["channelState"] != nil || extra["voucherState"] != nil {
		t.Errorf("a stranger was shown the channel: %v", extra)
	}

	// A failing handler charges nothing: the same voucher pays later.
	h.failNext.Store(true)
	if a = h.pay(t, batch.TypeVoucher, 5*p, 0, nil); a.status != http.StatusInternalServerError || a.settlement != nil {
		t.Fatalf("failed handler: %d %v", a.status, a.settlement)
	}
	if a = h.pay(t, batch.TypeVoucher, 5*p, 0, nil); a.status != http.StatusOK {
		t.Fatalf("voucher after a failure: %d %v", a.status, a.required["error"])
	}

	// A stale mirror is refreshed by the facilitator.
	h.now.Add(int64(time.Hour / time.Second))
	before = h.fac.verifies.Load()
	if a = h.pay(t, batch.TypeVoucher, 6*p, 0, nil); a.status != http.StatusOK {
		t.Fatalf("voucher on a stale mirror: %d %v", a.status, a.required["error"])
	}
	if h.fac.verifies.Load() != before+1 {
		t.Error("a stale mirror was trusted")
	}

	// The cooperative refund claims what was charged and returns the rest.
	a = h.pay(t, batch.TypeRefund, 6*p, 0, nil)
	if a.status != http.StatusOK || a.settlement["amount"] != big.NewInt(5_000_000-6*p).String() {
		t.Fatalf("refund: %d %s %v %v", a.status, a.body, a.settlement, a.required)
	}
	if len(h.fac.refunds) != 1 {
		t.Fatalf("%d refunds sent", len(h.fac.refunds))
	}
	o := h.fac.refunds[0]
	_, id := h.payer.Channel(h.terms)
	signer, err := payment.RecoverDigest(h.escrow.RefundDigest(id, o.Nonce, o.Amount), o.RefundSig)
	if err != nil || signer != h.terms.ReceiverAuthorizer {
		t.Errorf("refund signed by %s (%v), want the receiver authorizer", signer.Hex(), err)
	}
	if len(o.Claims) != 1 || o.Claims[0].TotalClaimed.Int64() != 6*p {
		t.Errorf("refund claims = %+v, want one row claiming 6 prices", o.Claims)
	}
	if h.handled.Load() != 7 {
		t.Errorf("handler ran %d times, want 7 (the refund skips it)", h.handled.Load())
	}
	if a = h.pay(t, batch.TypeRefund, 6*p, 0, nil); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonRefundNoBalance {
		t.Errorf("second refund: %d %v", a.status, a.required["error"])
	}
}

// TestServeResendInFlight (issue 20, item 4): a payer that gave up
// waiting sends the same voucher (or the deposit that carries it) again
// while the first is still served: told to retry (channel_busy) without
// the facilitator judging it against a deposit about to land, and then
// answered from the record, paying once.
func TestServeResendInFlight(t *testing.T) {
	p := price.Int64()
	for _, typ := range []string{batch.TypeDeposit, batch.TypeVoucher} {
		t.Run(typ, func(t *testing.T) {
			h := newHarness(t)
			max := p
			if typ == batch.TypeVoucher {
				if a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil); a.status != http.StatusOK {
					t.Fatalf("deposit: %d %v", a.status, a.required["error"])
				}
				max = 2 * p
			}
			deposit := int64(0)
			if typ == batch.TypeDeposit {
				deposit = 5_000_000
			}
			h.inHandler, h.release = make(chan struct{}), make(chan struct{})
			first := make(chan answer, 1)
			go func() { first <- h.pay(t, typ, max, deposit, nil) }()
			<-h.inHandler
			h.inHandler = nil
			verifies := h.fac.verifies.Load()
			if a := h.pay(t, typ, max, deposit, nil); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonChannelBusy {
				t.Fatalf("resend while the first is served: %d %v", a.status, a.required["error"])
			}
			if h.fac.verifies.Load() != verifies {
				t.Error("the facilitator was asked about a resend of a request in flight")
			}
			close(h.release)
			if a := <-first; a.status != http.StatusOK {
				t.Fatalf("first: %d %v", a.status, a.required["error"])
			}
			handled := h.handled.Load()
			a := h.pay(t, typ, max, deposit, nil)
			if a.status != http.StatusOK || a.body != `{"regime":"calm"}` || h.handled.Load() != handled {
				t.Fatalf("resend after the answer: %d %s (handler runs %d)", a.status, a.body, h.handled.Load()-handled)
			}
			_, id := h.payer.Channel(h.terms)
			if c := h.store.m[id]; c.Charged.Int64() != max || h.fac.state.Balance.Int64() != 5_000_000 {
				t.Errorf("charged %s, balance %s: want one charge of %d and one deposit", c.Charged, h.fac.state.Balance, max)
			}
		})
	}
}

// TestServeRefundRacesVoucher (issue 20, item 2): a voucher whose read of
// the chain began before a cooperative refund landed and ended after it
// is judged against the state after the refund, inside the channel's
// serialized update: refused, the handler never runs, nothing is charged
// that the escrow could not pay.
func TestServeRefundRacesVoucher(t *testing.T) {
	h := newHarness(t)
	p := price.Int64()
	if a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil); a.status != http.StatusOK {
		t.Fatalf("deposit: %d %v", a.status, a.required["error"])
	}
	if a := h.pay(t, batch.TypeVoucher, 2*p, 0, nil); a.status != http.StatusOK {
		t.Fatalf("voucher: %d %v", a.status, a.required["error"])
	}
	h.now.Add(int64(time.Hour / time.Second)) // a stale mirror: the next voucher reads the chain
	refunded := make(chan answer, 1)
	h.fac.afterRead = func() {
		// The voucher's read is done (the whole deposit still there);
		// the refund lands before the voucher's update.
		refunded <- h.pay(t, batch.TypeRefund, 2*p, 0, nil)
	}
	handled := h.handled.Load()
	a := h.pay(t, batch.TypeVoucher, 3*p, 0, nil)
	r := <-refunded
	if r.status != http.StatusOK {
		t.Fatalf("refund: %d %v", r.status, r.required["error"])
	}
	if a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonCumulativeExceedsBalance {
		t.Fatalf("voucher racing the refund: %d %v; want 402 %s", a.status, a.required["error"], batch.ReasonCumulativeExceedsBalance)
	}
	if h.handled.Load() != handled {
		t.Error("the handler ran for a voucher the escrow cannot pay")
	}
	_, id := h.payer.Channel(h.terms)
	if c := h.store.m[id]; c.Charged.Int64() != 2*p || c.Balance.Int64() != 2*p {
		t.Errorf("channel: charged %s, balance %s; want both 2 prices", c.Charged, c.Balance)
	}
}

// TestServeRefundBounds (issue 20, item 3): a refund costs the operator a
// transaction: none for a stranger's signature, none below the minimum,
// one per interval per channel; a refund whose outcome is unknown keeps
// its amount off every later voucher until the chain shows it.
func TestServeRefundBounds(t *testing.T) {
	p := price.Int64()
	setup := func(t *testing.T) *harness {
		h := newHarness(t)
		if a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil); a.status != http.StatusOK {
			t.Fatalf("deposit: %d %v", a.status, a.required["error"])
		}
		return h
	}
	t.Run("stranger", func(t *testing.T) {
		h := setup(t)
		stranger, _ := crypto.GenerateKey()
		if a := h.payAt(t, "/regime", stranger, batch.TypeRefund, p, 0, nil); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonVoucherSignature {
			t.Fatalf("stranger's refund: %d %v", a.status, a.required["error"])
		}
		if len(h.fac.refunds) != 0 {
			t.Error("a refund was sent for a stranger")
		}
	})
	t.Run("minimum and rate", func(t *testing.T) {
		h := setup(t)
		if a := h.pay(t, batch.TypeRefund, p, 0, big.NewInt(9_999)); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonRefundBelowMinimum {
			t.Fatalf("dust refund: %d %v", a.status, a.required["error"])
		}
		if a := h.pay(t, batch.TypeRefund, p, 0, big.NewInt(100_000)); a.status != http.StatusOK {
			t.Fatalf("partial refund: %d %v", a.status, a.required["error"])
		}
		if a := h.pay(t, batch.TypeRefund, p, 0, big.NewInt(100_000)); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonRefundTooSoon {
			t.Fatalf("second refund at once: %d %v", a.status, a.required["error"])
		}
		h.now.Add(int64(10 * time.Minute / time.Second))
		if a := h.pay(t, batch.TypeRefund, p, 0, big.NewInt(100_000)); a.status != http.StatusOK {
			t.Fatalf("refund after the interval: %d %v", a.status, a.required["error"])
		}
		if len(h.fac.refunds) != 2 {
			t.Errorf("%d refunds sent, want 2", len(h.fac.refunds))
		}
	})
	t.Run("unknown outcome", func(t *testing.T) {
		h := setup(t)
		h.fac.refundErr = errors.New("connection reset")
		if a := h.pay(t, batch.TypeRefund, p, 0, nil); a.status != http.StatusBadGateway {
			t.Fatalf("refund with no answer: %d %s", a.status, a.body)
		}
		// The chain does not show it yet: what it would take stays off.
		if a := h.pay(t, batch.TypeVoucher, 2*p, 0, nil); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonCumulativeExceedsBalance {
			t.Fatalf("voucher while the refund may land: %d %v", a.status, a.required["error"])
		}
		// It landed after all, and someone else topped the channel up:
		// the next read shows both, ends the refund in flight and serves.
		h.fac.mu.Lock()
		h.fac.state.Balance.SetInt64(p + 1_000_000)
		h.fac.state.RefundNonce.SetInt64(1)
		h.fac.mu.Unlock()
		_, id := h.payer.Channel(h.terms)
		if a := h.pay(t, batch.TypeVoucher, 2*p, 0, nil); a.status != http.StatusOK {
			t.Fatalf("voucher after the refund landed: %d %v", a.status, a.required["error"])
		}
		if c := h.store.m[id]; c.RefundPending != nil || c.Balance.Int64() != p+1_000_000 {
			t.Errorf("channel after the refund was seen: pending %v balance %s", c.RefundPending, c.Balance)
		}
	})
}

func TestServeRefusals(t *testing.T) {
	p := price.Int64()
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		typ   string
		max   int64
		want  string
	}{
		{"a channel another server opened", func(h *harness) {
			h.fac.state.Balance.SetInt64(1_000_000)
			h.fac.state.TotalClaimed.SetInt64(300_000)
		}, batch.TypeVoucher, 300_000 + p, batch.ReasonChannelOpenedElsewhere},
		{"voucher above the balance", func(h *harness) { h.fac.state.Balance.SetInt64(p) }, batch.TypeVoucher, 2 * p, batch.ReasonCumulativeExceedsBalance},
		{"busy channel", func(h *harness) {
			h.fac.state.Balance.SetInt64(1_000_000)
			_, id := h.payer.Channel(h.terms)
			cfg, _ := h.payer.Channel(h.terms)
			h.store.m[id] = batch.Channel{ID: id, Config: cfg, Charged: new(big.Int), Balance: big.NewInt(1_000_000), TotalClaimed: new(big.Int),
				RefundNonce: new(big.Int), SyncedAt: time.Unix(h.now.Load(), 0),
				Pending: &batch.Reservation{ID: "other", SignedMax: big.NewInt(p), ExpiresAt: time.Unix(h.now.Load()+30, 0)}}
		}, batch.TypeVoucher, p, batch.ReasonChannelBusy},
		{"withdrawal about to be finalizable", func(h *harness) {
			_, id := h.payer.Channel(h.terms)
			cfg, _ := h.payer.Channel(h.terms)
			h.store.m[id] = batch.Channel{ID: id, Config: cfg, Charged: new(big.Int), Balance: big.NewInt(1_000_000), TotalClaimed: new(big.Int),
				RefundNonce: new(big.Int), SyncedAt: time.Unix(h.now.Load(), 0), WithdrawRequestedAt: uint64(h.now.Load() - 3500), Opened: true}
		}, batch.TypeVoucher, p, batch.ReasonWithdrawalPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.setup(h)
			a := h.pay(t, tc.typ, tc.max, 0, nil)
			if a.status != http.StatusPaymentRequired || a.required["error"] != tc.want {
				t.Fatalf("got %d %v (%s), want 402 %s", a.status, a.required["error"], a.body, tc.want)
			}
			if h.handled.Load() != 0 {
				t.Error("the handler ran")
			}
		})
	}
	t.Run("a channel opened elsewhere stays refused, counted once", func(t *testing.T) {
		h := newHarness(t)
		h.fac.state.Balance.SetInt64(1_000_000)
		h.fac.state.TotalClaimed.SetInt64(300_000)
		for _, tt := range []struct {
			typ     string
			max     int64
			deposit int64
		}{{batch.TypeVoucher, 300_000 + p, 0}, {batch.TypeVoucher, p, 0}, {batch.TypeDeposit, 300_000 + p, 1_000_000}, {batch.TypeRefund, 300_000, 0}} {
			a := h.pay(t, tt.typ, tt.max, tt.deposit, nil)
			if a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonChannelOpenedElsewhere {
				t.Fatalf("%s of %d: %d %v, want refused as opened elsewhere", tt.typ, tt.max, a.status, a.required["error"])
			}
			extra := a.required["accepts"].([]any)[0].(map[string]any)["extra"].(map[string]any)
			if extra["channelState"] != nil || extra["voucherState"] != nil {
				t.Errorf("%s: a corrective state of a channel this server does not serve: %v", tt.typ, extra)
			}
		}
		if n := h.stops.count(batch.EvidenceOpenedElsewhere); n != 1 {
			t.Errorf("%d stops counted, want 1", n)
		}
		if h.handled.Load() != 0 || h.fac.state.Balance.Int64() != 1_000_000 || len(h.fac.refunds) != 0 {
			t.Errorf("handler ran %d times, balance %s, %d refunds: want nothing done", h.handled.Load(), h.fac.state.Balance, len(h.fac.refunds))
		}
	})
}

// TestDepositSaltForms: a deposit's ERC-3009 salt is read as the
// official client writes it (32 bytes of hex) and as a decimal.
func TestDepositSaltForms(t *testing.T) {
	for _, salt := range []string{"0x00000000000000000000000000000000000000000000000000000000000004d2", "1234"} {
		raw := `{"type":"deposit","channelConfig":{"payer":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","payerAuthorizer":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
"receiver":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","receiverAuthorizer":"0x70997970C51812dc3A010C7d01b50e0d17dc79C8","token":"0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35",
"withdrawDelay":900,"salt":"0x0000000000000000000000000000000000000000000000000000000000000000"},
"voucher":{"channelId":"0x1111111111111111111111111111111111111111111111111111111111111111","maxClaimableAmount":"1","signature":"0x` + strings.Repeat("ab", 65) + `"},
"deposit":{"amount":"10","authorization":{"erc3009Authorization":{"validAfter":"0","validBefore":"99","salt":"` + salt + `","signature":"0x` + strings.Repeat("ab", 65) + `"}}}}`
		p, err := batch.DecodePayload([]byte(raw))
		if err != nil || p.Deposit.Salt.Int64() != 1234 {
			t.Errorf("salt %s: %v %v", salt, err, p)
		}
	}
}

// TestServeFromRecentCopy (issue 20, item 9): a payer's next voucher
// starts from the row this process last wrote, without reading the
// store; a row someone else wrote meanwhile is never overwritten from the
// stale copy, and the voucher is judged on the row as it is, whether the
// write was a claim or another replica's charge of the next voucher.
func TestServeFromRecentCopy(t *testing.T) {
	p := price.Int64()
	type counts struct{ reads, fromHits int }
	count := func(h *harness) counts {
		h.store.mu.Lock()
		defer h.store.mu.Unlock()
		return counts{h.store.reads, h.store.fromHits}
	}
	for _, tc := range []struct {
		name string
		// meanwhile writes the channel as someone else would, after the
		// voucher of 3p; the next voucher signs next.
		meanwhile func(t *testing.T, h *harness, id common.Hash)
		next      int64
		// read: the next voucher reads the store before its handler;
		// from: its charge is written from what it started from (the
		// copy, or that read), not from a read inside the update.
		read, from bool
		// claimed is what the row shows claimed after the next voucher.
		claimed int64
		// missed: the channel is read from the store afterwards.
		missed bool
	}{
		{name: "nothing", meanwhile: func(*testing.T, *harness, common.Hash) {}, next: 4 * p, from: true},
		{name: "a claim", meanwhile: func(t *testing.T, h *harness, id common.Hash) {
			if _, err := h.store.UpdateChannel(context.Background(), id, func(c *batch.Channel, _ bool) (batch.Change, error) {
				c.TotalClaimed = big.NewInt(3 * p)
				return batch.Save, nil
			}); err != nil {
				t.Fatal(err)
			}
		}, next: 4 * p, claimed: 3 * p, missed: true},
		{name: "another replica's charge", meanwhile: func(t *testing.T, h *harness, id common.Hash) {
			sig, err := payment.SignDigest(h.escrow.VoucherDigest(id, big.NewInt(4*p)), h.payer.Key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.store.UpdateChannel(context.Background(), id, func(c *batch.Channel, _ bool) (batch.Change, error) {
				c.Charged, c.SignedMax, c.Signature = big.NewInt(4*p), big.NewInt(4*p), sig
				return batch.Save, nil
			}); err != nil {
				t.Fatal(err)
			}
		}, next: 5 * p, read: true, from: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			_, id := h.payer.Channel(h.terms)
			if a := h.pay(t, batch.TypeDeposit, p, 20*p, nil); a.status != http.StatusOK {
				t.Fatalf("deposit: %d %v", a.status, a.required["error"])
			}
			for _, max := range []int64{2 * p, 3 * p} {
				if a := h.pay(t, batch.TypeVoucher, max, 0, nil); a.status != http.StatusOK {
					t.Fatalf("voucher %d: %d %v", max, a.status, a.required["error"])
				}
			}
			before := count(h)
			tc.meanwhile(t, h, id)
			if a := h.pay(t, batch.TypeVoucher, tc.next, 0, nil); a.status != http.StatusOK {
				t.Fatalf("voucher %d: %d %v", tc.next, a.status, a.required["error"])
			}
			after := count(h)
			if got := after.fromHits > before.fromHits; got != tc.from {
				t.Errorf("written from what it started from: %v, want %v", got, tc.from)
			}
			if got := after.reads > before.reads; got != tc.read {
				t.Errorf("read the store: %v, want %v", got, tc.read)
			}
			c, _, _ := h.store.Channel(context.Background(), id)
			claimed := int64(0)
			if c.TotalClaimed != nil {
				claimed = c.TotalClaimed.Int64()
			}
			if c.Charged.Int64() != tc.next || claimed != tc.claimed {
				t.Errorf("row: charged %s claimed %d, want %d and %d", c.Charged, claimed, tc.next, tc.claimed)
			}
			if !tc.missed {
				return
			}
			// A channel someone else writes is read from the store for a
			// while, not tried from a copy that would miss.
			before = count(h)
			if a := h.pay(t, batch.TypeVoucher, tc.next+p, 0, nil); a.status != http.StatusOK {
				t.Fatalf("voucher after: %d %v", a.status, a.required["error"])
			}
			if after := count(h); after.reads == before.reads {
				t.Error("the voucher after a missed copy did not read the store")
			}
		})
	}
}

// TestDecodePayloadRefusesMalformed: every hex word and amount of a
// payload is checked for its form, and one that is not is refused.
func TestDecodePayloadRefusesMalformed(t *testing.T) {
	addr, id, sig := "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "0x"+strings.Repeat("11", 32), "0x"+strings.Repeat("ab", 65)
	payload := func(payer, salt, channel, max string) string {
		return `{"type":"voucher","channelConfig":{"payer":"` + payer + `","payerAuthorizer":"` + addr + `","receiver":"` + addr +
			`","receiverAuthorizer":"` + addr + `","token":"` + addr + `","withdrawDelay":900,"salt":"` + salt + `"},` +
			`"voucher":{"channelId":"` + channel + `","maxClaimableAmount":"` + max + `","signature":"` + sig + `"}}`
	}
	if _, err := batch.DecodePayload([]byte(payload(addr, id, id, "10000"))); err != nil {
		t.Fatalf("a well-formed voucher: %v", err)
	}
	for _, tc := range []struct{ name, payer, salt, channel, max string }{
		{"address without 0x", "00" + addr[2:], id, id, "1"},
		{"address too short", addr[:41], id, id, "1"},
		{"address not hex", addr[:41] + "g", id, id, "1"},
		{"salt too long", addr, id + "00", id, "1"},
		{"channel id not hex", addr, id, id[:65] + "z", "1"},
		{"channel id with 0X", addr, id, "0X" + id[2:], "1"},
		{"amount empty", addr, id, id, ""},
		{"amount negative", addr, id, id, "-1"},
		{"amount in hex", addr, id, id, "0x10"},
		{"amount beyond 78 digits", addr, id, id, strings.Repeat("9", 79)},
	} {
		if _, err := batch.DecodePayload([]byte(payload(tc.payer, tc.salt, tc.channel, tc.max))); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// TestServeThirdPartyDeposit (issue 20, item 6): a deposit someone else
// landed on the payer's channel is seen at once: a voucher beyond the
// (fresh) mirror is judged on a read of the chain, not refused until the
// mirror expires.
func TestServeThirdPartyDeposit(t *testing.T) {
	h := newHarness(t)
	p := price.Int64()
	if a := h.pay(t, batch.TypeDeposit, p, 2*p, nil); a.status != http.StatusOK {
		t.Fatalf("deposit: %d %v", a.status, a.required["error"])
	}
	if a := h.pay(t, batch.TypeVoucher, 2*p, 0, nil); a.status != http.StatusOK {
		t.Fatalf("voucher: %d %v", a.status, a.required["error"])
	}
	h.fac.mu.Lock()
	h.fac.state.Balance.Add(h.fac.state.Balance, big.NewInt(10*p)) // landed by someone else
	h.fac.mu.Unlock()
	before := h.fac.verifies.Load()
	if a := h.pay(t, batch.TypeVoucher, 3*p, 0, nil); a.status != http.StatusOK {
		t.Fatalf("voucher beyond the mirror, within the chain's balance: %d %v", a.status, a.required["error"])
	}
	if h.fac.verifies.Load() != before+1 {
		t.Error("the chain was not read for a voucher beyond the mirror")
	}
	if a := h.pay(t, batch.TypeVoucher, 4*p, 0, nil); a.status != http.StatusOK || h.fac.verifies.Load() != before+1 {
		t.Fatalf("next voucher, from the refreshed mirror: %d %v (verifies %d)", a.status, a.required["error"], h.fac.verifies.Load()-before)
	}
}

// TestServeStopsOnEvidence (issue 32): a channel this server opened is
// served while the payer's vouchers follow its books; a voucher ahead of
// them (the payer signed for charges made at another server) is never
// corrected: the channel stops, every later payment on it is refused with
// the evidence (a correct voucher, a cooperative refund), nothing more is
// charged, and the stop is counted once.
func TestServeStopsOnEvidence(t *testing.T) {
	p := price.Int64()
	h := newHarness(t)
	if a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil); a.status != http.StatusOK {
		t.Fatalf("deposit: %d %v", a.status, a.required["error"])
	}
	_, id := h.payer.Channel(h.terms)
	if c := h.store.m[id]; !c.Opened {
		t.Fatal("the deposit that found the channel empty did not open it")
	}
	if a := h.pay(t, batch.TypeVoucher, 2*p, 0, nil); a.status != http.StatusOK {
		t.Fatalf("voucher: %d %v", a.status, a.required["error"])
	}
	// Below the books: the corrective 402, as before.
	if a := h.pay(t, batch.TypeVoucher, 2*p, 0, nil); a.status != http.StatusOK || h.handled.Load() != 2 {
		t.Fatalf("a resend is answered from the record: %d %v", a.status, a.required["error"])
	}
	if a := h.pay(t, batch.TypeVoucher, p, 0, nil); a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonCumulativeAmountMismatch {
		t.Fatalf("a voucher below the books: %d %v", a.status, a.required["error"])
	}
	for _, tt := range []struct {
		name string
		typ  string
		max  int64
	}{
		{"a voucher two prices ahead", batch.TypeVoucher, 4 * p},
		{"then the voucher the books expect", batch.TypeVoucher, 3 * p},
		{"a deposit with the expected voucher", batch.TypeDeposit, 3 * p},
		{"a cooperative refund", batch.TypeRefund, 2 * p},
	} {
		deposit := int64(0)
		if tt.typ == batch.TypeDeposit {
			deposit = 1_000_000
		}
		a := h.pay(t, tt.typ, tt.max, deposit, nil)
		if a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonChannelChargedElsewhere {
			t.Fatalf("%s: %d %v, want refused as charged elsewhere", tt.name, a.status, a.required["error"])
		}
		extra := a.required["accepts"].([]any)[0].(map[string]any)["extra"].(map[string]any)
		if extra["channelState"] != nil || extra["voucherState"] != nil {
			t.Errorf("%s: a corrective state to sign again from: %v", tt.name, extra)
		}
	}
	c := h.store.m[id]
	if c.Charged.Int64() != 2*p || c.StopEvidence != batch.EvidenceVoucherAhead || c.StoppedAt.IsZero() || !strings.Contains(c.StopDetail, "200000 cumulative while this server charged 100000") {
		t.Errorf("the channel after the evidence: charged %s, stopped %v on %q (%s)", c.Charged, c.StoppedAt, c.StopEvidence, c.StopDetail)
	}
	if h.handled.Load() != 2 || len(h.fac.refunds) != 0 || h.fac.state.Balance.Int64() != 5_000_000 {
		t.Errorf("handler ran %d times, %d refunds, balance %s: want nothing more done", h.handled.Load(), len(h.fac.refunds), h.fac.state.Balance)
	}
	if n := h.stops.count(batch.EvidenceVoucherAhead); n != 1 {
		t.Errorf("%d stops counted, want 1", n)
	}
}

// TestServeOpening (issue 32): a deposit opens a channel only when it
// finds it empty. One that lands just after another server's deposit
// joins a channel another server opened: it is refused after landing
// (the deposit stays the payer's, in the channel) and the channel stops;
// the handler never runs. A failed handler after an opening deposit
// keeps the opening: the payer's next deposit tops the channel up.
func TestServeOpening(t *testing.T) {
	p := price.Int64()
	t.Run("joined", func(t *testing.T) {
		h := newHarness(t)
		h.fac.racer = big.NewInt(2_000_000)
		a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil)
		if a.status != http.StatusPaymentRequired || a.required["error"] != batch.ReasonChannelOpenedElsewhere {
			t.Fatalf("a deposit joining another's channel: %d %v", a.status, a.required["error"])
		}
		_, id := h.payer.Channel(h.terms)
		c := h.store.m[id]
		if c.Opened || c.StopEvidence != batch.EvidenceOpenedElsewhere || c.Pending != nil || !strings.Contains(c.StopDetail, "stays the payer's") ||
			c.Balance.Int64() != 7_000_000 {
			t.Errorf("the channel: opened %v, stopped on %q (%s), pending %v, balance %s", c.Opened, c.StopEvidence, c.StopDetail, c.Pending, c.Balance)
		}
		if h.handled.Load() != 0 || h.stops.count(batch.EvidenceOpenedElsewhere) != 1 {
			t.Errorf("handler ran %d times, %d stops", h.handled.Load(), h.stops.count(batch.EvidenceOpenedElsewhere))
		}
	})
	t.Run("failed handler", func(t *testing.T) {
		h := newHarness(t)
		h.failNext.Store(true)
		if a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil); a.status != http.StatusInternalServerError {
			t.Fatalf("deposit with a failing handler: %d", a.status)
		}
		_, id := h.payer.Channel(h.terms)
		if c := h.store.m[id]; !c.Opened || orZero(c.Charged).Sign() != 0 || c.Balance.Int64() != 5_000_000 {
			t.Fatalf("after the failed handler: opened %v, charged %s, balance %s", c.Opened, c.Charged, c.Balance)
		}
		if a := h.pay(t, batch.TypeDeposit, p, 1_000_000, nil); a.status != http.StatusOK {
			t.Fatalf("the payer's next deposit: %d %v", a.status, a.required["error"])
		}
		if c := h.store.m[id]; c.Charged.Int64() != p || c.Balance.Int64() != 6_000_000 || !c.StoppedAt.IsZero() {
			t.Errorf("charged %s, balance %s, stopped %v", c.Charged, c.Balance, c.StoppedAt)
		}
	})
}
