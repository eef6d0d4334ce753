package payment

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// cdpSigner makes the per-request JWTs of the Coinbase Developer Platform
// API: header {alg, kid, typ, nonce}, claims {sub: key id, iss: "cdp",
// nbf, exp: +120 s, uris: ["METHOD host/path"]}, signed ES256 (an EC P-256
// PEM secret) or EdDSA (a base64 Ed25519 secret of 64 bytes).
type cdpSigner struct {
	keyID string
	alg   string
	key   crypto.Signer
}

func newCDPSigner(keyID, secret string) (*cdpSigner, error) {
	secret = strings.TrimSpace(strings.ReplaceAll(secret, `\n`, "\n"))
	if block, _ := pem.Decode([]byte(secret)); block != nil {
		var key any
		var err error
		if block.Type == "EC PRIVATE KEY" {
			key, err = x509.ParseECPrivateKey(block.Bytes)
		} else {
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("cdp key: %w", err)
		}
		ec, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return nil, errors.New("cdp key: PEM key is not ECDSA")
		}
		return &cdpSigner{keyID: keyID, alg: "ES256", key: ec}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(secret)
	if err != nil || len(raw) != ed25519.PrivateKeySize {
		return nil, errors.New("cdp key: neither an EC PEM nor a base64 Ed25519 key")
	}
	return &cdpSigner{keyID: keyID, alg: "EdDSA", key: ed25519.PrivateKey(raw)}, nil
}

// token returns a JWT for one request.
func (s *cdpSigner) token(method, rawURL string, now time.Time) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	header, _ := json.Marshal(map[string]string{"alg": s.alg, "kid": s.keyID, "typ": "JWT", "nonce": hex.EncodeToString(nonce)})
	claims, _ := json.Marshal(map[string]any{
		"sub": s.keyID, "iss": "cdp", "nbf": now.Unix(), "exp": now.Add(120 * time.Second).Unix(),
		"uris": []string{method + " " + u.Host + u.Path},
	})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	var sig []byte
	switch k := s.key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(signing))
	case *ecdsa.PrivateKey:
		digest := sha256.Sum256([]byte(signing))
		r, ss, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			return "", err
		}
		sig = make([]byte, 64) // JWS ES256: r || s, 32 bytes each
		r.FillBytes(sig[:32])
		ss.FillBytes(sig[32:])
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
