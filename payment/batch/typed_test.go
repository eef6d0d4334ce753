package batch

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// TestTypedDataVectors: the channel id and the digests equal the values
// the official client computes (viem 2.57, @x402/evm 2.27 computeChannelId;
// docs/batch-settlement.md §1.2) for one config on chain 8453.
func TestTypedDataVectors(t *testing.T) {
	t.Parallel()
	e := Escrow{ChainID: big.NewInt(8453), Address: EscrowAddress}
	repeat := func(b byte) common.Address {
		var x common.Address
		for i := range x {
			x[i] = b
		}
		return x
	}
	cfg := Config{Payer: repeat(0x11), PayerAuthorizer: repeat(0x11), Receiver: repeat(0x22), ReceiverAuthorizer: repeat(0x33),
		Token: repeat(0x44), WithdrawDelay: 900}
	id := e.ChannelID(cfg)
	sep := payment.Domain{Name: DomainName, Version: DomainVersion, ChainID: e.ChainID, VerifyingContract: e.Address}.Separator()
	for _, tt := range []struct {
		name string
		got  common.Hash
		want string
	}{
		{"domain separator", sep, "0xd8d982716899b0e20cf2c1e706a37b8a892c83fdd4ac9b540cfeec11f9c73a39"},
		{"channel id", id, "0x8ea4b277c96d508b2d34b4f68ed56a23326b1e86baadcc7dd94a251cab3ec016"},
		{"voucher", e.VoucherDigest(id, big.NewInt(1000)), "0x06b733fd752cc6c2cfebca9a07f533f8c3e8c70eaac4860b537d7739742b85eb"},
		{"refund", e.RefundDigest(id, big.NewInt(0), big.NewInt(500)), "0x218ea5f4c703495e7def20b81df9bd0c350d2f97bc04551faf7c8d06146ad05b"},
		{"claim batch", e.ClaimBatchDigest([]ClaimEntry{{ChannelID: id, MaxClaimableAmount: big.NewInt(1000), TotalClaimed: big.NewInt(700)}}),
			"0x9084d23a756eef6cb33d0e8d6cc322f137cd22c5b420285e3cee2d8b4ce552d8"},
		{"deposit nonce", DepositNonce(id, big.NewInt(1)), "0x6a978793d96dcb65c35d3d86b10ca53507fe16a47fd6cb12296edd41735ff284"},
	} {
		if tt.got != common.HexToHash(tt.want) {
			t.Errorf("%s = %s, want %s", tt.name, tt.got.Hex(), tt.want)
		}
	}
}

// TestRecover: a voucher signed by a key recovers (payment.RecoverDigest) to its address with v
// 27/28; the same signature with v 0/1 or a high s (what the escrow's ECDSA refuses), another
// digest or a short signature does not.
func TestRecover(t *testing.T) {
	t.Parallel()
	key, _ := crypto.GenerateKey()
	e := Escrow{ChainID: big.NewInt(8453), Address: EscrowAddress}
	d := e.VoucherDigest(common.HexToHash("0x01"), big.NewInt(5))
	sig, err := crypto.Sign(d[:], key)
	if err != nil {
		t.Fatal(err)
	}
	want := crypto.PubkeyToAddress(key.PublicKey)
	s := append([]byte(nil), sig...)
	s[64] += 27
	if got, err := payment.RecoverDigest(d, s); err != nil || got != want {
		t.Errorf("v 27/28: %s %v", got.Hex(), err)
	}
	if _, err := payment.RecoverDigest(d, sig); err == nil {
		t.Error("v 0/1 was accepted; the escrow refuses it")
	}
	// The other s of the same signature (N - s, v flipped) recovers the
	// same key on the curve, and is refused as the escrow refuses it.
	high := append([]byte(nil), s...)
	copy(high[32:64], common.LeftPadBytes(new(big.Int).Sub(crypto.S256().Params().N, new(big.Int).SetBytes(s[32:64])).Bytes(), 32))
	high[64] = 27 + 28 - s[64]
	if _, err := payment.RecoverDigest(d, high); err == nil {
		t.Error("a high-s signature was accepted; the escrow refuses it")
	}
	if got, _ := payment.RecoverDigest(e.VoucherDigest(common.HexToHash("0x01"), big.NewInt(6)), sig); got == want {
		t.Error("another voucher recovered to the signer")
	}
	if _, err := payment.RecoverDigest(d, sig[:64]); err == nil {
		t.Error("a 64-byte signature was accepted")
	}
}
