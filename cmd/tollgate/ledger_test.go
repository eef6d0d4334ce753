package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
)

// TestLedgerCommand: list and export read the ledger with filters, and
// reconcile resolves a payment that landed on chain but was never
// recorded, with its real transaction hash.
func TestLedgerCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chain, client := devnettest.Start(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	db, err := store.OpenSQLite(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	payer, payTo := chain.Account(devnet.PayerAccount), chain.Account(devnet.PayToAccount).Address
	req := &payment.Requirement{Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(devnet.ChainID), Asset: chain.Token,
		AssetName: devnet.TokenName, AssetVersion: devnet.TokenVersion, PayTo: payTo, Amount: big.NewInt(50_000), MaxTimeout: 300}
	record := func(nonce byte, state, tx string) exact.Record {
		var n [32]byte
		n[0] = nonce
		r, err := db.Claim(ctx, exact.Record{Network: req.Network, Asset: chain.Token.Hex(), Payer: payer.Address.Hex(),
			Nonce: hexutil.Encode(n[:]), Operation: "regime", Resource: "/regime", Amount: "50000", PayTo: payTo.Hex(), Version: 2,
			ValidBefore: time.Now().Add(5 * time.Minute).Unix(), ClaimID: "c", SigHash: "s"}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if state != exact.StateVerified {
			r.State, r.Tx = state, tx
			if err := db.Finish(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	record(1, exact.StateSettled, "0x"+strings.Repeat("ab", 32))
	record(2, exact.StateFailed, "")
	// Payment 3 was settled on chain, and the ledger write was lost.
	lost := record(3, exact.StateVerified, "")
	sender, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(devnet.ChainID), Key: chain.Account(devnet.FacilitatorAccount).Key,
		ReceiptTimeout: 10 * time.Second}, client)
	if err != nil {
		t.Fatal(err)
	}
	local, err := exact.NewLocal(exact.LocalConfig{ChainID: big.NewInt(devnet.ChainID),
		Assets: []payment.Asset{{Address: chain.Token, Name: devnet.TokenName, Version: devnet.TokenVersion}}}, client, sender)
	if err != nil {
		t.Fatal(err)
	}
	a := payment.Authorization{From: payer.Address, To: payTo, Value: big.NewInt(50_000), ValidAfter: big.NewInt(0),
		ValidBefore: big.NewInt(lost.ValidBefore)}
	copy(a.Nonce[:], hexutil.MustDecode(lost.Nonce))
	sig, err := req.Domain().Sign(a, payer.Key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := local.Settle(ctx, &exact.Payment{Version: 2, Scheme: "exact", Network: req.Network, Authorization: a, Signature: sig}, req)
	if err != nil || !s.Success {
		t.Fatalf("settle: %+v %v", s, err)
	}
	db.Close()

	ledger := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append([]string{"ledger", args[0], "--data-dir", dataDir}, args[1:]...), envOf(nil), &out, &errOut)
		return out.String(), err
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"list"}, "3 payments: 1 settled by exact for $0.05 (50000 atomic units)"},
		{[]string{"list", "--state", "failed"}, "1 payments: 0 settled"},
		{[]string{"list", "--payer", strings.ToLower(payer.Address.Hex())}, "3 payments"},
		{[]string{"list", "--payer", crypto.PubkeyToAddress(chain.Account(5).Key.PublicKey).Hex()}, "0 payments"},
		{[]string{"list", "--since", "1h"}, "3 payments"},
		{[]string{"list", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "0 payments"},
	} {
		if out, err := ledger(tt.args...); err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("ledger %v: %v\n%s", tt.args, err, out)
		}
	}
	for _, bad := range [][]string{{"list", "--state", "confirmed"}, {"list", "--since", "yesterday"}, {"list", "--payer", "me"}, {"audit"}, {"reconcile"}} {
		if _, err := ledger(bad...); err == nil {
			t.Errorf("ledger %v: no error", bad)
		}
	}

	out, err := ledger("reconcile", "--chain-rpc", chain.URL())
	if err != nil || !strings.Contains(out, "SETTLED") || !strings.Contains(out, s.Tx.Hex()) || !strings.Contains(out, "1 resolved; 0 still unresolved") {
		t.Fatalf("reconcile: %v\n%s", err, out)
	}
	out, err = ledger("export", "--state", "settled")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != 3 || strings.Join(rows[0][:6], ",") != "time,operation,payer,amount,tx,state" {
		t.Fatalf("export: %v\n%s", err, out)
	}
	found := false
	for _, r := range rows[1:] {
		found = found || r[4] == s.Tx.Hex() && r[5] == exact.StateSettled && r[3] == "50000" && r[2] == payer.Address.Hex()
	}
	if !found {
		t.Errorf("the reconciled settlement is not exported with its transaction:\n%s", out)
	}
}
