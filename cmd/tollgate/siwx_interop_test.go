package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/big"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment"
)

// siwxAnswer is one answer siwx.mjs saw.
type siwxAnswer struct {
	Status     int
	Body       string
	Settlement *struct{ Transaction string }
	Required   *struct{ Error string }
	Error      string // the client's own failure
}

// TestInteropSignInWithX: the official @x402/fetch client with
// @x402/extensions' createSIWxClientHook (.ci/interop/siwx.mjs) reads
// again what its wallet bought, without paying: the answer is the
// recorded one, with the purchase's settlement; a resource it did not
// buy is refused and paid as usual; the hook's own headers are refused
// when replayed, from a wallet that bought nothing, and for another
// request. Checked on chain (payTo gained the two purchases only) and in
// /metrics.
func TestInteropSignInWithX(t *testing.T) {
	t.Parallel()
	dir := interopDir(t, "@x402/extensions")
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, _, payTo := watchDevnet(t, ctx, s)
	payTo0 := w.balance(payTo)

	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "siwx.mjs"), s.base, s.devnetRPC)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node siwx.mjs: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	type counts struct{ Payments, SignIns int }
	var got struct {
		Bought, Reread, NotBought     siwxAnswer
		RereadCounts, NotBoughtCounts counts
		Stranger                      struct {
			Refused  siwxAnswer
			Payments int
			SignIns  int
		}
		Refusals struct{ First, Replayed, StrangerNoPurchase, OtherRequest siwxAnswer }
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("siwx.mjs wrote %q: %v", out.String(), err)
	}
	if got.Bought.Status != 200 || got.Bought.Settlement == nil {
		t.Fatalf("the purchase: %+v", got.Bought)
	}
	if r := got.Reread; r.Status != 200 || r.Body != got.Bought.Body || r.Settlement == nil || r.Settlement.Transaction != got.Bought.Settlement.Transaction ||
		got.RereadCounts != (counts{Payments: 0, SignIns: 1}) {
		t.Errorf("the re-read: %+v after %+v; want the purchase's answer and settlement, one sign-in and no payment", r, got.RereadCounts)
	}
	if got.NotBought.Status != 200 || got.NotBoughtCounts != (counts{Payments: 1, SignIns: 1}) {
		t.Errorf("a resource not bought: %+v after %+v; want a refused sign-in, then a payment", got.NotBought, got.NotBoughtCounts)
	}
	if st := got.Stranger; st.Refused.Status == 200 || st.SignIns != 1 {
		t.Errorf("a wallet that bought nothing: %+v", st)
	}
	for _, tc := range []struct {
		name   string
		a      siwxAnswer
		reason string
	}{
		{"the hook's header", got.Refusals.First, ""},
		{"the hook's header replayed", got.Refusals.Replayed, payment.ReasonSIWxNonce},
		{"a wallet that bought nothing", got.Refusals.StrangerNoPurchase, payment.ReasonSIWxNoPurchase},
		{"another request's header", got.Refusals.OtherRequest, payment.ReasonSIWxURI},
	} {
		switch {
		case tc.reason == "" && (tc.a.Status != 200 || tc.a.Body != got.Bought.Body):
			t.Errorf("%s: %d %s; want the purchase's answer", tc.name, tc.a.Status, tc.a.Body)
		case tc.reason != "" && (tc.a.Status != 402 || tc.a.Required == nil || tc.a.Required.Error != tc.reason):
			t.Errorf("%s: %d %+v; want a 402 with %s", tc.name, tc.a.Status, tc.a.Required, tc.reason)
		}
	}
	// payTo gained /regime's purchase and /lanes' payment, nothing more.
	if earned := new(big.Int).Sub(w.balance(payTo), payTo0); earned.Cmp(big.NewInt(100_000)) != 0 {
		t.Errorf("payTo earned %s; want 100000 (the two purchases)", earned)
	}
	fams := scrape(t, s.admin)
	if v, ok := sample(fams["tollgate_siwx_rereads_total"].GetMetric(), "operation", "regime"); !ok || v != 2 {
		t.Errorf("tollgate_siwx_rereads_total{regime} = %v (%v); want 2", v, ok)
	}
}
