package payment

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	json "github.com/segmentio/encoding/json"
)

// This file is the sign-in-with-x extension (specs/extensions/
// sign-in-with-x.md, CAIP-122 with EIP-4361 messages): a wallet that
// bought a REST resource reads it again, for PurchaseFor, by signing a
// challenge instead of paying. Every REST PaymentRequired offers it: the
// domain and URI from the public URL, a fresh nonce, an issue time and an
// expiry SIWxFor later, Base with EIP-191 signatures. A GET that carries
// no payment and a SIGN-IN-WITH-X header is answered with the wallet's
// recorded answer for that same request when:
//
//   - the header is the extension's JSON: the domain is the public URL's
//     host, the URI is the requested resource on the public origin, the
//     chain is the gate's network with type eip191, the message was
//     issued at most SIWxFor ago and not in the future, and is not
//     expired or not yet valid;
//   - the EIP-4361 message rebuilt from those fields is signed by the
//     address (EIP-191), or the address is a contract that accepts the
//     signature (EIP-1271, asked on chain);
//   - the nonce was never used before, on any replica (NonceBook): a
//     signed header is good once, whatever follows;
//   - the address paid for that same request within PurchaseFor
//     (PurchaseBook: exact payments, voucher calls' last answers,
//     payment identifiers' answers).
//
// Every other case is the route's 402, with a new challenge and the
// reason in its error; the reasons speak of the header alone and of the
// signer's own purchases, never of another wallet's.

// The extension's names and times.
const (
	ExtensionSIWx = "sign-in-with-x"
	HeaderSIWx    = "SIGN-IN-WITH-X"
	// SIWxFor is how long a challenge is good for: the expiry the gate
	// writes, and the oldest issue time it accepts.
	SIWxFor = 5 * time.Minute
	// PurchaseFor is how long after a purchase its wallet may read it
	// again: the recorded answers' window.
	PurchaseFor = IDAnswerFor
)

// The reasons a sign-in is refused with (the 402's error).
const (
	ReasonSIWxMalformed  = "invalid_siwx_payload"
	ReasonSIWxDomain     = "invalid_siwx_domain_mismatch"
	ReasonSIWxURI        = "invalid_siwx_uri_mismatch"
	ReasonSIWxChain      = "invalid_siwx_chain"
	ReasonSIWxIssuedAt   = "invalid_siwx_issued_at"
	ReasonSIWxExpired    = "invalid_siwx_expired"
	ReasonSIWxNotBefore  = "invalid_siwx_not_yet_valid"
	ReasonSIWxSignature  = "invalid_siwx_signature"
	ReasonSIWxNonce      = "invalid_siwx_nonce"
	ReasonSIWxNoPurchase = "siwx_no_purchase"
)

// SIWxReasons are the sign-in's refusal codes, for the metrics.
func SIWxReasons() []string {
	return []string{ReasonSIWxMalformed, ReasonSIWxDomain, ReasonSIWxURI, ReasonSIWxChain, ReasonSIWxIssuedAt, ReasonSIWxExpired,
		ReasonSIWxNotBefore, ReasonSIWxSignature, ReasonSIWxNonce, ReasonSIWxNoPurchase}
}

// siwxStatement is the challenge's statement: what the wallet signs for.
const siwxStatement = "Sign in to read again what this wallet bought here in the last 10 minutes."

// NonceBook spends sign-in nonces, shared by the replicas of one store.
type NonceBook interface {
	// UseNonce records nonce as used at at: fresh false when it was used
	// before.
	UseNonce(ctx context.Context, nonce string, at time.Time) (fresh bool, err error)
}

// Purchase is one answer a wallet paid for, as the books keep it.
type Purchase struct {
	Operation, Resource string // Resource as Exchange.Resource
	ContentType         string
	Body                []byte
	Settlement          SettleResponse // its PAYMENT-RESPONSE
	At                  time.Time
}

// PurchaseBook finds what a wallet bought.
type PurchaseBook interface {
	// Purchases are payer's answered calls of operation since since.
	Purchases(ctx context.Context, payer common.Address, operation string, since time.Time) ([]Purchase, error)
}

// SignIn is what the sign-in-with-x extension needs; the gate offers
// the extension when GateConfig.SignIn is set.
type SignIn struct {
	Nonces    NonceBook
	Purchases PurchaseBook
	// Chain asks contract wallets (EIP-1271); nil: only EOAs sign in.
	Chain WalletChain
}

// WalletChain reads a contract wallet: its code, and its answer to a
// call (ethclient.Client is one).
type WalletChain interface {
	CodeAt(ctx context.Context, account common.Address, block *big.Int) ([]byte, error)
	CallContract(ctx context.Context, call ethereum.CallMsg, block *big.Int) ([]byte, error)
}

// siwxPayload is the SIGN-IN-WITH-X header's JSON. The optional fields
// keep absent apart from empty: the EIP-4361 message differs.
type siwxPayload struct {
	Domain          string    `json:"domain"`
	Address         string    `json:"address"`
	Statement       *string   `json:"statement"`
	URI             string    `json:"uri"`
	Version         string    `json:"version"`
	ChainID         string    `json:"chainId"`
	Type            string    `json:"type"`
	Nonce           string    `json:"nonce"`
	IssuedAt        string    `json:"issuedAt"`
	ExpirationTime  string    `json:"expirationTime"`
	NotBefore       string    `json:"notBefore"`
	RequestID       *string   `json:"requestId"`
	Resources       *[]string `json:"resources"`
	SignatureScheme string    `json:"signatureScheme"`
	Signature       string    `json:"signature"`
}

// message is the EIP-4361 message of p, as @x402/extensions writes it
// for the wallet to sign (its SIWE library's prepareMessage).
func (p *siwxPayload) message(address common.Address, chainID string) string {
	var b strings.Builder
	b.WriteString(p.Domain + " wants you to sign in with your Ethereum account:\n" + address.Hex())
	if p.Statement == nil {
		b.WriteString("\n\n")
	} else {
		b.WriteString("\n\n" + *p.Statement + "\n")
	}
	b.WriteString("\nURI: " + p.URI + "\nVersion: " + p.Version + "\nChain ID: " + chainID + "\nNonce: " + p.Nonce)
	if p.IssuedAt != "" {
		b.WriteString("\nIssued At: " + p.IssuedAt)
	}
	if p.ExpirationTime != "" {
		b.WriteString("\nExpiration Time: " + p.ExpirationTime)
	}
	if p.NotBefore != "" {
		b.WriteString("\nNot Before: " + p.NotBefore)
	}
	if p.RequestID != nil {
		b.WriteString("\nRequest ID: " + *p.RequestID)
	}
	if p.Resources != nil {
		b.WriteString("\nResources:")
		for _, r := range *p.Resources {
			b.WriteString("\n- " + r)
		}
	}
	return b.String()
}

// siwxRefusal is a refused sign-in: the 402's reason and message.
type siwxRefusal struct{ reason, message string }

func refuseSIWx(reason, format string, args ...any) *siwxRefusal {
	return &siwxRefusal{reason: reason, message: fmt.Sprintf(format, args...)}
}

// signIn judges a SIGN-IN-WITH-X header for resource (the request's URI,
// as Exchange.Resource) of operation op: the recorded purchase it reads
// again, or why not.
func (g *Gate) signIn(ctx context.Context, header, op, resource string, now time.Time) (*Purchase, *siwxRefusal) {
	raw, err := decodeBase64(header)
	var p siwxPayload
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	if err != nil {
		return nil, refuseSIWx(ReasonSIWxMalformed, "the %s header is not base64 of the extension's JSON", HeaderSIWx)
	}
	base := g.origin
	uri, err := url.Parse(p.URI)
	switch {
	case p.Domain != base.Host:
		return nil, refuseSIWx(ReasonSIWxDomain, "the message's domain is %q; this server is %q", p.Domain, base.Host)
	case err != nil || uri.Scheme != base.Scheme || uri.Host != base.Host:
		return nil, refuseSIWx(ReasonSIWxURI, "the message's URI %q is not on this server's origin %s", p.URI, g.base)
	case !SameResource(uri.RequestURI(), resource):
		return nil, refuseSIWx(ReasonSIWxURI, "the message signs in to %s, not to the requested %s", uri.RequestURI(), resource)
	case p.ChainID != g.cfg.Network || p.Type != "eip191" || p.Version != "1":
		return nil, refuseSIWx(ReasonSIWxChain, "sign in on %s with an eip191 message of version 1", g.cfg.Network)
	case !common.IsHexAddress(p.Address) || len(p.Nonce) < 8:
		return nil, refuseSIWx(ReasonSIWxMalformed, "the message needs an address and a nonce")
	}
	issued, err := time.Parse(time.RFC3339Nano, p.IssuedAt)
	switch {
	case err != nil:
		return nil, refuseSIWx(ReasonSIWxIssuedAt, "issuedAt %q is not an ISO 8601 time", p.IssuedAt)
	case issued.After(now.Add(clockSlack)):
		return nil, refuseSIWx(ReasonSIWxIssuedAt, "issuedAt is in the future")
	case now.Sub(issued) > SIWxFor:
		return nil, refuseSIWx(ReasonSIWxIssuedAt, "the message was issued more than %s ago: sign the new challenge", SIWxFor)
	}
	if p.ExpirationTime != "" {
		if exp, err := time.Parse(time.RFC3339Nano, p.ExpirationTime); err != nil || !exp.After(now) {
			return nil, refuseSIWx(ReasonSIWxExpired, "the message is expired: sign the new challenge")
		}
	}
	if p.NotBefore != "" {
		if nb, err := time.Parse(time.RFC3339Nano, p.NotBefore); err != nil || nb.After(now) {
			return nil, refuseSIWx(ReasonSIWxNotBefore, "the message is not valid yet")
		}
	}
	address := common.HexToAddress(p.Address)
	sig, err := hexutil.Decode(p.Signature)
	if err != nil || !g.signedBy(ctx, common.BytesToHash(accounts.TextHash([]byte(p.message(address, strings.TrimPrefix(p.ChainID, "eip155:"))))), sig, address) {
		return nil, refuseSIWx(ReasonSIWxSignature, "the signature is not %s's over the EIP-4361 message of these fields", address.Hex())
	}
	fresh, err := g.cfg.SignIn.Nonces.UseNonce(ctx, p.Nonce, now)
	if err != nil {
		g.logger.Error("sign-in-with-x: nonce", "err", err)
		return nil, refuseSIWx(ReasonSIWxNonce, "the nonce could not be checked; sign the new challenge")
	}
	if !fresh {
		return nil, refuseSIWx(ReasonSIWxNonce, "this nonce was used already: sign the new challenge")
	}
	bought, err := g.cfg.SignIn.Purchases.Purchases(ctx, address, op, now.Add(-PurchaseFor))
	if err != nil {
		g.logger.Error("sign-in-with-x: purchases", "err", err)
		return nil, refuseSIWx(ReasonSIWxNoPurchase, "the purchases could not be read; pay, or retry")
	}
	var found *Purchase
	for i := range bought {
		if b := &bought[i]; SameResource(b.Resource, resource) && (found == nil || b.At.After(found.At)) {
			found = b
		}
	}
	if found == nil {
		return nil, refuseSIWx(ReasonSIWxNoPurchase, "%s bought no answer to this request in the last %s: pay for it", address.Hex(), PurchaseFor)
	}
	return found, nil
}

// clockSlack is how far ahead of ours a client's clock may run.
const clockSlack = 30 * time.Second

// signedBy reports whether sig over hash is address's: an EOA's
// (EIP-191 recovery), or a contract wallet's that accepts it (EIP-1271).
func (g *Gate) signedBy(ctx context.Context, hash common.Hash, sig []byte, address common.Address) bool {
	if len(sig) == 65 {
		if signer, err := RecoverDigest(hash, sig); err == nil && signer == address {
			return true
		}
	}
	chain := g.cfg.SignIn.Chain
	if chain == nil {
		return false
	}
	if code, err := chain.CodeAt(ctx, address, nil); err != nil || len(code) == 0 || len(code) == 23 && code[0] == 0xef {
		return false // no contract (or an EIP-7702 delegation, whose key signs as an EOA)
	}
	out, err := chain.CallContract(ctx, ethereum.CallMsg{To: &address, Data: isValidSignatureCall(hash, sig)}, nil)
	return err == nil && len(out) >= 4 && bytes.Equal(out[:4], []byte{0x16, 0x26, 0xba, 0x7e})
}

// isValidSignatureCall is EIP-1271's isValidSignature(bytes32, bytes).
func isValidSignatureCall(hash common.Hash, sig []byte) []byte {
	data := append([]byte{0x16, 0x26, 0xba, 0x7e}, hash[:]...)
	data = append(data, common.LeftPadBytes(big.NewInt(64).Bytes(), 32)...)
	data = append(data, common.LeftPadBytes(big.NewInt(int64(len(sig))).Bytes(), 32)...)
	padded := make([]byte, (len(sig)+31)/32*32)
	copy(padded, sig)
	return append(data, padded...)
}

// siwxMarks stand for a challenge's fresh values in the pre-encoded
// challenge (gate.go); siwxValues gives them.
var siwxMarks = [3]string{`"tollgate-siwx-nonce"`, `"tollgate-siwx-issued"`, `"tollgate-siwx-expires"`}

// siwxMarkValues are siwxMarks as values: what the pre-encoded
// challenges are cut at.
func siwxMarkValues() [3][]byte {
	return [3][]byte{[]byte(siwxMarks[0]), []byte(siwxMarks[1]), []byte(siwxMarks[2])}
}

// siwxValues are a new challenge's nonce, issue time and expiry, JSON.
func siwxValues(now time.Time) [3][]byte {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	return [3][]byte{
		[]byte(`"` + hex.EncodeToString(nonce) + `"`),
		[]byte(strconv.Quote(now.UTC().Format(siwxTime))),
		[]byte(strconv.Quote(now.Add(SIWxFor).UTC().Format(siwxTime))),
	}
}

// siwxTime is JavaScript's toISOString, as the official clients write.
const siwxTime = "2006-01-02T15:04:05.000Z"

// siwxExtension is the extension a REST challenge for resource offers,
// with values (siwxValues, or the marks) as raw JSON.
func (g *Gate) siwxExtension(resource string, values [3][]byte) map[string]any {
	return map[string]any{
		"info": map[string]any{
			"domain": g.origin.Host, "uri": resource, "version": "1", "statement": siwxStatement, "resources": []string{resource},
			"nonce": json.RawMessage(values[0]), "issuedAt": json.RawMessage(values[1]), "expirationTime": json.RawMessage(values[2]),
		},
		"supportedChains": []map[string]string{{"chainId": g.cfg.Network, "type": "eip191"}},
		// No "schema": what a client signs is info and its chain, and a
		// v2 client echoes every extension in its payment header, whose
		// 8 KiB the bazaar extension shares (TestPaymentHeaderBudget).
	}
}

// signedIn answers a GET that carries a SIGN-IN-WITH-X header and no
// payment: the purchase read again, or the route's 402 saying why not.
func (g *Gate) signedIn(w http.ResponseWriter, r *http.Request, rt *route, header string) {
	req := g.requirement(rt, r)
	bought, why := g.signIn(r.Context(), header, rt.Name, r.URL.RequestURI(), time.Now())
	if why != nil {
		rt.challenges.Add(1)
		g.obs.Challenged(rt.Name, TransportREST)
		g.obs.SignInRefused(rt.Name, why.reason)
		v1, v2 := g.challengeObjects(req, &VerifyError{Reason: why.reason, Message: why.message})
		writeObjects(w, v1, v2)
		return
	}
	g.obs.SignedIn(rt.Name)
	setSettlementHeader(w, 2, req, bought.Settlement)
	h := http.Header{}
	h.Set("Content-Type", bought.ContentType)
	writePaid(w, h, http.StatusOK, bought.Body)
}
