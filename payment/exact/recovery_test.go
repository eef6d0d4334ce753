package exact_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
)

// The tests in this file follow a payment whose settlement's outcome was
// lost, refused or lied about, through the real gate, ledger and devnet
// chain (issue 10): the payer never gets data without a real transfer to
// payTo, never pays without getting the data, and no settled record or
// PAYMENT-RESPONSE carries anything but the real transaction hash.

var zeroHash = common.Hash{}.Hex()

// settleUnknown is a facilitator settle whose outcome is lost before
// anything is sent.
func settleUnknown(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
	return exact.Settlement{}, &payment.FacilitatorError{Op: "settle", Err: errors.New("read: connection reset")}
}

// cancelOnChain burns the authorization's nonce with EIP-3009
// cancelAuthorization, sent by the payer itself.
func cancelOnChain(t *testing.T, w *world, h string) {
	t.Helper()
	p := mustDecode(t, h)
	key := w.chain.Account(devnet.PayerAccount).Key
	d := payment.Domain{Name: devnet.TokenName, Version: devnet.TokenVersion, ChainID: big.NewInt(devnet.ChainID), VerifyingContract: w.chain.Token}
	typeHash := crypto.Keccak256([]byte("CancelAuthorization(address authorizer,bytes32 nonce)"))
	structHash := crypto.Keccak256(typeHash, common.LeftPadBytes(p.Authorization.From.Bytes(), 32), p.Authorization.Nonce[:])
	sep := d.Separator()
	digest := crypto.Keccak256([]byte{0x19, 0x01}, sep[:], structHash)
	sig, err := crypto.Sign(digest, key)
	if err != nil {
		t.Fatal(err)
	}
	sig[64] += 27
	var data []byte
	for _, m := range w.token.Methods {
		if m.RawName == "cancelAuthorization" && len(m.Inputs) == 3 {
			data, err = w.token.Pack(m.Name, p.Authorization.From, p.Authorization.Nonce, sig)
		}
	}
	if data == nil || err != nil {
		t.Fatalf("pack cancelAuthorization: %v", err)
	}
	rcpt, err := w.chain.Transact(context.Background(), w.chain.Account(devnet.PayerAccount), w.chain.Token, data)
	if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("cancelAuthorization: %+v %v", rcpt, err)
	}
}

// settlementOf decodes a PAYMENT-RESPONSE header.
func settlementOf(t *testing.T, h string) payment.SettleResponse {
	t.Helper()
	var s payment.SettleResponse
	raw, err := base64.StdEncoding.DecodeString(h)
	if err != nil || json.Unmarshal(raw, &s) != nil {
		t.Fatalf("settlement header %q: %v", h, err)
	}
	return s
}

// checkPaidOnce asserts one transfer of 0.05 USD to payTo since before,
// a settled record with the hash of the transaction that made it, and a
// settlement header naming that same transaction.
func checkPaidOnce(t *testing.T, w *world, before *big.Int, settlementHeader string) {
	t.Helper()
	if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 {
		t.Errorf("payTo received %s, want exactly one payment of 50000", got)
	}
	recs, _ := w.ledger.Payments(context.Background())
	if len(recs) != 1 || recs[0].State != exact.StateSettled {
		t.Fatalf("ledger %+v", recs)
	}
	s := settlementOf(t, settlementHeader)
	if !s.Success || s.Transaction != recs[0].Tx || s.Transaction == zeroHash {
		t.Fatalf("settlement header %+v, ledger tx %s", s, recs[0].Tx)
	}
	rcpt, err := w.client.TransactionReceipt(context.Background(), common.HexToHash(s.Transaction))
	if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("the settlement's transaction %s has no successful receipt: %v", s.Transaction, err)
	}
	if c, _ := w.gate.Counters(context.Background()); c["regime"].Paid != 1 {
		t.Errorf("paid counter %d", c["regime"].Paid)
	}
}

// TestCanceledAuthorizationBuysNothing (issue 10, case 1): after a
// settlement whose outcome was lost or refused, the payer cancels the
// authorization on chain and resends it: nothing is served, nothing moves,
// and the ledger says failed.
func TestCanceledAuthorizationBuysNothing(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		settle func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error)
		reason string
	}{
		{"outcome unknown", settleUnknown, exact.ReasonAuthorizationCanceled},
		{"pending without a transaction", func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
			return exact.Settlement{Pending: true, Reason: payment.ReasonSettlementPending}, nil
		}, exact.ReasonAuthorizationCanceled},
		{"refused", func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
			return exact.Settlement{Reason: exact.ReasonSimulationFailed}, nil
		}, exact.ReasonNonceUsed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
			f.settle = tt.settle
			before := w.balance(t, w.payTo)
			h := signedHeader(t, w, 2, "/regime", nil)
			if status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, h); status == 200 || strings.Contains(string(body), "RANGE") {
				t.Fatalf("first attempt: %d %s", status, body)
			}
			cancelOnChain(t, w, h)
			f.settle = nil // the facilitator behaves from now on
			for i := range 2 {
				status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
				if status != 402 || strings.Contains(string(body), "RANGE") {
					t.Fatalf("retry %d after cancel: %d %s", i, status, body)
				}
				if r := reasonOf(t, body); i == 0 && r != tt.reason || r != tt.reason && r != exact.ReasonNonceUsed {
					t.Errorf("retry %d after cancel: reason %q, want %s", i, r, tt.reason)
				}
				if s := hdr.Get(payment.HeaderPaymentResponseV2); s != "" && settlementOf(t, s).Success {
					t.Errorf("a settlement header says success: %s", s)
				}
			}
			if w.balance(t, w.payTo).Cmp(before) != 0 {
				t.Error("funds moved")
			}
			recs, _ := w.ledger.Payments(context.Background())
			if len(recs) != 1 || recs[0].State != exact.StateFailed {
				t.Errorf("ledger %+v, want failed", recs)
			}
			if c, _ := w.gate.Counters(context.Background()); c["regime"].Paid != 0 {
				t.Errorf("counted as paid: %+v", c)
			}
		})
	}
}

// failingSettledWrites is a ledger whose first writes of a settlement
// fail, as a database locked past its busy timeout or a full disk would.
type failingSettledWrites struct {
	exact.Ledger
	failures atomic.Int64
}

func (l *failingSettledWrites) Resolve(ctx context.Context, rec exact.Record) error {
	if rec.State == exact.StateSettled && l.failures.Add(-1) >= 0 {
		return errors.New("database is locked (SQLITE_BUSY)")
	}
	return l.Ledger.Resolve(ctx, rec)
}

// TestChargedButUnrecordedIsServed (issue 10, cases 2 and 3): the
// transfer lands but the ledger write fails; the payer is told to retry,
// and the retry is served at once from the chain's evidence, also after
// validBefore, or after the reconciler resolved the record; one transfer,
// the real hash everywhere.
func TestChargedButUnrecordedIsServed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		later time.Duration // how far the gate's clock moves before the retry
		// reconcile runs the reconciler before the retry.
		reconcile bool
	}{
		{name: "retry at once"},
		{name: "retry after validBefore", later: 10 * time.Minute},
		{name: "reconciled, then retried", reconcile: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var skew atomic.Int64
			failing := &failingSettledWrites{}
			failing.failures.Store(1)
			w := newWorldWith(t, worldOptions{
				ledger: func(l *store.DB) exact.Ledger { failing.Ledger = l; return failing },
				now:    func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
			})
			before := w.balance(t, w.payTo)
			h := signedHeader(t, w, 2, "/regime", nil)
			status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
			if status != 503 || strings.Contains(string(body), "RANGE") || !strings.Contains(string(body), "settlement_unrecorded") {
				t.Fatalf("first attempt: %d %s", status, body)
			}
			if n, _, _ := w.ledger.UnresolvedSummary(context.Background()); n != 1 {
				t.Errorf("%d unresolved after the lost write, want 1", n)
			}
			skew.Store(int64(tt.later))
			if tt.reconcile {
				rc := exact.DefaultReconcilerConfig()
				rc.MinAge = 0
				r, err := exact.NewReconciler(rc, w.ledger, w.audit, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				res, err := r.Once(context.Background())
				if err != nil || len(res) != 1 || res[0].State != exact.StateSettled || res[0].Tx == "" || res[0].Tx == zeroHash {
					t.Fatalf("reconciler: %+v %v", res, err)
				}
				if n, _, _ := w.ledger.UnresolvedSummary(context.Background()); n != 0 {
					t.Errorf("%d unresolved after reconciling", n)
				}
			}
			status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
			if status != 200 || string(body) != `{"regime":"RANGE"}` {
				t.Fatalf("retry: %d %s", status, body)
			}
			checkPaidOnce(t, w, before, hdr.Get(payment.HeaderPaymentResponseV2))
			// And once more: the stored response, no new transfer.
			if status, hdr2, _ := get(t, w, "/regime", payment.HeaderPaymentV2, h); status != 200 || hdr2.Get(payment.HeaderPaymentResponseV2) != hdr.Get(payment.HeaderPaymentResponseV2) {
				t.Errorf("second retry: %d", status)
			}
			checkPaidOnce(t, w, before, hdr.Get(payment.HeaderPaymentResponseV2))
		})
	}
}

// TestLostSettlementAnswerFoundOnChain (issue 10, case 3): the
// facilitator sent the transfer but its answer was lost: the gate finds
// the transaction on chain and serves with its real hash at once.
func TestLostSettlementAnswerFoundOnChain(t *testing.T) {
	t.Parallel()
	f := &fake{}
	w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
	f.settle = func(ctx context.Context, p *exact.Payment, r *payment.Requirement) (exact.Settlement, error) {
		_, _ = f.real.Settle(ctx, p, r)
		return exact.Settlement{}, &payment.FacilitatorError{Op: "settle", Err: errors.New("timeout")}
	}
	before := w.balance(t, w.payTo)
	status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil))
	if status != 200 || string(body) != `{"regime":"RANGE"}` {
		t.Fatalf("%d %s", status, body)
	}
	checkPaidOnce(t, w, before, hdr.Get(payment.HeaderPaymentResponseV2))
}

// TestLyingFacilitator (issue 10, case 4): a facilitator that reports a
// settlement the chain does not show gets no body released and no
// settled record; once it behaves, the same payment is settled for real.
func TestLyingFacilitator(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		tx   func(t *testing.T, w *world) common.Hash
	}{
		{"made-up hash", func(*testing.T, *world) common.Hash {
			var h common.Hash
			_, _ = rand.Read(h[:])
			return h
		}},
		{"another transaction's hash", func(t *testing.T, w *world) common.Hash {
			// A real, successful transfer from the payer to payTo, but not of
			// this authorization (and of 1 unit).
			data, _ := w.token.Pack("transfer", w.payTo, big.NewInt(1))
			rcpt, err := w.chain.Transact(context.Background(), w.chain.Account(devnet.PayerAccount), w.chain.Token, data)
			if err != nil || rcpt.Status != types.ReceiptStatusSuccessful {
				t.Fatalf("transfer: %v", err)
			}
			return rcpt.TxHash
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
			lie := tt.tx(t, w)
			f.settle = func(_ context.Context, p *exact.Payment, _ *payment.Requirement) (exact.Settlement, error) {
				return exact.Settlement{Success: true, Tx: lie, Payer: p.Authorization.From}, nil
			}
			before := w.balance(t, w.payTo)
			h := signedHeader(t, w, 2, "/regime", nil)
			status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
			if status != 502 || strings.Contains(string(body), "RANGE") || !strings.Contains(string(body), exact.ReasonSettlementUnconfirmed) {
				t.Fatalf("lying facilitator: %d %s", status, body)
			}
			if hdr.Get(payment.HeaderPaymentResponseV2) != "" {
				t.Error("a settlement header was sent for an unconfirmed settlement")
			}
			recs, _ := w.ledger.Payments(context.Background())
			if len(recs) != 1 || recs[0].State != exact.StatePending || recs[0].Tx != "" {
				t.Fatalf("ledger %+v, want pending without the claimed hash", recs)
			}
			f.settle = nil
			status, hdr, body = get(t, w, "/regime", payment.HeaderPaymentV2, h)
			if status != 200 || string(body) != `{"regime":"RANGE"}` {
				t.Fatalf("retry with an honest facilitator: %d %s", status, body)
			}
			checkPaidOnce(t, w, before, hdr.Get(payment.HeaderPaymentResponseV2))
		})
	}
}

// TestValidityBound (issue 10, case 5): an authorization valid for longer
// than maxTimeoutSeconds plus the slack is refused before anything is
// written; one within it is paid.
func TestValidityBound(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	maxUint256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	in := func(d time.Duration) *big.Int { return big.NewInt(time.Now().Add(d).Unix()) }
	for _, tt := range []struct {
		name        string
		validBefore *big.Int
		want        int
	}{
		{"a year", in(365 * 24 * time.Hour), 402},
		{"2^256-1", maxUint256, 402},
		{"maxTimeout + 60 s", in(360 * time.Second), 402},
		{"maxTimeout", in(300 * time.Second), 200},
		{"maxTimeout + 20 s (a payer's clock ahead)", in(320 * time.Second), 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) { a.ValidBefore = tt.validBefore })
			status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
			if status != tt.want {
				t.Fatalf("%d %s", status, body)
			}
			if tt.want == 402 && reasonOf(t, body) != exact.ReasonValidityTooLong {
				t.Errorf("reason %q", reasonOf(t, body))
			}
		})
	}
	if recs, _ := w.ledger.Payments(context.Background()); len(recs) != 2 {
		t.Errorf("%d ledger rows, want only the 2 accepted payments", len(recs))
	}
}

// withResource adds a v2 resource object to a payment header.
func withResource(t *testing.T, h, url string) string {
	t.Helper()
	raw, _ := base64.StdEncoding.DecodeString(h)
	var payload map[string]any
	if err := json.Unmarshal(raw, &payload); err != nil {
		t.Fatal(err)
	}
	payload["resource"] = map[string]any{"url": url, "description": "d", "mimeType": "application/json"}
	out, _ := payment.EncodeHeader(payload)
	return out
}

// TestResourceBinding (issue 10, case 6): a v2 payment names the resource
// it pays for; it buys that resource only. Query parameters compare as a
// set, in any order.
func TestResourceBinding(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for _, tt := range []struct {
		name, resource, path string
		want                 int
	}{
		{"regime's payment for lanes", "http://tollgate.test/regime", "/lanes", 402},
		{"the same resource", "http://tollgate.test/lanes", "/lanes", 200},
		{"parameters in another order", "http://tollgate.test/regime?a=1&b=2", "/regime?b=2&a=1", 200},
		{"another parameter value", "http://tollgate.test/regime?a=1", "/regime?a=2", 402},
		{"a parameter more", "http://tollgate.test/regime?a=1", "/regime?a=1&a=1", 402},
		{"another host", "http://elsewhere.test/regime", "/regime", 402},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := withResource(t, signedHeader(t, w, 2, tt.path, nil), tt.resource)
			calls := w.calls.Load()
			status, _, body := get(t, w, tt.path, payment.HeaderPaymentV2, h)
			if status != tt.want {
				t.Fatalf("%d %s", status, body)
			}
			if tt.want == 402 {
				if reasonOf(t, body) != payment.ReasonResourceMismatch || w.calls.Load() != calls {
					t.Errorf("reason %q, handler ran: %v", reasonOf(t, body), w.calls.Load() != calls)
				}
			}
		})
	}
}

// TestReconcilerFailsWhatCanNeverPay (issue 10, case 2): records left
// unresolved whose authorization was canceled, or expired without being
// used, are failed; one still valid and unused is left alone.
func TestReconcilerFailsWhatCanNeverPay(t *testing.T) {
	t.Parallel()
	f := &fake{}
	w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
	f.settle = settleUnknown
	canceled := signedHeader(t, w, 2, "/regime", nil)
	expiring := signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
		a.ValidBefore = big.NewInt(time.Now().Add(8 * time.Second).Unix())
	})
	valid := signedHeader(t, w, 2, "/regime", nil)
	for _, h := range []string{canceled, expiring, valid} {
		if status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, h); status != 502 {
			t.Fatalf("unknown settlement: %d %s", status, body)
		}
	}
	cancelOnChain(t, w, canceled)
	// Wait until the chain's clock passes the expiring authorization.
	deadline := mustDecode(t, expiring).Authorization.ValidBefore.Uint64()
	for {
		head, err := w.client.HeaderByNumber(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if head.Time >= deadline {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var logs syncBuffer
	rc := exact.DefaultReconcilerConfig()
	rc.MinAge = 0
	r, _ := exact.NewReconciler(rc, w.ledger, w.audit, slog.New(slog.NewTextHandler(&logs, nil)))
	res, err := r.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, x := range res {
		got[x.Nonce] = x.State + " " + x.Reason
	}
	nonce := func(h string) string { a := mustDecode(t, h).Authorization; return common.Hash(a.Nonce).Hex() }
	want := map[string]string{
		nonce(canceled): exact.StateFailed + " " + exact.ReasonAuthorizationCanceled,
		nonce(expiring): exact.StateFailed + " " + exact.ReasonExpiredUnused,
	}
	if len(got) != 2 || got[nonce(canceled)] != want[nonce(canceled)] || got[nonce(expiring)] != want[nonce(expiring)] {
		t.Errorf("resolutions %v, want %v", got, want)
	}
	if n, _, _ := w.ledger.UnresolvedSummary(context.Background()); n != 1 {
		t.Errorf("%d unresolved, want the valid one left", n)
	}
	if c := strings.Count(logs.String(), "reconciled an unresolved payment"); c != 2 {
		t.Errorf("%d resolutions logged, want 2:\n%s", c, logs.String())
	}
	// The valid one is still the payer's to retry, and it is settled then.
	f.settle = nil
	before := w.balance(t, w.payTo)
	if status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, valid); status != 200 {
		t.Fatalf("retry of the valid one: %d %s", status, body)
	}
	if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 {
		t.Errorf("payTo received %s", got)
	}
}

// TestFailedSettlementIsLogged (issue 10, case 7): a settlement refused
// or reverted is logged at WARN with its reason and transaction.
func TestFailedSettlementIsLogged(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := &fake{}
	tx := common.HexToHash("0x77")
	w := newWorldWith(t, worldOptions{
		facilitator: func(l *exact.Local) exact.Facilitator { f.real = l; return f },
		logger:      slog.New(slog.NewTextHandler(&logs, nil)),
	})
	f.settle = func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
		return exact.Settlement{Reason: exact.ReasonTransactionFailed, Message: "execution reverted: FiatTokenV2: authorization is expired", Tx: tx}, nil
	}
	if status, _, _ := get(t, w, "/regime", payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil)); status != 402 {
		t.Fatalf("status %d", status)
	}
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "settlement failed") {
			line = l
		}
	}
	if !strings.Contains(line, "level=WARN") || !strings.Contains(line, exact.ReasonTransactionFailed) ||
		!strings.Contains(line, "authorization is expired") || !strings.Contains(line, tx.Hex()) {
		t.Errorf("settlement failure log line %q", line)
	}
}

// TestChallengeCountsSurviveRestarts (issue 10, case 8): challenges are
// flushed to the ledger in batches, and a new gate on the same ledger
// counts on from them.
func TestChallengeCountsSurviveRestarts(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	for range 3 {
		if status, _, _ := get(t, w, "/regime", "", ""); status != 402 {
			t.Fatal(status)
		}
	}
	w.gate.FlushCounters(context.Background())
	if status, _, _ := get(t, w, "/lanes", "", ""); status != 402 {
		t.Fatal(status)
	}
	c, _ := w.gate.Counters(context.Background())
	if c["regime"].Challenges != 3 || c["lanes"].Challenges != 1 {
		t.Fatalf("before the flush: %+v", c)
	}
	w.gate.FlushCounters(context.Background())
	scheme, err := exact.NewServer(exact.ServerConfig{SettleTimeout: 2 * time.Second}, w.local, w.ledger, w.audit)
	if err != nil {
		t.Fatal(err)
	}
	again, err := payment.NewGate(gateConfig(w.chain, w.payTo, scheme),
		[]payment.Route{{Name: "regime", Pattern: "GET /regime", PriceUSD: "0.05", Valid: func(*http.Request) bool { return true }}},
		w.ledger, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := again.Counters(context.Background()); c["regime"].Challenges != 3 {
		t.Errorf("after a restart: %+v", c)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// answeredFirst is a ledger where, just before the claim holder records
// its settlement, another request (a retry on another replica that found
// the transfer on chain) records the same settlement with its own answer.
type answeredFirst struct {
	exact.Ledger
	once sync.Once
}

func (l *answeredFirst) Resolve(ctx context.Context, rec exact.Record) error {
	if rec.State == exact.StateSettled && rec.Response != nil {
		l.once.Do(func() {
			other := rec
			other.Response = []byte(`{"regime":"RANGE","answeredBy":"another replica"}`)
			_ = l.Ledger.Resolve(ctx, other)
		})
	}
	return l.Ledger.Resolve(ctx, rec)
}

// TestOnePaymentOneAnswer: when another request stored its answer to the
// same settled payment first, the claim holder delivers that stored
// answer, not its own: one payment never gets two different bodies.
func TestOnePaymentOneAnswer(t *testing.T) {
	t.Parallel()
	first := &answeredFirst{}
	w := newWorldWith(t, worldOptions{ledger: func(l *store.DB) exact.Ledger { first.Ledger = l; return first }})
	before := w.balance(t, w.payTo)
	h := signedHeader(t, w, 2, "/regime", nil)
	status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
	const stored = `{"regime":"RANGE","answeredBy":"another replica"}`
	if status != 200 || string(body) != stored {
		t.Fatalf("%d %s, want the answer stored first", status, body)
	}
	checkPaidOnce(t, w, before, hdr.Get(payment.HeaderPaymentResponseV2))
	if status, _, again := get(t, w, "/regime", payment.HeaderPaymentV2, h); status != 200 || string(again) != stored {
		t.Errorf("retry: %d %s", status, again)
	}
}
