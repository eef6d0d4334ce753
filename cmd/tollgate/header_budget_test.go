package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/service/catalog"
)

// TestPaymentHeaderBudget: for every paid route, the payment an official
// v2 client sends back stays within the gate's 8 KiB payment header (and
// a proxy's 8 KiB header line): the client echoes every extension of the
// 402 (bazaar, payment-identifier with a 128-character id,
// sign-in-with-x), the accepted terms and the resource beside its
// payload, here batch-settlement's largest, a deposit with its voucher.
func TestPaymentHeaderBudget(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	hex := func(n int) string { return "0x" + strings.Repeat("ab", n) }
	deposit := map[string]any{"type": "deposit",
		"channelConfig": map[string]any{"payer": hex(20), "payerAuthorizer": hex(20), "receiver": hex(20), "receiverAuthorizer": hex(20),
			"token": hex(20), "withdrawDelay": 86400, "salt": hex(32)},
		"voucher": map[string]any{"channelId": hex(32), "maxClaimableAmount": "1000000000000", "signature": hex(65)},
		"deposit": map[string]any{"amount": "1000000000000", "authorization": map[string]any{"from": hex(20), "to": hex(20),
			"value": "1000000000000", "validAfter": "1900000000", "validBefore": "1900003600", "nonce": hex(32), "signature": hex(65)}}}
	for _, op := range cat.Paid() {
		path, query := op.Path(), url.Values{}
		for _, p := range op.Params {
			switch ex := p.Rule.GetExample(); {
			case p.In == catalog.InPath:
				path = strings.Replace(path, "{"+p.Name+"}", ex, 1)
			case ex != "":
				query.Set(p.Name, ex)
			}
		}
		if len(query) > 0 {
			path += "?" + query.Encode()
		}
		resp, err := http.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get("PAYMENT-REQUIRED"))
		var required struct {
			Resource   json.RawMessage
			Accepts    []json.RawMessage
			Extensions map[string]json.RawMessage
		}
		if err := json.Unmarshal(raw, &required); err != nil || resp.StatusCode != http.StatusPaymentRequired || len(required.Accepts) == 0 {
			t.Fatalf("%s: %d %s (%v)", path, resp.StatusCode, raw, err)
		}
		ext := map[string]any{}
		for k, v := range required.Extensions {
			ext[k] = v
		}
		ext["payment-identifier"] = map[string]any{"info": map[string]any{"required": false, "id": strings.Repeat("p", 128)}}
		for _, accepted := range required.Accepts {
			b, _ := json.Marshal(map[string]any{"x402Version": 2, "resource": required.Resource, "accepted": accepted, "payload": deposit, "extensions": ext})
			if n := base64.StdEncoding.EncodedLen(len(b)); n > 8<<10 {
				t.Errorf("%s: an official client's payment header would be %d bytes; the gate takes 8192", path, n)
			}
		}
	}
}
