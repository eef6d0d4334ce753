package exact_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

func reasonOf(t *testing.T, body []byte) string {
	t.Helper()
	var v1 payment.RequiredV1
	if err := json.Unmarshal(body, &v1); err != nil {
		t.Fatalf("402 body %s: %v", body, err)
	}
	return v1.Error
}

// TestBadPayments: every malformed, mismatched or invalid payment is a 402
// naming the reason; the handler never runs and nothing moves on chain.
func TestBadPayments(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	other, _ := devnet.DeriveKey(devnet.Mnemonic, 3)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name   string
		header string
		value  func() string
		reason string
		status int // 402 unless set
	}{
		{"bad base64", payment.HeaderPaymentV2, func() string { return "%%% not base64 %%%" }, payment.ReasonInvalidPayload, 400},
		{"bad JSON", payment.HeaderPaymentV2, func() string { return b64(`{"x402Version":2,`) }, payment.ReasonInvalidPayload, 400},
		{"unknown version", payment.HeaderPaymentV2, func() string { return b64(`{"x402Version":3,"payload":{}}`) }, payment.ReasonInvalidVersion, 400},
		{"v1 payload in the v2 header", payment.HeaderPaymentV2, func() string { return signedHeader(t, w, 1, "/regime", nil) }, payment.ReasonInvalidVersion, 400},
		{"header over 8 KiB", payment.HeaderPaymentV2, func() string { return strings.Repeat("A", 9000) }, payment.ReasonInvalidPayload, 400},
		{"wrong scheme", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(_ *payment.Authorization, r *payment.RequirementsV2) { r.Scheme = "upto" })
		}, payment.ReasonNoMatch, 402},
		{"wrong network", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(_ *payment.Authorization, r *payment.RequirementsV2) { r.Network = "eip155:1" })
		}, payment.ReasonNoMatch, 402},
		{"wrong v1 network", payment.HeaderPaymentV1, func() string {
			h := signedHeader(t, w, 1, "/regime", nil)
			raw, _ := base64.StdEncoding.DecodeString(h)
			return b64(strings.Replace(string(raw), `"network":"base"`, `"network":"base-sepolia"`, 1))
		}, payment.ReasonNoMatch, 402},
		{"wrong asset", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(_ *payment.Authorization, r *payment.RequirementsV2) {
				r.Asset = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
			})
		}, payment.ReasonNoMatch, 402},
		{"wrong payTo", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, r *payment.RequirementsV2) {
				a.To = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
			})
		}, exact.ReasonRecipientMismatch, 402},
		{"amount one unit low", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) { a.Value.SetInt64(49_999) })
		}, exact.ReasonValueMismatch, 402},
		{"amount one unit high", payment.HeaderPaymentV1, func() string {
			return signedHeader(t, w, 1, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) { a.Value.SetInt64(50_001) })
		}, exact.ReasonValueMismatch, 402},
		{"expired", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
				a.ValidBefore = big.NewInt(time.Now().Add(-time.Second).Unix())
			})
		}, exact.ReasonValidBefore, 402},
		{"not yet valid", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
				a.ValidAfter = big.NewInt(time.Now().Add(time.Hour).Unix())
			})
		}, exact.ReasonValidAfter, 402},
		{"bad signature", payment.HeaderPaymentV2, func() string {
			h := signedHeader(t, w, 2, "/regime", nil)
			raw, _ := base64.StdEncoding.DecodeString(h)
			s := string(raw)
			i := strings.Index(s, `"signature":"0x`) + len(`"signature":"0x`)
			flip := map[byte]byte{'0': '1'}[s[i+10]]
			if flip == 0 {
				flip = '0'
			}
			return b64(s[:i+10] + string(flip) + s[i+11:])
		}, exact.ReasonInvalidSignature, 402},
		{"signer is not from", payment.HeaderPaymentV2, func() string {
			h := signedHeader(t, w, 2, "/regime", nil)
			raw, _ := base64.StdEncoding.DecodeString(h)
			from := crypto.PubkeyToAddress(w.chain.Account(devnet.PayerAccount).Key.PublicKey).Hex()
			return b64(strings.Replace(string(raw), from, crypto.PubkeyToAddress(other.PublicKey).Hex(), 1))
		}, exact.ReasonInvalidSignature, 402},
		{"balance too low", payment.HeaderPaymentV2, func() string { return signedByUnfunded(t, w) }, exact.ReasonInsufficientBalance, 402},
	}
	before := w.balance(t, w.payTo)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := w.calls.Load()
			status, _, body := get(t, w, "/regime", tt.header, tt.value())
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			var got string
			if status == 400 {
				var e struct{ Error string }
				_ = json.Unmarshal(body, &e)
				got = e.Error
			} else {
				got = reasonOf(t, body)
			}
			if got != tt.reason {
				t.Errorf("reason %q, want %s", got, tt.reason)
			}
			if w.calls.Load() != calls {
				t.Error("the handler ran for a bad payment")
			}
		})
	}
	if w.balance(t, w.payTo).Cmp(before) != 0 {
		t.Error("a bad payment moved funds")
	}
	if recs, _ := w.ledger.Payments(context.Background()); len(recs) != 1 { // only the well-formed, underfunded one reaches the ledger
		t.Errorf("%d ledger rows for bad payments, want 1: %+v", len(recs), recs)
	}
}

func signedByUnfunded(t *testing.T, w *world) string {
	t.Helper()
	k, _ := devnet.DeriveKey(devnet.Mnemonic, 42)
	value := big.NewInt(50_000)
	a := payment.Authorization{From: crypto.PubkeyToAddress(k.PublicKey), To: w.payTo, Value: value,
		ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(time.Now().Add(5 * time.Minute).Unix())}
	a.Nonce[0] = 42
	d := payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(devnet.ChainID), VerifyingContract: w.chain.Token}
	sig, _ := d.Sign(a, k)
	req := payment.RequirementsV2{Scheme: "exact", Network: "eip155:8453", Amount: "50000", Asset: w.chain.Token.Hex(),
		PayTo: w.payTo.Hex(), MaxTimeoutSeconds: 300, Extra: payment.Extra{Name: "USD Coin", Version: "2"}}
	h, _ := exact.EncodePayment(2, req, "base", a, sig)
	return h
}

// TestReplay: a settled payment retried for the same resource is answered
// again without a second charge; for another resource it is refused; a
// nonce burnt on chain by other means is refused.
func TestReplay(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	h := signedHeader(t, w, 2, "/regime", nil)
	status, hdr, _ := get(t, w, "/regime", payment.HeaderPaymentV2, h)
	if status != 200 {
		t.Fatalf("first: %d", status)
	}
	paid := w.balance(t, w.payTo)
	calls := w.calls.Load()
	status, hdr2, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
	if status != 200 || string(body) != `{"regime":"RANGE"}` || hdr2.Get(payment.HeaderPaymentResponseV2) != hdr.Get(payment.HeaderPaymentResponseV2) {
		t.Errorf("same-resource retry: %d %s", status, body)
	}
	if w.balance(t, w.payTo).Cmp(paid) != 0 || w.calls.Load() != calls {
		t.Error("the retry was charged again or ran the handler again")
	}
	// A forged retry (same payer and nonce, another signature) gets nothing.
	raw, _ := base64.StdEncoding.DecodeString(h)
	forged := strings.Replace(string(raw), `"value":"50000"`, `"value":"1"`, 1)
	status, _, body = get(t, w, "/regime", payment.HeaderPaymentV2, base64.StdEncoding.EncodeToString([]byte(forged)))
	if status != 402 || strings.Contains(string(body), "RANGE") {
		t.Errorf("forged replay: %d %s", status, body)
	}
	status, _, body = get(t, w, "/regime?other=1", payment.HeaderPaymentV2, h)
	if status != 402 || reasonOf(t, body) != exact.ReasonAuthorizationReplayed {
		t.Errorf("other-resource replay: %d %s", status, body)
	}
	// A nonce used on chain outside this server's ledger.
	h2 := signedHeader(t, w, 2, "/regime", nil)
	p2 := mustDecode(t, h2)
	r := &payment.Requirement{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(devnet.ChainID), Asset: w.chain.Token,
		AssetName: "USD Coin", AssetVersion: "2", PayTo: w.payTo, Amount: big.NewInt(50_000), MaxTimeout: 300}
	if s, err := w.local.Settle(context.Background(), p2, r); err != nil || !s.Success {
		t.Fatalf("direct settle: %+v %v", s, err)
	}
	status, _, body = get(t, w, "/regime", payment.HeaderPaymentV2, h2)
	if status != 402 || reasonOf(t, body) != exact.ReasonNonceUsed {
		t.Errorf("nonce used on chain: %d %s", status, body)
	}
}

// mustDecode decodes a header as the facilitator API would receive it.
func mustDecode(t *testing.T, h string) *exact.Payment {
	t.Helper()
	p, err := exact.DecodeHeader(h, 2)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fake is a facilitator with function fields; nil fields use the real one.
type fake struct {
	real    exact.Facilitator
	verify  func(context.Context, *exact.Payment, *payment.Requirement) (exact.Verification, error)
	settle  func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error)
	settles atomic.Int64
}

func (f *fake) Verify(ctx context.Context, p *exact.Payment, r *payment.Requirement) (exact.Verification, error) {
	if f.verify != nil {
		return f.verify(ctx, p, r)
	}
	return f.real.Verify(ctx, p, r)
}

func (f *fake) Settle(ctx context.Context, p *exact.Payment, r *payment.Requirement) (exact.Settlement, error) {
	f.settles.Add(1)
	if f.settle != nil {
		return f.settle(ctx, p, r)
	}
	return f.real.Settle(ctx, p, r)
}

// TestFaults: facilitator and handler failures never charge without an
// answer nor answer without a charge, and the ledger says what happened.
func TestFaults(t *testing.T) {
	t.Parallel()
	tx := common.HexToHash("0x1234")
	tests := []struct {
		name       string
		fake       func(*fake)
		status     int // handler status
		want       int
		wantState  string
		wantBody   bool
		wantSettle int64
	}{
		{name: "facilitator unreachable", fake: func(f *fake) {
			f.verify = func(context.Context, *exact.Payment, *payment.Requirement) (exact.Verification, error) {
				return exact.Verification{}, &payment.FacilitatorError{Op: "verify", Err: errors.New("connection refused")}
			}
		}, want: 502, wantState: exact.StateReleased},
		{name: "facilitator slow", fake: func(f *fake) {
			f.verify = func(ctx context.Context, _ *exact.Payment, _ *payment.Requirement) (exact.Verification, error) {
				<-ctx.Done()
				return exact.Verification{}, ctx.Err()
			}
		}, want: 502, wantState: exact.StateReleased},
		{name: "handler error", status: 503, want: 503, wantState: exact.StateReleased, wantBody: true},
		{name: "settlement fails", fake: func(f *fake) {
			f.settle = func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
				return exact.Settlement{Reason: exact.ReasonInsufficientBalance}, nil
			}
		}, want: 402, wantState: exact.StateFailed, wantSettle: 1},
		{name: "settlement outcome unknown", fake: func(f *fake) {
			f.settle = func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
				return exact.Settlement{}, &payment.FacilitatorError{Op: "settle", Err: errors.New("read: connection reset")}
			}
		}, want: 502, wantState: exact.StatePending, wantSettle: 1},
		{name: "settlement times out", fake: func(f *fake) {
			f.settle = func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
				return exact.Settlement{Pending: true, Reason: payment.ReasonSettlementPending, Tx: tx}, nil
			}
		}, want: 402, wantState: exact.StatePending, wantSettle: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
			if tt.fake != nil {
				tt.fake(f)
			}
			if tt.status != 0 {
				w.status.Store(int64(tt.status))
			}
			start := time.Now()
			status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil))
			if status != tt.want {
				t.Fatalf("status %d, want %d: %s", status, tt.want, body)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("took %v: not bounded", time.Since(start))
			}
			if got := strings.Contains(string(body), "RANGE"); got != tt.wantBody {
				t.Errorf("paid body released: %v, want %v", got, tt.wantBody)
			}
			if f.settles.Load() != tt.wantSettle {
				t.Errorf("settle called %d times, want %d", f.settles.Load(), tt.wantSettle)
			}
			recs, _ := w.ledger.Payments(context.Background())
			if len(recs) != 1 || recs[0].State != tt.wantState {
				t.Fatalf("ledger %+v, want state %s", recs, tt.wantState)
			}
			if tt.name == "settlement times out" {
				if recs[0].Tx != tx.Hex() || !strings.Contains(hdr.Get(payment.HeaderPaymentResponseV2), "") {
					t.Errorf("pending record %+v", recs[0])
				}
			}
			if tt.name == "facilitator unreachable" && w.calls.Load() != 0 {
				t.Error("handler ran without a verified payment")
			}
		})
	}
}

// TestClientGoneAfterHandler: the payer hangs up while the handler runs;
// the payment still settles and the ledger has it.
func TestClientGoneAfterHandler(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	w.onServe = func(*http.Request) { cancel(); time.Sleep(50 * time.Millisecond) }
	req, _ := http.NewRequestWithContext(ctx, "GET", w.srv.URL+"/regime", nil)
	req.Header.Set(payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		recs, _ := w.ledger.Payments(context.Background())
		if len(recs) == 1 && recs[0].State == exact.StateSettled {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs, _ := w.ledger.Payments(context.Background())
	t.Fatalf("ledger after the client left: %+v", recs)
}

// TestUnresolvedSettlementsResolveOnRetry: a settlement left pending or
// unknown is resolved when the payer retries the same payment: if it
// landed, the response is served without another charge; if it did not,
// it is settled now. Either way exactly one transfer happens. (An unknown
// outcome that did land is found at once: TestLostSettlementAnswerFoundOnChain.)
func TestUnresolvedSettlementsResolveOnRetry(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		first func(f *fake) func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error)
	}{
		{"pending, then it landed", func(f *fake) func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
			return func(ctx context.Context, p *exact.Payment, r *payment.Requirement) (exact.Settlement, error) {
				s, err := f.real.Settle(ctx, p, r)
				return exact.Settlement{Pending: true, Reason: payment.ReasonSettlementPending, Tx: s.Tx}, err
			}
		}},
		{"unknown, never sent", func(*fake) func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
			return settleUnknown
		}},
		{"pending, never sent", func(f *fake) func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
			return func(context.Context, *exact.Payment, *payment.Requirement) (exact.Settlement, error) {
				return exact.Settlement{Pending: true, Reason: payment.ReasonSettlementPending}, nil
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
			f.settle = tt.first(f)
			before := w.balance(t, w.payTo)
			h := signedHeader(t, w, 2, "/regime", nil)
			if status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, h); status == 200 || strings.Contains(string(body), "RANGE") {
				t.Fatalf("first attempt: %d %s", status, body)
			}
			f.settle = nil // the facilitator behaves from now on
			status, hdr, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
			if status != 200 || string(body) != `{"regime":"RANGE"}` || hdr.Get(payment.HeaderPaymentResponseV2) == "" {
				t.Fatalf("retry: %d %s", status, body)
			}
			if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 {
				t.Errorf("payTo received %s, want exactly one payment", got)
			}
			recs, _ := w.ledger.Payments(context.Background())
			if len(recs) != 1 || recs[0].State != exact.StateSettled {
				t.Errorf("ledger %+v", recs)
			}
			c, _ := w.gate.Counters(context.Background())
			if c["regime"].Paid != 1 {
				t.Errorf("paid counter %d", c["regime"].Paid)
			}
		})
	}
}

// TestHeadIsNeverCharged: HEAD would buy headers without a body.
func TestHeadIsNeverCharged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	req, _ := http.NewRequest("HEAD", w.srv.URL+"/regime", nil)
	req.Header.Set(payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	recs, _ := w.ledger.Payments(context.Background())
	if resp.StatusCode != 402 || len(recs) != 0 || w.calls.Load() != 0 {
		t.Errorf("HEAD: %d, %d ledger rows, %d handler runs", resp.StatusCode, len(recs), w.calls.Load())
	}
}

// TestSignatureWithV01: wallets that write v as 0/1 pay like the others.
func TestSignatureWithV01(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	h := signedHeader(t, w, 2, "/regime", nil)
	raw, _ := base64.StdEncoding.DecodeString(h)
	var payload map[string]any
	_ = json.Unmarshal(raw, &payload)
	inner := payload["payload"].(map[string]any)
	sig := inner["signature"].(string)
	v := sig[len(sig)-2:]
	inner["signature"] = sig[:len(sig)-2] + map[string]string{"1b": "00", "1c": "01"}[v]
	h, _ = payment.EncodeHeader(payload)
	if status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, h); status != 200 {
		t.Errorf("v in {0,1}: %d %s", status, body)
	}
}
