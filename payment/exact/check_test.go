package exact

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
)

// unasked is a chain that fails the test when asked anything.
type unasked struct{ t *testing.T }

func (c unasked) CallContract(context.Context, ethereum.CallMsg, *big.Int) ([]byte, error) {
	c.t.Error("the chain was asked")
	return nil, context.Canceled
}

func (c unasked) CodeAt(context.Context, common.Address, *big.Int) ([]byte, error) {
	c.t.Error("the chain was asked")
	return nil, context.Canceled
}

func (c unasked) HeaderByNumber(context.Context, *big.Int) (*types.Header, error) {
	c.t.Error("the chain was asked")
	return nil, context.Canceled
}

// TestValidityTooLong: an authorization valid for longer than
// maxTimeoutSeconds plus the skew is refused by Verify and Settle, before
// any chain call; one signed the way x402 clients sign passes the check.
func TestValidityTooLong(t *testing.T) {
	t.Parallel()
	key, _ := devnet.DeriveKey(devnet.Mnemonic, 0)
	fkey, _ := devnet.DeriveKey(devnet.Mnemonic, 9)
	asset := common.HexToAddress("0x700b6A60ce7EaaEA56F065753d8dcB9653dbAD35")
	now := time.Unix(1_800_000_000, 0)
	sender, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(8453), Key: fkey, ReceiptTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(LocalConfig{ChainID: big.NewInt(8453), Assets: []payment.Asset{{Address: asset, Name: "USD Coin", Version: "2"}},
		Now: func() time.Time { return now }}, unasked{t}, sender) // the chain must not be asked
	if err != nil {
		t.Fatal(err)
	}
	req := &payment.Requirement{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453), Asset: asset, AssetName: "USD Coin",
		AssetVersion: "2", PayTo: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), Amount: big.NewInt(50_000), MaxTimeout: 300}
	maxUint256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	tests := []struct {
		name        string
		validBefore *big.Int
		refused     bool
	}{
		{"maxTimeoutSeconds", big.NewInt(now.Unix() + 300), false},
		{"maxTimeoutSeconds and the skew", big.NewInt(now.Unix() + 330), false},
		{"a second more", big.NewInt(now.Unix() + 331), true},
		{"a year", big.NewInt(now.Add(365 * 24 * time.Hour).Unix()), true},
		{"2^256-1", maxUint256, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := payment.Authorization{From: crypto.PubkeyToAddress(key.PublicKey), To: req.PayTo, Value: req.Amount,
				ValidAfter: big.NewInt(0), ValidBefore: tt.validBefore}
			sig, _ := req.Domain().Sign(a, key)
			p := &Payment{Version: 2, Scheme: "exact", Network: req.Network, Authorization: a, Signature: sig}
			if reason, _ := l.check(p, req); !tt.refused {
				if reason != "" {
					t.Fatalf("refused: %s", reason)
				}
				return
			}
			v, err := l.Verify(context.Background(), p, req)
			if err != nil || v.Valid || v.Reason != ReasonValidityTooLong || !strings.Contains(v.Message, "maxTimeoutSeconds (300 s)") {
				t.Errorf("verify: %+v %v", v, err)
			}
			s, err := l.Settle(context.Background(), p, req)
			if err != nil || s.Success || s.Pending || s.Reason != ReasonValidityTooLong {
				t.Errorf("settle: %+v %v", s, err)
			}
		})
	}
}
