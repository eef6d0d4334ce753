package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment"
)

// Remote asks an x402 facilitator that speaks the scheme over HTTP
// (POST /verify and /settle in the official wire format,
// docs/batch-settlement.md §2.6–2.7): Tollgate's own `tollgate
// facilitator`, or the official one. It shares exact's transport
// (*payment.Client: timeout, authentication, strict decoding); like it,
// it never retries a settle.
type Remote struct {
	c       *payment.Client
	escrow  Escrow
	network string
}

var _ Facilitator = (*Remote)(nil)

// NewRemote returns a facilitator client for the scheme's escrow (its
// chain names the network, "eip155:8453") over c; it does no I/O.
func NewRemote(c *payment.Client, escrow Escrow) (*Remote, error) {
	if c == nil || escrow.ChainID == nil || escrow.ChainID.Sign() <= 0 {
		return nil, errors.New("batch remote facilitator: a client and the escrow's chain are required")
	}
	return &Remote{c: c, escrow: escrow, network: "eip155:" + escrow.ChainID.String()}, nil
}

// request is a /verify or /settle body.
type request struct {
	X402Version         int `json:"x402Version"`
	PaymentPayload      any `json:"paymentPayload"`
	PaymentRequirements any `json:"paymentRequirements"`
}

// Verify implements Facilitator, sending raw (the client's
// PaymentPayload) as it came.
func (r *Remote) Verify(ctx context.Context, p *Payment, req payment.RequirementsV2, raw []byte) (Verdict, error) {
	if len(raw) == 0 {
		return Verdict{}, errors.New("batch remote facilitator: verify needs the PaymentPayload")
	}
	var out wireVerifyAnswer
	if err := r.c.Post(ctx, "verify", request{X402Version: 2, PaymentPayload: json.RawMessage(raw), PaymentRequirements: req}, &out,
		func() bool { return out.IsValid != nil }); err != nil {
		return Verdict{}, err
	}
	v := Verdict{Valid: *out.IsValid, Reason: out.InvalidReason, Message: out.InvalidMessage, Payer: p.Config.Payer}
	if !v.Valid {
		if v.Reason == "" {
			v.Reason = payment.ReasonUnexpectedVerify
		}
		return v, nil
	}
	st, err := parseState(out.Extra)
	if err != nil {
		return Verdict{}, &payment.FacilitatorError{Op: "verify", Err: err}
	}
	v.State = st
	return v, nil
}

// Deposit implements Facilitator, sending raw as it came.
func (r *Remote) Deposit(ctx context.Context, p *Payment, req payment.RequirementsV2, raw []byte) (Outcome, error) {
	if len(raw) == 0 {
		return Outcome{}, errors.New("batch remote facilitator: deposit needs the PaymentPayload")
	}
	o, err := r.settle(ctx, json.RawMessage(raw), req)
	// A facilitator answers with the channel's state after the deposit:
	// the deposit opened the channel when that state holds only it. (A
	// second deposit in the same block blurs this: both then count as
	// joining, and neither server serves the channel.)
	if err == nil && o.Success && o.State != nil && o.Amount != nil {
		o.Opened = orZero(o.State.Balance).Cmp(o.Amount) == 0 && orZero(o.State.TotalClaimed).Sign() == 0
	}
	return o, err
}

// Claim implements Facilitator: a {type:"claim"} settle.
func (r *Remote) Claim(ctx context.Context, rows []Claim, sig []byte) (Outcome, error) {
	if e := checkClaims(r.escrow, rows); e != nil {
		return refusal(e), nil
	}
	act := wireClaimAction{Type: actionClaim, Claims: claimsToWire(rows)}
	if sig != nil {
		act.ClaimAuthorizerSignature = hexutil.Encode(sig)
	}
	return r.action(ctx, act, rows[0].Config.Receiver, rows[0].Config.Token)
}

// Settle implements Facilitator: a {type:"settle"} settle.
func (r *Remote) Settle(ctx context.Context, receiver, token common.Address) (Outcome, error) {
	return r.action(ctx, wireSettleAction{Type: actionSettle, Receiver: receiver.Hex(), Token: token.Hex()}, receiver, token)
}

// Refund implements Facilitator: an enriched {type:"refund"} settle.
func (r *Remote) Refund(ctx context.Context, o RefundOrder) (Outcome, error) {
	switch {
	case o.Amount == nil || o.Amount.Sign() <= 0:
		return Outcome{Reason: ReasonRefundAmountInvalid, Message: "a refund's amount must be positive"}, nil
	case o.Nonce == nil:
		return Outcome{Reason: ReasonRefundPayload, Message: "a refund needs the channel's refund nonce"}, nil
	}
	act := wireRefundAction{Type: TypeRefund, ChannelConfig: o.Config, Amount: o.Amount.String(), RefundNonce: o.Nonce.String(),
		Claims: claimsToWire(o.Claims)}
	act.Voucher = wireVoucher{ChannelID: r.escrow.ChannelID(o.Config).Hex(), MaxClaimableAmount: decimal(o.MaxClaimable)}
	if o.Signature != nil {
		act.Voucher.Signature = hexutil.Encode(o.Signature)
	}
	if o.RefundSig != nil {
		act.RefundAuthorizerSignature = hexutil.Encode(o.RefundSig)
	}
	if o.ClaimSig != nil {
		act.ClaimAuthorizerSignature = hexutil.Encode(o.ClaimSig)
	}
	return r.action(ctx, act, o.Config.Receiver, o.Config.Token)
}

// action sends a claim or settle action, with the minimal requirement
// the official channel manager sends (§3.6).
func (r *Remote) action(ctx context.Context, act any, receiver, token common.Address) (Outcome, error) {
	req := r.requirementsFor(receiver, token)
	return r.settle(ctx, map[string]any{"x402Version": 2, "accepted": req, "payload": act}, req)
}

func (r *Remote) requirementsFor(receiver, token common.Address) map[string]any {
	return map[string]any{"scheme": Scheme, "network": r.network, "asset": token.Hex(), "amount": "0", "payTo": receiver.Hex(),
		"maxTimeoutSeconds": 0, "extra": map[string]any{}}
}

// settle posts one /settle and reads its answer.
func (r *Remote) settle(ctx context.Context, payload, req any) (Outcome, error) {
	var out wireSettleAnswer
	if err := r.c.Post(ctx, "settle", request{X402Version: 2, PaymentPayload: payload, PaymentRequirements: req}, &out,
		func() bool { return out.Success != nil }); err != nil {
		return Outcome{}, err
	}
	o := Outcome{Success: *out.Success, Reason: out.ErrorReason, Message: out.ErrorMessage}
	if out.Transaction != "" {
		o.Tx = common.HexToHash(out.Transaction)
	}
	if !o.Success {
		if o.Reason == "" {
			o.Reason = payment.ReasonUnexpectedSettle
		}
		return o, nil
	}
	if out.Transaction == "" {
		return Outcome{}, &payment.FacilitatorError{Op: "settle", Err: errors.New("success without a transaction")}
	}
	if out.Amount != "" {
		if o.Amount = parseDecimal(out.Amount); o.Amount == nil {
			return Outcome{}, &payment.FacilitatorError{Op: "settle", Err: fmt.Errorf("amount %q is not a decimal integer", out.Amount)}
		}
	}
	if out.Extra != nil && out.Extra.ChannelState != nil {
		st, err := parseState(out.Extra.ChannelState)
		if err != nil {
			return Outcome{}, &payment.FacilitatorError{Op: "settle", Err: err}
		}
		o.State = &st
	}
	return o, nil
}
