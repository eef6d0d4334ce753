package exact

import (
	"crypto/ecdsa"
	"crypto/rand"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// Payer is exact's client side, a payment.SchemeClient: it signs an
// EIP-3009 authorization of each offer with an EOA key, with a fresh
// random nonce, valid for the offer's maxTimeoutSeconds.
type Payer struct {
	Key *ecdsa.PrivateKey
}

var _ payment.SchemeClient = Payer{}

// Name implements payment.SchemeClient.
func (Payer) Name() string { return Scheme }

// Pay implements payment.SchemeClient.
func (p Payer) Pay(o payment.Offer) (payment.SignedPayment, error) {
	a := payment.Authorization{
		From:        crypto.PubkeyToAddress(p.Key.PublicKey),
		To:          common.HexToAddress(o.Entry.PayTo),
		ValidAfter:  big.NewInt(time.Now().Add(-10 * time.Minute).Unix()),
		ValidBefore: big.NewInt(time.Now().Add(time.Duration(o.Entry.MaxTimeoutSeconds) * time.Second).Unix()),
	}
	var ok bool
	if a.Value, ok = new(big.Int).SetString(o.Entry.Amount, 10); !ok {
		return payment.SignedPayment{}, fmt.Errorf("pay: amount %q is not an integer", o.Entry.Amount)
	}
	if _, err := rand.Read(a.Nonce[:]); err != nil {
		return payment.SignedPayment{}, err
	}
	d := payment.Domain{Name: o.Entry.Extra.Name, Version: o.Entry.Extra.Version, ChainID: big.NewInt(o.ChainID), VerifyingContract: common.HexToAddress(o.Entry.Asset)}
	sig, err := d.Sign(a, p.Key)
	if err != nil {
		return payment.SignedPayment{}, err
	}
	value, err := EncodePayment(o.Version, o.Entry, o.NetworkV1, a, sig)
	if err != nil {
		return payment.SignedPayment{}, err
	}
	header := payment.HeaderPaymentV2
	if o.Version == 1 {
		header = payment.HeaderPaymentV1
	}
	return payment.SignedPayment{Header: header, Value: value, ID: hexutil.Encode(a.Nonce[:])}, nil
}

// Paid implements payment.SchemeClient: an exact settlement needs no
// bookkeeping.
func (Payer) Paid(payment.Offer, payment.SettleResponse) error { return nil }

// Recover implements payment.SchemeClient: an exact payment refused is
// not signed again.
func (Payer) Recover(payment.RequiredV2) bool { return false }
