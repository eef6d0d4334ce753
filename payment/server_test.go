package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
)

// echoScheme is a SchemeFacilitator that answers what it was given (or
// fails, or cannot read a payload that is not an object); v1 says it
// takes x402 v1 too.
type echoScheme struct{ fail, v1 bool }

func (e echoScheme) answer(op string, payload, requirements json.RawMessage) (any, error) {
	if e.fail {
		return nil, errors.New("node down")
	}
	if payload[0] != '{' {
		return nil, &payment.RequestError{Err: errors.New("payload is not an object")}
	}
	return map[string]any{"op": op, "payloadBytes": len(payload), "requirements": requirements}, nil
}

func (e echoScheme) Verify(_ context.Context, payload, requirements json.RawMessage) (any, error) {
	return e.answer("verify", payload, requirements)
}

func (e echoScheme) Settle(_ context.Context, payload, requirements json.RawMessage) (any, error) {
	return e.answer("settle", payload, requirements)
}

func (e echoScheme) Extra() map[string]any {
	if e.v1 {
		return nil
	}
	return map[string]any{"receiverAuthorizer": "0x01"}
}

func (e echoScheme) Versions() []int {
	if e.v1 {
		return []int{2, 1}
	}
	return []int{2}
}

// TestServerDispatchesSchemes: /verify and /settle go to the scheme that
// paymentRequirements.scheme names (bodies of 100 KiB too); a scheme not
// spoken, or a request the scheme cannot read, is a 400 in the shape of
// the answer; /supported lists each scheme once per version it takes.
func TestServerDispatchesSchemes(t *testing.T) {
	t.Parallel()
	serve := func(fail bool) *httptest.Server {
		api := payment.NewServer(payment.ServerConfig{Network: "eip155:8453", NetworkV1: "base",
			Schemes: map[string]payment.SchemeFacilitator{"batch-settlement": echoScheme{fail: fail}, "exact": echoScheme{fail: fail, v1: true}}}, common.Address{9})
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
		{"exact is exact's", "verify", `{"x402Version":1,"paymentPayload":{"x402Version":1},"paymentRequirements":{"scheme":"exact"}}`, false, 200, `"payloadBytes":17`},
		{"unreadable for the scheme", "verify", `{"x402Version":2,"paymentPayload":"x","paymentRequirements":{"scheme":"exact"}}`, false, 400, `"invalidMessage":"payload is not an object"`},
		{"unknown scheme", "settle", `{"x402Version":2,"paymentPayload":{"x402Version":2},"paymentRequirements":{"scheme":"upto"}}`, false, 400, `"errorMessage":"scheme \"upto\" is not supported"`},
		{"not a request", "verify", `[]`, false, 400, `"isValid":false`},
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
		!strings.Contains(string(b), `{"network":"eip155:8453","scheme":"exact","x402Version":2}`) ||
		!strings.Contains(string(b), `{"network":"base","scheme":"exact","x402Version":1}`) ||
		strings.Contains(string(b), `"scheme":"batch-settlement","x402Version":1`) || !strings.Contains(string(b), `"eip155:*":["0x0900000000000000000000000000000000000000"]`) {
		t.Errorf("/supported %s", b)
	}
}
