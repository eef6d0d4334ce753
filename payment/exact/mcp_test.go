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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// TestToolCallGuarantees: exact's guarantees hold for a tool call (the
// gate's MCP transport) as for a GET, with the real ledger and chain: a
// tool call whose settlement's outcome is lost is an error that asks for
// the same payment again, with no requirement and no record; that same
// payment sent again is served once the chain shows it paid; a third
// sending is the recorded answer, charged once; a failed tool is never
// settled; a payment made out to the REST resource buys no tool call.
func TestToolCallGuarantees(t *testing.T) {
	t.Parallel()
	f := &fake{}
	w := newWorld(t, func(l *exact.Local) exact.Facilitator { f.real = l; return f })
	ctx := context.Background()
	status := http.StatusOK
	call := func(h string, encoded bool) *mcp.CallToolResult {
		t.Helper()
		raw, _ := base64.StdEncoding.DecodeString(h)
		var pay any = h // Cloudflare's form: the base64 string
		if !encoded {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			pay = m // the spec's form: the object
		}
		r, err := w.gate.CallTool(ctx, payment.ToolCall{Name: "regime", Arguments: url.Values{}, Payment: pay,
			Run: func(context.Context) *payment.Response {
				w.calls.Add(1)
				if status != http.StatusOK {
					return payment.NewResponse(status, "application/json", []byte(`{"error":"unavailable","status":503}`))
				}
				return payment.NewResponse(status, "application/json", []byte(`{"regime":"RANGE"}`))
			}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }
	settlement := func(r *mcp.CallToolResult) payment.SettleResponse {
		t.Helper()
		var s payment.SettleResponse
		b, _ := json.Marshal(r.Meta[payment.MetaPaymentResponse])
		if err := json.Unmarshal(b, &s); err != nil || !s.Success {
			t.Fatalf("settlement %s (%v): %s", b, err, text(r))
		}
		return s
	}
	before := w.balance(t, w.payTo)

	f.settle = settleUnknown
	h := signedHeader(t, w, 2, "/regime", nil)
	r := call(h, false)
	if !r.IsError || r.StructuredContent != nil || r.Meta[payment.MetaError] != nil || !strings.Contains(text(r), payment.ReasonSettlementUnknown) {
		t.Fatalf("lost settlement: %+v %s", r, text(r))
	}
	f.settle = nil
	first := call(h, true)
	if first.IsError || string(first.StructuredContent.(json.RawMessage)) != `{"regime":"RANGE"}` {
		t.Fatalf("the same payment again: %s", text(first))
	}
	again := call(h, false)
	if again.IsError || settlement(again).Transaction != settlement(first).Transaction {
		t.Fatalf("a third sending: %s, settlements %v and %v", text(again), first.Meta, again.Meta)
	}
	if paid := new(big.Int).Sub(w.balance(t, w.payTo), before); paid.Cmp(big.NewInt(50_000)) != 0 {
		t.Fatalf("payTo received %s for one paid call, want 50000", paid)
	}

	status = http.StatusServiceUnavailable
	settles := f.settles.Load()
	failed := call(signedHeader(t, w, 2, "/regime", nil), false)
	if !failed.IsError || failed.Meta[payment.MetaPaymentResponse] != nil || !strings.Contains(text(failed), "unavailable") || f.settles.Load() != settles {
		t.Fatalf("a failed tool: %+v %s, %d settles", failed, text(failed), f.settles.Load()-settles)
	}

	status = http.StatusOK
	calls := w.calls.Load()
	rest := call(withResource(t, signedHeader(t, w, 2, "/regime", nil), "http://tollgate.test/regime"), false)
	if !rest.IsError || rest.StructuredContent == nil || !strings.Contains(text(rest), payment.ReasonResourceMismatch) || w.calls.Load() != calls {
		t.Fatalf("a REST payment: %s", text(rest))
	}
	if paid := new(big.Int).Sub(w.balance(t, w.payTo), before); paid.Cmp(big.NewInt(50_000)) != 0 {
		t.Fatalf("payTo received %s in all, want 50000", paid)
	}
}
