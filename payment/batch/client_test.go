package batch

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// TestPayerPayloads: what the payer side builds is what the server side
// accepts: a voucher binds to the terms and verifies locally; a deposit's
// ReceiveWithAuthorization is the payer's, to the collector, with the
// channel-bound nonce; a refund carries its amount.
func TestPayerPayloads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	payer := Payer{Key: f.key, Escrow: f.terms.Escrow}
	cfg, id := payer.Channel(f.terms)
	if cfg != f.cfg || id != f.id {
		t.Fatalf("channel %+v %s, want %+v %s", cfg, id.Hex(), f.cfg, f.id.Hex())
	}
	token := payment.Domain{Name: "USD Coin", Version: "2", ChainID: big.NewInt(8453), VerifyingContract: f.terms.Token}

	raw, err := payer.Payload(f.terms, TypeVoucher, big.NewInt(100_000), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := DecodePayload(raw)
	if err != nil || f.terms.Bind(p) != nil {
		t.Fatalf("voucher: %v / bind %v", err, f.terms.Bind(p))
	}
	mirror := Channel{ID: id, Config: cfg, Charged: big.NewInt(50_000), Balance: big.NewInt(1_000_000), TotalClaimed: big.NewInt(0), SyncedAt: time.Now()}
	if err := f.terms.Signed(p); err != nil {
		t.Errorf("signature: %v", err)
	}
	if err := Payable(mirror, p, time.Now(), time.Minute, false); err != nil {
		t.Errorf("payable from the mirror: %v", err)
	}

	dep := &DepositRequest{Amount: big.NewInt(1_000_000), Token: token, ValidBefore: big.NewInt(1_900_000_000), Salt: big.NewInt(42)}
	raw, err = payer.Payload(f.terms, TypeDeposit, big.NewInt(50_000), dep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = DecodePayload(raw); err != nil || p.Deposit == nil {
		t.Fatalf("deposit: %v", err)
	}
	a := payment.Authorization{From: payer.Address(), To: ERC3009CollectorAddress, Value: p.Deposit.Amount, ValidAfter: p.Deposit.ValidAfter,
		ValidBefore: p.Deposit.ValidBefore, Nonce: DepositNonce(id, p.Deposit.Salt)}
	if signer, err := payment.RecoverDigest(token.ReceiveDigest(a), p.Deposit.Signature); err != nil || signer != payer.Address() {
		t.Errorf("deposit authorization recovers to %s (%v), want the payer", signer.Hex(), err)
	}
	if signer, _ := payment.RecoverDigest(token.Digest(a), p.Deposit.Signature); signer == payer.Address() {
		t.Error("the deposit was signed as a TransferWithAuthorization, which anyone could submit")
	}
	if got := crypto.Keccak256Hash([]byte("ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")); got !=
		common.HexToHash("0xd099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8") {
		t.Errorf("ReceiveWithAuthorization typehash %s", got.Hex())
	}

	raw, err = payer.Payload(f.terms, TypeRefund, big.NewInt(50_000), nil, big.NewInt(700))
	if err != nil {
		t.Fatal(err)
	}
	if p, err = DecodePayload(raw); err != nil || p.Type != TypeRefund || p.RefundAmount.Int64() != 700 {
		t.Errorf("refund: %+v %v", p, err)
	}
	if _, err := payer.Payload(f.terms, TypeDeposit, big.NewInt(1), nil, nil); err == nil {
		t.Error("a deposit payload without a deposit was built")
	}
}
