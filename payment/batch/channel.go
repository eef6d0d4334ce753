// Package batch is the x402 batch-settlement scheme on EVM
// (docs/batch-settlement.md): a payer deposits once into an escrow
// channel, then signs a cumulative voucher per request; the server checks
// a signature and serves, and claims and settles many vouchers in one
// transaction later.
//
// This file holds the server's state of a channel and the store it lives
// in; the scheme's wire types, checks, facilitator and client sides join
// it here.
package batch

import (
	"context"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Config is a channel's ChannelConfig: the escrow derives the channel id
// from it (the EIP-712 digest of the struct in the escrow's domain).
type Config struct {
	Payer              common.Address `json:"payer"`
	PayerAuthorizer    common.Address `json:"payerAuthorizer"`
	Receiver           common.Address `json:"receiver"`
	ReceiverAuthorizer common.Address `json:"receiverAuthorizer"`
	Token              common.Address `json:"token"`
	WithdrawDelay      uint64         `json:"withdrawDelay"` // seconds (uint40 on chain)
	Salt               common.Hash    `json:"salt"`
}

// Channel is what the server keeps of one channel: what it has charged,
// the latest voucher, and its mirror of the escrow's state (the spec's
// "Per-Channel State"). Amounts are the token's atomic units.
type Channel struct {
	ID     common.Hash
	Config Config
	// Charged is the cumulative amount served and charged so far; the next
	// voucher must sign Charged + price.
	Charged *big.Int
	// SignedMax and Signature are the latest voucher (its
	// maxClaimableAmount) and its signature: what a claim presents.
	SignedMax *big.Int
	Signature []byte
	// The escrow's state as last read: deposit balance, amount claimed,
	// when a timed withdrawal was requested (unix seconds, 0: none), the
	// refund nonce; SyncedAt is when it was read.
	Balance             *big.Int
	TotalClaimed        *big.Int
	WithdrawRequestedAt uint64
	RefundNonce         *big.Int
	SyncedAt            time.Time
	// LastRequest is when the channel last paid for a request.
	LastRequest time.Time
	// UnclaimedSince is when Charged last rose above TotalClaimed (the age
	// of the oldest value not claimed yet); zero while everything charged
	// is claimed. Commit sets it, the claimer clears it.
	UnclaimedSince time.Time
	// Pending is the request being served on the channel, if any: one at a
	// time per channel, across replicas, until it commits or expires.
	Pending *Reservation
	// RefundPending is a cooperative refund sent (or whose sending is
	// unknown) that the mirror does not show landed yet: until a read of
	// the escrow shows its nonce used, its amount is taken off the balance
	// every voucher is checked against.
	RefundPending *PendingRefund
	// LastRefundAt is when the last cooperative refund was asked of the
	// facilitator: refunds are rate-limited per channel.
	LastRefundAt time.Time
	// Answer is the last paid answer on the channel, kept for a resend of
	// its voucher (the answer was lost on the way back).
	Answer *Answer
	// Opened reports that this store holds the channel's opening: its
	// row was made by a deposit this server sent that found the channel
	// empty (or before the rule, by any first payment). Only an opened
	// channel is served: what another server opened, it serves
	// (docs/batch-settlement.md, "Servers with separate books").
	Opened bool
	// OwnClaimed is the highest claimed total this store has asked the
	// escrow for (a claim, or a refund's claim), written before it is
	// sent: a claimed total above it was claimed by someone else.
	OwnClaimed *big.Int
	// StoppedAt is when the channel stopped being served, on evidence
	// that another server charged it; zero: served. StopEvidence names
	// the evidence (Evidence*) and StopDetail says what was seen.
	StoppedAt    time.Time
	StopEvidence string
	StopDetail   string
	// NewCharge, when set by an update, is written to the books in the
	// same transaction as the channel (Save); it is never read back.
	NewCharge *Charge
	// Version is the store's mark of the row this copy was read from
	// (empty: not read from a store); UpdateChannelFrom compares it.
	Version string
}

// The evidence on which a channel stops being served: each is a sign
// that a server with other books charged it, and serving it here could
// serve a range of vouchers twice.
const (
	// EvidenceVoucherAhead: the payer signed a voucher above this store's
	// charged total plus the price, for charges this store never made.
	EvidenceVoucherAhead = "voucher_ahead"
	// EvidenceOpenedElsewhere: a payment for a channel this store did not
	// open, which the escrow shows funded or claimed.
	EvidenceOpenedElsewhere = "opened_elsewhere"
	// EvidenceClaimedElsewhere: the escrow shows the channel claimed above
	// what this store claimed.
	EvidenceClaimedElsewhere = "claimed_elsewhere"
)

// Evidences are the evidence names, in the order of the constants.
func Evidences() []string {
	return []string{EvidenceVoucherAhead, EvidenceOpenedElsewhere, EvidenceClaimedElsewhere}
}

// StopObserver is told of every channel stopped (once per channel);
// *admin.Metrics implements it.
type StopObserver interface {
	BatchChannelStopped(evidence string)
}

// stop stops channel c at now on evidence, once; it reports whether it
// did (false: stopped already).
func (c *Channel) stop(evidence, detail string, now time.Time) bool {
	if !c.StoppedAt.IsZero() {
		return false
	}
	c.StoppedAt, c.StopEvidence, c.StopDetail = now, evidence, detail
	return true
}

// PendingRefund is the cooperative refunds that may still land at one
// refund nonce: only one of them can (each uses the nonce), but which is
// not known, so every voucher is judged as if the largest did.
type PendingRefund struct {
	Nonce  *big.Int // the escrow's refund nonce they use
	Amount *big.Int // the largest of them
	// Orders is how many were sent (or may have been) and are not known
	// to have failed; when it falls to 0, none can land.
	Orders int
	At     time.Time
}

// Answer is a paid answer as a resend of its voucher gets it again.
type Answer struct {
	Resource    string // the request URI (path and query) it answered
	ContentType string
	Body        []byte
	Settlement  []byte // the PAYMENT-RESPONSE object, JSON
	At          time.Time
}

// Charge is one request a channel paid for, as the books record it.
type Charge struct {
	Operation string
	Resource  string
	Amount    *big.Int
	// Cumulative is the channel's charged total after this charge: with
	// the channel id, the charge's key.
	Cumulative *big.Int
	At         time.Time
}

// Reservation holds a channel for one request between its verification
// and its commit.
type Reservation struct {
	ID        string
	SignedMax *big.Int // the voucher's maxClaimableAmount
	ExpiresAt time.Time
}

// Live reports whether r still holds its channel at now.
func (r *Reservation) Live(now time.Time) bool { return r != nil && now.Before(r.ExpiresAt) }

// Change is what an update does with the channel it was handed.
type Change int

// The changes an update may ask for.
const (
	Keep   Change = iota // write nothing
	Save                 // write the channel (create it if new)
	Delete               // remove it (a full refund)
)

// Store keeps the channels of a service, shared by its replicas; *store.DB
// implements it on SQLite and PostgreSQL.
type Store interface {
	// Channel returns the channel id, and whether it exists.
	Channel(ctx context.Context, id common.Hash) (Channel, bool, error)
	// Channels returns every channel, by id.
	Channels(ctx context.Context) ([]Channel, error)
	// UpdateChannel reads channel id (found false, and a Channel with only
	// ID set, when it does not exist), hands it to fn and applies fn's
	// change, atomically: updates of one channel are serialized across
	// replicas. An error from fn changes nothing and is returned. It
	// returns the channel as fn left it.
	UpdateChannel(ctx context.Context, id common.Hash, fn func(c *Channel, found bool) (Change, error)) (Channel, error)
	// UpdateChannelFrom is UpdateChannel of from.ID, started from from, a
	// copy read with Channel: fn runs first on from, and when it saves and
	// the row is still as from was read (its Version), the change is
	// written without reading the row again. Otherwise fn runs again as in
	// UpdateChannel, on the row as it is: fn may run twice, and only its
	// last run counts.
	UpdateChannelFrom(ctx context.Context, from Channel, fn func(c *Channel, found bool) (Change, error)) (Channel, error)
}
