package batch

import (
	"math/big"
	"sync"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// The addresses the official client and facilitator use (hard-coded in
// @x402/evm; docs/batch-settlement.md §1.1). The devnet places our
// contracts there.
var (
	EscrowAddress           = common.HexToAddress("0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003")
	ERC3009CollectorAddress = common.HexToAddress("0x4020806089470a89826cB9fB1f4059150b550004")
)

// The escrow's EIP-712 domain name and version.
const (
	DomainName    = "x402 Batch Settlement"
	DomainVersion = "1"
)

var (
	channelConfigType = crypto.Keccak256Hash([]byte("ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"))
	voucherType       = crypto.Keccak256Hash([]byte("Voucher(bytes32 channelId,uint128 maxClaimableAmount)"))
	refundType        = crypto.Keccak256Hash([]byte("Refund(bytes32 channelId,uint256 nonce,uint128 amount)"))
	claimEntryType    = crypto.Keccak256Hash([]byte("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"))
	claimBatchType    = crypto.Keccak256Hash([]byte("ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"))
)

// Escrow is the escrow's EIP-712 domain on one chain: every signature of
// the scheme but the deposit's (which is the token's) is made in it.
type Escrow struct {
	ChainID *big.Int
	Address common.Address
}

func (e Escrow) digest(structHash []byte) common.Hash {
	sep := e.separator()
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, sep[:], structHash)
}

// separator is the escrow's EIP-712 domain separator, computed once per
// escrow (five hashes that every voucher, claim and refund would redo).
func (e Escrow) separator() common.Hash {
	key := escrowKey{chain: e.ChainID.String(), address: e.Address}
	if sep, ok := separators.Load(key); ok {
		return sep.(common.Hash)
	}
	sep := payment.Domain{Name: DomainName, Version: DomainVersion, ChainID: e.ChainID, VerifyingContract: e.Address}.Separator()
	if separatorCount.Add(1) <= maxSeparators { // escrows come from configuration: a handful
		separators.Store(key, sep)
	}
	return sep
}

type escrowKey struct {
	chain   string
	address common.Address
}

var (
	separators     sync.Map // escrowKey -> common.Hash
	separatorCount atomic.Int64
)

const maxSeparators = 64

// ChannelID is the id of the channel of c: the EIP-712 digest of the
// config in the escrow's domain (so it binds the chain and the escrow).
func (e Escrow) ChannelID(c Config) common.Hash {
	return e.digest(crypto.Keccak256(channelConfigType[:],
		addressWord(c.Payer), addressWord(c.PayerAuthorizer), addressWord(c.Receiver), addressWord(c.ReceiverAuthorizer),
		addressWord(c.Token), word(new(big.Int).SetUint64(c.WithdrawDelay)), c.Salt[:]))
}

// VoucherDigest is what a payer signs to allow claims up to max
// (cumulative) on channel id.
func (e Escrow) VoucherDigest(id common.Hash, max *big.Int) common.Hash {
	return e.digest(crypto.Keccak256(voucherType[:], id[:], word(max)))
}

// RefundDigest is what the receiver's authorizer signs to refund amount
// of channel id at refund nonce.
func (e Escrow) RefundDigest(id common.Hash, nonce, amount *big.Int) common.Hash {
	return e.digest(crypto.Keccak256(refundType[:], id[:], word(nonce), word(amount)))
}

// ClaimEntry is one row of a claim batch.
type ClaimEntry struct {
	ChannelID          common.Hash
	MaxClaimableAmount *big.Int // the voucher's
	TotalClaimed       *big.Int // the new cumulative claimed total
}

// ClaimBatchDigest is what the receiver's authorizer signs to claim
// entries in one claimWithSignature.
func (e Escrow) ClaimBatchDigest(entries []ClaimEntry) common.Hash {
	var hashes []byte
	for _, c := range entries {
		hashes = append(hashes, crypto.Keccak256(claimEntryType[:], c.ChannelID[:], word(c.MaxClaimableAmount), word(c.TotalClaimed))...)
	}
	return e.digest(crypto.Keccak256(claimBatchType[:], crypto.Keccak256(hashes)))
}

// DepositNonce is the ERC-3009 nonce of a deposit into channel id with
// salt: keccak256(abi.encode(channelId, salt)), binding the token
// authorization to the channel.
func DepositNonce(id common.Hash, salt *big.Int) common.Hash {
	return crypto.Keccak256Hash(id[:], word(salt))
}

func addressWord(a common.Address) []byte { return common.LeftPadBytes(a[:], 32) }

func word(v *big.Int) []byte {
	if v == nil {
		return make([]byte, 32)
	}
	return common.LeftPadBytes(v.Bytes(), 32)
}
