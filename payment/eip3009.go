package payment

import (
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
)

// Authorization is an EIP-3009 TransferWithAuthorization message.
type Authorization struct {
	From        common.Address
	To          common.Address
	Value       *big.Int
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       [32]byte
}

// Domain is the EIP-712 domain of an EIP-3009 token.
type Domain struct {
	Name              string
	Version           string
	ChainID           *big.Int
	VerifyingContract common.Address
}

var (
	domainTypeHash   = crypto.Keccak256Hash([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"))
	transferTypeHash = crypto.Keccak256Hash([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"))
	receiveTypeHash  = crypto.Keccak256Hash([]byte("ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"))
)

// Separator returns the EIP-712 domain separator.
func (d Domain) Separator() common.Hash {
	return crypto.Keccak256Hash(
		domainTypeHash[:],
		crypto.Keccak256([]byte(d.Name)),
		crypto.Keccak256([]byte(d.Version)),
		common.LeftPadBytes(d.ChainID.Bytes(), 32),
		common.LeftPadBytes(d.VerifyingContract[:], 32),
	)
}

// Digest returns the EIP-712 digest a payer signs for a:
// keccak256(0x1901 || domainSeparator || hashStruct(a)).
func (d Domain) Digest(a Authorization) common.Hash { return d.digest(transferTypeHash, a) }

// ReceiveDigest is Digest for ReceiveWithAuthorization, the variant only
// the recipient may submit (a batch-settlement deposit's, to the
// collector).
func (d Domain) ReceiveDigest(a Authorization) common.Hash { return d.digest(receiveTypeHash, a) }

func (d Domain) digest(typeHash common.Hash, a Authorization) common.Hash {
	sep := d.Separator()
	structHash := crypto.Keccak256(
		typeHash[:],
		common.LeftPadBytes(a.From[:], 32),
		common.LeftPadBytes(a.To[:], 32),
		word(a.Value),
		word(a.ValidAfter),
		word(a.ValidBefore),
		a.Nonce[:],
	)
	return crypto.Keccak256Hash([]byte{0x19, 0x01}, sep[:], structHash)
}

func word(v *big.Int) []byte {
	if v == nil {
		return make([]byte, 32)
	}
	return common.LeftPadBytes(v.Bytes(), 32)
}

// Sign signs a with key, returning the 65-byte r||s||v signature with v in
// {27, 28}, as wallets do.
func (d Domain) Sign(a Authorization, key *ecdsa.PrivateKey) ([]byte, error) {
	return SignDigest(d.Digest(a), key)
}

// SignDigest signs an EIP-712 digest with key: r||s||v, v in {27, 28}.
func SignDigest(digest common.Hash, key *ecdsa.PrivateKey) ([]byte, error) {
	sig, err := crypto.Sign(digest[:], key)
	if err != nil {
		return nil, err
	}
	sig[64] += 27
	return sig, nil
}

var errBadSignature = errors.New("signature does not recover")

// Recover returns the address that produced sig over a's digest (see
// RecoverDigest).
func (d Domain) Recover(a Authorization, sig []byte) (common.Address, error) {
	return RecoverDigest(d.Digest(a), sig)
}

// RecoverDigest returns the address that signed an EIP-712 digest,
// accepting exactly the signatures the contracts we relay them to accept
// (FiatToken's ECRecover, OpenZeppelin's ECDSA in the batch-settlement
// escrow): 65 bytes r‖s‖v, v 27 or 28, s in the lower half of the curve
// order. The same signature with v 0/1 is refused: the escrow and the
// token would refuse it on chain, so an answer served on it could never
// be paid.
func RecoverDigest(digest common.Hash, sig []byte) (common.Address, error) {
	if len(sig) != 65 {
		return common.Address{}, fmt.Errorf("%w: %d bytes, want 65", errBadSignature, len(sig))
	}
	if sig[64] != 27 && sig[64] != 28 {
		return common.Address{}, fmt.Errorf("%w: v = %d, want 27 or 28", errBadSignature, sig[64])
	}
	s := make([]byte, 65)
	copy(s, sig)
	s[64] -= 27
	if new(big.Int).SetBytes(s[32:64]).Cmp(halfOrder) > 0 {
		return common.Address{}, fmt.Errorf("%w: high s", errBadSignature)
	}
	pub, err := crypto.SigToPub(digest[:], s)
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: %v", errBadSignature, err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}

var halfOrder = new(big.Int).Rsh(crypto.S256().Params().N, 1)
