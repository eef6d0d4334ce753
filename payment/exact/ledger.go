package exact

import (
	"context"
	"errors"
	"time"
)

// States of a payment in the ledger.
const (
	StateVerified = "verified" // claimed: verified, handler running or settling
	StateSettled  = "settled"  // transfer mined and confirmed on chain, with its real transaction hash
	StatePending  = "pending"  // outcome unknown: sent without a receipt in time, or the answer was lost
	StateFailed   = "failed"   // nothing was paid: refused, reverted, canceled or expired unused
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
	PayTo       string // the recipient the authorization pays
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

// Ledger errors.
var (
	// ErrNotFound means the ledger has no record of the payment.
	ErrNotFound = errors.New("payment: no such payment")
	// ErrClaimed means the payment's key is already in the ledger in a
	// state that forbids a new claim; the existing record comes with it.
	ErrClaimed = errors.New("payment: authorization already claimed")
	// ErrLostClaim means another request took the claim over, or the
	// record is already settled.
	ErrLostClaim = errors.New("payment: claim no longer held")
	// ErrAnswered means a settlement with a response was recorded while
	// another request's response for the same transaction was stored
	// first: the stored one is the payment's answer (Lookup reads it), so
	// that one payment never gets two different bodies.
	ErrAnswered = errors.New("payment: settled and answered by another request")
)

// Ledger stores exact payments durably. Server declares it; *store.DB
// implements it on SQLite or PostgreSQL.
//
// Two kinds of writes: Finish records what a request holding the claim
// decided (guarded by its claim id), Resolve records what the chain
// established (a confirmed settlement, a cancellation, an expiry), which is
// a fact whoever holds the claim.
type Ledger interface {
	// Claim inserts rec in StateVerified under rec.ClaimID, or takes over a
	// key left released, failed or pending, or verified but last updated
	// before staleBefore (a process that died mid-payment), reporting the
	// state it took over in PrevState/PrevTx. Otherwise it returns the
	// existing record and ErrClaimed: one in-flight claim per key, whatever
	// the replicas.
	Claim(ctx context.Context, rec Record, staleBefore time.Time) (Record, error)
	// Finish moves a key to its outcome, only while rec.ClaimID holds it
	// and it is not settled; otherwise it returns ErrLostClaim. A settled
	// outcome is recorded as Resolve records it.
	Finish(ctx context.Context, rec Record) error
	// Resolve records an outcome established on chain, whatever claim
	// holds the key: StateSettled (with the real transaction hash; idempotent
	// for the same hash, and it keeps the first stored response, filling
	// one in if none is stored yet, or returning ErrAnswered when rec
	// brings a response and another is stored; the totals count it once)
	// from any unsettled state, or StateFailed from verified or pending
	// only. Else ErrLostClaim.
	Resolve(ctx context.Context, rec Record) error
	// Lookup returns the record of rec's key, or ErrNotFound.
	Lookup(ctx context.Context, rec Record) (Record, error)
}
