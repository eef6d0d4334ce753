// Package exact is the x402 exact scheme on EVM chains: one EIP-3009
// transferWithAuthorization per paid call.
//
// It is one scheme folder beside payment/batch, importing only the
// shared package payment: its wire payload (Payment, DecodeHeader,
// EncodePayment); its server side (Server, a payment.V1Scheme the gate
// offers to v1 and v2 clients), which claims each authorization in the
// Ledger, settles only a handler's success, confirms the transfer on
// chain (Auditor) before releasing the body and answers retries from the
// ledger or the chain (Reconciler resolves what was left unresolved);
// its facilitators (Local on a chain, through the shared gas key's
// sender; Remote over the shared transport; Adapter for the facilitator
// HTTP API); and its client side (Payer, a payment.SchemeClient).
package exact
