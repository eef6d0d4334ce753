package exact_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// cdpChecker is a facilitator front that accepts only requests carrying a
// valid CDP JWT for exactly that method, host and path.
func cdpChecker(t *testing.T, keyID string, pub any, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkJWT(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), keyID, pub, r.Method+" "+r.Host+r.URL.Path); err != nil {
			t.Logf("JWT refused: %v", err)
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func checkJWT(tok, keyID string, pub any, uri string) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	enc := base64.RawURLEncoding
	var header struct{ Alg, Kid, Typ, Nonce string }
	var claims struct {
		Sub, Iss string
		Nbf, Exp int64
		URIs     []string
	}
	hb, _ := enc.DecodeString(parts[0])
	cb, _ := enc.DecodeString(parts[1])
	sig, _ := enc.DecodeString(parts[2])
	if json.Unmarshal(hb, &header) != nil || json.Unmarshal(cb, &claims) != nil {
		return errors.New("bad JSON")
	}
	signing := []byte(parts[0] + "." + parts[1])
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		d := sha256.Sum256(signing)
		if header.Alg != "ES256" || len(sig) != 64 || !ecdsa.Verify(k, d[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
			return errors.New("bad ES256 signature")
		}
	case ed25519.PublicKey:
		if header.Alg != "EdDSA" || !ed25519.Verify(k, signing, sig) {
			return errors.New("bad EdDSA signature")
		}
	}
	now := time.Now().Unix()
	switch {
	case header.Kid != keyID || claims.Sub != keyID || claims.Iss != "cdp" || len(header.Nonce) != 32:
		return errors.New("bad kid/sub/iss/nonce")
	case claims.Nbf > now+5 || claims.Exp < now || claims.Exp-claims.Nbf > 120:
		return errors.New("bad times")
	case len(claims.URIs) != 1 || claims.URIs[0] != uri:
		return errors.New("uri " + strings.Join(claims.URIs, ",") + " is not " + uri)
	}
	return nil
}

// TestRemoteFacilitatorWithCDPAuth: the gate pays through the client, over
// the standard API of the self-hosted facilitator's server, with CDP JWTs
// (EC and Ed25519 keys) checked on every request.
func TestRemoteFacilitatorWithCDPAuth(t *testing.T) {
	t.Parallel()
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(ecKey)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	for name, k := range map[string]struct {
		secret string
		pub    any
	}{"ES256": {ecPEM, &ecKey.PublicKey}, "EdDSA": {base64.StdEncoding.EncodeToString(edPriv), edPub}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var srv *httptest.Server
			w := newWorld(t, func(l *exact.Local) exact.Facilitator {
				adapter := exact.NewAdapter(exact.AdapterConfig{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(devnet.ChainID),
					PayTo: []common.Address{common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")}}, l)
				api := payment.NewServer(payment.ServerConfig{Network: "eip155:8453", NetworkV1: "base",
					Schemes: map[string]payment.SchemeFacilitator{exact.Scheme: adapter}}, common.Address{9})
				srv = httptest.NewServer(cdpChecker(t, "organizations/o/apiKeys/k", k.pub, api.Handler()))
				t.Cleanup(srv.Close)
				c, err := payment.NewClient(payment.ClientConfig{URL: srv.URL, Timeout: 10 * time.Second,
					CDPKeyID: "organizations/o/apiKeys/k", CDPKeySecret: k.secret}, srv.Client())
				if err != nil {
					t.Fatal(err)
				}
				return exact.NewRemote(c)
			})
			for _, version := range []int{2, 1} {
				res, err := w.payer(version).Get(context.Background(), w.srv.URL+"/regime")
				if err != nil || res.Status != 200 || res.Settlement == nil || !res.Settlement.Success {
					t.Fatalf("v%d: %+v %v", version, res, err)
				}
			}
			// A bad payment comes back as a reason, not as a facilitator failure.
			status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", func(a *payment.Authorization, _ *payment.RequirementsV2) {
				a.Value.SetInt64(1)
			}))
			if status != 402 || !strings.HasPrefix(reasonOf(t, body), exact.ReasonValueMismatch) {
				t.Errorf("remote refusal: %d %s", status, body)
			}
			resp, err := srv.Client().Get(srv.URL + "/supported")
			if err != nil || resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("/supported without a token: %v %v", resp.StatusCode, err)
			}
		})
	}
}

// TestClientStrictness: answers without a verdict, or failing requests,
// are facilitator errors (502 at the gate), never a silent yes or no.
func TestClientStrictness(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		status int
		body   string
	}{
		{"empty object", 200, `{}`},
		{"not JSON", 200, `<html>`},
		{"server error", 500, `{"error":"boom"}`},
		{"success without transaction", 200, `{"isValid":true,"success":true,"transaction":""}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.name == "success without transaction" && r.URL.Path == "/verify" {
					w.Write([]byte(`{"isValid":true,"payer":"0x0"}`))
					return
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c, err := payment.NewClient(payment.ClientConfig{URL: srv.URL, Timeout: time.Second}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			w := newWorld(t, func(*exact.Local) exact.Facilitator { return exact.NewRemote(c) })
			status, _, body := get(t, w, "/regime", payment.HeaderPaymentV2, signedHeader(t, w, 2, "/regime", nil))
			if status != 502 || strings.Contains(string(body), "RANGE") {
				t.Errorf("status %d body %s", status, body)
			}
		})
	}
}
