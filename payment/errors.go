package payment

import "fmt"

// Reason codes, as the x402 reference facilitators write them.
const (
	ReasonInvalidPayload        = "invalid_payload"
	ReasonInvalidVersion        = "invalid_x402_version"
	ReasonInvalidScheme         = "invalid_exact_evm_scheme"
	ReasonNetworkMismatch       = "invalid_exact_evm_network_mismatch"
	ReasonNoMatch               = "invalid_payment_requirements"
	ReasonRecipientMismatch     = "invalid_exact_evm_recipient_mismatch"
	ReasonValueMismatch         = "invalid_exact_evm_payload_authorization_value_mismatch"
	ReasonValidBefore           = "invalid_exact_evm_payload_authorization_valid_before"
	ReasonValidAfter            = "invalid_exact_evm_payload_authorization_valid_after"
	ReasonInvalidSignature      = "invalid_exact_evm_signature"
	ReasonNonceUsed             = "invalid_exact_evm_nonce_already_used"
	ReasonInsufficientBalance   = "invalid_exact_evm_insufficient_balance"
	ReasonSimulationFailed      = "invalid_exact_evm_transaction_simulation_failed"
	ReasonTransactionFailed     = "invalid_exact_evm_transaction_failed"
	ReasonSettlementPending     = "settlement_pending"
	ReasonPaymentInFlight       = "payment_in_flight"
	ReasonAuthorizationReplayed = "authorization_already_used"
	ReasonUnexpectedVerify      = "unexpected_verify_error"
	ReasonUnexpectedSettle      = "unexpected_settle_error"
	// ReasonValidityTooLong refuses an authorization valid for longer than
	// the requirement's maxTimeoutSeconds plus a small clock skew.
	ReasonValidityTooLong = "invalid_exact_evm_payload_authorization_validity_too_long"
	// ReasonResourceMismatch refuses a v2 payment whose resource is not
	// the requested one.
	ReasonResourceMismatch = "invalid_payment_resource_mismatch"
	// ReasonAuthorizationCanceled: the payer canceled the authorization on
	// chain (EIP-3009 AuthorizationCanceled); it can never pay.
	ReasonAuthorizationCanceled = "authorization_canceled"
	// ReasonSettlementUnconfirmed: the facilitator reported a settlement
	// the chain does not show (no receipt, a failed one, or no transfer of
	// this authorization to payTo).
	ReasonSettlementUnconfirmed = "settlement_unconfirmed"
	// ReasonExpiredUnused: the authorization expired without ever being
	// used on chain; nothing was paid.
	ReasonExpiredUnused = "authorization_expired_unused"
)

// VerifyError is a payment refused before the handler ran: a 402 with the
// reason.
type VerifyError struct {
	Reason  string
	Message string
	Payer   string
}

func (e *VerifyError) Error() string {
	if e.Message == "" {
		return "payment refused: " + e.Reason
	}
	return fmt.Sprintf("payment refused: %s: %s", e.Reason, e.Message)
}

// FacilitatorError is a facilitator that could not be asked or answered
// nonsense: a 502, and the handler does not run.
type FacilitatorError struct {
	Op  string // "verify" or "settle"
	Err error
}

func (e *FacilitatorError) Error() string { return fmt.Sprintf("facilitator %s: %v", e.Op, e.Err) }

func (e *FacilitatorError) Unwrap() error { return e.Err }
