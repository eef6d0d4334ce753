package payment

import "time"

// Observer is told of each step of the payment funnel of one process:
// admin.Metrics implements it for Prometheus. Calls are made on the
// request path: implementations must be cheap and safe for concurrent use.
//
// A presented payment ends as one of: refused (nothing charged; reason
// is the 402's or the JSON error's code), verified then settled, verified
// then failed (settlement refused, reverted or not established; reason
// likewise), or none of them when a retry is answered from the ledger.
//
// Each call names the operation and the transport the call came by
// (TransportREST or TransportMCP).
type Observer interface {
	// Challenged: a requirement for a call without payment.
	Challenged(op, transport string)
	// Presented: a call carrying a payment.
	Presented(op, transport string)
	// Refused: a presented payment refused before any settlement.
	Refused(op, transport, reason string)
	// Verified: the facilitator verified the payment; the handler runs.
	Verified(op, transport string)
	// Settled: a settlement of usd confirmed on chain and answered; took
	// is from the settle request to the confirmed receipt, 0 when the
	// chain showed it paid already.
	Settled(op, transport string, usd float64, took time.Duration)
	// SettleFailed: a verified payment whose settlement failed or is not
	// established.
	SettleFailed(op, transport, reason string)
	// Deduplicated: a payment whose payment identifier was answered
	// already, answered from the record and not charged.
	Deduplicated(op, transport string)
	// SignedIn: a wallet read again what it bought (sign-in-with-x), not
	// charged.
	SignedIn(op string)
	// SignInRefused: a sign-in answered with the 402, and why.
	SignInRefused(op, reason string)
}

// The transports a paid call comes by.
const (
	TransportREST = "rest" // a GET with a payment header
	TransportMCP  = "mcp"  // an MCP tool call with the payment in _meta
)

// Transports lists the transports, for the metrics' labels.
func Transports() []string { return []string{TransportREST, TransportMCP} }

type nopObserver struct{}

func (nopObserver) Challenged(string, string)                      {}
func (nopObserver) Presented(string, string)                       {}
func (nopObserver) Refused(string, string, string)                 {}
func (nopObserver) Verified(string, string)                        {}
func (nopObserver) Settled(string, string, float64, time.Duration) {}
func (nopObserver) SettleFailed(string, string, string)            {}
func (nopObserver) Deduplicated(string, string)                    {}
func (nopObserver) SignedIn(string)                                {}
func (nopObserver) SignInRefused(string, string)                   {}
