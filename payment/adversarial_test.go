package payment_test

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
	}{
		{"bad base64", payment.HeaderPaymentV2, func() string { return "%%% not base64 %%%" }, payment.ReasonInvalidPayload},
		{"bad JSON", payment.HeaderPaymentV2, func() string { return b64(`{"x402Version":2,`) }, payment.ReasonInvalidPayload},
		{"unknown version", payment.HeaderPaymentV2, func() string { return b64(`{"x402Version":3,"payload":{}}`) }, payment.ReasonInvalidVersion},
		{"v1 payload in the v2 header", payment.HeaderPaymentV2, func() string { return signedHeader(t, w, 1, "/regime", nil) }, payment.ReasonInvalidVersion},
		{"header over 8 KiB", payment.HeaderPaymentV2, func() string { return strings.Repeat("A", 9000) }, payment.ReasonInvalidPayload},
		{"wrong scheme", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(_ *payment.Authorization, r *payment.RequirementsV2) { r.Scheme = "upto" })
		}, payment.ReasonNoMatch},
		{"wrong network", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(_ *payment.Authorization, r *payment.RequirementsV2) { r.Network = "eip155:1" })
		}, payment.ReasonNoMatch},
		{"wrong v1 network", payment.HeaderPaymentV1, func() string {
			h := signedHeader(t, w, 1, "/regime", nil)
			raw, _ := base64.StdEncoding.DecodeString(h)
			return b64(strings.Replace(string(raw), `"network":"base"`, `"network":"base-sepolia"`, 1))
		}, payment.ReasonNoMatch},
		{"wrong asset", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(_ *payment.Authorization, r *payment.RequirementsV2) {
				r.Asset = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
			})
		}, payment.ReasonNoMatch},
		{"wrong payTo", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, r *payment.RequirementsV2) {
				a.To = common.HexToAddress("0x000000000000000000000000000000000000dEaD")
			})
		}, payment.ReasonRecipientMismatch},
		{"amount one unit low", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) { a.Value.SetInt64(49_999) })
		}, payment.ReasonValueMismatch},
		{"amount one unit high", payment.HeaderPaymentV1, func() string {
			return signedHeader(t, w, 1, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) { a.Value.SetInt64(50_001) })
		}, payment.ReasonValueMismatch},
		{"expired", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
				a.ValidBefore = big.NewInt(time.Now().Add(-time.Second).Unix())
			})
		}, payment.ReasonValidBefore},
		{"not yet valid", payment.HeaderPaymentV2, func() string {
			return signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
				a.ValidAfter = big.NewInt(time.Now().Add(time.Hour).Unix())
			})
		}, payment.ReasonValidAfter},
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
		}, payment.ReasonInvalidSignature},
		{"signer is not from", payment.HeaderPaymentV2, func() string {
			h := signedHeader(t, w, 2, "/regime", nil)
			raw, _ := base64.StdEncoding.DecodeString(h)
			from := crypto.PubkeyToAddress(w.chain.Account(devnet.PayerAccount).Key.PublicKey).Hex()
			return b64(strings.Replace(string(raw), from, crypto.PubkeyToAddress(other.PublicKey).Hex(), 1))
		}, payment.ReasonInvalidSignature},
		{"balance too low", payment.HeaderPaymentV2, func() string { return signedByUnfunded(t, w) }, payment.ReasonInsufficientBalance},
	}
	before := w.balance(t, w.payTo)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := w.calls.Load()
			status, _, body := get(t, w, "/regime", tt.header, tt.value())
			if status != 402 {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := reasonOf(t, body); !strings.HasPrefix(got, tt.reason) {
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
	h, _ := payment.EncodePayment(2, req, "base", a, sig)
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
	status, hdr2, body := get(t, w, "/regime", payment.HeaderPaymentV2, h)
	if status != 200 || string(body) != `{"regime":"RANGE"}` || hdr2.Get(payment.HeaderPaymentResponseV2) != hdr.Get(payment.HeaderPaymentResponseV2) {
		t.Errorf("same-resource retry: %d %s", status, body)
	}
	if w.balance(t, w.payTo).Cmp(paid) != 0 {
		t.Error("the retry was charged again")
	}
	status, _, body = get(t, w, "/regime?other=1", payment.HeaderPaymentV2, h)
	if status != 402 || !strings.HasPrefix(reasonOf(t, body), payment.ReasonAuthorizationReplayed) {
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
	if status != 402 || !strings.HasPrefix(reasonOf(t, body), payment.ReasonNonceUsed) {
		t.Errorf("nonce used on chain: %d %s", status, body)
	}
}

// mustDecode decodes a header as the facilitator API would receive it.
func mustDecode(t *testing.T, h string) *payment.Payment {
	t.Helper()
	p, err := payment.DecodeHeader(h, 2)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fake is a facilitator with function fields; nil fields use the real one.
type fake struct {
	real    payment.Facilitator
	verify  func(context.Context, *payment.Payment, *payment.Requirement) (payment.Verification, error)
	settle  func(context.Context, *payment.Payment, *payment.Requirement) (payment.Settlement, error)
	settles atomic.Int64
}

func (f *fake) Verify(ctx context.Context, p *payment.Payment, r *payment.Requirement) (payment.Verification, error) {
	if f.verify != nil {
		return f.verify(ctx, p, r)
	}
	return f.real.Verify(ctx, p, r)
}

func (f *fake) Settle(ctx context.Context, p *payment.Payment, r *payment.Requirement) (payment.Settlement, error) {
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
			f.verify = func(context.Context, *payment.Payment, *payment.Requirement) (payment.Verification, error) {
				return payment.Verification{}, &payment.FacilitatorError{Op: "verify", Err: errors.New("connection refused")}
			}
		}, want: 502, wantState: payment.StateReleased},
		{name: "facilitator slow", fake: func(f *fake) {
			f.verify = func(ctx context.Context, _ *payment.Payment, _ *payment.Requirement) (payment.Verification, error) {
				<-ctx.Done()
				return payment.Verification{}, ctx.Err()
			}
		}, want: 502, wantState: payment.StateReleased},
		{name: "handler error", status: 503, want: 503, wantState: payment.StateReleased, wantBody: true},
		{name: "settlement fails", fake: func(f *fake) {
			f.settle = func(context.Context, *payment.Payment, *payment.Requirement) (payment.Settlement, error) {
				return payment.Settlement{Reason: payment.ReasonInsufficientBalance}, nil
			}
		}, want: 402, wantState: payment.StateFailed, wantSettle: 1},
		{name: "settlement times out", fake: func(f *fake) {
			f.settle = func(context.Context, *payment.Payment, *payment.Requirement) (payment.Settlement, error) {
				return payment.Settlement{Pending: true, Reason: payment.ReasonSettlementPending, Tx: tx}, nil
			}
		}, want: 402, wantState: payment.StatePending, wantSettle: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			w := newWorld(t, func(l *payment.Local) payment.Facilitator { f.real = l; return f })
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
			if tt.wantState == payment.StatePending {
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
		if len(recs) == 1 && recs[0].State == payment.StateSettled {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs, _ := w.ledger.Payments(context.Background())
	t.Fatalf("ledger after the client left: %+v", recs)
}
