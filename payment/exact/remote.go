package exact

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
)

// Remote asks a remote facilitator to verify and settle exact payments,
// over the shared transport (payment.Client): the payment's own
// PaymentPayload is passed on as it came, with the requirement in the
// payment's protocol version. A settle is never retried: one that may
// have been broadcast must not be sent twice.
type Remote struct {
	c *payment.Client
}

var _ Facilitator = (*Remote)(nil)

// NewRemote returns exact's remote facilitator over c.
func NewRemote(c *payment.Client) *Remote { return &Remote{c: c} }

type facilitatorRequest struct {
	X402Version         int             `json:"x402Version"`
	PaymentPayload      json.RawMessage `json:"paymentPayload"`
	PaymentRequirements any             `json:"paymentRequirements"`
}

// requirementsFor returns r in the payment's protocol version.
func requirementsFor(p *Payment, r *payment.Requirement) any {
	if p.Version == 1 {
		v1 := EntryV1(r)
		v1.OutputSchema = map[string]any{}
		return v1
	}
	return Entry(r)
}

// Verify implements Facilitator.
func (rm *Remote) Verify(ctx context.Context, p *Payment, r *payment.Requirement) (Verification, error) {
	var out struct {
		IsValid        *bool  `json:"isValid"`
		InvalidReason  string `json:"invalidReason"`
		InvalidMessage string `json:"invalidMessage"`
		Payer          string `json:"payer"`
	}
	if err := rm.post(ctx, "verify", p, r, &out, func() bool { return out.IsValid != nil }); err != nil {
		return Verification{}, err
	}
	v := Verification{Valid: *out.IsValid, Reason: out.InvalidReason, Message: out.InvalidMessage, Payer: p.Authorization.From}
	if !v.Valid && v.Reason == "" {
		v.Reason = payment.ReasonUnexpectedVerify
	}
	return v, nil
}

// Settle implements Facilitator.
func (rm *Remote) Settle(ctx context.Context, p *Payment, r *payment.Requirement) (Settlement, error) {
	var out struct {
		Success      *bool  `json:"success"`
		ErrorReason  string `json:"errorReason"`
		ErrorMessage string `json:"errorMessage"`
		Transaction  string `json:"transaction"`
		Payer        string `json:"payer"`
	}
	if err := rm.post(ctx, "settle", p, r, &out, func() bool { return out.Success != nil }); err != nil {
		return Settlement{}, err
	}
	s := Settlement{Success: *out.Success, Reason: out.ErrorReason, Message: out.ErrorMessage, Payer: p.Authorization.From}
	if out.Transaction != "" {
		s.Tx = common.HexToHash(out.Transaction)
	}
	if !s.Success && s.Reason == payment.ReasonSettlementPending && out.Transaction != "" {
		s.Pending = true
	}
	if s.Success && out.Transaction == "" {
		return Settlement{}, &payment.FacilitatorError{Op: "settle", Err: errors.New("success without a transaction")}
	}
	return s, nil
}

func (rm *Remote) post(ctx context.Context, op string, p *Payment, r *payment.Requirement, out any, decoded func() bool) error {
	return rm.c.Post(ctx, op, facilitatorRequest{X402Version: p.Version, PaymentPayload: p.Raw, PaymentRequirements: requirementsFor(p, r)}, out, decoded)
}
