package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// refusingLedger is enough for challenges, which never reach the ledger.
type refusingLedger struct{ exact.Ledger }

// challengeOnly is exact's server side for gates that are only asked
// for challenges: its facilitator and ledger are never reached.
func challengeOnly(t *testing.T) payment.Scheme {
	t.Helper()
	s, err := exact.NewServer(exact.ServerConfig{SettleTimeout: time.Second}, exact.NewRemote(nil), refusingLedger{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestChallengeMatchesOpenAPI puts the real gate, with the catalog's routes
// and prices, in front of the gateway: every paid path answers an unpaid
// call with a 402 whose body and PAYMENT-REQUIRED header match the
// document, priced as declared; bad input is a 400 and no challenge; free
// paths pass.
func TestChallengeMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	srv := paidServer(t, s)
	want := map[string]string{
		"/candles": "20000", "/rugcheck/" + usdc: "100000", "/whales": "150000", "/signal": "200000",
		"/signal-pack": "500000", "/token/" + usdc: "50000", "/regime": "50000", "/lanes": "50000", "/forecast?pred_len=12": "250000",
	}
	for path, amount := range want {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r := reply{status: resp.StatusCode, header: resp.Header, req: req, resp: resp}
		r.body = readAll(t, resp)
		if r.status != 402 {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
		doc.validateResponse(t, r)
		doc.validateSchema(t, "PaymentRequired", r.body)
		var v1 payment.RequiredV1
		_ = json.Unmarshal(r.body, &v1)
		raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get("PAYMENT-REQUIRED"))
		var v2 payment.RequiredV2
		_ = json.Unmarshal(raw, &v2)
		if v1.Accepts[0].MaxAmountRequired != amount || v2.Accepts[0].Amount != amount || v1.Accepts[0].Resource != publicURL+path || v2.Resource.URL != publicURL+path {
			t.Errorf("%s: v1 %+v v2 %+v", path, v1.Accepts[0], v2)
		}
	}
	for path, status := range map[string]int{"/candles?product=DOGE-USD": 400, "/rugcheck/0x12": 400, "/whales?x=1": 400, "/demo/regime": 200, "/health": 200, "/nope": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status || resp.Header.Get("PAYMENT-REQUIRED") != "" {
			t.Errorf("%s: %d (challenge %q), want %d and no challenge", path, resp.StatusCode, resp.Header.Get("PAYMENT-REQUIRED"), status)
		}
	}
}
