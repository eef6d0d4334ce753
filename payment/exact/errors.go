package exact

// Reason codes of the exact scheme, as the x402 reference facilitators
// write them, and Tollgate's own for what the chain established.
const (
	ReasonInvalidScheme         = "invalid_exact_evm_scheme"
	ReasonNetworkMismatch       = "invalid_exact_evm_network_mismatch"
	ReasonRecipientMismatch     = "invalid_exact_evm_recipient_mismatch"
	ReasonValueMismatch         = "invalid_exact_evm_payload_authorization_value_mismatch"
	ReasonValidBefore           = "invalid_exact_evm_payload_authorization_valid_before"
	ReasonValidAfter            = "invalid_exact_evm_payload_authorization_valid_after"
	ReasonInvalidSignature      = "invalid_exact_evm_signature"
	ReasonNonceUsed             = "invalid_exact_evm_nonce_already_used"
	ReasonInsufficientBalance   = "invalid_exact_evm_insufficient_balance"
	ReasonSimulationFailed      = "invalid_exact_evm_transaction_simulation_failed"
	ReasonTransactionFailed     = "invalid_exact_evm_transaction_failed"
	ReasonAuthorizationReplayed = "authorization_already_used"
	// ReasonValidityTooLong refuses an authorization valid for longer than
	// the requirement's maxTimeoutSeconds plus a small clock skew.
	ReasonValidityTooLong = "invalid_exact_evm_payload_authorization_validity_too_long"
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
