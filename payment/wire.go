package payment

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
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

// Extra is a requirement's extra object: the asset's EIP-712 domain name
// and version, which every EVM scheme names, and the fields a scheme adds
// beside them (batch-settlement's receiverAuthorizer, withdrawDelay, …),
// written after name and version in key order.
type Extra struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Fields holds the scheme's other fields, by key, as JSON; nil for
	// exact.
	Fields map[string]json.RawMessage `json:"-"`
}

type plainExtra struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// MarshalJSON writes name, version, then Fields in key order.
func (e Extra) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(plainExtra{Name: e.Name, Version: e.Version})
	if err != nil || len(e.Fields) == 0 {
		return b, err
	}
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		if k != "name" && k != "version" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b = b[:len(b)-1]
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		b = append(append(append(append(b, ','), kb...), ':'), e.Fields[k]...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads name and version, and keeps every other field in
// Fields.
func (e *Extra) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	var plain plainExtra
	if err := json.Unmarshal(b, &plain); err != nil {
		return err
	}
	e.Name, e.Version, e.Fields = plain.Name, plain.Version, nil
	for k, v := range all {
		if k == "name" || k == "version" {
			continue
		}
		if e.Fields == nil {
			e.Fields = map[string]json.RawMessage{}
		}
		e.Fields[k] = v
	}
	return nil
}

// Field returns extra field k as JSON, nil when absent.
func (e Extra) Field(k string) json.RawMessage { return e.Fields[k] }

// With returns e with field k set to v's JSON (a copy: e's map is not
// written).
func (e Extra) With(k string, v any) Extra {
	b, err := json.Marshal(v)
	if err != nil {
		return e
	}
	out := e
	out.Fields = make(map[string]json.RawMessage, len(e.Fields)+1)
	for key, val := range e.Fields {
		out.Fields[key] = val
	}
	out.Fields[k] = b
	return out
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
// missing field from a zero one. The payload is the scheme's.
type wirePayload struct {
	X402Version *int            `json:"x402Version"`
	Scheme      string          `json:"scheme"`   // v1
	Network     string          `json:"network"`  // v1
	Accepted    *RequirementsV2 `json:"accepted"` // v2
	Resource    *ResourceV2     `json:"resource"` // v2, optional
	Payload     json.RawMessage `json:"payload"`
}

// Payment is a decoded exact payment, whichever protocol version carried it.
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

// DecodeHeader decodes an exact payment header: base64 (standard, raw or
// URL, as clients differ) of a PaymentPayload JSON. Errors are
// *VerifyError with code invalid_payload.
func DecodeHeader(value string, version int) (*Payment, error) {
	raw, err := decodeBase64(value)
	if err != nil {
		return nil, err
	}
	return DecodePayload(raw, version)
}

// decodeBase64 undoes a payment header's base64, whichever alphabet and
// padding the client used.
func decodeBase64(value string) ([]byte, error) {
	if len(value) > maxHeader {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: fmt.Sprintf("payment header is %d bytes; at most %d", len(value), maxHeader)}
	}
	value = strings.TrimSpace(value)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(value); err == nil {
			return raw, nil
		}
	}
	return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payment header is not base64"}
}

// decodeEnvelope decodes a PaymentPayload of the given version, leaving
// its scheme's payload as JSON.
func decodeEnvelope(raw []byte, version int) (*wirePayload, error) {
	var w wirePayload
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payment header is not a JSON PaymentPayload: " + err.Error()}
	}
	switch {
	case w.X402Version == nil:
		return nil, &VerifyError{Reason: ReasonInvalidVersion, Message: "x402Version is missing"}
	case *w.X402Version != version:
		return nil, &VerifyError{Reason: ReasonInvalidVersion, Message: fmt.Sprintf("x402Version %d in the %s header", *w.X402Version, headerOf(version))}
	case len(w.Payload) == 0 || string(w.Payload) == "null":
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payload is missing"}
	case version == 2 && w.Accepted == nil:
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "accepted is missing"}
	}
	if version == 2 {
		w.Scheme, w.Network = w.Accepted.Scheme, w.Accepted.Network
	} else {
		w.Resource = nil
	}
	return &w, nil
}

// DecodePayload decodes an exact PaymentPayload JSON of the given version.
func DecodePayload(raw []byte, version int) (*Payment, error) {
	w, err := decodeEnvelope(raw, version)
	if err != nil {
		return nil, err
	}
	return exactPayment(w, raw)
}

// exactPayment reads an envelope's payload as exact's: an EIP-3009
// authorization and its signature.
func exactPayment(w *wirePayload, raw []byte) (*Payment, error) {
	var ex wireExactPayload
	if err := json.Unmarshal(w.Payload, &ex); err != nil {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payload is not an exact payload: " + err.Error()}
	}
	version := *w.X402Version
	p := &Payment{Version: version, Scheme: w.Scheme, Network: w.Network, Accepted: w.Accepted, Resource: w.Resource, Raw: raw}
	var err error
	if p.Authorization, err = parseAuthorization(ex.Authorization); err != nil {
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: err.Error()}
	}
	if p.Signature, err = hexutil.Decode(ex.Signature); err != nil || len(p.Signature) == 0 {
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
// Amount and Extra are a scheme's (batch-settlement: the deposited or
// refunded amount, chargedAmount and channelState); exact writes neither.
type SettleResponse struct {
	Success     bool   `json:"success"`
	ErrorReason string `json:"errorReason,omitempty"`
	Transaction string `json:"transaction"`
	Network     string `json:"network"`
	Payer       string `json:"payer"`
	Amount      string `json:"amount,omitempty"`
	Extra       any    `json:"extra,omitempty"`
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
