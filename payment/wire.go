package payment

import (
	"encoding/base64"
	"fmt"
	json "github.com/segmentio/encoding/json"
	"slices"
	"strings"
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
	if v, ok := all["name"]; ok {
		if err := json.Unmarshal(v, &plain.Name); err != nil {
			return fmt.Errorf("extra.name: %w", err)
		}
	}
	if v, ok := all["version"]; ok {
		if err := json.Unmarshal(v, &plain.Version); err != nil {
			return fmt.Errorf("extra.version: %w", err)
		}
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

// wirePayload is a PaymentPayload of either version; pointers tell a
// missing field from a zero one. The payload is the scheme's.
type wirePayload struct {
	X402Version *int            `json:"x402Version"`
	Scheme      string          `json:"scheme"`   // v1
	Network     string          `json:"network"`  // v1
	Accepted    *RequirementsV2 `json:"accepted"` // v2
	Resource    *ResourceV2     `json:"resource"` // v2, optional
	Payload     json.RawMessage `json:"payload"`
	// Extensions are the v2 payload's extensions, each as JSON.
	Extensions map[string]json.RawMessage `json:"extensions"`
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

// DecodeEnvelope decodes a payment header of the given version: base64
// (standard, raw or URL, as clients differ) of a PaymentPayload JSON,
// its scheme's payload left as JSON. Errors are *VerifyError.
func DecodeEnvelope(value string, version int) (*Envelope, error) {
	raw, err := decodeBase64(value)
	if err != nil {
		return nil, err
	}
	return ParseEnvelope(raw, version)
}

// ParseEnvelope decodes a PaymentPayload JSON of the given version,
// leaving its scheme's payload as JSON.
func ParseEnvelope(raw []byte, version int) (*Envelope, error) {
	return parseEnvelope(raw, version, "the "+headerOf(version)+" header")
}

// parseEnvelope is ParseEnvelope with where the payment came from named
// in its errors ("the PAYMENT-SIGNATURE header", "_meta[\"x402/payment\"]").
// This file decodes with segmentio's encoding/json, which reads the same
// JSON the same way as the standard library's in about half the time: a
// paid call's header is decoded on every call (bench/outside).
func parseEnvelope(raw []byte, version int, where string) (*Envelope, error) {
	var w wirePayload
	if err := json.Unmarshal(raw, &w); err != nil {
		if !json.Valid(raw) {
			// Any text can pass for base64 ("junk" decodes to three bytes):
			// say what the header should be, not what the decoder tripped on.
			return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: fmt.Sprintf(
				"%s is not base64-encoded JSON (an x402 PaymentPayload): it decodes to %d bytes that are not JSON", where, len(raw))}
		}
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: where + "'s JSON is not an x402 PaymentPayload: " + err.Error()}
	}
	switch {
	case w.X402Version == nil:
		return nil, &VerifyError{Reason: ReasonInvalidVersion, Message: "x402Version is missing"}
	case *w.X402Version != version:
		return nil, &VerifyError{Reason: ReasonInvalidVersion, Message: fmt.Sprintf("x402Version %d in %s; want %d", *w.X402Version, where, version)}
	case len(w.Payload) == 0 || string(w.Payload) == "null":
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "payload is missing"}
	case version == 2 && w.Accepted == nil:
		return nil, &VerifyError{Reason: ReasonInvalidPayload, Message: "accepted is missing"}
	}
	env := &Envelope{Version: version, Payload: w.Payload, Raw: raw, Extensions: w.Extensions}
	if version == 2 {
		env.Accepted, env.Resource = *w.Accepted, w.Resource
	} else {
		env.Accepted = RequirementsV2{Scheme: w.Scheme, Network: w.Network}
	}
	return env, nil
}

func headerOf(version int) string {
	if version == 1 {
		return HeaderPaymentV1
	}
	return HeaderPaymentV2
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
