package exact_test

import (
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
)

// siwxChallenge reads the sign-in-with-x challenge of path's 402.
func siwxChallenge(t *testing.T, w *world, path string) map[string]any {
	t.Helper()
	status, h, _ := get(t, w, path, "", "")
	raw, _ := base64.StdEncoding.DecodeString(h.Get(payment.HeaderPaymentRequired))
	var required struct {
		Extensions map[string]struct {
			Info            map[string]any
			SupportedChains []map[string]string
		}
	}
	if err := json.Unmarshal(raw, &required); err != nil || status != http.StatusPaymentRequired {
		t.Fatalf("402 of %s: %d %s (%v)", path, status, raw, err)
	}
	ext, ok := required.Extensions[payment.ExtensionSIWx]
	if !ok || len(ext.SupportedChains) != 1 || ext.SupportedChains[0]["chainId"] != "eip155:8453" || ext.SupportedChains[0]["type"] != "eip191" {
		t.Fatalf("the 402 of %s offers no eip191 sign-in on Base: %s", path, raw)
	}
	info := ext.Info
	info["chainId"], info["type"] = "eip155:8453", "eip191"
	return info
}

// siwxHeader signs info as key's wallet, as @x402/extensions'
// createSIWxPayload does: the EIP-4361 message, EIP-191.
func siwxHeader(t *testing.T, info map[string]any, key *ecdsa.PrivateKey) string {
	t.Helper()
	address := crypto.PubkeyToAddress(key.PublicKey)
	var m strings.Builder
	m.WriteString(info["domain"].(string) + " wants you to sign in with your Ethereum account:\n" + address.Hex() + "\n\n")
	if st, ok := info["statement"].(string); ok {
		m.WriteString(st + "\n\n")
	} else {
		m.WriteString("\n")
	}
	m.WriteString("URI: " + info["uri"].(string) + "\nVersion: 1\nChain ID: 8453\nNonce: " + info["nonce"].(string) + "\nIssued At: " + info["issuedAt"].(string))
	if exp, ok := info["expirationTime"].(string); ok {
		m.WriteString("\nExpiration Time: " + exp)
	}
	if rs, ok := info["resources"].([]any); ok {
		m.WriteString("\nResources:")
		for _, r := range rs {
			m.WriteString("\n- " + r.(string))
		}
	}
	sig, err := crypto.Sign(accounts.TextHash([]byte(m.String())), key)
	if err != nil {
		t.Fatal(err)
	}
	sig[64] += 27
	payload := map[string]any{"address": address.Hex(), "signature": hexutil.Encode(sig)}
	for k, v := range info {
		payload[k] = v
	}
	b, _ := json.Marshal(payload)
	return base64.StdEncoding.EncodeToString(b)
}

// edited is info with k set to v (deleted when v is nil).
func edited(info map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range info {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// TestSignInWithX: a wallet that paid for a request reads its answer
// again by signing the 402's challenge, once per challenge, uncharged,
// with the original settlement. Every other sign-in gets the 402 with
// its reason: another request, a wallet that bought nothing, a reused
// nonce, another domain or origin, an old or expired message, a
// signature of another key.
func TestSignInWithX(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{signIn: true})
	payer := w.chain.Account(devnet.PayerAccount).Key
	status, h, body := get(t, w, "/regime", payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil))
	if status != 200 {
		t.Fatalf("the purchase: %d %s", status, body)
	}
	settlement := h.Get(payment.HeaderPaymentResponseV2)
	before := w.balance(t, w.payTo)

	first := siwxChallenge(t, w, "/regime")
	if again := siwxChallenge(t, w, "/regime"); again["nonce"] == first["nonce"] || len(first["nonce"].(string)) != 32 ||
		first["domain"] != "tollgate.test" || first["uri"] != "http://tollgate.test/regime" {
		t.Fatalf("challenges %v and %v: want the public URL's domain and the resource, a new 32-hex nonce each", first, again)
	}
	signedIn := siwxHeader(t, first, payer)
	stranger, _ := crypto.GenerateKey()
	old := time.Now().Add(-6 * time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
	for _, tc := range []struct {
		name, path, header string
		reason             string // "": the recorded answer
	}{
		{name: "the buyer", path: "/regime", header: signedIn},
		{name: "the same header again", path: "/regime", header: signedIn, reason: payment.ReasonSIWxNonce},
		{name: "a wallet that bought nothing", path: "/regime", header: siwxHeader(t, siwxChallenge(t, w, "/regime"), stranger), reason: payment.ReasonSIWxNoPurchase},
		{name: "a request not bought", path: "/lanes", header: siwxHeader(t, siwxChallenge(t, w, "/lanes"), payer), reason: payment.ReasonSIWxNoPurchase},
		{name: "another request's challenge", path: "/lanes", header: siwxHeader(t, siwxChallenge(t, w, "/regime"), payer), reason: payment.ReasonSIWxURI},
		{name: "another domain", path: "/regime", header: siwxHeader(t, edited(siwxChallenge(t, w, "/regime"), "domain", "evil.test"), payer),
			reason: payment.ReasonSIWxDomain},
		{name: "another origin", path: "/regime", header: siwxHeader(t, edited(siwxChallenge(t, w, "/regime"), "uri", "https://tollgate.test/regime"), payer),
			reason: payment.ReasonSIWxURI},
		{name: "issued too long ago", path: "/regime", header: siwxHeader(t, edited(edited(siwxChallenge(t, w, "/regime"), "issuedAt", old), "expirationTime", nil), payer),
			reason: payment.ReasonSIWxIssuedAt},
		{name: "expired", path: "/regime", header: siwxHeader(t, edited(siwxChallenge(t, w, "/regime"), "expirationTime", old), payer), reason: payment.ReasonSIWxExpired},
		{name: "another chain", path: "/regime", header: siwxHeader(t, edited(siwxChallenge(t, w, "/regime"), "chainId", "eip155:1"), payer), reason: payment.ReasonSIWxChain},
		{name: "signed by another key", path: "/regime", header: forged(t, siwxChallenge(t, w, "/regime"), payer, stranger), reason: payment.ReasonSIWxSignature},
		{name: "not the extension's JSON", path: "/regime", header: "bm90IGpzb24", reason: payment.ReasonSIWxMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := get(t, w, tc.path, payment.HeaderSIWx, tc.header)
			if tc.reason == "" {
				if status != 200 || string(body) != `{"regime":"RANGE"}` || h.Get(payment.HeaderPaymentResponseV2) != settlement {
					t.Errorf("%d %s with PAYMENT-RESPONSE %s; want the recorded answer and its settlement %s", status, body, h.Get(payment.HeaderPaymentResponseV2), settlement)
				}
				return
			}
			raw, _ := base64.StdEncoding.DecodeString(h.Get(payment.HeaderPaymentRequired))
			var required struct{ Error string }
			json.Unmarshal(raw, &required)
			if status != http.StatusPaymentRequired || required.Error != tc.reason || strings.Contains(string(body), `"regime":`) {
				t.Errorf("%d, error %q: want a 402 with %s\n%s", status, required.Error, tc.reason, raw)
			}
		})
	}
	if w.calls.Load() != 1 || w.balance(t, w.payTo).Cmp(before) != 0 {
		t.Errorf("the handler ran %d times and payTo got %s more; want once and nothing", w.calls.Load(), new(big.Int).Sub(w.balance(t, w.payTo), before))
	}
}

// forged is info signed by key but naming as's address.
func forged(t *testing.T, info map[string]any, as, key *ecdsa.PrivateKey) string {
	t.Helper()
	raw, _ := base64.StdEncoding.DecodeString(siwxHeader(t, info, key))
	var m map[string]any
	json.Unmarshal(raw, &m)
	m["address"] = crypto.PubkeyToAddress(as.PublicKey).Hex()
	b, _ := json.Marshal(m)
	return base64.StdEncoding.EncodeToString(b)
}

// wallet1271 is the creation code of a contract wallet whose
// isValidSignature (EIP-1271) answers magic to every call.
func wallet1271(magic string) []byte {
	runtime := "7f" + magic + strings.Repeat("00", 28) + "600052" + "60206000f3"
	return hexutil.MustDecode("0x6029600c60003960296000f3" + runtime)
}

// TestSignInWithXContractWallet: a contract wallet signs in when it
// accepts the signature on chain (EIP-1271), and not when it refuses it.
func TestSignInWithXContractWallet(t *testing.T) {
	t.Parallel()
	w := newWorldWith(t, worldOptions{signIn: true})
	ctx := t.Context()
	from := w.chain.Account(devnet.PayerAccount)
	key, _ := crypto.GenerateKey() // the wallets' "owner": any key, the contracts decide
	for _, tc := range []struct {
		name, magic string
		want        int
	}{
		{"accepts", "1626ba7e", 200},
		{"refuses", "ffffffff", 402},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wallet, err := w.chain.DeployCode(ctx, from, wallet1271(tc.magic))
			if err != nil {
				t.Fatal(err)
			}
			// The wallet's purchase, as the books keep a payment
			// identifier's answer.
			rec := payment.IDRecord{ID: "pay_wallet_" + tc.name + "_0123456789", Operation: "regime", Resource: "/regime", PayloadHash: "00",
				Owner: "o", Created: time.Now()}
			if _, _, err := w.ledger.ReserveID(ctx, rec, time.Now().Add(-time.Minute), time.Now().Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			rec.Payer, rec.Done, rec.ContentType, rec.Body, rec.Settlement, rec.Finished = wallet.Hex(), true, "application/json",
				[]byte(`{"regime":"TREND-UP"}`), []byte(`{"success":true,"transaction":"","network":"eip155:8453","payer":"`+wallet.Hex()+`"}`), time.Now()
			if err := w.ledger.FinishID(ctx, rec); err != nil {
				t.Fatal(err)
			}
			raw, _ := base64.StdEncoding.DecodeString(siwxHeader(t, siwxChallenge(t, w, "/regime"), key))
			var m map[string]any
			json.Unmarshal(raw, &m)
			m["address"] = wallet.Hex()
			b, _ := json.Marshal(m)
			status, _, body := get(t, w, "/regime", payment.HeaderSIWx, base64.StdEncoding.EncodeToString(b))
			if status != tc.want || tc.want == 200 && string(body) != `{"regime":"TREND-UP"}` {
				t.Errorf("the wallet that %s: %d %s; want %d", tc.name, status, body, tc.want)
			}
		})
	}
}
