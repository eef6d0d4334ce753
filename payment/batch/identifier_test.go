package batch_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store"
)

// TestServePaymentIdentifier: on batch-settlement, a voucher call paid
// with a payment identifier, then a voucher the payer signs anew for
// the next amount with the same id, gets the recorded answer; the new
// voucher is not charged, so the payer's next call without the id
// charges exactly that amount. A stranger's voucher with the id is
// refused with 409.
func TestServePaymentIdentifier(t *testing.T) {
	ids, err := store.OpenSQLite(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ids.Close()
	h := newHarnessIDs(t, ids)
	p := price.Int64()
	if a := h.pay(t, batch.TypeDeposit, p, 5_000_000, nil); a.status != http.StatusOK {
		t.Fatalf("deposit call: %d %s", a.status, a.body)
	}
	h.extensions = map[string]any{payment.ExtensionPaymentIdentifier: map[string]any{"info": map[string]any{"required": false,
		"id": "pay_batch_0123456789abcdef"}}}
	first := h.pay(t, batch.TypeVoucher, 2*p, 0, nil)
	again := h.pay(t, batch.TypeVoucher, 3*p, 0, nil) // signed anew after a lost answer
	if first.status != http.StatusOK || again.status != http.StatusOK || again.body != first.body ||
		again.settlement["extra"].(map[string]any)["chargedAmount"] != first.settlement["extra"].(map[string]any)["chargedAmount"] {
		t.Fatalf("first %d %v, signed anew %d %v: want the recorded answer", first.status, first.settlement, again.status, again.settlement)
	}
	stranger, _ := crypto.GenerateKey()
	if a := h.payAt(t, "/regime", stranger, batch.TypeVoucher, 3*p, 0, nil); a.status != http.StatusConflict {
		t.Errorf("a stranger's voucher with the id: %d %s; want 409", a.status, a.body)
	}
	h.extensions = nil
	next := h.pay(t, batch.TypeVoucher, 3*p, 0, nil)
	if next.status != http.StatusOK || channelState(t, next.settlement["extra"].(map[string]any))["chargedCumulativeAmount"] != "150000" {
		t.Errorf("the next voucher: %d %v; want 3 prices charged in all", next.status, next.settlement)
	}
	if n := h.handled.Load(); n != 3 {
		t.Errorf("the handler ran %d times; want 3 (deposit, first voucher, next voucher)", n)
	}
}
