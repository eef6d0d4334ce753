package batch_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// facEnv is a devnet with the batch facilitator over it: the exact
// facilitator (gas key #9) as its transactor, a receiver authorizer key
// the facilitator holds, payTo #1.
type facEnv struct {
	chain      *devnet.Chain
	client     *ethclient.Client
	escrow     batch.Escrow
	local      *batch.Local
	authorizer *ecdsa.PrivateKey
	payTo      common.Address
	token      common.Address
	tokenABI   abi.ABI
}

// facPrice and facDeposit are the price of one request and the deposit
// of the tests' channels.
var (
	facPrice   = big.NewInt(20_000)
	facDeposit = big.NewInt(1_000_000)
)

func newFacEnv(t *testing.T) *facEnv {
	t.Helper()
	chain, client := devnettest.Start(t)
	_, tokenABI, err := devnet.TokenArtifact()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := payment.NewLocal(payment.LocalConfig{
		ChainID: big.NewInt(devnet.ChainID), Key: chain.Account(devnet.FacilitatorAccount).Key,
		ReceiptTimeout: time.Minute,
	}, client)
	if err != nil {
		t.Fatal(err)
	}
	authorizer, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	e := &facEnv{chain: chain, client: client, escrow: batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress},
		authorizer: authorizer, payTo: chain.Account(devnet.PayToAccount).Address, token: chain.Token, tokenABI: tokenABI}
	e.local = e.newLocal(t, authorizer, tx)
	return e
}

func (e *facEnv) newLocal(t *testing.T, authorizer *ecdsa.PrivateKey, tx batch.Transactor) *batch.Local {
	t.Helper()
	l, err := batch.NewLocal(batch.LocalConfig{Escrow: e.escrow, Authorizer: authorizer,
		Tokens: []payment.Asset{{Address: e.token, Name: devnet.TokenName, Version: devnet.TokenVersion}}}, e.client, tx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// terms are the server's terms for channels to payTo under the
// facilitator's authorizer.
func (e *facEnv) terms() batch.Terms {
	return batch.Terms{Escrow: e.escrow, Receiver: e.payTo, ReceiverAuthorizer: crypto.PubkeyToAddress(e.authorizer.PublicKey),
		Token: e.token, WithdrawDelay: 900, Price: facPrice}
}

// requirements is the route's accepts entry for t.
func facRequirements(t batch.Terms) payment.RequirementsV2 {
	return payment.RequirementsV2{Scheme: batch.Scheme, Network: "eip155:8453", Amount: t.Price.String(), Asset: t.Token.Hex(),
		PayTo: t.Receiver.Hex(), MaxTimeoutSeconds: 300,
		Extra: payment.Extra{Name: devnet.TokenName, Version: devnet.TokenVersion}.With("receiverAuthorizer", t.ReceiverAuthorizer.Hex()).
			With("withdrawDelay", t.WithdrawDelay)}
}

// payer is devnet account i as a batch payer.
func (e *facEnv) payer(i int) batch.Payer {
	return batch.Payer{Key: e.chain.Account(i).Key, Escrow: e.escrow}
}

// deposit is a fresh deposit request of amount, valid for five minutes.
func (e *facEnv) deposit(t *testing.T, amount *big.Int) *batch.DepositRequest {
	t.Helper()
	salt, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 255))
	if err != nil {
		t.Fatal(err)
	}
	return &batch.DepositRequest{Amount: amount, ValidBefore: big.NewInt(time.Now().Add(5 * time.Minute).Unix()), Salt: salt,
		Token: payment.Domain{Name: devnet.TokenName, Version: devnet.TokenVersion, ChainID: big.NewInt(devnet.ChainID), VerifyingContract: e.token}}
}

// facPayment builds a payload of p to terms t, decoded, with its whole
// PaymentPayload.
func facPayment(t *testing.T, p batch.Payer, terms batch.Terms, typ string, max *big.Int, dep *batch.DepositRequest, refund *big.Int) (*batch.Payment, []byte) {
	t.Helper()
	payload, err := p.Payload(terms, typ, max, dep, refund)
	if err != nil {
		t.Fatal(err)
	}
	pay, err := batch.DecodePayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{"x402Version": 2, "accepted": facRequirements(terms), "payload": json.RawMessage(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return pay, raw
}

// claim is a claim row of p's channel to t: a voucher of max, claimed up
// to total.
func facClaim(t *testing.T, p batch.Payer, terms batch.Terms, max, total *big.Int) batch.Claim {
	t.Helper()
	cfg, id := p.Channel(terms)
	sig, err := p.Voucher(id, max)
	if err != nil {
		t.Fatal(err)
	}
	return batch.Claim{Config: cfg, MaxClaimable: max, Signature: sig, TotalClaimed: total}
}

func (e *facEnv) balance(t *testing.T, who common.Address) *big.Int {
	t.Helper()
	data, _ := e.tokenABI.Pack("balanceOf", who)
	out, err := e.client.CallContract(context.Background(), ethereum.CallMsg{To: &e.token, Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out)
}

func mul(n int64, x *big.Int) *big.Int { return new(big.Int).Mul(big.NewInt(n), x) }

func sameState(got *batch.OnChain, balance, claimed *big.Int, nonce int64) bool {
	return got != nil && got.Balance.Cmp(balance) == 0 && got.TotalClaimed.Cmp(claimed) == 0 && got.RefundNonce.Int64() == nonce &&
		got.WithdrawRequestedAt == 0
}

// TestLocalChannelLife drives one channel through the facilitator on the
// devnet: a deposit (verified, then sent), vouchers, a claim the
// facilitator signs, a settle (and one with nothing left), a refund with
// its claim bundled in a multicall (and one with nothing left), checking
// the reported and the on-chain amounts at each step.
func TestLocalChannelLife(t *testing.T) {
	t.Parallel()
	e := newFacEnv(t)
	ctx := context.Background()
	terms, payer := e.terms(), e.payer(devnet.PayerAccount)
	req := facRequirements(terms)
	payerBefore, payToBefore := e.balance(t, payer.Address()), e.balance(t, e.payTo)

	p, raw := facPayment(t, payer, terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
	v, err := e.local.Verify(ctx, p, req, raw)
	if err != nil || !v.Valid || v.Payer != payer.Address() || !sameState(&v.State, new(big.Int), new(big.Int), 0) {
		t.Fatalf("verify deposit = %+v, %v", v, err)
	}
	out, err := e.local.Deposit(ctx, p, req, raw)
	if err != nil || !out.Success || out.Tx == (common.Hash{}) || out.Amount.Cmp(facDeposit) != 0 || !sameState(out.State, facDeposit, new(big.Int), 0) {
		t.Fatalf("deposit = %+v (state %+v), %v", out, out.State, err)
	}
	if got := e.balance(t, payer.Address()); new(big.Int).Sub(payerBefore, got).Cmp(facDeposit) != 0 {
		t.Errorf("payer paid %s, want %s", new(big.Int).Sub(payerBefore, got), facDeposit)
	}

	for _, n := range []int64{2, 3} {
		p, raw := facPayment(t, payer, terms, batch.TypeVoucher, mul(n, facPrice), nil, nil)
		if v, err := e.local.Verify(ctx, p, req, raw); err != nil || !v.Valid || !sameState(&v.State, facDeposit, new(big.Int), 0) {
			t.Fatalf("verify voucher %d×price = %+v, %v", n, v, err)
		}
	}

	out, err = e.local.Claim(ctx, []batch.Claim{facClaim(t, payer, terms, mul(2, facPrice), mul(2, facPrice))}, nil)
	if err != nil || !out.Success {
		t.Fatalf("claim = %+v, %v", out, err)
	}
	// A row the escrow would refuse is refused before anything is sent:
	// signed by someone else, or with v 0/1 (the same signature).
	bad := facClaim(t, e.payer(3), terms, mul(3, facPrice), mul(3, facPrice))
	bad.Config = facClaim(t, payer, terms, mul(3, facPrice), mul(3, facPrice)).Config
	lowV := facClaim(t, payer, terms, mul(3, facPrice), mul(3, facPrice))
	lowV.Signature = append([]byte(nil), lowV.Signature...)
	lowV.Signature[64] -= 27
	for _, row := range []batch.Claim{bad, lowV} {
		if out, err := e.local.Claim(ctx, []batch.Claim{row}, nil); err != nil || out.Success || out.Reason != batch.ReasonClaimPayload || out.Tx != (common.Hash{}) {
			t.Errorf("claim with a bad voucher = %+v, %v", out, err)
		}
	}
	// The escrow itself refuses the v 0/1 form: what Tollgate refuses is
	// what could never be claimed.
	lowV.TotalClaimed = mul(3, facPrice)
	if _, err := e.client.CallContract(ctx, ethereum.CallMsg{From: e.payTo, To: &batch.EscrowAddress, Data: e.claimCalldata(t, lowV)}, nil); err == nil {
		t.Error("the escrow accepted a voucher with v 0/1")
	}
	lowV.Signature[64] += 27
	if _, err := e.client.CallContract(ctx, ethereum.CallMsg{From: e.payTo, To: &batch.EscrowAddress, Data: e.claimCalldata(t, lowV)}, nil); err != nil {
		t.Errorf("the escrow refused the same voucher with v 27/28: %v", err)
	}

	out, err = e.local.Settle(ctx, e.payTo, e.token)
	if err != nil || !out.Success || out.Amount.Cmp(mul(2, facPrice)) != 0 {
		t.Fatalf("settle = %+v, %v", out, err)
	}
	if got := new(big.Int).Sub(e.balance(t, e.payTo), payToBefore); got.Cmp(mul(2, facPrice)) != 0 {
		t.Errorf("payTo received %s, want %s", got, mul(2, facPrice))
	}
	if out, err := e.local.Settle(ctx, e.payTo, e.token); err != nil || out.Success || out.Reason != batch.ReasonNothingToSettle {
		t.Errorf("second settle = %+v, %v", out, err)
	}

	p, raw = facPayment(t, payer, terms, batch.TypeRefund, mul(3, facPrice), nil, nil)
	if v, err := e.local.Verify(ctx, p, req, raw); err != nil || !v.Valid || !sameState(&v.State, facDeposit, mul(2, facPrice), 0) {
		t.Fatalf("verify refund = %+v, %v", v, err)
	}
	order := batch.RefundOrder{Config: p.Config, MaxClaimable: p.MaxClaimable, Signature: p.Signature, Amount: facDeposit, Nonce: big.NewInt(0),
		Claims: []batch.Claim{facClaim(t, payer, terms, mul(3, facPrice), mul(3, facPrice))}}
	out, err = e.local.Refund(ctx, order)
	rest := new(big.Int).Sub(facDeposit, mul(3, facPrice))
	if err != nil || !out.Success || out.Amount.Cmp(rest) != 0 || !sameState(out.State, mul(3, facPrice), mul(3, facPrice), 1) {
		t.Fatalf("refund = %+v (state %+v), %v", out, out.State, err)
	}
	if got := new(big.Int).Sub(payerBefore, e.balance(t, payer.Address())); got.Cmp(mul(3, facPrice)) != 0 {
		t.Errorf("payer paid %s in all, want %s", got, mul(3, facPrice))
	}
	order.Nonce = big.NewInt(1)
	if out, err := e.local.Refund(ctx, order); err != nil || out.Success || out.Reason != batch.ReasonRefundNoBalance {
		t.Errorf("second refund = %+v, %v", out, err)
	}
}

// TestLocalRefusals: what the facilitator refuses, and why, without
// sending anything (verifications against one funded channel, and claim,
// settle and refund orders refused before their transaction).
func TestLocalRefusals(t *testing.T) {
	t.Parallel()
	e := newFacEnv(t)
	ctx := context.Background()
	terms, payer := e.terms(), e.payer(devnet.PayerAccount)
	req := facRequirements(terms)
	p, raw := facPayment(t, payer, terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
	if out, err := e.local.Deposit(ctx, p, req, raw); err != nil || !out.Success {
		t.Fatalf("deposit = %+v, %v", out, err)
	}
	stranger := e.payer(3) // a funded account without a channel
	otherKey, _ := crypto.GenerateKey()
	signedBy := func(p *batch.Payment, key *ecdsa.PrivateKey) {
		sig, err := payment.SignDigest(e.escrow.VoucherDigest(p.ChannelID, p.MaxClaimable), key)
		if err != nil {
			t.Fatal(err)
		}
		p.Signature = sig
	}

	for _, tc := range []struct {
		name   string
		build  func() (*batch.Payment, []byte)
		req    func(r payment.RequirementsV2) payment.RequirementsV2
		reason string
	}{
		{"voucher within the deposit", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
		}, nil, ""},
		{"voucher signed by another key", func() (*batch.Payment, []byte) {
			p, raw := facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
			signedBy(p, otherKey)
			return p, raw
		}, nil, batch.ReasonVoucherSignature},
		{"payer authorizer zero", func() (*batch.Payment, []byte) {
			p, raw := facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
			p.Config.PayerAuthorizer = common.Address{}
			p.ChannelID = e.escrow.ChannelID(p.Config)
			return p, raw
		}, nil, batch.ReasonVoucherSignature},
		{"wrong receiver", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
		}, func(r payment.RequirementsV2) payment.RequirementsV2 {
			r.PayTo = e.chain.Account(4).Address.Hex()
			return r
		}, batch.ReasonReceiverMismatch},
		{"wrong receiver authorizer", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
		}, func(r payment.RequirementsV2) payment.RequirementsV2 {
			r.Extra = r.Extra.With("receiverAuthorizer", e.chain.Account(4).Address.Hex())
			return r
		}, batch.ReasonReceiverAuthorizerMismatch},
		{"another withdraw delay", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
		}, func(r payment.RequirementsV2) payment.RequirementsV2 {
			r.Extra = r.Extra.With("withdrawDelay", 3600)
			return r
		}, batch.ReasonWithdrawDelayMismatch},
		{"token not accepted", func() (*batch.Payment, []byte) {
			tt := terms
			tt.Token = e.chain.Account(5).Address
			return facPayment(t, payer, tt, batch.TypeVoucher, mul(5, facPrice), nil, nil)
		}, func(r payment.RequirementsV2) payment.RequirementsV2 {
			r.Asset = e.chain.Account(5).Address.Hex()
			return r
		}, batch.ReasonTokenMismatch},
		{"another network", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeVoucher, mul(5, facPrice), nil, nil)
		}, func(r payment.RequirementsV2) payment.RequirementsV2 {
			r.Network = "eip155:1"
			return r
		}, batch.ReasonNetworkMismatch},
		{"voucher over the balance", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeVoucher, new(big.Int).Add(facDeposit, big.NewInt(1)), nil, nil)
		}, nil, batch.ReasonCumulativeExceedsBalance},
		{"voucher on a channel without deposit", func() (*batch.Payment, []byte) {
			return facPayment(t, stranger, terms, batch.TypeVoucher, facPrice, nil, nil)
		}, nil, batch.ReasonChannelNotFound},
		{"deposit over the payer's balance", func() (*batch.Payment, []byte) {
			huge := new(big.Int).Exp(big.NewInt(10), big.NewInt(30), nil)
			return facPayment(t, stranger, terms, batch.TypeDeposit, facPrice, e.deposit(t, huge), nil)
		}, nil, batch.ReasonInsufficientBalance},
		{"deposit voucher over balance plus deposit", func() (*batch.Payment, []byte) {
			return facPayment(t, stranger, terms, batch.TypeDeposit, new(big.Int).Add(facDeposit, big.NewInt(1)), e.deposit(t, facDeposit), nil)
		}, nil, batch.ReasonCumulativeExceedsBalance},
		{"deposit authorization expiring", func() (*batch.Payment, []byte) {
			d := e.deposit(t, facDeposit)
			d.ValidBefore = big.NewInt(time.Now().Add(2 * time.Second).Unix())
			return facPayment(t, stranger, terms, batch.TypeDeposit, facPrice, d, nil)
		}, nil, batch.ReasonValidBefore},
		{"deposit authorization signed by another key", func() (*batch.Payment, []byte) {
			p, raw := facPayment(t, stranger, terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
			other, _ := facPayment(t, e.payer(4), terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
			p.Deposit.Signature = other.Deposit.Signature
			return p, raw
		}, nil, batch.ReasonReceiveAuthorizationSignature},
		{"deposit without the token's domain", func() (*batch.Payment, []byte) {
			return facPayment(t, stranger, terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
		}, func(r payment.RequirementsV2) payment.RequirementsV2 {
			r.Extra.Name = ""
			return r
		}, batch.ReasonMissingEIP712Domain},
		{"deposit of a stranger", func() (*batch.Payment, []byte) {
			return facPayment(t, stranger, terms, batch.TypeDeposit, facPrice, e.deposit(t, facDeposit), nil)
		}, nil, ""},
		{"refund voucher below what was charged", func() (*batch.Payment, []byte) {
			return facPayment(t, payer, terms, batch.TypeRefund, big.NewInt(0), nil, nil)
		}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, raw := tc.build()
			r := req
			if tc.req != nil {
				r = tc.req(r)
			}
			v, err := e.local.Verify(ctx, p, r, raw)
			if err != nil {
				t.Fatal(err)
			}
			if v.Valid != (tc.reason == "") || v.Reason != tc.reason {
				t.Errorf("verify = %+v, want reason %q", v, tc.reason)
			}
		})
	}

	noKey := e.newLocal(t, nil, failingTransactor{t})
	otherTerms := terms
	otherTerms.ReceiverAuthorizer = crypto.PubkeyToAddress(otherKey.PublicKey)
	row := facClaim(t, payer, terms, mul(2, facPrice), mul(2, facPrice))
	order := batch.RefundOrder{Config: row.Config, Amount: facDeposit, Nonce: big.NewInt(0)}
	for _, tc := range []struct {
		name   string
		do     func() (batch.Outcome, error)
		reason string
	}{
		{"claim of no rows", func() (batch.Outcome, error) { return noKey.Claim(ctx, nil, nil) }, batch.ReasonClaimPayload},
		{"claim unsigned without a key", func() (batch.Outcome, error) { return noKey.Claim(ctx, []batch.Claim{row}, nil) }, batch.ReasonAuthorizerNotConfigured},
		{"claim for another authorizer", func() (batch.Outcome, error) {
			return e.local.Claim(ctx, []batch.Claim{facClaim(t, payer, otherTerms, facPrice, facPrice)}, nil)
		}, batch.ReasonAuthorizerAddressMismatch},
		{"settle with nothing claimed", func() (batch.Outcome, error) { return noKey.Settle(ctx, e.chain.Account(4).Address, e.token) }, batch.ReasonNothingToSettle},
		{"refund of a channel without deposit", func() (batch.Outcome, error) {
			o := order
			o.Config, _ = stranger.Channel(terms)
			return noKey.Refund(ctx, o)
		}, batch.ReasonRefundNoBalance},
		{"refund of nothing", func() (batch.Outcome, error) {
			o := order
			o.Amount = new(big.Int)
			return noKey.Refund(ctx, o)
		}, batch.ReasonRefundAmountInvalid},
		{"refund claiming it all", func() (batch.Outcome, error) {
			o := order
			o.Claims = []batch.Claim{facClaim(t, payer, terms, facDeposit, facDeposit)}
			return noKey.Refund(ctx, o)
		}, batch.ReasonRefundNoBalance},
		{"refund unsigned without a key", func() (batch.Outcome, error) { return noKey.Refund(ctx, order) }, batch.ReasonAuthorizerNotConfigured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := tc.do()
			if err != nil || out.Success || out.Reason != tc.reason {
				t.Errorf("= %+v, %v; want reason %s", out, err, tc.reason)
			}
		})
	}
}

// failingTransactor fails a test that sends anything.
type failingTransactor struct{ t *testing.T }

func (f failingTransactor) Transact(context.Context, common.Address, []byte, uint64) (payment.Sent, error) {
	f.t.Error("a transaction was sent")
	return payment.Sent{}, nil
}

// TestLocalConfig: the constructor reports every missing piece at once.
func TestLocalConfig(t *testing.T) {
	t.Parallel()
	_, err := batch.NewLocal(batch.LocalConfig{Tokens: []payment.Asset{{}}}, nil, nil)
	if err == nil {
		t.Fatal("an empty config was accepted")
	}
	for _, want := range []string{"chain id", "escrow address", "EIP-712 name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// claimCalldata is the escrow's claim([((config, max), signature, total)])
// of row, packed with the escrow's own compiled ABI.
func (e *facEnv) claimCalldata(t *testing.T, row batch.Claim) []byte {
	t.Helper()
	_, escrowABI, err := devnet.LoadArtifact("x402BatchSettlement")
	if err != nil {
		t.Fatal(err)
	}
	c := row.Config
	type channelConfig struct {
		Payer              common.Address
		PayerAuthorizer    common.Address
		Receiver           common.Address
		ReceiverAuthorizer common.Address
		Token              common.Address
		WithdrawDelay      *big.Int
		Salt               [32]byte
	}
	config := channelConfig{c.Payer, c.PayerAuthorizer, c.Receiver, c.ReceiverAuthorizer, c.Token, new(big.Int).SetUint64(c.WithdrawDelay), c.Salt}
	type voucher struct {
		Channel            channelConfig
		MaxClaimableAmount *big.Int
	}
	data, err := escrowABI.Pack("claim", []struct {
		Voucher      voucher
		Signature    []byte
		TotalClaimed *big.Int
	}{{voucher{config, row.MaxClaimable}, row.Signature, row.TotalClaimed}})
	if err != nil {
		t.Fatal(err)
	}
	return data
}
