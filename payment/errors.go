package payment

import "fmt"

// Reason codes every scheme may answer with, as the x402 reference
// facilitators write them; each scheme's own are in its package.
const (
	ReasonInvalidPayload    = "invalid_payload"
	ReasonInvalidVersion    = "invalid_x402_version"
	ReasonNoMatch           = "invalid_payment_requirements"
	ReasonSettlementPending = "settlement_pending"
	ReasonPaymentInFlight   = "payment_in_flight"
	ReasonUnexpectedVerify  = "unexpected_verify_error"
	ReasonUnexpectedSettle  = "unexpected_settle_error"
	// ReasonResourceMismatch refuses a v2 payment whose resource is not
	// the requested one.
	ReasonResourceMismatch = "invalid_payment_resource_mismatch"
)

// Codes of Tollgate's own for a failure of its side, the error of the
// JSON body (docs/payments.md "Codes of our own"); each scheme answers
// with them.
const (
	// ReasonUnavailable (503): the store could not be asked; nothing was
	// charged.
	ReasonUnavailable = "unavailable"
	// ReasonBadGateway (502): the facilitator failed; nothing was charged.
	ReasonBadGateway = "bad_gateway"
	// ReasonSettlementUnknown (502): the settlement's outcome is unknown;
	// the payer retries the same payment.
	ReasonSettlementUnknown = "settlement_unknown"
	// ReasonSettlementUnrecorded (503): paid on chain, not yet in the
	// ledger; the payer retries the same payment to receive the body.
	ReasonSettlementUnrecorded = "settlement_unrecorded"
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
