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
	// ClaimID identifies the request holding the claim: only it may
	// finish the record.
	ClaimID string
	// SigHash is keccak256(signature || value): a retry must carry the
	// very same authorization to be answered again.
	SigHash string
	// Response is the paid body (and ContentType) kept once settled, so a
	// retry is answered with it rather than by running the handler again.
	Response    []byte
	ContentType string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// PrevState and PrevTx are set by Claim when it took over a key left
	// pending, failed or released (or verified and stale).
	PrevState string
	PrevTx    string
}

// Paid is the settled total of one operation.
type Paid struct {
	Count  uint64
	Amount string // atomic units, decimal
}

// Ledger errors.
var (
	// ErrClaimed means the payment's key is already in the ledger in a
	// state that forbids a new claim; the existing record comes with it.
	ErrClaimed = errors.New("payment: authorization already claimed")
	// ErrLostClaim means another request took the claim over, or the
	// record is already settled.
	ErrLostClaim = errors.New("payment: claim no longer held")
)

// Ledger stores payments durably. The gate declares it; *store.SQLite
// implements it (and a PostgreSQL store with the same SQL can).
type Ledger interface {
	// Claim inserts rec in StateVerified under rec.ClaimID, or takes over a
	// key left released, failed or pending, or verified but last updated
	// before staleBefore (a process that died mid-payment), reporting the
	// state it took over in PrevState/PrevTx. Otherwise it returns the
	// existing record and ErrClaimed: one in-flight claim per key, whatever
	// the replicas.
	Claim(ctx context.Context, rec Record, staleBefore time.Time) (Record, error)
	// Finish moves a key to its outcome, only while rec.ClaimID holds it
	// and it is not settled; otherwise it returns ErrLostClaim.
	Finish(ctx context.Context, rec Record) error
	// PaidByOperation returns the settled payments per operation.
	PaidByOperation(ctx context.Context) (map[string]Paid, error)
}
