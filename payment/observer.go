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
type Observer interface {
	// Challenged: a 402 for a request without payment.
	Challenged(op string)
	// Presented: a request carrying a payment header.
	Presented(op string)
	// Refused: a presented payment refused before any settlement.
	Refused(op, reason string)
	// Verified: the facilitator verified the payment; the handler runs.
	Verified(op string)
	// Settled: a settlement of usd confirmed on chain and answered; took
	// is from the settle request to the confirmed receipt, 0 when the
	// chain showed it paid already.
	Settled(op string, usd float64, took time.Duration)
	// SettleFailed: a verified payment whose settlement failed or is not
	// established.
	SettleFailed(op, reason string)
}

type nopObserver struct{}

func (nopObserver) Challenged(string)                      {}
func (nopObserver) Presented(string)                       {}
func (nopObserver) Refused(string, string)                 {}
func (nopObserver) Verified(string)                        {}
func (nopObserver) Settled(string, float64, time.Duration) {}
func (nopObserver) SettleFailed(string, string)            {}
