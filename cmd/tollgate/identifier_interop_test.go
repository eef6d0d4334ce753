package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/store"
)

// idAnswer is one answer payment-id.mjs saw.
type idAnswer struct {
	Status     int
	Body       string
	Settlement *struct {
		Success     bool
		Transaction string
		Amount      string
		Extra       struct {
			ChargedAmount string
			ChannelState  struct{ ChargedCumulativeAmount string }
		}
	}
}

// idPayload is the part of a sent payload the test compares.
type idPayload struct {
	Authorization *struct{ Nonce string }
	Voucher       *struct{ MaxClaimableAmount string }
}

// TestInteropPaymentIdentifier: the official @x402/fetch client with
// @x402/extensions' payment identifier (.ci/interop/payment-id.mjs): a
// purchase whose answer is lost, retried with a newly signed payment and
// the same id, is paid once and answered, on exact and batch-settlement;
// the id reused for another request is refused with 409. Checked on
// chain (the payer paid one exact price and the channel's deposit, the
// retry's authorization is unused), in the ledger and in /metrics.
func TestInteropPaymentIdentifier(t *testing.T) {
	t.Parallel()
	dir := interopDir(t, "@x402/extensions")
	dataDir := t.TempDir()
	s, err := serveFor(t, []string{"--data-dir", dataDir, "--batch-claim-interval", "27m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, payer, payTo := watchDevnet(t, ctx, s)
	payer0, payTo0 := w.balance(payer), w.balance(payTo)

	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "payment-id.mjs"), s.base, s.devnetRPC, t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node payment-id.mjs: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	type idRun struct {
		ID                         string
		Lost                       string
		FirstPayload, RetryPayload idPayload
		Retry, Conflict            idAnswer
		Opening, Next              idAnswer
	}
	var got struct {
		Payer        common.Address
		Exact, Batch idRun
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("payment-id.mjs wrote %q: %v", out.String(), err)
	}
	price := big.NewInt(50_000) // /regime's $0.05
	conflict := func(name string, a idAnswer) {
		var body struct{ Error string }
		json.Unmarshal([]byte(a.Body), &body)
		if a.Status != 409 || body.Error != payment.ReasonIDConflict {
			t.Errorf("%s: the id reused for another request got %d %s; want 409 %s", name, a.Status, a.Body, payment.ReasonIDConflict)
		}
	}

	// exact: one transfer, answered twice; the retry's authorization unused.
	ex := got.Exact
	if ex.Retry.Status != 200 || ex.Retry.Settlement == nil || !ex.Retry.Settlement.Success {
		t.Fatalf("exact retry: %+v (the first was lost: %s)", ex.Retry, ex.Lost)
	}
	if ex.FirstPayload.Authorization == nil || ex.RetryPayload.Authorization == nil || ex.FirstPayload.Authorization.Nonce == ex.RetryPayload.Authorization.Nonce {
		t.Fatalf("exact: the retry did not sign a new authorization: %+v then %+v", ex.FirstPayload, ex.RetryPayload)
	}
	conflict("exact", ex.Conflict)
	ledger, err := store.OpenSQLite(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	recs, err := ledger.Payments(ctx)
	if err != nil || len(recs) != 1 || recs[0].Tx != ex.Retry.Settlement.Transaction || recs[0].Operation != "regime" {
		t.Fatalf("the ledger holds %+v (%v); want the one exact payment the retry was answered with (%s)", recs, err, ex.Retry.Settlement.Transaction)
	}
	tokenABI, err := abi.JSON(bytes.NewReader([]byte(`[{"name":"authorizationState","type":"function","stateMutability":"view",
		"inputs":[{"name":"a","type":"address"},{"name":"n","type":"bytes32"}],"outputs":[{"type":"bool"}]}]`)))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := tokenABI.Pack("authorizationState", payer, common.HexToHash(ex.RetryPayload.Authorization.Nonce))
	if used := new(big.Int).SetBytes(w.call(w.token, data)); used.Sign() != 0 {
		t.Error("the exact retry's authorization is used on chain; it must stay unused")
	}

	// batch-settlement: the lost voucher's retry is answered and charged
	// once; the next call charges the next price.
	bt := got.Batch
	if bt.Opening.Status != 200 || bt.Retry.Status != 200 || bt.Next.Status != 200 || bt.Retry.Settlement == nil || bt.Next.Settlement == nil {
		t.Fatalf("batch: opening %d, retry %+v, next %+v (the first was lost: %s)", bt.Opening.Status, bt.Retry, bt.Next, bt.Lost)
	}
	conflict("batch-settlement", bt.Conflict)
	if c := bt.Next.Settlement.Extra.ChannelState.ChargedCumulativeAmount; c != new(big.Int).Mul(price, big.NewInt(3)).String() {
		t.Errorf("batch: the channel is charged %s after three answered calls; want 3 × %s", c, price)
	}
	charges, err := ledger.BatchCharges(ctx, store.Filter{})
	if err != nil || len(charges) != 3 {
		t.Errorf("the books hold %d voucher calls (%v); want 3", len(charges), err)
	}
	deposit, ok := new(big.Int).SetString(bt.Opening.Settlement.Amount, 10)
	if !ok {
		t.Fatalf("the opening call's settlement names no deposit: %+v", bt.Opening.Settlement)
	}

	// On chain: the payer paid one exact price and the deposit; payTo got
	// the exact price (the channel is not claimed yet).
	spent, earned := new(big.Int).Sub(payer0, w.balance(payer)), new(big.Int).Sub(w.balance(payTo), payTo0)
	if want := new(big.Int).Add(price, deposit); spent.Cmp(want) != 0 || earned.Cmp(price) != 0 {
		t.Errorf("the payer spent %s (want %s: one exact price and the deposit), payTo earned %s (want %s)", spent, want, earned, price)
	}

	// The ledger shows each id beside the payment it paid: the exact
	// payment, and the lost voucher call's charge.
	var list, errOut2 bytes.Buffer
	if err := run(ctx, []string{"ledger", "list", "--data-dir", dataDir}, envOf(nil), &list, &errOut2); err != nil {
		t.Fatalf("ledger list: %v\n%s", err, errOut2.String())
	}
	rows := map[string][]string{} // by payment id
	for _, l := range strings.Split(list.String(), "\n") {
		if f := strings.Fields(l); len(f) == 10 && f[9] != "-" {
			rows[f[9]] = f
		}
	}
	if r := rows[ex.ID]; len(rows) != 2 || r == nil || r[1] != "exact" || r[7] != ex.Retry.Settlement.Transaction {
		t.Errorf("ledger list shows the ids %v; want %s beside the exact payment %s, and %s\n%s", rows, ex.ID, ex.Retry.Settlement.Transaction, bt.ID, list.String())
	}
	if r := rows[bt.ID]; r == nil || r[1] != "batch-settlement" || r[4] != price.String() {
		t.Errorf("ledger list shows %v for %s; want a voucher call of %s\n%s", r, bt.ID, price, list.String())
	}

	fams := scrape(t, s.admin)
	if v, ok := sample(fams["tollgate_payment_deduplicated_total"].GetMetric(), "operation", "regime", "transport", "rest"); !ok || v < 1 {
		t.Errorf("tollgate_payment_deduplicated_total{regime,rest} = %v (%v); want at least 1", v, ok)
	}
}
