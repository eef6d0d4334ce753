package batch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

var _ payment.SchemeFacilitator = (*batch.Adapter)(nil)

// recorder is a batch.Facilitator that records what it was asked and
// answers a fixed outcome (or fails, with err).
type recorder struct {
	err     error
	claims  []batch.Claim
	sig     []byte
	settled [2]common.Address
	refund  batch.RefundOrder
}

var recorded = batch.Outcome{Success: true, Tx: common.Hash{1}, Amount: big.NewInt(7),
	State: &batch.OnChain{Balance: big.NewInt(9), TotalClaimed: big.NewInt(2), RefundNonce: big.NewInt(1)}}

func (r *recorder) Verify(context.Context, *batch.Payment, payment.RequirementsV2, []byte) (batch.Verdict, error) {
	return batch.Verdict{Valid: true, State: *recorded.State}, r.err
}

func (r *recorder) Deposit(context.Context, *batch.Payment, payment.RequirementsV2, []byte) (batch.Outcome, error) {
	return recorded, r.err
}

func (r *recorder) Claim(_ context.Context, rows []batch.Claim, sig []byte) (batch.Outcome, error) {
	r.claims, r.sig = rows, sig
	return batch.Outcome{Success: true, Tx: common.Hash{2}}, r.err
}

func (r *recorder) Settle(_ context.Context, receiver, token common.Address) (batch.Outcome, error) {
	r.settled = [2]common.Address{receiver, token}
	return batch.Outcome{Success: true, Tx: common.Hash{3}, Amount: big.NewInt(5)}, r.err
}

func (r *recorder) Refund(_ context.Context, o batch.RefundOrder) (batch.Outcome, error) {
	r.refund = o
	return recorded, r.err
}

// serveAdapter serves a recorder through the adapter and payment.Server;
// authorizer is what /supported advertises.
func serveAdapter(t *testing.T, f batch.Facilitator, authorizer common.Address) (*httptest.Server, *batch.Remote) {
	t.Helper()
	adapter, err := batch.NewAdapter(f, batch.AdapterConfig{Network: "eip155:8453", PayTo: []common.Address{adapterPayTo}, ReceiverAuthorizer: authorizer})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := crypto.GenerateKey()
	sender, err := payment.NewLocal(payment.LocalConfig{ChainID: big.NewInt(devnet.ChainID), Key: key,
		ReceiptTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	api := payment.NewServer(payment.ServerConfig{Network: "eip155:8453", NetworkV1: "base",
		Schemes: map[string]payment.SchemeFacilitator{batch.Scheme: adapter}}, sender.Signer())
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	client, err := payment.NewClient(payment.ClientConfig{URL: srv.URL, Timeout: 5 * time.Second}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	remote, err := batch.NewRemote(client, batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress})
	if err != nil {
		t.Fatal(err)
	}
	return srv, remote
}

var (
	adapterPayTo  = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	adapterToken  = common.HexToAddress("0x4444444444444444444444444444444444444444")
	adapterEscrow = batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress}
)

func adapterTerms(t *testing.T) (batch.Terms, batch.Payer) {
	t.Helper()
	key, _ := crypto.GenerateKey()
	return batch.Terms{Escrow: adapterEscrow, Receiver: adapterPayTo, ReceiverAuthorizer: common.Address{3}, Token: adapterToken, WithdrawDelay: 900, Price: big.NewInt(10)},
		batch.Payer{Key: key, Escrow: adapterEscrow}
}

// TestAdapterCarriesActions: what Remote sends reaches the facilitator
// behind the adapter as it was given (claims, signatures, refund
// orders), and the answers come back whole.
func TestAdapterCarriesActions(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	_, remote := serveAdapter(t, rec, common.Address{})
	terms, payer := adapterTerms(t)
	ctx := context.Background()
	rows := []batch.Claim{facClaim(t, payer, terms, big.NewInt(30), big.NewInt(20))}

	if out, err := remote.Claim(ctx, rows, []byte{1, 2, 3}); err != nil || !out.Success || out.Tx != (common.Hash{2}) {
		t.Fatalf("claim = %+v, %v", out, err)
	}
	if !reflect.DeepEqual(rec.claims, rows) || !bytes.Equal(rec.sig, []byte{1, 2, 3}) {
		t.Errorf("claimed %+v with %x, want %+v", rec.claims, rec.sig, rows)
	}
	if out, err := remote.Claim(ctx, rows, nil); err != nil || !out.Success || rec.sig != nil {
		t.Errorf("unsigned claim = %+v, %v; facilitator got signature %x", out, err, rec.sig)
	}
	if out, err := remote.Settle(ctx, adapterPayTo, adapterToken); err != nil || !out.Success || out.Amount.Int64() != 5 ||
		rec.settled != [2]common.Address{adapterPayTo, adapterToken} {
		t.Errorf("settle = %+v, %v (settled %v)", out, err, rec.settled)
	}
	order := batch.RefundOrder{Config: rows[0].Config, MaxClaimable: big.NewInt(20), Signature: rows[0].Signature, Amount: big.NewInt(100),
		Nonce: big.NewInt(4), Claims: rows, RefundSig: []byte{4}, ClaimSig: []byte{5}}
	out, err := remote.Refund(ctx, order)
	if err != nil || !out.Success || out.Amount.Int64() != 7 || !reflect.DeepEqual(out.State, recorded.State) {
		t.Fatalf("refund = %+v, %v", out, err)
	}
	if !reflect.DeepEqual(rec.refund, order) {
		t.Errorf("refund order %+v, want %+v", rec.refund, order)
	}
	p, raw := facPayment(t, payer, terms, batch.TypeVoucher, big.NewInt(10), nil, nil)
	if v, err := remote.Verify(ctx, p, facRequirements(terms), raw); err != nil || !v.Valid || !reflect.DeepEqual(v.State, *recorded.State) {
		t.Errorf("verify = %+v, %v", v, err)
	}
}

// TestAdapterRefusals: requests the adapter answers itself, and a
// facilitator that fails (502).
func TestAdapterRefusals(t *testing.T) {
	t.Parallel()
	terms, payer := adapterTerms(t)
	req := facRequirements(terms)
	_, voucher := facPayment(t, payer, terms, batch.TypeVoucher, big.NewInt(10), nil, nil)
	_, refund := facPayment(t, payer, terms, batch.TypeRefund, big.NewInt(10), nil, nil)
	wrap := func(payload string) json.RawMessage {
		return json.RawMessage(`{"x402Version":2,"accepted":{},"payload":` + payload + `}`)
	}
	other := req
	other.Network = "eip155:1"
	stranger := req
	stranger.PayTo = common.Address{9}.Hex()
	for _, tc := range []struct {
		name    string
		op      string
		payload json.RawMessage
		req     any
		fail    bool
		status  int
		reason  string
	}{
		{"voucher verified", "verify", voucher, req, false, 200, ""},
		{"another network", "verify", voucher, other, false, 200, batch.ReasonNetworkMismatch},
		{"receiver not served", "verify", voucher, stranger, false, 200, batch.ReasonReceiverMismatch},
		{"not a payload", "verify", wrap(`{"type":"deposit"}`), req, false, 200, batch.ReasonPayloadType},
		{"no payload", "verify", nil, req, false, 400, payment.ReasonInvalidPayload},
		{"facilitator down", "verify", voucher, req, true, 502, ""},
		{"voucher settled", "settle", voucher, req, false, 200, batch.ReasonPayloadType},
		{"bare refund settled", "settle", refund, req, false, 200, batch.ReasonPayloadType},
		{"unknown action", "settle", wrap(`{"type":"frobnicate"}`), req, false, 200, batch.ReasonUnknownSettleAction},
		{"claim without claims", "settle", wrap(`{"type":"claim","claims":[]}`), req, false, 200, batch.ReasonClaimPayload},
		{"settle for a stranger", "settle", wrap(`{"type":"settle","receiver":"` + common.Address{9}.Hex() + `","token":"` + adapterToken.Hex() + `"}`), req, false, 200, batch.ReasonReceiverMismatch},
		{"settle on another network", "settle", wrap(`{"type":"settle","receiver":"` + adapterPayTo.Hex() + `","token":"` + adapterToken.Hex() + `"}`), other, false, 200, batch.ReasonNetworkMismatch},
		{"settle failing", "settle", wrap(`{"type":"settle","receiver":"` + adapterPayTo.Hex() + `","token":"` + adapterToken.Hex() + `"}`), req, true, 502, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			if tc.fail {
				rec.err = errors.New("node down")
			}
			srv, _ := serveAdapter(t, rec, common.Address{})
			body, _ := json.Marshal(map[string]any{"x402Version": 2, "paymentPayload": tc.payload, "paymentRequirements": tc.req})
			resp, err := srv.Client().Post(srv.URL+"/"+tc.op, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var out struct {
				IsValid       *bool  `json:"isValid"`
				InvalidReason string `json:"invalidReason"`
				Success       *bool  `json:"success"`
				ErrorReason   string `json:"errorReason"`
				Network       string `json:"network"`
			}
			_ = json.Unmarshal(b, &out)
			reason, ok := out.InvalidReason, out.IsValid
			if tc.op == "settle" {
				reason, ok = out.ErrorReason, out.Success
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 200 && (ok == nil || *ok != (tc.reason == "") || reason != tc.reason) {
				t.Errorf("answer %s, want reason %q", b, tc.reason)
			}
			if tc.op == "settle" && tc.status == 200 && out.Network != "eip155:8453" {
				t.Errorf("settle answer without the network: %s", b)
			}
		})
	}
}

// TestSupportedAdvertisesAuthorizer: GET /supported lists the scheme,
// with extra.receiverAuthorizer only when the facilitator has one.
func TestSupportedAdvertisesAuthorizer(t *testing.T) {
	t.Parallel()
	for _, authorizer := range []common.Address{{}, {7}} {
		srv, _ := serveAdapter(t, &recorder{}, authorizer)
		resp, err := srv.Client().Get(srv.URL + "/supported")
		if err != nil {
			t.Fatal(err)
		}
		var sup struct {
			Kinds []map[string]any `json:"kinds"`
		}
		err = json.NewDecoder(resp.Body).Decode(&sup)
		resp.Body.Close()
		if err != nil || len(sup.Kinds) != 1 {
			t.Fatalf("/supported %+v, %v", sup, err)
		}
		kind := sup.Kinds[0]
		extra, has := kind["extra"].(map[string]any)
		switch {
		case kind["scheme"] != batch.Scheme || kind["network"] != "eip155:8453" || kind["x402Version"] != float64(2):
			t.Errorf("kind %v", kind)
		case authorizer == (common.Address{}) && has:
			t.Errorf("extra %v advertised without an authorizer", extra)
		case authorizer != (common.Address{}) && (!has || extra["receiverAuthorizer"] != authorizer.Hex()):
			t.Errorf("extra %v, want receiverAuthorizer %s", extra, authorizer.Hex())
		}
	}
}
