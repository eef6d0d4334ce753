package payment

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Requirement is what the gate asks for one paid operation: the exact-EVM
// scheme on one network, one asset, one recipient, one amount.
type Requirement struct {
	Network      string // CAIP-2, "eip155:8453"
	NetworkV1    string // x402 v1 name, "base"
	ChainID      *big.Int
	Asset        common.Address
	AssetName    string // EIP-712 domain name, "USD Coin"
	AssetVersion string // EIP-712 domain version, "2"
	PayTo        common.Address
	Amount       *big.Int // atomic units
	MaxTimeout   int      // seconds
	Resource     string   // absolute URL
	Description  string
	MimeType     string
	Operation    string // the paid operation's name, for the metrics; not on the wire

	discovery *discovery // the route's discovery fields, for challenges
}

// V2 returns r as an x402 v2 requirement.
func (r *Requirement) V2() RequirementsV2 {
	return RequirementsV2{
		Scheme: "exact", Network: r.Network, Amount: r.Amount.String(), Asset: r.Asset.Hex(),
		PayTo: r.PayTo.Hex(), MaxTimeoutSeconds: r.MaxTimeout, Extra: Extra{Name: r.AssetName, Version: r.AssetVersion},
	}
}

// Domain returns the EIP-712 domain payments for r are signed in.
func (r *Requirement) Domain() Domain {
	return Domain{Name: r.AssetName, Version: r.AssetVersion, ChainID: r.ChainID, VerifyingContract: r.Asset}
}

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

// Facilitator verifies and settles payments. *Local does it itself on a
// chain; *Client asks a remote facilitator. An error (rather than a
// Verification or Settlement saying no) means the facilitator could not
// answer: the gate answers 502 and does not run the handler.
type Facilitator interface {
	Verify(ctx context.Context, p *Payment, r *Requirement) (Verification, error)
	Settle(ctx context.Context, p *Payment, r *Requirement) (Settlement, error)
}
