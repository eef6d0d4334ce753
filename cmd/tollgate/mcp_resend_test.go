package main

import (
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// TestMCPResend: an exact payment spent on a tool call and sent again gets
// the recorded answer, with the settlement it was charged by, when the
// resend is the same call as the service reads it, however its arguments
// are spelled (an address in another case, an integer clamped to the same
// bound, a default written out); a resend that is another call is refused
// as already used. Either way payTo receives the price once. On a devnet
// server, through the go-sdk client.
func TestMCPResend(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	session := mcpSession(t, s.base+"/mcp")
	key, _ := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
	p := &payment.Payer{Version: 2, Schemes: []payment.SchemeClient{exact.Payer{Key: key}}}
	o, err := p.ToolOffer(ctx, session, "regime", nil, exact.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	w := &escrowWatch{t: t, ctx: ctx, c: client, token: common.HexToAddress(o.Entry.Asset)}
	payTo := common.HexToAddress(o.Entry.PayTo)
	// The devnet's token is a contract the rug check and the token tool read.
	token := common.HexToAddress(o.Entry.Asset).Hex()
	lower, upper := strings.ToLower(token), "0x"+strings.ToUpper(token[2:])
	if lower == token || upper == token {
		t.Fatalf("the token's address %s has no letters in one case", token)
	}

	for _, tt := range []struct {
		name         string
		tool         string
		paid, resent map[string]any
		same         bool
	}{
		{"rugcheck: address checksummed, then in lowercase", "rugcheck", map[string]any{"addr": token}, map[string]any{"addr": lower}, true},
		{"rugcheck: address in lowercase, then in capitals", "rugcheck", map[string]any{"addr": lower}, map[string]any{"addr": upper}, true},
		{"token: address in capitals, then checksummed", "token", map[string]any{"addr": upper}, map[string]any{"addr": token}, true},
		{"forecast: clamped to the bound", "forecast", map[string]any{"pred_len": 48}, map[string]any{"pred_len": 100}, true},
		{"forecast: defaults left out, then written", "forecast", map[string]any{}, map[string]any{"product": "BTC-USD", "pred_len": 24}, true},
		{"rugcheck: another address", "rugcheck", map[string]any{"addr": token}, map[string]any{"addr": "0x0000000000000000000000000000000000000001"}, false},
		{"forecast: another length", "forecast", map[string]any{"pred_len": 24}, map[string]any{"pred_len": 12}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := p.ToolOffer(ctx, session, tt.tool, tt.paid, exact.Scheme)
			if err != nil {
				t.Fatal(err)
			}
			signed, err := exact.Payer{Key: key}.Pay(o)
			if err != nil {
				t.Fatal(err)
			}
			call := func(args map[string]any) *mcp.CallToolResult {
				t.Helper()
				r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: args,
					Meta: mcp.Meta{payment.MetaPayment: decoded(t, signed.Value)}})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			settlement := func(r *mcp.CallToolResult) string {
				var s payment.SettleResponse
				b, _ := json.Marshal(r.Meta[payment.MetaPaymentResponse])
				_ = json.Unmarshal(b, &s)
				return s.Transaction
			}
			before := w.balance(payTo)
			first := call(tt.paid)
			if first.IsError || settlement(first) == "" {
				t.Fatalf("paid %v: %s", tt.paid, text(first))
			}
			again := call(tt.resent)
			switch {
			case tt.same && (again.IsError || settlement(again) != settlement(first) || text(again) != text(first)):
				t.Errorf("resent %v: %.300s (settlement %s), want the recorded answer %.300s (settlement %s)", tt.resent, text(again), settlement(again), text(first), settlement(first))
			case !tt.same && (!again.IsError || again.StructuredContent == nil || !strings.Contains(text(again), exact.ReasonAuthorizationReplayed)):
				t.Errorf("resent %v: %.300s, want a requirement refusing the spent payment", tt.resent, text(again))
			}
			price, _ := new(big.Int).SetString(o.Entry.Amount, 10)
			if got := new(big.Int).Sub(w.balance(payTo), before); got.Cmp(price) != 0 {
				t.Errorf("payTo received %s for one payment sent twice, want %s", got, price)
			}
		})
	}
}
