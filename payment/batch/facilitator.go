package batch

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
)

// Facilitator is what the scheme's server side and its claimer ask of a
// facilitator (docs/batch-settlement.md §2.6–2.8): *Local does it on a
// chain itself, *Remote asks a facilitator over HTTP. An error (rather
// than a Verdict or Outcome saying no) means the facilitator could not
// answer.
type Facilitator interface {
	// Verify checks payment p against the route's accepts entry req: the
	// channel binding, the voucher's signature, and the escrow's state
	// (and for a deposit its authorization and a simulation). The verdict
	// carries the state it read (before the deposit, for a deposit).
	Verify(ctx context.Context, p *Payment, req payment.RequirementsV2, raw []byte) (Verdict, error)
	// Deposit verifies p again and sends its deposit, reporting the
	// channel's state after it.
	Deposit(ctx context.Context, p *Payment, req payment.RequirementsV2, raw []byte) (Outcome, error)
	// Claim sends claimWithSignature for rows, signed by the receiver
	// authorizer (sig; nil asks the facilitator to sign with its own).
	Claim(ctx context.Context, rows []Claim, sig []byte) (Outcome, error)
	// Settle sweeps what was claimed for receiver in token to it.
	Settle(ctx context.Context, receiver, token common.Address) (Outcome, error)
	// Refund returns part or all of a channel's unclaimed deposit to its
	// payer, claiming o's rows in the same transaction first.
	Refund(ctx context.Context, o RefundOrder) (Outcome, error)
}

// OnChain is a channel's state in the escrow.
type OnChain struct {
	Balance             *big.Int
	TotalClaimed        *big.Int
	WithdrawRequestedAt uint64 // unix seconds; 0: no timed withdrawal pending
	RefundNonce         *big.Int
}

// Verdict is a facilitator's verification of a payment.
type Verdict struct {
	Valid           bool
	Reason, Message string
	Payer           common.Address
	State           OnChain
}

// Outcome is what a facilitator's settle did: Success with its
// transaction, or the reason it did not. Amount is the deposit, the
// amount settled, or the amount refunded. State is the channel's state
// afterwards, when the action reports one (deposit, refund).
type Outcome struct {
	Success         bool
	Reason, Message string
	Tx              common.Hash
	Amount          *big.Int
	State           *OnChain
	// Opened reports that a deposit found the channel empty: it opened
	// it (the escrow's Deposited event shows the new balance equal to the
	// amount).
	Opened bool
}

// Claim is one row of a claim: the receiver claims TotalClaimed (what it
// charged) on the channel, under the payer's voucher of MaxClaimable.
type Claim struct {
	Config       Config
	MaxClaimable *big.Int
	Signature    []byte
	TotalClaimed *big.Int
}

// RefundOrder is a cooperative refund: Amount of channel Config at the
// escrow's refund nonce Nonce, with the claims to make first, and the
// receiver authorizer's signatures (nil: the facilitator signs with its
// own authorizer key).
type RefundOrder struct {
	Config       Config
	MaxClaimable *big.Int // the refund request's voucher
	Signature    []byte
	Amount       *big.Int
	Nonce        *big.Int
	Claims       []Claim
	RefundSig    []byte
	ClaimSig     []byte
}
