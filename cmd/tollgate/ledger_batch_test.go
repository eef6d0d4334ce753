package main

import (
	"bytes"
	"context"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store"
)

var _ batch.ClaimObserver = (*admin.Metrics)(nil)

// TestLedgerChannels: `tollgate ledger channels` lists each channel with
// what waits for a claim and since when, the totals, and the claim and
// settle transactions, newest first.
func TestLedgerChannels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	db, err := store.OpenSQLite(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	put := func(n byte, charged, claimed int64, since time.Time, withdraw uint64) common.Hash {
		id := common.BytesToHash([]byte{0xc4, n})
		if _, err := db.UpdateChannel(ctx, id, func(c *batch.Channel, _ bool) (batch.Change, error) {
			c.Config.Payer = common.BytesToAddress([]byte{0xaa, n})
			c.Charged, c.TotalClaimed, c.Balance, c.SignedMax = big.NewInt(charged), big.NewInt(claimed), big.NewInt(1_000_000), big.NewInt(charged)
			c.UnclaimedSince, c.WithdrawRequestedAt = since, withdraw
			return batch.Save, nil
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	waiting := put(1, 150_000, 50_000, now.Add(-2*time.Hour), 0)
	put(2, 100_000, 100_000, time.Time{}, 0)
	withdrawing := put(3, 70_000, 20_000, now.Add(-time.Minute), 1_900_000_000)
	for _, r := range []batch.TxRecord{
		{Kind: batch.KindClaim, Tx: common.HexToHash("0xc1a1"), Amount: big.NewInt(120_000), Rows: 2, Result: batch.ResultOK, At: now.Add(-time.Hour)},
		{Kind: batch.KindSettle, Tx: common.HexToHash("0x5e77"), Receiver: common.HexToAddress("0x22"), Token: common.HexToAddress("0x44"),
			Amount: big.NewInt(120_000), Result: batch.ResultOK, At: now.Add(-59 * time.Minute)},
		{Kind: batch.KindClaim, Amount: new(big.Int), Rows: 1, Result: batch.ResultRefused, Reason: "invalid_batch_settlement_evm_claim_simulation_failed",
			Message: "ClaimExceedsBalance", At: now.Add(-30 * time.Minute)},
	} {
		if err := db.RecordBatchTx(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	var out, errOut bytes.Buffer
	if err := run(ctx, []string{"ledger", "channels", "--data-dir", dataDir}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	got := out.String()
	lines := strings.Split(got, "\n")
	row := func(id common.Hash) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, id.Hex()) {
				return strings.Fields(l)
			}
		}
		t.Fatalf("no row for %s in\n%s", id.Hex(), got)
		return nil
	}
	if f := row(waiting); f[2] != "150000" || f[3] != "50000" || f[4] != "1000000" || f[5] != "100000" || f[6] != "2h0m0s" || f[7] != "-" {
		t.Errorf("the waiting channel: %v", f)
	}
	if f := row(withdrawing); f[5] != "50000" || f[7] != "2030-03-17T17:46:40Z" {
		t.Errorf("the withdrawing channel: %v", f)
	}
	for _, want := range []string{
		"3 channels; 150000 atomic units unclaimed on 2 of them, the oldest waiting 2h0m0s",
		"invalid_batch_settlement_evm_claim_simulation_failed ClaimExceedsBalance",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the listing lacks %q:\n%s", want, got)
		}
	}
	refused, settle, claim := strings.Index(got, "refused"), strings.Index(got, common.HexToHash("0x5e77").Hex()), strings.Index(got, common.HexToHash("0xc1a1").Hex())
	if refused < 0 || settle < 0 || claim < 0 || !(refused < settle && settle < claim) {
		t.Errorf("transactions not newest first:\n%s", got)
	}

	out.Reset()
	if err := run(ctx, []string{"ledger", "channels", "--data-dir", dataDir, "--txs", "1"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), common.HexToHash("0xc1a1").Hex()) || !strings.Contains(out.String(), "refused") {
		t.Errorf("--txs 1 lists more or other than the latest:\n%s", out.String())
	}
}
