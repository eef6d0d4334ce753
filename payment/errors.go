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
