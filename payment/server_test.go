package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// echoScheme is a SchemeFacilitator that answers what it was given (or
// fails).
type echoScheme struct{ fail bool }

func (e echoScheme) answer(op string, payload, requirements json.RawMessage) (any, error) {
	if e.fail {
		return nil, errors.New("node down")
	}
	return map[string]any{"op": op, "payloadBytes": len(payload), "requirements": requirements}, nil
}

func (e echoScheme) Verify(_ context.Context, payload, requirements json.RawMessage) (any, error) {
	return e.answer("verify", payload, requirements)
}

func (e echoScheme) Settle(_ context.Context, payload, requirements json.RawMessage) (any, error) {
	return e.answer("settle", payload, requirements)
}

func (echoScheme) Extra() map[string]any { return map[string]any{"receiverAuthorizer": "0x01"} }

// TestServerDispatchesSchemes: /verify and /settle go to the scheme that
// paymentRequirements.scheme names (bodies beyond exact's 64 KiB too),
// exact's requests stay exact's, and /supported lists the scheme.
func TestServerDispatchesSchemes(t *testing.T) {
	t.Parallel()
	key, _ := crypto.GenerateKey()
	local, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(8453), Key: key,
		Assets: []payment.Asset{{Address: common.Address{4}, Name: "USD Coin", Version: "2"}}, ReceiptTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(fail bool) *httptest.Server {
		api := payment.NewServer(payment.ServerConfig{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453),
			PayTo: []common.Address{{1}}, Schemes: map[string]payment.SchemeFacilitator{"batch-settlement": echoScheme{fail: fail}}}, local)
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)
		return srv
	}
	srv, down := serve(false), serve(true)
	large := `"` + strings.Repeat("a", 100<<10) + `"`
	for _, tc := range []struct {
		name, op, body string
		down           bool
		status         int
		want           string
	}{
		{"scheme verify", "verify", `{"x402Version":2,"paymentPayload":{"payload":{}},"paymentRequirements":{"scheme":"batch-settlement"}}`, false, 200, `"op":"verify"`},
		{"scheme settle", "settle", `{"x402Version":2,"paymentPayload":{"payload":{}},"paymentRequirements":{"scheme":"batch-settlement"}}`, false, 200, `"op":"settle"`},
		{"scheme large body", "settle", `{"x402Version":2,"paymentPayload":{"payload":` + large + `},"paymentRequirements":{"scheme":"batch-settlement"}}`, false, 200, `"payloadBytes":102414`},
		{"scheme without payload", "settle", `{"x402Version":2,"paymentRequirements":{"scheme":"batch-settlement"}}`, false, 400, payment.ReasonInvalidPayload},
		{"scheme facilitator down", "verify", `{"x402Version":2,"paymentPayload":{},"paymentRequirements":{"scheme":"batch-settlement"}}`, true, 502, "could not be asked"},
		{"exact stays exact", "verify", `{"x402Version":2,"paymentPayload":{"x402Version":2},"paymentRequirements":{"scheme":"exact"}}`, false, 400, `"isValid":false`},
		{"unknown scheme is exact's refusal", "settle", `{"x402Version":2,"paymentPayload":{"x402Version":2},"paymentRequirements":{"scheme":"upto"}}`, false, 400, `"success":false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := srv.URL
			if tc.down {
				base = down.URL
			}
			resp, err := http.Post(base+"/"+tc.op, "application/json", bytes.NewReader([]byte(tc.body)))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, b, tc.status, tc.want)
			}
		})
	}

	resp, err := http.Get(srv.URL + "/supported")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `{"extra":{"receiverAuthorizer":"0x01"},"network":"eip155:8453","scheme":"batch-settlement","x402Version":2}`) ||
		!strings.Contains(string(b), `{"network":"eip155:8453","scheme":"exact","x402Version":2}`) {
		t.Errorf("/supported %s", b)
	}
}
