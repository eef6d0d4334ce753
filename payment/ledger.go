package payment

import (
	"context"
	"errors"
	"time"
)

// States of a payment in the ledger.
const (
	StateVerified = "verified" // claimed: verified, handler running or settling
	StateSettled  = "settled"  // transfer mined
	StatePending  = "pending"  // transfer sent, receipt not seen in time
	StateFailed   = "failed"   // settlement refused or reverted; the nonce is unused
	StateReleased = "released" // handler failed, nothing settled; the payment may be retried
)

// Record is one payment authorization in the ledger, keyed by (network,
// asset, payer, nonce): the EIP-3009 nonce makes it single-use on chain.
type Record struct {
	Network     string
	Asset       string
	Payer       string
	Nonce       string // 0x-hex
	Operation   string
	Resource    string // the request path, e.g. /rugcheck/0x...
	Amount      string // atomic units
	Version     int    // x402 version
	ValidBefore int64  // Unix seconds
	State       string
	Tx          string
	Reason      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Attempt is a payment refused before any claim (bad header, failed
// verification), kept for the record.
type Attempt struct {
	Time      time.Time
	Operation string
	Payer     string
	Nonce     string
	Reason    string
}

// Paid is the settled total of one operation.
type Paid struct {
	Count  uint64
	Amount string // atomic units, decimal
}

// ErrClaimed means the payment's key is already in the ledger in a state
// that forbids a new claim; the existing record is returned with it.
var ErrClaimed = errors.New("payment: authorization already claimed")

// Ledger stores payments durably. The gate declares it; *store.SQLite
// implements it (and a PostgreSQL store with the same SQL can).
type Ledger interface {
	// Claim inserts rec in StateVerified, or takes over a key left
	// released or failed, or verified but last updated before staleBefore
	// (a process that died mid-payment). Otherwise it returns the existing
	// record and ErrClaimed: one in-flight claim per key, whatever the
	// replicas.
	Claim(ctx context.Context, rec Record, staleBefore time.Time) (Record, error)
	// Finish moves a claimed key to its outcome.
	Finish(ctx context.Context, rec Record) error
	// Refused records a payment refused before any claim.
	Refused(ctx context.Context, a Attempt) error
	// PaidByOperation returns the settled payments per operation.
	PaidByOperation(ctx context.Context) (map[string]Paid, error)
}
