package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"math/big"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
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
	// Each amount is two fields: dollars, then (atomic units).
	if f := row(waiting); strings.Join(f[2:10], " ") != "$0.15 (150000) $0.05 (50000) $1.00 (1000000) $0.10 (100000)" || f[10] != "2h0m0s" || f[11] != "-" {
		t.Errorf("the waiting channel: %v", f)
	}
	if f := row(withdrawing); strings.Join(f[8:10], " ") != "$0.05 (50000)" || f[11] != "2030-03-17T17:46:40Z" {
		t.Errorf("the withdrawing channel: %v", f)
	}
	for _, want := range []string{
		"3 channels; $0.15 (150000 atomic units) unclaimed on 2 of them, the oldest waiting 2h0m0s",
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

// TestLedgerVoucherCalls: `ledger list` and `ledger export` show
// batch-settlement's voucher calls beside exact's payments, oldest first
// with their scheme, and their paid totals are the store's (what the
// JSON /metrics reads): three voucher calls and one settled exact payment
// are four paid calls, in every book.
func TestLedgerVoucherCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	db, err := store.OpenSQLite(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	payerA, payerB := common.HexToAddress("0xA11CE00000000000000000000000000000000001"), common.HexToAddress("0xB0B0000000000000000000000000000000000002")
	payTo, token := common.HexToAddress("0x22"), common.HexToAddress("0x44")
	chA, chB := common.BytesToHash([]byte{0xc5, 1}), common.BytesToHash([]byte{0xc5, 2})
	voucher := func(id common.Hash, payer common.Address, amount int64, at time.Time) {
		t.Helper()
		if _, err := db.UpdateChannel(ctx, id, func(c *batch.Channel, found bool) (batch.Change, error) {
			if !found {
				c.Config = batch.Config{Payer: payer, PayerAuthorizer: payer, Receiver: payTo, Token: token}
				c.Charged = new(big.Int)
			}
			c.Charged = new(big.Int).Add(c.Charged, big.NewInt(amount))
			c.NewCharge = &batch.Charge{Operation: "regime", Resource: "/regime", Amount: big.NewInt(amount), Cumulative: new(big.Int).Set(c.Charged), At: at}
			return batch.Save, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	exactPayment := func(nonce, state, tx string) {
		t.Helper()
		r, err := db.Claim(ctx, exact.Record{Network: "eip155:8453", Asset: token.Hex(), Payer: payerA.Hex(), Nonce: nonce, Operation: "regime",
			Resource: "/regime", Amount: "50000", PayTo: payTo.Hex(), Version: 2, ClaimID: "c", SigHash: "s"}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		r.State, r.Tx = state, tx
		if err := db.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	settleTx := "0x" + strings.Repeat("ab", 32)
	now := time.Now()
	voucher(chA, payerA, 10_000, now.Add(-2*time.Hour))
	voucher(chB, payerB, 15_000, now.Add(-time.Hour))
	exactPayment("0x01", exact.StateSettled, settleTx) // first seen now
	exactPayment("0x02", exact.StateFailed, "")
	voucher(chA, payerA, 10_000, time.Now().Add(time.Second))
	totals, err := db.Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := totals["regime"]; got.Paid != 4 || got.Amount != "85000" {
		t.Fatalf("paid totals %+v, want 4 for 85000", got)
	}

	ledger := func(t *testing.T, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(ctx, append([]string{"ledger", args[0], "--data-dir", dataDir}, args[1:]...), envOf(nil), &out, &errOut); err != nil {
			t.Fatalf("ledger %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	for _, tt := range []struct {
		name    string
		args    []string
		schemes []string // of the rows, in order
		footer  string
	}{
		{"everything", nil, []string{"batch-settlement", "batch-settlement", "exact", "exact", "batch-settlement"},
			"5 payments: 1 settled by exact for $0.05 (50000 atomic units), 3 charged by batch-settlement for $0.035 (35000 atomic units); 4 paid for $0.085 (85000 atomic units)"},
		{"paid: the totals' calls", []string{"--state", "paid"}, []string{"batch-settlement", "batch-settlement", "exact", "batch-settlement"},
			"4 payments: 1 settled by exact for $0.05 (50000 atomic units), 3 charged by batch-settlement for $0.035 (35000 atomic units); 4 paid for $0.085 (85000 atomic units)"},
		{"charged", []string{"--state", "charged"}, []string{"batch-settlement", "batch-settlement", "batch-settlement"},
			"3 payments: 0 settled by exact for $0.00 (0 atomic units), 3 charged by batch-settlement for $0.035 (35000 atomic units); 3 paid for $0.035 (35000 atomic units)"},
		{"settled", []string{"--state", "settled"}, []string{"exact"}, "1 payments: 1 settled by exact for $0.05 (50000 atomic units)"},
		{"failed", []string{"--state", "failed"}, []string{"exact"}, "1 payments: 0 settled by exact for $0.00 (0 atomic units), 0 charged by batch-settlement for $0.00 (0 atomic units); 0 paid"},
		{"one payer", []string{"--payer", strings.ToLower(payerB.Hex())}, []string{"batch-settlement"}, "1 payments: 0 settled"},
		{"since", []string{"--since", "90m"}, []string{"batch-settlement", "exact", "exact", "batch-settlement"}, "4 payments: 1 settled"},
	} {
		t.Run("list "+tt.name, func(t *testing.T) {
			t.Parallel()
			out := ledger(t, append([]string{"list"}, tt.args...)...)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if f := strings.Fields(lines[0]); !slices.Equal(f, []string{"TIME", "SCHEME", "OPERATION", "PAYER", "AMOUNT", "USD", "STATE", "TX/CHANNEL", "REASON", "PAYMENT", "ID"}) {
				t.Errorf("header %v", f)
			}
			var schemes []string
			for _, l := range lines[1 : len(lines)-1] {
				f := strings.Fields(l)
				schemes = append(schemes, f[1])
				if f[1] == batch.Scheme && (f[6] != store.StateCharged || (f[7] != chA.Hex() && f[7] != chB.Hex()) || f[5] != usd(f[4])) {
					t.Errorf("a voucher call's row: %v", f)
				}
				if f[1] == exact.Scheme && f[6] == exact.StateSettled && (f[7] != settleTx || f[4] != "50000" || f[5] != "0.05") {
					t.Errorf("the settled payment's row: %v", f)
				}
			}
			if !slices.Equal(schemes, tt.schemes) {
				t.Errorf("rows of schemes %v, want %v:\n%s", schemes, tt.schemes, out)
			}
			if !strings.HasPrefix(lines[len(lines)-1], tt.footer) {
				t.Errorf("footer %q, want it to start with %q", lines[len(lines)-1], tt.footer)
			}
		})
	}

	t.Run("export", func(t *testing.T) {
		t.Parallel()
		rows, err := csv.NewReader(strings.NewReader(ledger(t, "export"))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"time", "operation", "payer", "amount", "tx", "state", "reason", "asset", "nonce", "resource",
			"scheme", "channel", "cumulative", "pay_to", "amount_usd", "payment_id"}
		if !slices.Equal(rows[0], want) || len(rows) != 6 {
			t.Fatalf("export: header %v and %d rows, want %v and 5", rows[0], len(rows)-1, want)
		}
		paid, sum := 0, new(big.Int)
		for _, r := range rows[1:] {
			switch {
			case r[10] == batch.Scheme:
				if r[5] != store.StateCharged || r[4] != "" || r[8] != "" || (r[11] != chA.Hex() && r[11] != chB.Hex()) || r[12] == "" ||
					r[13] != payTo.Hex() || r[7] != token.Hex() {
					t.Errorf("a voucher call's row: %v", r)
				}
			case r[10] != exact.Scheme || r[11] != "" || r[12] != "":
				t.Errorf("an exact payment's row: %v", r)
			}
			if r[5] == exact.StateSettled || r[5] == store.StateCharged {
				n, _ := new(big.Int).SetString(r[3], 10)
				paid++
				sum.Add(sum, n)
			}
		}
		if got := totals["regime"]; uint64(paid) != got.Paid || sum.String() != got.Amount {
			t.Errorf("the export's revenue is %d calls for %s, the totals' %d for %s", paid, sum, got.Paid, got.Amount)
		}
	})
}

// TestUSD: atomic units of USDC as exact dollars.
func TestUSD(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ atomic, want string }{
		{"0", "0"}, {"1", "0.000001"}, {"50000", "0.05"}, {"1000000", "1"}, {"12345678901234567890", "12345678901234.56789"}, {"", "?"}, {"x", "?"},
	} {
		if got := usd(tt.atomic); got != tt.want {
			t.Errorf("usd(%q) = %q, want %q", tt.atomic, got, tt.want)
		}
	}
}
