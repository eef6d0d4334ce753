package batch

import (
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// escrowABI is what the facilitator calls, reads and decodes (docs/batch-settlement.md
// §1.3–1.4): the escrow's deposit, claimWithSignature, settle,
// refundWithSignature and multicall, its state getters, the events whose
// amounts it reports, every custom error it can revert with (its own,
// OpenZeppelin's it inherits, and the ERC-3009 collector's, which a
// deposit bubbles up), and the token's balanceOf. The escrow's entries are
// the devnet artifact's (devnet/contracts/BatchSettlement.sol), which match
// the official @x402/evm 2.27 ABI.
const escrowABI = `[
 {"inputs":[{"name":"target","type":"address"}],"name":"AddressEmptyCode","type":"error"},
 {"inputs":[],"name":"ClaimExceedsBalance","type":"error"},
 {"inputs":[],"name":"ClaimExceedsCeiling","type":"error"},
 {"inputs":[],"name":"DepositCollectionFailed","type":"error"},
 {"inputs":[],"name":"DepositOverflow","type":"error"},
 {"inputs":[],"name":"ECDSAInvalidSignature","type":"error"},
 {"inputs":[{"name":"length","type":"uint256"}],"name":"ECDSAInvalidSignatureLength","type":"error"},
 {"inputs":[{"name":"s","type":"bytes32"}],"name":"ECDSAInvalidSignatureS","type":"error"},
 {"inputs":[],"name":"EmptyBatch","type":"error"},
 {"inputs":[],"name":"FailedCall","type":"error"},
 {"inputs":[],"name":"InvalidChannel","type":"error"},
 {"inputs":[],"name":"InvalidCollector","type":"error"},
 {"inputs":[],"name":"InvalidRefundNonce","type":"error"},
 {"inputs":[],"name":"InvalidSignature","type":"error"},
 {"inputs":[],"name":"NotAuthorizedToClaim","type":"error"},
 {"inputs":[],"name":"NotAuthorizedToFinalizeWithdraw","type":"error"},
 {"inputs":[],"name":"NotAuthorizedToRefund","type":"error"},
 {"inputs":[],"name":"NotReceiverAuthorizer","type":"error"},
 {"inputs":[],"name":"NothingToWithdraw","type":"error"},
 {"inputs":[],"name":"ReentrancyGuardReentrantCall","type":"error"},
 {"inputs":[{"name":"token","type":"address"}],"name":"SafeERC20FailedOperation","type":"error"},
 {"inputs":[],"name":"WithdrawAmountExceedsAvailable","type":"error"},
 {"inputs":[],"name":"WithdrawDelayNotElapsed","type":"error"},
 {"inputs":[],"name":"WithdrawDelayOutOfRange","type":"error"},
 {"inputs":[],"name":"WithdrawalAlreadyPending","type":"error"},
 {"inputs":[],"name":"WithdrawalNotPending","type":"error"},
 {"inputs":[],"name":"ZeroDeposit","type":"error"},
 {"inputs":[],"name":"ZeroRefund","type":"error"},
 {"anonymous":false,"inputs":[{"indexed":true,"name":"channelId","type":"bytes32"},{"indexed":true,"name":"sender","type":"address"},{"indexed":false,"name":"claimAmount","type":"uint128"},{"indexed":false,"name":"newTotalClaimed","type":"uint128"}],"name":"Claimed","type":"event"},
 {"anonymous":false,"inputs":[{"indexed":true,"name":"channelId","type":"bytes32"},{"indexed":true,"name":"sender","type":"address"},{"indexed":false,"name":"amount","type":"uint128"},{"indexed":false,"name":"newBalance","type":"uint128"}],"name":"Deposited","type":"event"},
 {"anonymous":false,"inputs":[{"indexed":true,"name":"channelId","type":"bytes32"},{"indexed":true,"name":"sender","type":"address"},{"indexed":false,"name":"amount","type":"uint128"}],"name":"Refunded","type":"event"},
 {"anonymous":false,"inputs":[{"indexed":true,"name":"receiver","type":"address"},{"indexed":true,"name":"token","type":"address"},{"indexed":true,"name":"sender","type":"address"},{"indexed":false,"name":"amount","type":"uint128"}],"name":"Settled","type":"event"},
 {"inputs":[{"name":"channelId","type":"bytes32"}],"name":"channels","outputs":[{"name":"balance","type":"uint128"},{"name":"totalClaimed","type":"uint128"}],"stateMutability":"view","type":"function"},
 {"inputs":[{"components":[{"components":[{"components":[{"name":"payer","type":"address"},{"name":"payerAuthorizer","type":"address"},{"name":"receiver","type":"address"},{"name":"receiverAuthorizer","type":"address"},{"name":"token","type":"address"},{"name":"withdrawDelay","type":"uint40"},{"name":"salt","type":"bytes32"}],"name":"channel","type":"tuple"},{"name":"maxClaimableAmount","type":"uint128"}],"name":"voucher","type":"tuple"},{"name":"signature","type":"bytes"},{"name":"totalClaimed","type":"uint128"}],"name":"voucherClaims","type":"tuple[]"},{"name":"authorizerSignature","type":"bytes"}],"name":"claimWithSignature","outputs":[],"stateMutability":"nonpayable","type":"function"},
 {"inputs":[{"components":[{"name":"payer","type":"address"},{"name":"payerAuthorizer","type":"address"},{"name":"receiver","type":"address"},{"name":"receiverAuthorizer","type":"address"},{"name":"token","type":"address"},{"name":"withdrawDelay","type":"uint40"},{"name":"salt","type":"bytes32"}],"name":"config","type":"tuple"},{"name":"amount","type":"uint128"},{"name":"collector","type":"address"},{"name":"collectorData","type":"bytes"}],"name":"deposit","outputs":[],"stateMutability":"nonpayable","type":"function"},
 {"inputs":[{"name":"data","type":"bytes[]"}],"name":"multicall","outputs":[{"name":"results","type":"bytes[]"}],"stateMutability":"nonpayable","type":"function"},
 {"inputs":[{"name":"channelId","type":"bytes32"}],"name":"pendingWithdrawals","outputs":[{"name":"amount","type":"uint128"},{"name":"initiatedAt","type":"uint40"}],"stateMutability":"view","type":"function"},
 {"inputs":[{"name":"receiver","type":"address"},{"name":"token","type":"address"}],"name":"receivers","outputs":[{"name":"totalClaimed","type":"uint128"},{"name":"totalSettled","type":"uint128"}],"stateMutability":"view","type":"function"},
 {"inputs":[{"name":"channelId","type":"bytes32"}],"name":"refundNonce","outputs":[{"name":"","type":"uint256"}],"stateMutability":"view","type":"function"},
 {"inputs":[{"components":[{"name":"payer","type":"address"},{"name":"payerAuthorizer","type":"address"},{"name":"receiver","type":"address"},{"name":"receiverAuthorizer","type":"address"},{"name":"token","type":"address"},{"name":"withdrawDelay","type":"uint40"},{"name":"salt","type":"bytes32"}],"name":"config","type":"tuple"},{"name":"amount","type":"uint128"},{"name":"nonce","type":"uint256"},{"name":"receiverAuthorizerSignature","type":"bytes"}],"name":"refundWithSignature","outputs":[],"stateMutability":"nonpayable","type":"function"},
 {"inputs":[{"name":"receiver","type":"address"},{"name":"token","type":"address"}],"name":"settle","outputs":[],"stateMutability":"nonpayable","type":"function"},
 {"inputs":[],"name":"OnlyX402BatchSettlement","type":"error"},
 {"inputs":[{"name":"account","type":"address"}],"name":"balanceOf","outputs":[{"name":"","type":"uint256"}],"stateMutability":"view","type":"function"}
]`

// abiConfig, abiVoucher and abiClaim are the escrow's ABI tuples in the
// shape go-ethereum's abi package packs (fields by component name).
type abiConfig struct {
	Payer              common.Address
	PayerAuthorizer    common.Address
	Receiver           common.Address
	ReceiverAuthorizer common.Address
	Token              common.Address
	WithdrawDelay      *big.Int // uint40
	Salt               [32]byte
}

type abiVoucher struct {
	Channel            abiConfig
	MaxClaimableAmount *big.Int
}

type abiClaim struct {
	Voucher      abiVoucher
	Signature    []byte
	TotalClaimed *big.Int
}

func toABI(c Config) abiConfig {
	return abiConfig{Payer: c.Payer, PayerAuthorizer: c.PayerAuthorizer, Receiver: c.Receiver, ReceiverAuthorizer: c.ReceiverAuthorizer,
		Token: c.Token, WithdrawDelay: new(big.Int).SetUint64(c.WithdrawDelay), Salt: c.Salt}
}

func claimsABI(rows []Claim) []abiClaim {
	out := make([]abiClaim, len(rows))
	for i, r := range rows {
		sig := r.Signature
		if sig == nil {
			sig = []byte{}
		}
		out[i] = abiClaim{Voucher: abiVoucher{Channel: toABI(r.Config), MaxClaimableAmount: r.MaxClaimable}, Signature: sig, TotalClaimed: r.TotalClaimed}
	}
	return out
}
