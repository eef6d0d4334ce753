package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment"
)

// AdapterConfig configures the scheme's side of the facilitator HTTP API.
type AdapterConfig struct {
	// Network is the CAIP-2 network served, "eip155:8453".
	Network string
	// PayTo lists the receivers the facilitator acts for: deposits,
	// claims, settles and refunds of other receivers' channels are
	// refused, so the gas key is not spent on them.
	PayTo []common.Address
	// ReceiverAuthorizer is the facilitator's receiver authorizer, what
	// GET /supported advertises; zero when it holds no authorizer key.
	ReceiverAuthorizer common.Address
}

// Validate reports every problem of c at once.
func (c AdapterConfig) Validate() error {
	var errs []error
	if c.Network == "" {
		errs = append(errs, errors.New("batch facilitator API: network is required"))
	}
	if len(c.PayTo) == 0 {
		errs = append(errs, errors.New("batch facilitator API: no receiver served (PayTo)"))
	}
	return errors.Join(errs...)
}

// Adapter serves a Facilitator over the x402 facilitator HTTP API
// (docs/batch-settlement.md §2.6–2.8): it decodes /verify and /settle
// requests of the scheme (deposit, voucher and refund payloads; the
// claim, settle and enriched refund actions), asks the Facilitator, and
// answers in the official wire format. payment.Server routes the
// scheme's requests to it (payment.ServerConfig.Schemes).
//
// With a receiver authorizer key, the facilitator signs the claims and
// refunds a request leaves unsigned: anyone who can reach the API can
// then have a channel's unclaimed balance refunded to its payer. Keep
// such a facilitator on a private network, reachable by its servers only.
type Adapter struct {
	f   Facilitator
	cfg AdapterConfig
}

// NewAdapter returns the scheme's HTTP API side over f; it does no I/O.
func NewAdapter(f Facilitator, cfg AdapterConfig) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Adapter{f: f, cfg: cfg}, nil
}

// Versions implements payment.SchemeFacilitator: batch-settlement is
// x402 v2 only.
func (a *Adapter) Versions() []int { return []int{2} }

// Extra is the extra object of the scheme's /supported kind: the
// receiver authorizer, when there is one.
func (a *Adapter) Extra() map[string]any {
	if a.cfg.ReceiverAuthorizer == (common.Address{}) {
		return nil
	}
	return map[string]any{"receiverAuthorizer": a.cfg.ReceiverAuthorizer.Hex()}
}

// The facilitator API's JSON: verify and settle answers, the state they
// report, and the settle actions' payloads (§2.6–2.7). They are shared by
// Adapter, which writes the answers and reads the payloads, and Remote,
// which does the opposite.
type (
	wireVerifyAnswer struct {
		IsValid        *bool      `json:"isValid"`
		InvalidReason  string     `json:"invalidReason,omitempty"`
		InvalidMessage string     `json:"invalidMessage,omitempty"`
		Payer          string     `json:"payer,omitempty"`
		Extra          *wireState `json:"extra,omitempty"`
	}

	wireSettleAnswer struct {
		Success      *bool            `json:"success"`
		ErrorReason  string           `json:"errorReason,omitempty"`
		ErrorMessage string           `json:"errorMessage,omitempty"`
		Transaction  string           `json:"transaction"`
		Network      string           `json:"network"`
		Payer        string           `json:"payer,omitempty"`
		Amount       string           `json:"amount"`
		Extra        *wireSettleExtra `json:"extra,omitempty"`
	}

	wireSettleExtra struct {
		ChannelState *wireState `json:"channelState,omitempty"`
	}

	// wireState is the on-chain state of a channel as the facilitator
	// reports it (without the server's chargedCumulativeAmount).
	wireState struct {
		ChannelID           string `json:"channelId"`
		Balance             string `json:"balance"`
		TotalClaimed        string `json:"totalClaimed"`
		WithdrawRequestedAt uint64 `json:"withdrawRequestedAt"`
		RefundNonce         string `json:"refundNonce"`
	}

	// wireClaim is a VoucherClaim: {voucher:{channel, maxClaimableAmount}, signature, totalClaimed}.
	wireClaim struct {
		Voucher struct {
			Channel            Config `json:"channel"`
			MaxClaimableAmount string `json:"maxClaimableAmount"`
		} `json:"voucher"`
		Signature    string `json:"signature"`
		TotalClaimed string `json:"totalClaimed"`
	}

	// wireAction is a settle payload of any action, for decoding:
	// pointers tell a missing field from an empty one.
	wireAction struct {
		Type string `json:"type"`
		// claim (and refund)
		Claims                   *[]wireClaim `json:"claims"`
		ClaimAuthorizerSignature string       `json:"claimAuthorizerSignature"`
		// settle
		Receiver string `json:"receiver"`
		Token    string `json:"token"`
		// refund
		ChannelConfig             *Config      `json:"channelConfig"`
		Voucher                   *wireVoucher `json:"voucher"`
		Amount                    *string      `json:"amount"`
		RefundNonce               *string      `json:"refundNonce"`
		RefundAuthorizerSignature string       `json:"refundAuthorizerSignature"`
	}

	wireClaimAction struct {
		Type                     string      `json:"type"`
		Claims                   []wireClaim `json:"claims"`
		ClaimAuthorizerSignature string      `json:"claimAuthorizerSignature,omitempty"`
	}

	wireSettleAction struct {
		Type     string `json:"type"`
		Receiver string `json:"receiver"`
		Token    string `json:"token"`
	}

	wireRefundAction struct {
		Type                      string      `json:"type"`
		ChannelConfig             Config      `json:"channelConfig"`
		Voucher                   wireVoucher `json:"voucher"`
		Amount                    string      `json:"amount"`
		RefundNonce               string      `json:"refundNonce"`
		Claims                    []wireClaim `json:"claims"`
		RefundAuthorizerSignature string      `json:"refundAuthorizerSignature,omitempty"`
		ClaimAuthorizerSignature  string      `json:"claimAuthorizerSignature,omitempty"`
	}

	// wireEnvelope is a PaymentPayload as the facilitator reads it.
	wireEnvelope struct {
		X402Version int             `json:"x402Version"`
		Payload     json.RawMessage `json:"payload"`
	}
)

// Settle actions beyond the client's payload types.
const (
	actionClaim  = "claim"
	actionSettle = "settle"
)

func stateOf(id common.Hash, s OnChain) *wireState {
	return &wireState{ChannelID: strings.ToLower(id.Hex()), Balance: decimal(s.Balance), TotalClaimed: decimal(s.TotalClaimed),
		WithdrawRequestedAt: s.WithdrawRequestedAt, RefundNonce: decimal(s.RefundNonce)}
}

func claimsToWire(rows []Claim) []wireClaim {
	out := make([]wireClaim, len(rows))
	for i, r := range rows {
		out[i].Voucher.Channel, out[i].Voucher.MaxClaimableAmount = r.Config, decimal(r.MaxClaimable)
		out[i].Signature, out[i].TotalClaimed = hexutil.Encode(r.Signature), decimal(r.TotalClaimed)
	}
	return out
}

func claimsFromWire(rows []wireClaim) ([]Claim, *Error) {
	out := make([]Claim, len(rows))
	for i, r := range rows {
		c := Claim{Config: r.Voucher.Channel}
		var err error
		if c.MaxClaimable, err = amount("maxClaimableAmount", r.Voucher.MaxClaimableAmount); err != nil {
			return nil, refuse(ReasonClaimPayload, "claims[%d]: %s", i, err.(*Error).Message)
		}
		if c.TotalClaimed, err = amount("totalClaimed", r.TotalClaimed); err != nil {
			return nil, refuse(ReasonClaimPayload, "claims[%d]: %s", i, err.(*Error).Message)
		}
		if c.Signature, err = hexutil.Decode(r.Signature); err != nil {
			return nil, refuse(ReasonClaimPayload, "claims[%d]: signature is not hex", i)
		}
		out[i] = c
	}
	return out, nil
}

// optionalSignature decodes a signature the request may leave out (nil:
// the facilitator's authorizer signs).
func optionalSignature(name, s string) ([]byte, *Error) {
	if s == "" {
		return nil, nil
	}
	b, err := hexutil.Decode(s)
	if err != nil || len(b) == 0 {
		return nil, refuse(ReasonPayloadType, "%s is not hex", name)
	}
	return b, nil
}

func (a *Adapter) serves(receiver common.Address) bool { return slices.Contains(a.cfg.PayTo, receiver) }

// requirements decodes paymentRequirements and checks what the adapter
// owns: the scheme and the network.
func (a *Adapter) requirements(raw json.RawMessage) (payment.RequirementsV2, *Error) {
	var req payment.RequirementsV2
	if err := json.Unmarshal(raw, &req); err != nil {
		return req, refuse(ReasonPayloadType, "paymentRequirements: %v", err)
	}
	switch {
	case req.Scheme != Scheme:
		return req, refuse(ReasonScheme, "requirement scheme %q, want %s", req.Scheme, Scheme)
	case req.Network != a.cfg.Network:
		return req, refuse(ReasonNetworkMismatch, "requirement network %q, this facilitator settles on %s", req.Network, a.cfg.Network)
	}
	return req, nil
}

// payment decodes a client's PaymentPayload for verify or deposit: its
// scheme payload, and the requirement it pays, for a receiver served.
func (a *Adapter) payment(payload, requirements json.RawMessage) (*Payment, payment.RequirementsV2, *Error) {
	req, e := a.requirements(requirements)
	if e != nil {
		return nil, req, e
	}
	var env wireEnvelope
	if err := json.Unmarshal(payload, &env); err != nil || len(env.Payload) == 0 {
		return nil, req, refuse(ReasonPayloadType, "paymentPayload is not a PaymentPayload with a payload")
	}
	p, err := DecodePayload(env.Payload)
	if err != nil {
		return nil, req, err.(*Error)
	}
	if !common.IsHexAddress(req.PayTo) || !a.serves(common.HexToAddress(req.PayTo)) {
		return p, req, refuse(ReasonReceiverMismatch, "payTo %s is not served by this facilitator", req.PayTo)
	}
	return p, req, nil
}

// Verify answers POST /verify for a deposit, voucher or refund payload.
func (a *Adapter) Verify(ctx context.Context, payload, requirements json.RawMessage) (any, error) {
	no := false
	p, req, e := a.payment(payload, requirements)
	if e != nil {
		out := wireVerifyAnswer{IsValid: &no, InvalidReason: e.Reason, InvalidMessage: e.Message}
		if p != nil {
			out.Payer = p.Config.Payer.Hex()
		}
		return out, nil
	}
	v, err := a.f.Verify(ctx, p, req, payload)
	if err != nil {
		return nil, err
	}
	out := wireVerifyAnswer{IsValid: &v.Valid, Payer: p.Config.Payer.Hex()}
	if !v.Valid {
		out.InvalidReason, out.InvalidMessage = v.Reason, v.Message
	} else {
		out.Extra = stateOf(p.ChannelID, v.State)
	}
	return out, nil
}

// Settle answers POST /settle, dispatched on the payload's type: a
// deposit, a claim, a settle, or an enriched refund (one carrying amount,
// refundNonce and claims; a client's bare refund payload is refused).
func (a *Adapter) Settle(ctx context.Context, payload, requirements json.RawMessage) (any, error) {
	out, e, err := a.settle(ctx, payload, requirements)
	if err != nil {
		return nil, err
	}
	if e != nil {
		no := false
		out = wireSettleAnswer{Success: &no, ErrorReason: e.Reason, ErrorMessage: e.Message}
	}
	out.Network = a.cfg.Network
	return out, nil
}

func (a *Adapter) settle(ctx context.Context, payload, requirements json.RawMessage) (wireSettleAnswer, *Error, error) {
	var env wireEnvelope
	var act wireAction
	if err := json.Unmarshal(payload, &env); err != nil || len(env.Payload) == 0 || json.Unmarshal(env.Payload, &act) != nil {
		return wireSettleAnswer{}, refuse(ReasonPayloadType, "paymentPayload is not a PaymentPayload with a payload"), nil
	}
	switch {
	case act.Type == TypeDeposit:
		p, req, e := a.payment(payload, requirements)
		if e != nil {
			return wireSettleAnswer{}, e, nil
		}
		o, err := a.f.Deposit(ctx, p, req, payload)
		return answerOf(o, p.Config.Payer, p.ChannelID), nil, err
	case act.Type == actionClaim:
		return a.claim(ctx, act, requirements)
	case act.Type == actionSettle:
		if _, e := a.requirements(requirements); e != nil {
			return wireSettleAnswer{}, e, nil
		}
		if !common.IsHexAddress(act.Receiver) || !common.IsHexAddress(act.Token) {
			return wireSettleAnswer{}, refuse(ReasonSettlePayload, "a settle needs a receiver and a token address"), nil
		}
		receiver := common.HexToAddress(act.Receiver)
		if !a.serves(receiver) {
			return wireSettleAnswer{}, refuse(ReasonReceiverMismatch, "receiver %s is not served by this facilitator", act.Receiver), nil
		}
		o, err := a.f.Settle(ctx, receiver, common.HexToAddress(act.Token))
		return answerOf(o, common.Address{}, common.Hash{}), nil, err
	case act.Type == TypeRefund && act.Amount != nil && act.RefundNonce != nil && act.Claims != nil:
		return a.refund(ctx, act, requirements)
	case act.Type == TypeRefund || act.Type == TypeVoucher:
		return wireSettleAnswer{}, refuse(ReasonPayloadType, "a %s payload is not settled by the facilitator (a refund needs amount, refundNonce and claims)", act.Type), nil
	}
	return wireSettleAnswer{}, refuse(ReasonUnknownSettleAction, "settle action %q: want deposit, claim, settle or refund", act.Type), nil
}

func (a *Adapter) claim(ctx context.Context, act wireAction, requirements json.RawMessage) (wireSettleAnswer, *Error, error) {
	if _, e := a.requirements(requirements); e != nil {
		return wireSettleAnswer{}, e, nil
	}
	if act.Claims == nil || len(*act.Claims) == 0 {
		return wireSettleAnswer{}, refuse(ReasonClaimPayload, "a claim needs claims"), nil
	}
	rows, e := claimsFromWire(*act.Claims)
	if e != nil {
		return wireSettleAnswer{}, e, nil
	}
	for _, r := range rows {
		if !a.serves(r.Config.Receiver) {
			return wireSettleAnswer{}, refuse(ReasonReceiverMismatch, "receiver %s is not served by this facilitator", r.Config.Receiver.Hex()), nil
		}
	}
	sig, e := optionalSignature("claimAuthorizerSignature", act.ClaimAuthorizerSignature)
	if e != nil {
		return wireSettleAnswer{}, e, nil
	}
	o, err := a.f.Claim(ctx, rows, sig)
	return answerOf(o, common.Address{}, common.Hash{}), nil, err
}

func (a *Adapter) refund(ctx context.Context, act wireAction, requirements json.RawMessage) (wireSettleAnswer, *Error, error) {
	if _, e := a.requirements(requirements); e != nil {
		return wireSettleAnswer{}, e, nil
	}
	if act.ChannelConfig == nil || act.Voucher == nil {
		return wireSettleAnswer{}, refuse(ReasonRefundPayload, "a refund needs channelConfig and voucher"), nil
	}
	o := RefundOrder{Config: *act.ChannelConfig}
	if !a.serves(o.Config.Receiver) {
		return wireSettleAnswer{}, refuse(ReasonReceiverMismatch, "receiver %s is not served by this facilitator", o.Config.Receiver.Hex()), nil
	}
	var err error
	if o.Amount, err = amount("amount", *act.Amount); err != nil || o.Amount.Sign() == 0 {
		return wireSettleAnswer{}, refuse(ReasonRefundAmountInvalid, "a refund's amount must be a positive integer, got %q", *act.Amount), nil
	}
	if o.Nonce, err = amount("refundNonce", *act.RefundNonce); err != nil {
		return wireSettleAnswer{}, refuse(ReasonRefundPayload, "refundNonce %q is not a decimal integer", *act.RefundNonce), nil
	}
	if act.Voucher.MaxClaimableAmount != "" {
		if o.MaxClaimable, err = amount("voucher.maxClaimableAmount", act.Voucher.MaxClaimableAmount); err != nil {
			return wireSettleAnswer{}, refuse(ReasonRefundPayload, "%s", err.(*Error).Message), nil
		}
	}
	if act.Voucher.Signature != "" {
		if o.Signature, err = hexutil.Decode(act.Voucher.Signature); err != nil {
			return wireSettleAnswer{}, refuse(ReasonRefundPayload, "voucher.signature is not hex"), nil
		}
	}
	var e *Error
	if o.Claims, e = claimsFromWire(*act.Claims); e != nil {
		return wireSettleAnswer{}, refuse(ReasonRefundPayload, "%s", e.Message), nil
	}
	if o.RefundSig, e = optionalSignature("refundAuthorizerSignature", act.RefundAuthorizerSignature); e != nil {
		return wireSettleAnswer{}, e, nil
	}
	if o.ClaimSig, e = optionalSignature("claimAuthorizerSignature", act.ClaimAuthorizerSignature); e != nil {
		return wireSettleAnswer{}, e, nil
	}
	out, err := a.f.Refund(ctx, o)
	// The state reported is the channel's the voucher names.
	return answerOf(out, o.Config.Payer, common.HexToHash(act.Voucher.ChannelID)), nil, err
}

// answerOf writes an Outcome as a settle answer (payer and the channel
// id of its state when the action has them).
func answerOf(o Outcome, payer common.Address, id common.Hash) wireSettleAnswer {
	out := wireSettleAnswer{Success: &o.Success, ErrorReason: o.Reason, ErrorMessage: o.Message}
	if o.Success {
		out.ErrorReason, out.ErrorMessage = "", ""
	}
	if o.Tx != (common.Hash{}) {
		out.Transaction = o.Tx.Hex()
	}
	if payer != (common.Address{}) {
		out.Payer = payer.Hex()
	}
	if o.Amount != nil {
		out.Amount = o.Amount.String()
	}
	if o.State != nil {
		out.Extra = &wireSettleExtra{ChannelState: stateOf(id, *o.State)}
	}
	return out
}

// parseState reads a reported state; absent, it is all zero.
func parseState(w *wireState) (OnChain, error) {
	if w == nil {
		return OnChain{Balance: new(big.Int), TotalClaimed: new(big.Int), RefundNonce: new(big.Int)}, nil
	}
	s := OnChain{Balance: parseDecimal(w.Balance), TotalClaimed: parseDecimal(w.TotalClaimed), RefundNonce: parseDecimal(w.RefundNonce),
		WithdrawRequestedAt: w.WithdrawRequestedAt}
	if s.Balance == nil || s.TotalClaimed == nil || s.RefundNonce == nil {
		return OnChain{}, fmt.Errorf("channel state %+v: amounts are not decimal integers", *w)
	}
	return s, nil
}

// parseDecimal reads a reported amount; nil when it is not one.
func parseDecimal(s string) *big.Int {
	x, ok := new(big.Int).SetString(s, 10)
	if !ok || x.Sign() < 0 {
		return nil
	}
	return x
}
