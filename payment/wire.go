package payment

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// Header names of x402 v1 and v2.
const (
	HeaderPaymentV1         = "X-PAYMENT"
	HeaderPaymentV2         = "PAYMENT-SIGNATURE"
	HeaderPaymentRequired   = "PAYMENT-REQUIRED"
	HeaderPaymentResponseV1 = "X-PAYMENT-RESPONSE"
	HeaderPaymentResponseV2 = "PAYMENT-RESPONSE"
)

// maxHeader is the largest payment header accepted (an EOA payment is
// about 700 bytes; smart-wallet signatures are longer).
const maxHeader = 8 << 10

// RequirementsV1 is one x402 v1 payment requirement. Every field the v1
// clients insist on is always written (no omitempty on description or
// mimeType; outputSchema and extra are objects, never null).
type RequirementsV1 struct {
	Scheme            string         `json:"scheme"`
	Network           string         `json:"network"`
	MaxAmountRequired string         `json:"maxAmountRequired"`
	Resource          string         `json:"resource"`
	Description       string         `json:"description"`
	MimeType          string         `json:"mimeType"`
	OutputSchema      map[string]any `json:"outputSchema"`
	PayTo             string         `json:"payTo"`
	MaxTimeoutSeconds int            `json:"maxTimeoutSeconds"`
	Asset             string         `json:"asset"`
	Extra             Extra          `json:"extra"`
}

// Extra is the EIP-712 domain name and version of the asset.
type Extra struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// RequiredV1 is the body of a 402 (x402 v1).
type RequiredV1 struct {
	X402Version int              `json:"x402Version"`
	Error       string           `json:"error"`
	Accepts     []RequirementsV1 `json:"accepts"`
	Payer       string           `json:"payer,omitempty"`
}

// RequirementsV2 is one x402 v2 payment requirement.
type RequirementsV2 struct {
	Scheme            string `json:"scheme"`
	Network           string `json:"network"`
	Amount            string `json:"amount"`
	Asset             string `json:"asset"`
	PayTo             string `json:"payTo"`
	MaxTimeoutSeconds int    `json:"maxTimeoutSeconds"`
	Extra             Extra  `json:"extra"`
}

// ResourceV2 describes the resource of a v2 PaymentRequired.
type ResourceV2 struct {
	URL         string `json:"url"`
	Description string `json:"description"`
	MimeType    string `json:"mimeType"`
}

// RequiredV2 is the PAYMENT-REQUIRED header's object (x402 v2).
type RequiredV2 struct {
	X402Version int              `json:"x402Version"`
	Error       string           `json:"error,omitempty"`
	Resource    ResourceV2       `json:"resource"`
	Accepts     []RequirementsV2 `json:"accepts"`
	Extensions  map[string]any   `json:"extensions,omitempty"`
}

// wireAuthorization is the EIP-3009 authorization as JSON strings.
type wireAuthorization struct {
	From        string `json:"from"`
	To          string `json:"to"`
	Value       string `json:"value"`
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Nonce       string `json:"nonce"`
}

type wireExactPayload struct {
	Signature     string            `json:"signature"`
	Authorization wireAuthorization `json:"authorization"`
}

// wirePayload is a PaymentPayload of either version; pointers tell a
// missing field from a zero one.
type wirePayload struct {
	X402Version *int              `json:"x402Version"`
	Scheme      string            `json:"scheme"`   // v1
	Network     string            `json:"network"`  // v1
	Accepted    *RequirementsV2   `json:"accepted"` // v2
	Resource    *ResourceV2       `json:"resource"` // v2, optional
	Payload     *wireExactPayload `json:"payload"`
}

// Payment is a decoded payment, whichever protocol version carried it.
type Payment struct {
	Version  int
	Scheme   string
	Network  string // as sent: "base" (v1) or "eip155:8453" (v2)
	Accepted *RequirementsV2
	// Resource is the v2 payload's resource (copied by clients from the
	// PAYMENT-REQUIRED they were answered), or nil when it names none.
	Resource      *ResourceV2
	Authorization Authorization
	Signature     []byte
	// Raw is the decoded PaymentPayload JSON, passed on to a remote facilitator.
	Raw json.RawMessage
}

// DecodeHeader decodes a payment header: base64 (standard, raw or URL, as
// clients differ) of a PaymentPayload JSON. Errors are *VerifyError with
// code invalid_payload.
func DecodeHeader(value string, version int) (*Payment, error) {
	if len(value) > maxHeader {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: fmt.Sprintf("payment header is %d bytes; at most %d", len(value), maxHeader)}
	}
	value = strings.TrimSpace(value)
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(value); err == nil {
			break
		}
	}
	if err != nil {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payment header is not base64"}
	}
	return DecodePayload(raw, version)
}

// DecodePayload decodes a PaymentPayload JSON of the given version.
func DecodePayload(raw []byte, version int) (*Payment, error) {
	var w wirePayload
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payment header is not a JSON PaymentPayload: " + err.Error()}
	}
	switch {
	case w.X402Version == nil:
		return nil, &VerifyError{Reason: ReasonInvalidVersion, Message: "x402Version is missing"}
	case *w.X402Version != version:
		return nil, &VerifyError{Reason: ReasonInvalidVersion, Message: fmt.Sprintf("x402Version %d in the %s header", *w.X402Version, headerOf(version))}
	case w.Payload == nil:
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payload is missing"}
	}
	p := &Payment{Version: version, Scheme: w.Scheme, Network: w.Network, Accepted: w.Accepted, Raw: raw}
	if version == 2 {
		p.Resource = w.Resource
	}
	var err error
	if version == 2 {
		if w.Accepted == nil {
			return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "accepted is missing"}
		}
		p.Scheme, p.Network = w.Accepted.Scheme, w.Accepted.Network
	}
	if p.Authorization, err = parseAuthorization(w.Payload.Authorization); err != nil {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: err.Error()}
	}
	if p.Signature, err = hexutil.Decode(w.Payload.Signature); err != nil || len(p.Signature) == 0 {
		return nil, &VerifyError{Reason: ReasonInvalidSignature, Message: "signature is not 0x-hex"}
	}
	if len(p.Signature) == 65 && p.Signature[64] < 27 {
		p.Signature[64] += 27 // wallets that write v as 0/1: FiatToken wants 27/28
	}
	return p, nil
}

func headerOf(version int) string {
	if version == 1 {
		return HeaderPaymentV1
	}
	return HeaderPaymentV2
}

func parseAuthorization(w wireAuthorization) (Authorization, error) {
	var a Authorization
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

// EncodeHeader returns base64(JSON(v)), the form of every x402 header.
func EncodeHeader(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// SettleResponse is the settlement header's object (both versions).
type SettleResponse struct {
	Success     bool   `json:"success"`
	ErrorReason string `json:"errorReason,omitempty"`
	Transaction string `json:"transaction"`
	Network     string `json:"network"`
	Payer       string `json:"payer"`
}

// EncodePayment builds a PaymentPayload header value for a signed
// authorization: the client side, used by `tollgate pay` and tests.
func EncodePayment(version int, req RequirementsV2, networkV1 string, a Authorization, sig []byte) (string, error) {
	payload := map[string]any{
		"signature": hexutil.Encode(sig),
		"authorization": wireAuthorization{
			From: a.From.Hex(), To: a.To.Hex(), Value: a.Value.String(),
			ValidAfter: a.ValidAfter.String(), ValidBefore: a.ValidBefore.String(),
			Nonce: hexutil.Encode(a.Nonce[:]),
		},
	}
	if version == 1 {
		return EncodeHeader(map[string]any{"x402Version": 1, "scheme": req.Scheme, "network": networkV1, "payload": payload})
	}
	return EncodeHeader(map[string]any{"x402Version": 2, "accepted": req, "payload": payload})
}
