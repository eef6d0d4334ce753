package exact_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// blindEstimate is the devnet whose gas estimates never revert, so that
// a transfer the chain will refuse is sent.
type blindEstimate struct{ *ethclient.Client }

func (blindEstimate) EstimateGas(context.Context, ethereum.CallMsg) (uint64, error) {
	return 150_000, nil
}

// TestSettleReverted: a settlement mined but reverted is a failure with
// its reason, never a success. Gas estimation (the simulation) is faked so
// that a used authorization reaches the chain.
func TestSettleReverted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	p, err := exact.DecodeHeader(signedHeader(t, w, 2, "/regime", nil), 2)
	if err != nil {
		t.Fatal(err)
	}
	req := &payment.Requirement{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(devnet.ChainID), Asset: w.chain.Token,
		AssetName: devnet.TokenName, AssetVersion: devnet.TokenVersion, PayTo: w.payTo, Amount: big.NewInt(50_000), MaxTimeout: 300}
	if s, err := w.local.Settle(context.Background(), p, req); err != nil || !s.Success {
		t.Fatalf("first settlement: %+v %v", s, err)
	}
	// A second gas key, whose gas estimate (the simulation) is blind.
	sender, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(devnet.ChainID), Key: w.chain.Account(devnet.FacilitatorAccount).Key,
		ReceiptTimeout: time.Minute}, blindEstimate{w.client})
	if err != nil {
		t.Fatal(err)
	}
	blind, err := exact.NewLocal(exact.LocalConfig{ChainID: big.NewInt(devnet.ChainID),
		Assets: []payment.Asset{{Address: w.chain.Token, Name: devnet.TokenName, Version: devnet.TokenVersion}}}, w.client, sender)
	if err != nil {
		t.Fatal(err)
	}
	s, err := blind.Settle(context.Background(), p, req)
	if err != nil || s.Success || s.Pending || s.Reason != exact.ReasonTransactionFailed || s.Tx == (common.Hash{}) {
		t.Fatalf("replayed authorization: %+v %v", s, err)
	}
	if !strings.Contains(s.Message, "used or canceled") || !strings.Contains(s.Message, s.Tx.Hex()) {
		t.Errorf("message %q does not name the transaction and the cause", s.Message)
	}
	if rcpt, err := w.client.TransactionReceipt(context.Background(), s.Tx); err != nil || rcpt.Status != types.ReceiptStatusFailed {
		t.Errorf("receipt %+v %v", rcpt, err)
	}
}
