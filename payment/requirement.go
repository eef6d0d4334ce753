package payment

import (
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// Requirement is what the gate asks for one paid operation, whatever the
// scheme: one network, one asset, one recipient, one amount.
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
	transport string     // TransportREST or TransportMCP
}

// Domain returns the EIP-712 domain payments for r are signed in.
func (r *Requirement) Domain() Domain {
	return Domain{Name: r.AssetName, Version: r.AssetVersion, ChainID: r.ChainID, VerifyingContract: r.Asset}
}
