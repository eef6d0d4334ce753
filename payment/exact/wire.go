package exact

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment"
)

// Scheme is the scheme's name on the wire.
const Scheme = "exact"

// wireAuthorization is the EIP-3009 authorization as JSON strings.
type wireAuthorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
}

// wirePayload is exact's payload: an authorization and its signature.
type wirePayload struct {
	Signature     string            `json:"signature"`
	Authorization wireAuthorization `json:"authorization"`
}

// Payment is a decoded exact payment, whichever protocol version carried it.
type Payment struct {
	Version  int
	Scheme   string
	Network  string // as sent: "base" (v1) or "eip155:8453" (v2)
	Accepted *payment.RequirementsV2
	// Resource is the v2 payload's resource (copied by clients from the
	// PAYMENT-REQUIRED they were answered), or nil when it names none.
	Resource      *payment.ResourceV2
	Authorization payment.Authorization
	Signature     []byte
	// Raw is the decoded PaymentPayload JSON, passed on to a remote facilitator.
	Raw json.RawMessage
}

// DecodeHeader decodes an exact payment header: base64 (standard, raw or
// URL, as clients differ) of a PaymentPayload JSON. Errors are
// *payment.VerifyError.
func DecodeHeader(value string, version int) (*Payment, error) {
	env, err := payment.DecodeEnvelope(value, version)
	if err != nil {
		return nil, err
	}
	return paymentOf(env)
}

// DecodePayload decodes an exact PaymentPayload JSON of the given version.
func DecodePayload(raw []byte, version int) (*Payment, error) {
	env, err := payment.ParseEnvelope(raw, version)
	if err != nil {
		return nil, err
	}
	return paymentOf(env)
}

// paymentOf reads an envelope's payload as exact's: an EIP-3009
// authorization and its signature.
func paymentOf(env *payment.Envelope) (*Payment, error) {
	var ex wirePayload
	if err := json.Unmarshal(env.Payload, &ex); err != nil {
		return nil, &payment.VerifyError{Reason: payment.ReasonInvalidPayload, Message: "payload is not an exact payload: " + err.Error()}
	}
	p := &Payment{Version: env.Version, Scheme: env.Accepted.Scheme, Network: env.Accepted.Network, Resource: env.Resource, Raw: env.Raw}
	if env.Version == 2 {
		accepted := env.Accepted
		p.Accepted = &accepted
	}
	var err error
	if p.Authorization, err = parseAuthorization(ex.Authorization); err != nil {
		return nil, &payment.VerifyError{Reason: payment.ReasonInvalidPayload, Message: err.Error()}
	}
	if p.Signature, err = hexutil.Decode(ex.Signature); err != nil || len(p.Signature) == 0 {
		return nil, &payment.VerifyError{Reason: ReasonInvalidSignature, Message: "signature is not 0x-hex"}
	}
	if len(p.Signature) == 65 && p.Signature[64] < 27 {
		p.Signature[64] += 27 // wallets that write v as 0/1: FiatToken wants 27/28
	}
	return p, nil
}

func parseAuthorization(w wireAuthorization) (payment.Authorization, error) {
	var a payment.Authorization
	if !common.IsHexAddress(w.From) || !common.IsHexAddress(w.To) {
		return a, errors.New("authorization from/to are not addresses")
	}
	a.From, a.To = common.HexToAddress(w.From), common.HexToAddress(w.To)
	var ok bool
	for _, f := range []struct {
		dst  **big.Int
		text string
		name string
	}{{&a.Value, w.Value, "value"}, {&a.ValidAfter, w.ValidAfter, "validAfter"}, {&a.ValidBefore, w.ValidBefore, "validBefore"}} {
		if *f.dst, ok = new(big.Int).SetString(f.text, 10); !ok || (*f.dst).Sign() < 0 || (*f.dst).BitLen() > 256 {
			return a, fmt.Errorf("authorization %s %q is not a uint256 decimal", f.name, f.text)
		}
	}
	nonce, err := hexutil.Decode(w.Nonce)
	if err != nil || len(nonce) != 32 {
		return a, fmt.Errorf("authorization nonce %q is not 32 bytes of 0x-hex", w.Nonce)
	}
	copy(a.Nonce[:], nonce)
	return a, nil
}

// EncodePayment builds a PaymentPayload header value for a signed
// authorization: the client side, used by `tollgate pay` and tests.
func EncodePayment(version int, req payment.RequirementsV2, networkV1 string, a payment.Authorization, sig []byte) (string, error) {
	payload := map[string]any{
		"signature": hexutil.Encode(sig),
		"authorization": wireAuthorization{
			From: a.From.Hex(), To: a.To.Hex(), Value: a.Value.String(),
			ValidAfter: a.ValidAfter.String(), ValidBefore: a.ValidBefore.String(),
			Nonce: hexutil.Encode(a.Nonce[:]),
		},
	}
	if version == 1 {
		return payment.EncodeHeader(map[string]any{"x402Version": 1, "scheme": req.Scheme, "network": networkV1, "payload": payload})
	}
	return payment.EncodeHeader(map[string]any{"x402Version": 2, "accepted": req, "payload": payload})
}
