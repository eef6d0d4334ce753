package exact

import (
	"context"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/tollgate/tollgate/payment"
)

// Verification is a facilitator's verdict on a payment.
type Verification struct {
	Valid   bool
	Reason  string
	Message string
	Payer   common.Address
}

// Settlement is the outcome of settling a payment on chain. Pending means
// the transaction was sent but its receipt did not come in time: Tx holds
// its hash, and the payment may still land.
type Settlement struct {
	Success bool
	Pending bool
	Reason  string
	Message string
	Tx      common.Hash
	Payer   common.Address
	// Receipt is Tx's receipt as the facilitator read it from the chain
	// itself (the in-process *Local); the gate then checks it in memory
	// instead of fetching it again. A remote facilitator's word carries
	// none: its settlement is confirmed by reading the chain.
	Receipt *types.Receipt
}

// Facilitator verifies and settles exact payments. *Local does it itself
// on a chain; *Remote asks a remote facilitator. An error (rather than a
// Verification or Settlement saying no) means the facilitator could not
// answer: the gate answers 502 and does not run the handler.
type Facilitator interface {
	Verify(ctx context.Context, p *Payment, r *payment.Requirement) (Verification, error)
	Settle(ctx context.Context, p *Payment, r *payment.Requirement) (Settlement, error)
}
