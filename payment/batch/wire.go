package batch

import (
	"fmt"
	json "github.com/segmentio/encoding/json"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// Scheme is the scheme's name in accepts entries and payloads.
const Scheme = "batch-settlement"

// The withdraw delay's bounds, seconds (the escrow's MIN_ and
// MAX_WITHDRAW_DELAY, both inclusive).
const (
	MinWithdrawDelay = 900
	MaxWithdrawDelay = 2_592_000
)

// Payload types.
const (
	TypeDeposit = "deposit"
	TypeVoucher = "voucher"
	TypeRefund  = "refund"
)

// Reason codes of the scheme (docs/batch-settlement.md §2.5), each
// "invalid_batch_settlement_evm_" and the name.
const (
	ReasonChannelIDMismatch          = reasonPrefix + "channel_id_mismatch"
	ReasonReceiverMismatch           = reasonPrefix + "receiver_mismatch"
	ReasonReceiverAuthorizerMismatch = reasonPrefix + "receiver_authorizer_mismatch"
	ReasonTokenMismatch              = reasonPrefix + "token_mismatch"
	ReasonWithdrawDelayMismatch      = reasonPrefix + "withdraw_delay_mismatch"
	ReasonPayloadType                = reasonPrefix + "payload_type"
	ReasonDepositPayload             = reasonPrefix + "deposit_payload"
	ReasonVoucherSignature           = reasonPrefix + "voucher_signature"
	ReasonCumulativeExceedsBalance   = reasonPrefix + "cumulative_exceeds_balance"
	ReasonCumulativeBelowClaimed     = reasonPrefix + "cumulative_below_claimed"
	ReasonCumulativeAmountMismatch   = reasonPrefix + "cumulative_amount_mismatch"
	ReasonChargeExceedsSigned        = reasonPrefix + "charge_exceeds_signed_cumulative"
	ReasonChannelNotFound            = reasonPrefix + "channel_not_found"
	ReasonMissingChannel             = reasonPrefix + "missing_channel"
	ReasonChannelBusy                = reasonPrefix + "channel_busy"
	ReasonRefundNoBalance            = reasonPrefix + "refund_no_balance"
	ReasonRefundAmountInvalid        = reasonPrefix + "refund_amount_invalid"
	ReasonERC3009Required            = reasonPrefix + "erc3009_authorization_required"
)

const reasonPrefix = "invalid_batch_settlement_evm_"

// Reason codes of the facilitator side (docs/batch-settlement.md §2.5–2.8):
// the requirement and the deposit's authorization, and the claim, settle
// and refund actions.
const (
	ReasonScheme                        = reasonPrefix + "scheme"
	ReasonNetworkMismatch               = reasonPrefix + "network_mismatch"
	ReasonWithdrawDelayOutOfRange       = reasonPrefix + "withdraw_delay_out_of_range"
	ReasonMissingEIP712Domain           = reasonPrefix + "missing_eip712_domain"
	ReasonInsufficientBalance           = reasonPrefix + "insufficient_balance"
	ReasonReceiveAuthorizationSignature = reasonPrefix + "receive_authorization_signature"
	ReasonValidBefore                   = reasonPrefix + "payload_authorization_valid_before"
	ReasonValidAfter                    = reasonPrefix + "payload_authorization_valid_after"
	ReasonDepositSimulationFailed       = reasonPrefix + "deposit_simulation_failed"
	ReasonDepositTransactionFailed      = reasonPrefix + "deposit_transaction_failed"
	ReasonClaimPayload                  = reasonPrefix + "claim_payload"
	ReasonClaimSimulationFailed         = reasonPrefix + "claim_simulation_failed"
	ReasonClaimTransactionFailed        = reasonPrefix + "claim_transaction_failed"
	ReasonSettlePayload                 = reasonPrefix + "settle_payload"
	ReasonSettleSimulationFailed        = reasonPrefix + "settle_simulation_failed"
	ReasonSettleTransactionFailed       = reasonPrefix + "settle_transaction_failed"
	ReasonNothingToSettle               = reasonPrefix + "nothing_to_settle"
	ReasonRefundPayload                 = reasonPrefix + "refund_payload"
	ReasonRefundSimulationFailed        = reasonPrefix + "refund_simulation_failed"
	ReasonRefundTransactionFailed       = reasonPrefix + "refund_transaction_failed"
	ReasonAuthorizerNotConfigured       = reasonPrefix + "authorizer_not_configured"
	ReasonAuthorizerAddressMismatch     = reasonPrefix + "authorizer_address_mismatch"
	ReasonUnknownSettleAction           = reasonPrefix + "unknown_settle_action"
)

// Error is a refusal with its reason code.
type Error struct {
	Reason, Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func refuse(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Payment is a decoded batch-settlement payload: the channel, the
// voucher, and for a deposit or a refund what comes with it.
type Payment struct {
	Type      string
	Config    Config
	ChannelID common.Hash
	// The voucher: the payer allows claims up to MaxClaimable, cumulative.
	MaxClaimable *big.Int
	Signature    []byte
	Deposit      *Deposit // TypeDeposit only
	// RefundAmount is a refund's requested amount; nil: everything left.
	RefundAmount *big.Int
}

// Deposit is the deposit of a TypeDeposit payload, by ERC-3009
// receiveWithAuthorization through the collector.
type Deposit struct {
	Amount                  *big.Int
	ValidAfter, ValidBefore *big.Int
	Salt                    *big.Int // read as uint256; the ERC-3009 nonce is DepositNonce(channel, salt)
	Signature               []byte
}

// wirePayload is PaymentPayload.payload as the official client writes it.
type wirePayload struct {
	Type          string       `json:"type"`
	ChannelConfig *wireConfig  `json:"channelConfig"`
	Voucher       *wireVoucher `json:"voucher"`
	Deposit       *wireDeposit `json:"deposit,omitempty"`
	Amount        string       `json:"amount,omitempty"` // a refund's, optional
}

type wireConfig struct {
	Payer              string          `json:"payer"`
	PayerAuthorizer    string          `json:"payerAuthorizer"`
	Receiver           string          `json:"receiver"`
	ReceiverAuthorizer string          `json:"receiverAuthorizer"`
	Token              string          `json:"token"`
	WithdrawDelay      json.RawMessage `json:"withdrawDelay"` // a JSON number
	Salt               string          `json:"salt"`
}

type wireVoucher struct {
	ChannelID          string `json:"channelId"`
	MaxClaimableAmount string `json:"maxClaimableAmount"`
	Signature          string `json:"signature"`
}

type wireDeposit struct {
	Amount        string `json:"amount"`
	Authorization struct {
		ERC3009 *wireERC3009    `json:"erc3009Authorization,omitempty"`
		Permit2 json.RawMessage `json:"permit2Authorization,omitempty"`
	} `json:"authorization"`
}

type wireERC3009 struct {
	ValidAfter  string `json:"validAfter"`
	ValidBefore string `json:"validBefore"`
	Salt        string `json:"salt"`
	Signature   string `json:"signature"`
}

// isHexWord reports whether s is 0x and digits hex digits (an address:
// 40, a hash: 64), either case.
func isHexWord(digits int, s string) bool {
	if len(s) != 2+digits || s[:2] != "0x" {
		return false
	}
	for _, r := range s[2:] {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F') {
			return false
		}
	}
	return true
}

// isDigits reports whether s is 1 to 78 decimal digits (a uint256 has
// at most 78).
func isDigits(s string) bool {
	if len(s) == 0 || len(s) > 78 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// DecodePayload decodes PaymentPayload.payload of the scheme, checking
// every field's form (not yet its meaning: see Terms).
func DecodePayload(raw []byte) (*Payment, error) {
	var w wirePayload
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, refuse(ReasonPayloadType, "payload is not a batch-settlement payload: %v", err)
	}
	switch w.Type {
	case TypeDeposit, TypeVoucher, TypeRefund:
	default:
		return nil, refuse(ReasonPayloadType, "payload type %q: want deposit, voucher or refund", w.Type)
	}
	if w.ChannelConfig == nil || w.Voucher == nil {
		return nil, refuse(ReasonPayloadType, "channelConfig and voucher are required")
	}
	p := &Payment{Type: w.Type}
	cc := w.ChannelConfig
	for _, a := range []struct {
		name string
		src  string
		dst  *common.Address
	}{{"payer", cc.Payer, &p.Config.Payer}, {"payerAuthorizer", cc.PayerAuthorizer, &p.Config.PayerAuthorizer},
		{"receiver", cc.Receiver, &p.Config.Receiver}, {"receiverAuthorizer", cc.ReceiverAuthorizer, &p.Config.ReceiverAuthorizer},
		{"token", cc.Token, &p.Config.Token}} {
		if !isHexWord(40, a.src) {
			return nil, refuse(ReasonPayloadType, "channelConfig.%s %q is not an address", a.name, a.src)
		}
		*a.dst = common.HexToAddress(a.src)
	}
	var delay uint64
	if err := json.Unmarshal(cc.WithdrawDelay, &delay); err != nil {
		return nil, refuse(ReasonPayloadType, "channelConfig.withdrawDelay is not a whole number of seconds")
	}
	p.Config.WithdrawDelay = delay
	if !isHexWord(64, cc.Salt) {
		return nil, refuse(ReasonPayloadType, "channelConfig.salt %q is not 32 bytes of hex", cc.Salt)
	}
	p.Config.Salt = common.HexToHash(cc.Salt)

	v := w.Voucher
	if !isHexWord(64, v.ChannelID) {
		return nil, refuse(ReasonPayloadType, "voucher.channelId %q is not 32 bytes of hex", v.ChannelID)
	}
	p.ChannelID = common.HexToHash(v.ChannelID)
	var err error
	if p.MaxClaimable, err = amount("voucher.maxClaimableAmount", v.MaxClaimableAmount); err != nil {
		return nil, err
	}
	if p.Signature, err = signature("voucher.signature", v.Signature); err != nil {
		return nil, err
	}

	switch w.Type {
	case TypeDeposit:
		if w.Deposit == nil {
			return nil, refuse(ReasonDepositPayload, "a deposit payload needs deposit")
		}
		a := w.Deposit.Authorization.ERC3009
		if a == nil {
			return nil, refuse(ReasonERC3009Required, "only ERC-3009 deposits are accepted (erc3009Authorization)")
		}
		d := &Deposit{}
		for _, f := range []struct {
			name, src string
			dst       **big.Int
		}{{"deposit.amount", w.Deposit.Amount, &d.Amount}, {"validAfter", a.ValidAfter, &d.ValidAfter},
			{"validBefore", a.ValidBefore, &d.ValidBefore}, {"salt", a.Salt, &d.Salt}} {
			if f.dst == &d.Salt && isHexWord(64, f.src) {
				// The official client writes the salt as 32 bytes of hex.
				d.Salt = new(big.Int).SetBytes(common.FromHex(f.src))
				continue
			}
			if *f.dst, err = amount(f.name, f.src); err != nil {
				return nil, refuse(ReasonDepositPayload, "%s", err.(*Error).Message)
			}
		}
		if d.Amount.Sign() == 0 {
			return nil, refuse(ReasonDepositPayload, "deposit.amount is 0")
		}
		if d.Signature, err = signature("erc3009Authorization.signature", a.Signature); err != nil {
			return nil, refuse(ReasonDepositPayload, "%s", err.(*Error).Message)
		}
		p.Deposit = d
	case TypeRefund:
		if w.Amount != "" {
			if p.RefundAmount, err = amount("amount", w.Amount); err != nil || p.RefundAmount.Sign() == 0 {
				return nil, refuse(ReasonRefundAmountInvalid, "a refund's amount must be a positive integer, got %q", w.Amount)
			}
		}
	}
	return p, nil
}

// amount parses a decimal string of atomic units.
func amount(name, s string) (*big.Int, error) {
	if !isDigits(s) {
		return nil, refuse(ReasonPayloadType, "%s %q is not a decimal amount", name, s)
	}
	x, _ := new(big.Int).SetString(s, 10)
	if x.BitLen() > 256 {
		return nil, refuse(ReasonPayloadType, "%s is out of range", name)
	}
	return x, nil
}

// signature parses a 65-byte hex signature (longer ones, EIP-1271 or
// ERC-6492 wrapped, are for smart-wallet payers: not accepted here).
func signature(name, s string) ([]byte, error) {
	b, err := hexutil.Decode(s)
	if err != nil || len(b) != 65 {
		return nil, refuse(ReasonVoucherSignature, "%s is not a 65-byte hex signature", name)
	}
	return b, nil
}

// ChannelState is the channel as an answer reports it (channelState in
// PAYMENT-RESPONSE extra and in the corrective 402).
type ChannelState struct {
	ChannelID               string `json:"channelId"`
	Balance                 string `json:"balance"`
	TotalClaimed            string `json:"totalClaimed"`
	WithdrawRequestedAt     uint64 `json:"withdrawRequestedAt"`
	RefundNonce             string `json:"refundNonce"`
	ChargedCumulativeAmount string `json:"chargedCumulativeAmount"`
}

// VoucherState is the latest voucher the server holds (voucherState in
// the corrective 402).
type VoucherState struct {
	SignedMaxClaimable string `json:"signedMaxClaimable"`
	Signature          string `json:"signature"`
}

// State reports c as a ChannelState.
func (c Channel) State() ChannelState {
	return ChannelState{
		ChannelID: strings.ToLower(c.ID.Hex()), Balance: decimal(c.Balance), TotalClaimed: decimal(c.TotalClaimed),
		WithdrawRequestedAt: c.WithdrawRequestedAt, RefundNonce: decimal(c.RefundNonce), ChargedCumulativeAmount: decimal(c.Charged),
	}
}

func decimal(x *big.Int) string {
	if x == nil {
		return "0"
	}
	return x.String()
}
