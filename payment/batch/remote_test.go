package batch_test

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// remoteEnv is facEnv's facilitator served over HTTP by payment.Server
// with the batch adapter, and a Remote asking it.
type remoteEnv struct {
	*facEnv
	srv    *httptest.Server
	remote *batch.Remote
}

func newRemoteEnv(t *testing.T) *remoteEnv {
	t.Helper()
	e := newFacEnv(t)
	sender, err := payment.NewLocal(payment.LocalConfig{
		ChainID: big.NewInt(devnet.ChainID), Key: e.chain.Account(devnet.FacilitatorAccount).Key,
		ReceiptTimeout: time.Minute,
	}, e.client)
	if err != nil {
		t.Fatal(err)
	}
	// One gas key, one nonce manager: the batch facilitator sends through
	// the one exact is served beside.
	e.local = e.newLocal(t, e.authorizer, sender)
	adapter, err := batch.NewAdapter(e.local, batch.AdapterConfig{Network: "eip155:8453", PayTo: []common.Address{e.payTo},
		ReceiverAuthorizer: crypto.PubkeyToAddress(e.authorizer.PublicKey)})
	if err != nil {
		t.Fatal(err)
	}
	api := payment.NewServer(payment.ServerConfig{Network: "eip155:8453", NetworkV1: "base",
		Schemes: map[string]payment.SchemeFacilitator{batch.Scheme: adapter}}, sender.Signer())
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	client, err := payment.NewClient(payment.ClientConfig{URL: srv.URL, Timeout: time.Minute}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	remote, err := batch.NewRemote(client, e.escrow)
	if err != nil {
		t.Fatal(err)
	}
	return &remoteEnv{facEnv: e, srv: srv, remote: remote}
}

// TestRemoteRoundTrip drives a channel through Remote → HTTP →
// payment.Server → Adapter → Local on the devnet: every action's request
// and answer crosses the wire, and the answers read back as Local's.
func TestRemoteRoundTrip(t *testing.T) {
	t.Parallel()
	e := newRemoteEnv(t)
	ctx := context.Background()
	terms, payer := e.terms(), e.payer(devnet.PayerAccount)
	req := facRequirements(terms)

	resp, err := e.srv.Client().Get(e.srv.URL + "/supported")
	if err != nil {
		t.Fatal(err)
	}
	var sup struct {
		Kinds []struct {
			X402Version int               `json:"x402Version"`
			Scheme      string            `json:"scheme"`
			Network     string            `json:"network"`
			Extra       map[string]string `json:"extra"`
		} `json:"kinds"`
	}
	err = json.NewDecoder(resp.Body).Decode(&sup)
	resp.Body.Close()
	if err != nil || len(sup.Kinds) != 1 || sup.Kinds[0].Scheme != batch.Scheme || sup.Kinds[0].X402Version != 2 || sup.Kinds[0].Network != "eip155:8453" ||
		sup.Kinds[0].Extra["receiverAuthorizer"] != terms.ReceiverAuthorizer.Hex() {
		t.Fatalf("/supported kinds %+v (%v)", sup.Kinds, err)
	}

	p, raw := facPayment(t, payer, terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
	if v, err := e.remote.Verify(ctx, p, req, raw); err != nil || !v.Valid || v.Payer != payer.Address() || !sameState(&v.State, new(big.Int), new(big.Int), 0) {
		t.Fatalf("verify deposit = %+v, %v", v, err)
	}
	out, err := e.remote.Deposit(ctx, p, req, raw)
	if err != nil || !out.Success || out.Tx == (common.Hash{}) || out.Amount.Cmp(facDeposit) != 0 || !sameState(out.State, facDeposit, new(big.Int), 0) {
		t.Fatalf("deposit = %+v (state %+v), %v", out, out.State, err)
	}
	p, raw = facPayment(t, payer, terms, batch.TypeVoucher, mul(2, facPrice), nil, nil)
	if v, err := e.remote.Verify(ctx, p, req, raw); err != nil || !v.Valid || !sameState(&v.State, facDeposit, new(big.Int), 0) {
		t.Fatalf("verify voucher = %+v, %v", v, err)
	}
	p, raw = facPayment(t, payer, terms, batch.TypeVoucher, new(big.Int).Add(facDeposit, big.NewInt(1)), nil, nil)
	if v, err := e.remote.Verify(ctx, p, req, raw); err != nil || v.Valid || v.Reason != batch.ReasonCumulativeExceedsBalance {
		t.Errorf("verify voucher over the balance = %+v, %v", v, err)
	}

	// The claim is signed here by the authorizer, as a server holding the
	// key does, and relayed.
	row := facClaim(t, payer, terms, mul(2, facPrice), mul(2, facPrice))
	sig, err := payment.SignDigest(e.escrow.ClaimBatchDigest([]batch.ClaimEntry{{ChannelID: e.escrow.ChannelID(row.Config),
		MaxClaimableAmount: row.MaxClaimable, TotalClaimed: row.TotalClaimed}}), e.authorizer)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.remote.Claim(ctx, []batch.Claim{row}, sig); err != nil || !out.Success || out.Tx == (common.Hash{}) {
		t.Fatalf("claim = %+v, %v", out, err)
	}
	if out, err := e.remote.Settle(ctx, e.payTo, e.token); err != nil || !out.Success || out.Amount.Cmp(mul(2, facPrice)) != 0 {
		t.Fatalf("settle = %+v, %v", out, err)
	}
	if out, err := e.remote.Settle(ctx, e.payTo, e.token); err != nil || out.Success || out.Reason != batch.ReasonNothingToSettle {
		t.Errorf("second settle = %+v, %v", out, err)
	}

	p, raw = facPayment(t, payer, terms, batch.TypeRefund, mul(3, facPrice), nil, nil)
	if v, err := e.remote.Verify(ctx, p, req, raw); err != nil || !v.Valid || !sameState(&v.State, facDeposit, mul(2, facPrice), 0) {
		t.Fatalf("verify refund = %+v, %v", v, err)
	}
	// Unsigned: the facilitator's authorizer signs the claim and the refund.
	order := batch.RefundOrder{Config: p.Config, MaxClaimable: p.MaxClaimable, Signature: p.Signature, Amount: facDeposit, Nonce: big.NewInt(0),
		Claims: []batch.Claim{facClaim(t, payer, terms, mul(3, facPrice), mul(3, facPrice))}}
	out, err = e.remote.Refund(ctx, order)
	if err != nil || !out.Success || out.Amount.Cmp(new(big.Int).Sub(facDeposit, mul(3, facPrice))) != 0 || !sameState(out.State, mul(3, facPrice), mul(3, facPrice), 1) {
		t.Fatalf("refund = %+v (state %+v), %v", out, out.State, err)
	}
	order.Nonce = big.NewInt(1)
	if out, err := e.remote.Refund(ctx, order); err != nil || out.Success || out.Reason != batch.ReasonRefundNoBalance {
		t.Errorf("second refund = %+v, %v", out, err)
	}
}

// TestRemoteFacilitatorDown: a facilitator that answers nonsense or
// nothing is an error, not a verdict.
func TestRemoteFacilitatorDown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"the chain could not be asked"}`, http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	client, err := payment.NewClient(payment.ClientConfig{URL: srv.URL, Timeout: time.Second}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	escrow := batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress}
	remote, err := batch.NewRemote(client, escrow)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := remote.Verify(ctx, &batch.Payment{}, payment.RequirementsV2{}, []byte(`{}`)); err == nil {
		t.Error("verify: no error")
	}
	if _, err := remote.Settle(ctx, common.Address{1}, common.Address{2}); err == nil {
		t.Error("settle: no error")
	}
}
