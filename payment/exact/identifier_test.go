package exact_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
)

// withID adds the payment-identifier extension with id to a payment
// header, as @x402/extensions' appendPaymentIdentifierToExtensions does.
func withID(t *testing.T, header, id string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(header)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	env["extensions"] = map[string]any{payment.ExtensionPaymentIdentifier: map[string]any{"info": map[string]any{"required": false, "id": id}}}
	out, _ := json.Marshal(env)
	return base64.StdEncoding.EncodeToString(out)
}

// TestPaymentIdentifier: a payment identifier pays once. Its first
// payment is settled and answered; the same payment again, and a payment
// the same payer signs anew, get the recorded answer and its original
// settlement, and the new authorization stays unused; the id for another
// request, or from another payer, is a 409; a malformed id a 400; none of
// them runs the handler or moves money.
func TestPaymentIdentifier(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{ids: true})
	ctx := context.Background()
	const id = "pay_7d5d747be160e280504c099d984bcfe0"
	before := w.balance(t, w.payTo)

	first := withID(t, signedHeader(t, w, 2, "/regime", nil), id)
	status, h, body := get(t, w, "/regime", payment.HeaderPaymentV2, first)
	if status != 200 || h.Get(payment.HeaderPaymentResponseV2) == "" {
		t.Fatalf("first payment: %d %s", status, body)
	}
	settlement := h.Get(payment.HeaderPaymentResponseV2)
	if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 {
		t.Fatalf("payTo received %s for the first payment; want 50000", got)
	}

	var fresh [32]byte // the nonce of the payment signed anew
	anew := withID(t, signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) { fresh = a.Nonce }), id)
	stranger, _ := crypto.GenerateKey()
	other := withID(t, signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
		a.From = crypto.PubkeyToAddress(stranger.PublicKey)
	}), id)
	for _, tc := range []struct {
		name, path, header string
		status             int
		code               string // the error code of a refusal
	}{
		{name: "the same payment", path: "/regime", header: first, status: 200},
		{name: "a payment signed anew", path: "/regime", header: anew, status: 200},
		{name: "another request", path: "/lanes", header: withID(t, signedHeader(t, w, 2, "/lanes", nil), id), status: 409, code: payment.ReasonIDConflict},
		{name: "another payer", path: "/regime", header: other, status: 409, code: payment.ReasonIDConflict},
		{name: "a malformed id", path: "/regime", header: withID(t, signedHeader(t, w, 2, "/regime", nil), "short"), status: 400, code: payment.ReasonIDInvalid},
		{name: "an id of bad characters", path: "/regime", header: withID(t, signedHeader(t, w, 2, "/regime", nil), "pay_0123456789abcdef!"), status: 400,
			code: payment.ReasonIDInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := get(t, w, tc.path, payment.HeaderPaymentV2, tc.header)
			var refusal struct{ Error string }
			json.Unmarshal(body, &refusal)
			switch {
			case status != tc.status:
				t.Errorf("status %d (%s); want %d", status, body, tc.status)
			case tc.status == 200 && (h.Get(payment.HeaderPaymentResponseV2) != settlement || string(body) != `{"regime":"RANGE"}`):
				t.Errorf("answer %s with settlement %s; want the recorded one, %s", body, h.Get(payment.HeaderPaymentResponseV2), settlement)
			case tc.status != 200 && refusal.Error != tc.code:
				t.Errorf("refused with %s; want %s", body, tc.code)
			}
		})
	}
	if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 {
		t.Errorf("payTo received %s in all; want the first payment's 50000", got)
	}
	if w.calls.Load() != 1 {
		t.Errorf("the handler ran %d times; want once", w.calls.Load())
	}
	data, _ := w.token.Pack("authorizationState", w.chain.Account(devnet.PayerAccount).Address, common.Hash(fresh))
	out, err := w.client.CallContract(ctx, ethereum.CallMsg{To: &w.chain.Token, Data: data}, nil)
	if err != nil || new(big.Int).SetBytes(out).Sign() != 0 {
		t.Errorf("the authorization signed anew is used on chain (%x, %v); it must stay unused", out, err)
	}
}

// TestPaymentIdentifierAdvertised: every challenge offers the extension,
// optional.
func TestPaymentIdentifierAdvertised(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{ids: true})
	status, h, _ := get(t, w, "/regime", "", "")
	raw, _ := base64.StdEncoding.DecodeString(h.Get(payment.HeaderPaymentRequired))
	var required struct {
		Extensions map[string]struct {
			Info struct{ Required *bool }
		}
	}
	json.Unmarshal(raw, &required)
	ext, ok := required.Extensions[payment.ExtensionPaymentIdentifier]
	if status != http.StatusPaymentRequired || !ok || ext.Info.Required == nil || *ext.Info.Required {
		t.Errorf("challenge %d offers %s; want payment-identifier with required false", status, raw)
	}
}

// TestPaymentIdentifierTool: the same on MCP. A tool call paid with an
// id, then a payment signed anew with that id, gets the recorded result
// and settlement; the id with other arguments is refused, and nothing
// more is charged.
func TestPaymentIdentifierTool(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{ids: true})
	ctx := context.Background()
	const id = "pay_0f4c6b1e2d3a49c8b7a6f5e4d3c2b1a0"
	before := w.balance(t, w.payTo)
	call := func(args url.Values, header string) *mcp.CallToolResult {
		t.Helper()
		raw, _ := base64.StdEncoding.DecodeString(header)
		var pay map[string]any
		if err := json.Unmarshal(raw, &pay); err != nil {
			t.Fatal(err)
		}
		r, err := w.gate.CallTool(ctx, payment.ToolCall{Name: "regime", Arguments: args, Payment: pay,
			Run: func(context.Context) *payment.Response {
				w.calls.Add(1)
				return payment.NewResponse(http.StatusOK, "application/json", []byte(`{"regime":"RANGE"}`))
			}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tx := func(r *mcp.CallToolResult) string {
		b, _ := json.Marshal(r.Meta[payment.MetaPaymentResponse])
		var s payment.SettleResponse
		json.Unmarshal(b, &s)
		return s.Transaction
	}
	first := call(url.Values{}, withID(t, signedHeader(t, w, 2, "/regime", nil), id))
	again := call(url.Values{}, withID(t, signedHeader(t, w, 2, "/regime", nil), id))
	if first.IsError || again.IsError || tx(first) == "" || tx(again) != tx(first) {
		t.Fatalf("first %+v, signed anew %+v: want one settlement answered twice", first, again)
	}
	other := call(url.Values{"window": {"7"}}, withID(t, signedHeader(t, w, 2, "/regime", nil), id))
	if text := other.Content[0].(*mcp.TextContent).Text; !other.IsError || !strings.Contains(text, payment.ReasonIDConflict) {
		t.Errorf("the id with other arguments: %s; want %s", text, payment.ReasonIDConflict)
	}
	if got := new(big.Int).Sub(w.balance(t, w.payTo), before); got.Int64() != 50_000 || w.calls.Load() != 1 {
		t.Errorf("payTo received %s and the tool ran %d times; want 50000 and once", got, w.calls.Load())
	}
}

// TestPaymentIdentifierStates: an id whose first payment still runs is
// refused with 409 and Retry-After; an id answered more than 10 minutes
// ago with 409 payment_identifier_expired; neither is charged.
func TestPaymentIdentifierStates(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{ids: true})
	ctx := context.Background()
	now := time.Now()
	running := payment.IDRecord{ID: "pay_running_0123456789", Operation: "regime", Resource: "/regime", PayloadHash: "00", Owner: "other", Created: now}
	answered := payment.IDRecord{ID: "pay_answered_long_ago_01", Operation: "regime", Resource: "/regime", PayloadHash: "00", Owner: "other",
		Created: now.Add(-15 * time.Minute)}
	for _, r := range []payment.IDRecord{running, answered} {
		if _, ok, err := w.ledger.ReserveID(ctx, r, now.Add(-time.Hour), now.Add(-48*time.Hour)); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	answered.Payer, answered.Done, answered.Body, answered.Settlement, answered.Finished = w.chain.Account(devnet.PayerAccount).Address.Hex(), true,
		[]byte(`{}`), []byte(`{"success":true}`), now.Add(-11*time.Minute)
	if err := w.ledger.FinishID(ctx, answered); err != nil {
		t.Fatal(err)
	}
	before := w.balance(t, w.payTo)
	for _, tc := range []struct {
		id, code, retryAfter string
	}{
		{running.ID, payment.ReasonIDInProgress, "2"},
		{answered.ID, payment.ReasonIDExpired, ""},
	} {
		status, h, body := get(t, w, "/regime", payment.HeaderPaymentV2, withID(t, signedHeader(t, w, 2, "/regime", nil), tc.id))
		var refusal struct{ Error string }
		json.Unmarshal(body, &refusal)
		if status != http.StatusConflict || refusal.Error != tc.code || h.Get("Retry-After") != tc.retryAfter {
			t.Errorf("%s: %d %s, Retry-After %q; want 409 %s, %q", tc.id, status, body, h.Get("Retry-After"), tc.code, tc.retryAfter)
		}
	}
	if w.calls.Load() != 0 || w.balance(t, w.payTo).Cmp(before) != 0 {
		t.Errorf("the handler ran %d times, payTo moved: want nothing", w.calls.Load())
	}
}
