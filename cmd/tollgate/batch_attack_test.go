package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/service/catalog"
)

// The attacks of issue 20 (items 1–4), each against a devnet `serve` with
// the real escrow, with the chain's balances read before and after: the
// token balances of payTo and the payers, the escrow's channel balance and
// totalClaimed, the facilitator's nonce. Every test claims with a 3 s
// interval (the withdraw delay is the default hour).

// attackServeArgs are serve's flags for the attack tests: claims every
// 3 s, no threshold reached, a deposit of $1.00.
func attackServeArgs(t *testing.T) []string {
	return []string{"--data-dir", t.TempDir(), "--batch-claim-interval", "3s", "--batch-claim-threshold", "100", "--batch-min-deposit", "1.00"}
}

// attackDeposit is the deposit every channel of these tests makes: the
// announced minimum, $1.00.
var attackDeposit = big.NewInt(1_000_000)

// attackServe starts a devnet serve for an attack test and dials its chain.
func attackServe(t *testing.T, extra ...string) (*served, *ethclient.Client) {
	t.Helper()
	s, err := serveFor(t, append(attackServeArgs(t), extra...), nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return s, client
}

// attackChannel signs payments naming one channel, with any key: the
// channel's payer's (an honest payer, or one that mangles its own
// signatures) or a stranger's (who knows the channel's config, which is
// public: the payer's address and the server's terms).
type attackChannel struct {
	key      *ecdsa.PrivateKey // signs the vouchers and the deposit's authorization
	escrow   batch.Escrow
	cfg      batch.Config
	id       common.Hash
	entry    payment.RequirementsV2
	resource *payment.ResourceV2
}

// newAttackChannel is account's channel of salt to the server of entry,
// signed by account's key.
func newAttackChannel(t testing.TB, entry payment.RequirementsV2, resource *payment.ResourceV2, account uint32, salt int64) *attackChannel {
	t.Helper()
	key, err := devnet.DeriveKey(devnet.Mnemonic, account)
	if err != nil {
		t.Fatal(err)
	}
	escrow := batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress}
	terms, err := batch.TermsOf(entry, escrow.ChainID)
	if err != nil {
		t.Fatal(err)
	}
	payer := crypto.PubkeyToAddress(key.PublicKey)
	cfg := batch.Config{Payer: payer, PayerAuthorizer: payer, Receiver: terms.Receiver, ReceiverAuthorizer: terms.ReceiverAuthorizer,
		Token: terms.Token, WithdrawDelay: terms.WithdrawDelay, Salt: common.BigToHash(big.NewInt(salt))}
	return &attackChannel{key: key, escrow: escrow, cfg: cfg, id: escrow.ChannelID(cfg), entry: entry, resource: resource}
}

// signedBy is the same channel, its payments signed by account's key.
func (a *attackChannel) signedBy(t testing.TB, account uint32) *attackChannel {
	t.Helper()
	key, err := devnet.DeriveKey(devnet.Mnemonic, account)
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.key = key
	return &b
}

// voucher signs a voucher of cumulative on the channel.
func (a *attackChannel) voucher(cumulative *big.Int) []byte {
	sig, err := payment.SignDigest(a.escrow.VoucherDigest(a.id, cumulative), a.key)
	if err != nil {
		panic(err) // a valid key and a 32-byte digest
	}
	return sig
}

// envelope is the PAYMENT-SIGNATURE value of a payment of kind typ with a
// voucher of cumulative carrying sig (nil: the key's signature), written
// as the official client writes it; deposit (for TypeDeposit) is the
// amount the key authorizes, refund (for TypeRefund) the amount asked
// (nil: all).
func (a *attackChannel) envelope(typ string, cumulative *big.Int, sig []byte, deposit, refund *big.Int) (string, error) {
	if sig == nil {
		sig = a.voucher(cumulative)
	}
	c := a.cfg
	payload := map[string]any{
		"type": typ,
		"channelConfig": map[string]any{"payer": c.Payer.Hex(), "payerAuthorizer": c.PayerAuthorizer.Hex(), "receiver": c.Receiver.Hex(),
			"receiverAuthorizer": c.ReceiverAuthorizer.Hex(), "token": c.Token.Hex(), "withdrawDelay": c.WithdrawDelay, "salt": c.Salt.Hex()},
		"voucher": map[string]any{"channelId": a.id.Hex(), "maxClaimableAmount": cumulative.String(), "signature": hexutil.Encode(sig)},
	}
	switch typ {
	case batch.TypeDeposit:
		salt := new(big.Int).SetUint64(uint64(time.Now().UnixNano()))
		validBefore := big.NewInt(time.Now().Unix() + int64(max(a.entry.MaxTimeoutSeconds, 60)))
		token := payment.Domain{Name: a.entry.Extra.Name, Version: a.entry.Extra.Version, ChainID: a.escrow.ChainID, VerifyingContract: c.Token}
		auth, err := payment.SignDigest(token.ReceiveDigest(payment.Authorization{From: c.Payer, To: batch.ERC3009CollectorAddress, Value: deposit,
			ValidAfter: new(big.Int), ValidBefore: validBefore, Nonce: batch.DepositNonce(a.id, salt)}), a.key)
		if err != nil {
			return "", err
		}
		payload["deposit"] = map[string]any{"amount": deposit.String(), "authorization": map[string]any{"erc3009Authorization": map[string]any{
			"validAfter": "0", "validBefore": validBefore.String(), "salt": common.BigToHash(salt).Hex(), "signature": hexutil.Encode(auth)}}}
	case batch.TypeRefund:
		if refund != nil {
			payload["amount"] = refund.String()
		}
	}
	return payment.EncodeHeader(map[string]any{"x402Version": 2, "accepted": a.entry, "resource": a.resource, "payload": payload})
}

// mustEnvelope is envelope, failing t on error.
func (a *attackChannel) mustEnvelope(t testing.TB, typ string, cumulative *big.Int, sig []byte, deposit, refund *big.Int) string {
	t.Helper()
	env, err := a.envelope(typ, cumulative, sig, deposit, refund)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// attackAnswer is an answer to one paid request.
type attackAnswer struct {
	batchAnswer
	// responded: the answer carries a PAYMENT-RESPONSE header.
	responded bool
}

// reason is a 402's error reason ("" for other answers).
func (a attackAnswer) reason() string {
	if a.required == nil {
		return ""
	}
	return a.required.Error
}

// batchEntry is the 402's batch-settlement accepts entry.
func (a attackAnswer) batchEntry() (payment.RequirementsV2, bool) {
	if a.required != nil {
		for _, e := range a.required.Accepts {
			if e.Scheme == batch.Scheme {
				return e, true
			}
		}
	}
	return payment.RequirementsV2{}, false
}

// charged is a paid answer's PAYMENT-RESPONSE
// extra.channelState.chargedCumulativeAmount.
func (a attackAnswer) charged() string {
	extra, _ := json.Marshal(a.settlement.Extra)
	var e struct {
		ChannelState batch.ChannelState `json:"channelState"`
	}
	_ = json.Unmarshal(extra, &e)
	return e.ChannelState.ChargedCumulativeAmount
}

func (a attackAnswer) String() string {
	body := a.body
	if len(body) > 200 {
		body = body[:200]
	}
	return fmt.Sprintf("%d reason %q settlement %+v body %s", a.status, a.reason(), a.settlement, body)
}

// post sends envelope to base+path; safe from any goroutine.
func post(base, path, envelope string) (attackAnswer, error) {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return attackAnswer{}, err
	}
	req.Header.Set(payment.HeaderPaymentV2, envelope)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return attackAnswer{}, err
	}
	defer resp.Body.Close()
	a := attackAnswer{batchAnswer: batchAnswer{status: resp.StatusCode}}
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		return a, err
	}
	if v := resp.Header.Get(payment.HeaderPaymentResponseV2); v != "" {
		a.responded = true
		raw, _ := base64.StdEncoding.DecodeString(v)
		if err := json.Unmarshal(raw, &a.settlement); err != nil {
			return a, fmt.Errorf("PAYMENT-RESPONSE: %w", err)
		}
	}
	if v := resp.Header.Get(payment.HeaderPaymentRequired); v != "" && resp.StatusCode == http.StatusPaymentRequired {
		raw, _ := base64.StdEncoding.DecodeString(v)
		a.required = new(payment.RequiredV2)
		if err := json.Unmarshal(raw, a.required); err != nil {
			return a, fmt.Errorf("PAYMENT-REQUIRED: %w", err)
		}
	}
	return a, nil
}

// mustPost is post, failing t on a transport error.
func mustPost(t testing.TB, base, path, envelope string) attackAnswer {
	t.Helper()
	a, err := post(base, path, envelope)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// eventually polls cond every 250 ms until it holds; after timeout it
// fails t with cond's last account and returns false.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("after %s: %s", timeout, why)
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// claimedAndSettled waits until the escrow shows want claimed on each
// channel and payTo received their sum since payTo0 (see eventually).
func claimedAndSettled(t testing.TB, w *escrowWatch, payTo common.Address, payTo0 *big.Int, want map[common.Hash]*big.Int) bool {
	t.Helper()
	total := new(big.Int)
	for _, v := range want {
		total.Add(total, v)
	}
	return eventually(t, 25*time.Second, func() (bool, string) {
		var wrong []string
		for id, v := range want {
			if _, claimed := w.channel(id); claimed.Cmp(v) != 0 {
				wrong = append(wrong, fmt.Sprintf("channel %s: totalClaimed %s, want %s (the prices answered)", id.Hex()[:10], claimed, v))
			}
		}
		if got := new(big.Int).Sub(w.balance(payTo), payTo0); got.Cmp(total) != 0 {
			wrong = append(wrong, fmt.Sprintf("payTo received %s, want %s", got, total))
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})
}

// batchTxSeries reads the admin /metrics series
// tollgate_batch_transactions_total by its labels, e.g.
// `kind="claim",result="refused"`: 0 when absent.
func batchTxSeries(t testing.TB, s *served, labels string) float64 {
	t.Helper()
	return batchSeries(t, s)["tollgate_batch_transactions_total{"+labels+"}"]
}

// withoutResource is envelope without its resource.
func withoutResource(t testing.TB, envelope string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(envelope)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	delete(env, "resource")
	out, err := payment.EncodeHeader(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func times(price *big.Int, n int) *big.Int { return new(big.Int).Mul(price, big.NewInt(int64(n))) }

// TestBatchAttackUnclaimableVoucher (issue 20, item 1): a voucher whose
// signature the escrow would refuse when it is claimed is not served. After
// a deposit call the payer sends vouchers that are its own correct
// signatures in a form the escrow's OpenZeppelin ECDSA refuses: v = 0/1
// (27 subtracted from the last byte) and the malleable twin with a high s.
// Each gets a 402 voucher_signature with no answer and no PAYMENT-RESPONSE;
// the claimer then claims exactly the one answered call and payTo receives
// it, and the cooperative refund leaves the payer out of exactly that.
//
// Before the fix the server recovered the signer of the v 0/1 form (go-
// ethereum's recovery accepts it), served and charged that voucher, and
// its claim presented it, which the escrow refuses (ECDSAInvalidSignature):
// 2 answers, payTo received nothing, and the wait for the claim below
// fails (seen on the code before b0d09c7).
func TestBatchAttackUnclaimableVoucher(t *testing.T) {
	t.Parallel()
	s, client := attackServe(t)
	c := newBatchCaller(t, s.base, devnet.PayerAccount)
	entry, resource := c.entry("/regime")
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	payTo, payer := common.HexToAddress(entry.PayTo), c.sess.Payer.Address()
	w := &escrowWatch{t: t, ctx: context.Background(), c: client, token: common.HexToAddress(entry.Asset)}
	payTo0, payer0 := w.balance(payTo), w.balance(payer)

	first := c.pay("/regime", entry, resource)
	if first.status != http.StatusOK || first.settlement.Transaction == "" {
		t.Fatalf("deposit call: %d %s", first.status, first.body)
	}
	answered := 1
	ch := newAttackChannel(t, entry, resource, devnet.PayerAccount, 0)
	terms, _ := batch.TermsOf(entry, big.NewInt(devnet.ChainID))
	if _, id := c.sess.Payer.Channel(terms); ch.id != id {
		t.Fatalf("the test's channel %s is not the session's %s", ch.id.Hex(), id.Hex())
	}

	n := crypto.S256().Params().N
	for _, form := range []struct {
		name   string
		mangle func(sig []byte)
	}{
		{"v 0/1", func(sig []byte) { sig[64] -= 27 }},
		{"high s", func(sig []byte) {
			copy(sig[32:64], common.LeftPadBytes(new(big.Int).Sub(n, new(big.Int).SetBytes(sig[32:64])).Bytes(), 32))
			sig[64] ^= 1 // 27 <-> 28: the same signer
		}},
	} {
		next := new(big.Int).Add(c.sess.Charged, price)
		sig := ch.voucher(next)
		form.mangle(sig)
		a := mustPost(t, s.base, "/regime", ch.mustEnvelope(t, batch.TypeVoucher, next, sig, nil, nil))
		if a.status == http.StatusOK {
			// Served: the payer's record follows the server's charge, as
			// the official client's would, and sends the next one.
			answered++
			c.sess.Charged = next
		}
		var v1 payment.RequiredV1
		entry402, _ := a.batchEntry()
		switch {
		case a.status != http.StatusPaymentRequired || a.reason() != batch.ReasonVoucherSignature:
			t.Errorf("voucher with %s: %s; want 402 %s", form.name, a, batch.ReasonVoucherSignature)
		case a.responded:
			t.Errorf("voucher with %s: a PAYMENT-RESPONSE %+v on a refusal", form.name, a.settlement)
		case json.Unmarshal(a.body, &v1) != nil || v1.X402Version != 1 || v1.Error != batch.ReasonVoucherSignature:
			t.Errorf("voucher with %s: the body is not the 402 challenge: %s", form.name, a.body)
		case len(entry402.Extra.Field("channelState")) != 0:
			t.Errorf("voucher with %s: the 402 reveals the channel's state: %s", form.name, entry402.Extra.Field("channelState"))
		}
	}

	// Every answer served is claimed and reaches payTo.
	served := times(price, answered)
	if !claimedAndSettled(t, w, payTo, payTo0, map[common.Hash]*big.Int{ch.id: served}) {
		t.FailNow()
	}
	if balance, _ := w.channel(ch.id); balance.Cmp(attackDeposit) != 0 {
		t.Fatalf("the channel holds %s, want the deposit %s", balance, attackDeposit)
	}
	if n := batchTxSeries(t, s, `kind="claim",result="refused"`); n != 0 {
		t.Errorf("%v claims refused", n)
	}
	// The rest goes back: the payer paid exactly the answered calls.
	env, err := c.sess.RefundEnvelope(entry, resource, big.NewInt(devnet.ChainID), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := mustPost(t, s.base, "/regime", env); a.status != http.StatusOK {
		t.Fatalf("refund: %s", a)
	}
	if spent := new(big.Int).Sub(payer0, w.balance(payer)); spent.Cmp(served) != 0 {
		t.Errorf("the payer spent %s for %d answers of %s", spent, answered, price)
	}
	if got := new(big.Int).Sub(w.balance(payTo), payTo0); got.Cmp(served) != 0 {
		t.Errorf("payTo received %s after the refund, want %s", got, served)
	}
}

// raceRound is one channel's race of a cooperative refund against its
// next voucher.
type raceRound struct {
	ch                       *attackChannel
	refundEnv, voucherEnv    string
	voucherDelay             time.Duration
	deposit, voucher, refund attackAnswer
	next                     attackAnswer // the voucher after the race
	answered                 int          // vouchers served on the channel, the deposit's included
	sent                     int          // times the racing voucher was sent
	odd                      []attackAnswer
	err                      error
}

// concurrently runs f for every round at once and fails t with their
// transport errors.
func concurrently(t *testing.T, rounds []*raceRound, f func(r *raceRound) error) {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range rounds {
		wg.Go(func() { r.err = f(r) })
	}
	wg.Wait()
	for i, r := range rounds {
		if r.err != nil {
			t.Fatalf("round %d: %v", i, r.err)
		}
	}
}

// TestBatchAttackRefundRacesVoucher (issue 20, item 2): on each of 10
// channels (5 payers, 2 salts each), all at once, the payer makes a
// deposit call and, once the claimer claimed it, sends a cooperative
// refund of the unspent deposit and its next voucher at the same moment:
// the voucher 0 or 2 ms behind the refund (it may reserve the channel
// first) or 100–170 ms behind (the refund holds the channel or is in
// flight), and then again and again, as a payer told channel_busy
// retries, around the block the refund lands in, until the refund has
// answered. Then the payer sends one more voucher. Whatever the
// interleaving, on every channel the escrow ends with exactly the prices
// answered claimed (and payTo received their sum), no voucher is served
// once the refund of everything unspent answered, a channel whose refund
// landed holds exactly what was claimed, one whose refund did not still
// holds the whole deposit, each payer lost exactly what its channels
// hold, and no claim was refused. Paid requests are not rate-limited
// here (--paid-rate-limit 0): a payer with many addresses is not either.
//
// Before the fix the voucher was judged against the mirror's balance
// outside the update that reserves the channel, and the refund's outcome
// was written without regard to a voucher that had read the channel
// before: in most rounds whose refund reserved the channel first, a
// voucher sent again around the refund's block was served as well, the
// refund returned everything above the first price, the claim of the
// second price was refused (ClaimExceedsBalance) and payTo received less
// than the prices answered (seen in 4 runs out of 4 on the code before
// b0d09c7).
func TestBatchAttackRefundRacesVoucher(t *testing.T) {
	t.Parallel()
	// Blocks every second: the channels' deposits and refunds share blocks
	// (sealed as they come, concurrent transactions wait seconds).
	// No limit on paid requests a second: a payer with many addresses is
	// not limited either.
	s, client := attackServe(t, "--devnet-block-time", "1s", "--paid-rate-limit", "0")
	entry, resource := newBatchCaller(t, s.base, devnet.PayerAccount).entry("/regime")
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	payTo := common.HexToAddress(entry.PayTo)
	w := &escrowWatch{t: t, ctx: context.Background(), c: client, token: common.HexToAddress(entry.Asset)}

	accounts := []uint32{devnet.PayerAccount, 2, 3, 4, 5}
	// The voucher sent 0 or 2 ms after the refund (it may reserve the
	// channel first), or 100–170 ms after (the refund has reserved it).
	delays := []time.Duration{0, 2, 100, 110, 120, 130, 140, 150, 160, 170} // ms
	var rounds []*raceRound
	for _, acct := range accounts {
		for salt := range int64(2) {
			rounds = append(rounds, &raceRound{ch: newAttackChannel(t, entry, resource, acct, 1000+salt),
				voucherDelay: delays[len(rounds)%len(delays)] * time.Millisecond})
		}
	}
	payTo0 := w.balance(payTo)
	payers0 := map[common.Address]*big.Int{}
	for _, r := range rounds {
		payers0[r.ch.cfg.Payer] = w.balance(r.ch.cfg.Payer)
	}

	// The deposit calls, then the claim of their first price: the refunds
	// carry no claim.
	concurrently(t, rounds, func(r *raceRound) error {
		env, err := r.ch.envelope(batch.TypeDeposit, price, nil, attackDeposit, nil)
		if err == nil {
			r.deposit, err = post(s.base, "/regime", env)
		}
		return err
	})
	for i, r := range rounds {
		if r.deposit.status != http.StatusOK || r.deposit.settlement.Transaction == "" {
			t.Fatalf("round %d: deposit call: %s", i, r.deposit)
		}
		r.answered = 1
	}
	if !eventually(t, 20*time.Second, func() (bool, string) {
		for _, r := range rounds {
			if _, claimed := w.channel(r.ch.id); claimed.Cmp(price) != 0 {
				return false, fmt.Sprintf("channel %s: totalClaimed %s, want %s", r.ch.id.Hex()[:10], claimed, price)
			}
		}
		return true, ""
	}) {
		t.FailNow()
	}

	// The races. Each starts 200 ms into a second, so that every refund's
	// transaction lands in the block sealed at the next second. The
	// voucher is sent at once (after its round's delay) from 3
	// connections, and, while it is refused as channel_busy or the refund
	// has not answered, sent again every millisecond from 30 ms before
	// that block until the refund answers: a payer retrying as told,
	// around the moment the refund's outcome is written (a voucher that
	// read the channel before that write and reserved it after was served
	// before the fix).
	const senders = 3
	for _, r := range rounds {
		r.refundEnv = r.ch.mustEnvelope(t, batch.TypeRefund, price, nil, nil, nil)
		r.voucherEnv = r.ch.mustEnvelope(t, batch.TypeVoucher, times(price, 2), nil, nil, nil)
	}
	at := time.Now().Truncate(time.Second).Add(time.Second + 200*time.Millisecond)
	landing := at.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at))
	concurrently(t, rounds, func(r *raceRound) error {
		var (
			mu         sync.Mutex
			errs       []error
			wg         sync.WaitGroup
			refundDone atomic.Bool
		)
		wg.Go(func() {
			a, err := post(s.base, "/regime", r.refundEnv)
			mu.Lock()
			r.refund, errs = a, append(errs, err)
			mu.Unlock()
			refundDone.Store(true)
		})
		time.Sleep(r.voucherDelay)
		for range senders {
			wg.Go(func() {
				for deadline := time.Now().Add(10 * time.Second); ; {
					after := refundDone.Load()
					a, err := post(s.base, "/regime", r.voucherEnv)
					mu.Lock()
					r.sent++
					errs = append(errs, err)
					if err == nil && a.status != http.StatusOK && a.status != http.StatusPaymentRequired {
						r.odd = append(r.odd, a)
					}
					if a.status == http.StatusOK || r.voucher.status != http.StatusOK {
						r.voucher = a // a 200 is kept: the voucher was served
					}
					mu.Unlock()
					if err != nil || a.status == http.StatusOK || after && a.reason() != batch.ReasonChannelBusy || time.Now().After(deadline) {
						return
					}
					time.Sleep(max(time.Until(landing.Add(-30*time.Millisecond)), time.Millisecond))
				}
			})
		}
		wg.Wait()
		return errors.Join(errs...)
	})
	// The payer's next voucher, by its own record.
	concurrently(t, rounds, func(r *raceRound) error {
		charged := price
		if r.voucher.status == http.StatusOK {
			r.answered++
			charged = times(price, 2)
		}
		env, err := r.ch.envelope(batch.TypeVoucher, new(big.Int).Add(charged, price), nil, nil, nil)
		if err == nil {
			r.next, err = post(s.base, "/regime", env)
		}
		if r.next.status == http.StatusOK {
			r.answered++
		}
		return err
	})
	want := map[common.Hash]*big.Int{}
	outcomes := map[string]int{}
	for i, r := range rounds {
		t.Logf("round %d, voucher +%s (sent %d times): %d %s; refund: %d %s; next voucher: %d %s", i, r.voucherDelay, r.sent, r.voucher.status,
			r.voucher.reason(), r.refund.status, r.refund.reason(), r.next.status, r.next.reason())
		for _, a := range r.odd {
			t.Errorf("round %d: voucher: %s", i, a)
		}
		for name, a := range map[string]attackAnswer{"refund": r.refund, "voucher": r.voucher, "next voucher": r.next} {
			if a.status != http.StatusOK && a.status != http.StatusPaymentRequired {
				t.Errorf("round %d: %s: %s", i, name, a)
			}
		}
		if r.refund.status == http.StatusOK && r.next.status == http.StatusOK {
			t.Errorf("round %d: a voucher was served after the refund of everything unspent landed: %s", i, r.next)
		}
		want[r.ch.id] = times(price, r.answered)
		outcomes[fmt.Sprintf("voucher %d, refund %d", r.voucher.status, r.refund.status)]++
	}
	t.Logf("outcomes of %d races: %v", len(rounds), outcomes)

	claimedAndSettled(t, w, payTo, payTo0, want)
	holds := map[common.Address]*big.Int{}
	for i, r := range rounds {
		balance, claimed := w.channel(r.ch.id)
		wantBalance := attackDeposit
		if r.refund.status == http.StatusOK {
			wantBalance = claimed // everything unspent went back
		}
		if balance.Cmp(wantBalance) != 0 {
			t.Errorf("round %d (refund %d): balance %s, totalClaimed %s; want balance %s", i, r.refund.status, balance, claimed, wantBalance)
		}
		if holds[r.ch.cfg.Payer] == nil {
			holds[r.ch.cfg.Payer] = new(big.Int)
		}
		holds[r.ch.cfg.Payer].Add(holds[r.ch.cfg.Payer], balance)
	}
	for payer, held := range holds {
		if lost := new(big.Int).Sub(payers0[payer], w.balance(payer)); lost.Cmp(held) != 0 {
			t.Errorf("payer %s lost %s, its channels hold %s", payer.Hex(), lost, held)
		}
	}
	if n := batchTxSeries(t, s, `kind="claim",result="refused"`); n != 0 {
		t.Errorf("%v claims refused", n)
	}
	if n := batchTxSeries(t, s, `kind="claim",result="ok"`); n == 0 {
		t.Error("no claim counted ok")
	}
}

// TestBatchAttackStranger (issue 20, item 3): a stranger who knows a
// victim's channel (its config is public) but not the victim's key learns
// nothing of it and moves nothing. After the victim's two paid calls are
// claimed and settled, the stranger sends, naming the victim's channel,
// vouchers signed by its own key (the next cumulative, a stale one, a
// refund-sized one) and cooperative refunds signed by its own key: every
// one is a 402 voucher_signature whose batch entry carries no
// channelState and no voucherState; if any answer revealed a voucher, the
// stranger asks a refund with it. Then the facilitator's nonce, the
// channel's balance and totalClaimed, and the victim's and payTo's token
// balances are as before, and the victim's next call is served.
//
// Before the fix the corrective 402 of the stale voucher came before any
// signature check and carried the victim's latest voucher (voucherState),
// and the refund built from it was sent, paid with the operator's gas:
// the nonce moved and the channel's balance fell (seen on the code before
// b0d09c7).
func TestBatchAttackStranger(t *testing.T) {
	t.Parallel()
	s, client := attackServe(t)
	ctx := context.Background()
	victim := newBatchCaller(t, s.base, devnet.PayerAccount)
	entry, resource := victim.entry("/regime")
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	payTo, payer := common.HexToAddress(entry.PayTo), victim.sess.Payer.Address()
	w := &escrowWatch{t: t, ctx: ctx, c: client, token: common.HexToAddress(entry.Asset)}
	payTo0 := w.balance(payTo)
	for i := range 2 {
		if a := victim.pay("/regime", entry, resource); a.status != http.StatusOK {
			t.Fatalf("victim's call %d: %d %s", i+1, a.status, a.body)
		}
	}
	mine := newAttackChannel(t, entry, resource, devnet.PayerAccount, 0)
	if !claimedAndSettled(t, w, payTo, payTo0, map[common.Hash]*big.Int{mine.id: times(price, 2)}) {
		t.FailNow()
	}

	facKey, err := devnet.DeriveKey(devnet.Mnemonic, devnet.FacilitatorAccount)
	if err != nil {
		t.Fatal(err)
	}
	facilitator := crypto.PubkeyToAddress(facKey.PublicKey)
	nonce := func() uint64 {
		n, err := client.NonceAt(ctx, facilitator, nil) // eth_getTransactionCount
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	nonce0, payTo1, payer1 := nonce(), w.balance(payTo), w.balance(payer)
	balance0, claimed0 := w.channel(mine.id)

	stranger := mine.signedBy(t, 3)
	var leaked []batch.VoucherState
	for _, tt := range []struct {
		name   string
		typ    string
		max    *big.Int
		refund *big.Int
	}{
		{"voucher of the next cumulative", batch.TypeVoucher, times(price, 3), nil},
		{"voucher of a stale cumulative", batch.TypeVoucher, price, nil},
		{"voucher of what was charged", batch.TypeVoucher, times(price, 2), nil},
		{"refund of everything", batch.TypeRefund, times(price, 2), nil},
		{"refund of an amount", batch.TypeRefund, times(price, 2), big.NewInt(500_000)},
		{"refund of a stale cumulative", batch.TypeRefund, price, nil},
	} {
		a := mustPost(t, s.base, "/regime", stranger.mustEnvelope(t, tt.typ, tt.max, nil, nil, tt.refund))
		e, _ := a.batchEntry()
		if a.status != http.StatusPaymentRequired || a.reason() != batch.ReasonVoucherSignature || a.responded {
			t.Errorf("stranger's %s: %s; want 402 %s", tt.name, a, batch.ReasonVoucherSignature)
		}
		if st := e.Extra.Field("channelState"); len(st) != 0 {
			t.Errorf("stranger's %s: the 402 reveals channelState %s", tt.name, st)
		}
		if vs := e.Extra.Field("voucherState"); len(vs) != 0 {
			t.Errorf("stranger's %s: the 402 reveals voucherState %s", tt.name, vs)
			var v batch.VoucherState
			if json.Unmarshal(vs, &v) == nil {
				leaked = append(leaked, v)
			}
		}
	}
	// What a stranger would do with a revealed voucher: a refund with it.
	for _, v := range leaked {
		signed, _ := new(big.Int).SetString(v.SignedMaxClaimable, 10)
		sig, err := hexutil.Decode(v.Signature)
		if signed == nil || err != nil {
			continue
		}
		a := mustPost(t, s.base, "/regime", stranger.mustEnvelope(t, batch.TypeRefund, signed, sig, nil, nil))
		t.Errorf("the stranger's refund with the revealed voucher of %s: %s", signed, a)
	}

	if n := nonce(); n != nonce0 {
		t.Errorf("the facilitator's nonce went from %d to %d: the stranger made it send %d transactions", nonce0, n, n-nonce0)
	}
	if balance, claimed := w.channel(mine.id); balance.Cmp(balance0) != 0 || claimed.Cmp(claimed0) != 0 {
		t.Errorf("the victim's channel: balance %s totalClaimed %s, was %s and %s", balance, claimed, balance0, claimed0)
	}
	if got := w.balance(payer); got.Cmp(payer1) != 0 {
		t.Errorf("the victim's balance went from %s to %s", payer1, got)
	}
	if got := w.balance(payTo); got.Cmp(payTo1) != 0 {
		t.Errorf("payTo's balance went from %s to %s", payTo1, got)
	}
	if a := (attackAnswer{batchAnswer: victim.pay("/regime", entry, resource)}); a.status != http.StatusOK || a.charged() != times(price, 3).String() {
		t.Errorf("the victim's next call: %s; want 200 with %s charged", a, times(price, 3))
	}
}

// TestBatchAttackLostAnswer (issue 20, item 4): a payer whose answer was
// lost resends the same PAYMENT-SIGNATURE for the same request and gets
// the same answer, uncharged. After a deposit call and a voucher call to
// /candles, the voucher's envelope is sent again for the same query (as
// is, and with its parameters reordered: the same request): 200, the same
// body, the same chargedCumulativeAmount, no transaction. Sent for another
// query it is refused (the gate: the envelope names its resource); the
// same payment without its optional resource is replayed for the same
// query and gets the corrective 402 for another (cumulative_amount_mismatch,
// its channel state showing the 2 prices charged). The claimer claims 2
// prices, payTo receives 2 prices, and after the cooperative refund the
// payer has paid exactly 2 prices: not 3.
//
// Before the fix the resend was refused as stale with the corrective 402,
// and the payer, recovering as the official client does, paid its second
// answer again (emulated below for each resend not answered): payTo
// received 4 prices for 2 answers (seen on the code before b0d09c7).
func TestBatchAttackLostAnswer(t *testing.T) {
	t.Parallel()
	s, client := attackServe(t)
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	op, ok := cat.ByName("candles")
	if !ok || !op.Paid() {
		t.Fatal("candles is not a paid operation")
	}
	path := op.Path() + "?product=BTC-USD&granularity=300"
	c := newBatchCaller(t, s.base, devnet.PayerAccount)
	entry, resource := c.entry(path)
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	payTo, payer := common.HexToAddress(entry.PayTo), c.sess.Payer.Address()
	w := &escrowWatch{t: t, ctx: context.Background(), c: client, token: common.HexToAddress(entry.Asset)}
	payTo0, payer0 := w.balance(payTo), w.balance(payer)
	head, err := client.BlockNumber(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	if a := c.pay(path, entry, resource); a.status != http.StatusOK || a.settlement.Transaction == "" {
		t.Fatalf("deposit call: %d %s", a.status, a.body)
	}
	env, err := c.sess.Envelope(entry, resource, big.NewInt(devnet.ChainID), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	paid := mustPost(t, s.base, path, env)
	if paid.status != http.StatusOK || paid.charged() != times(price, 2).String() {
		t.Fatalf("voucher call: %s", paid)
	}
	if err := c.sess.Settled(paid.settlement, price); err != nil {
		t.Fatal(err)
	}
	// The answer was lost: the payer sends the same envelope again.
	for _, again := range []string{path, op.Path() + "?granularity=300&product=BTC-USD"} {
		a := mustPost(t, s.base, again, env)
		switch {
		case a.status != http.StatusOK:
			t.Errorf("resend to %s: %s; want the recorded answer", again, a)
			if a.reason() == batch.ReasonCumulativeAmountMismatch {
				// What the official client does with the corrective 402:
				// adopt the server's state and pay again.
				c.pay(path, entry, resource)
			}
		case !bytes.Equal(a.body, paid.body) || a.charged() != paid.charged() || a.settlement.Transaction != "" || !a.settlement.Success:
			t.Errorf("resend to %s: %s; want body %.100s charged %s, no transaction", again, a, paid.body, paid.charged())
		}
	}
	// For another request it pays nothing. The envelope names its
	// resource: the gate refuses it for another query.
	otherPath := op.Path() + "?product=ETH-USD&granularity=300"
	var v1 payment.RequiredV1
	if a := mustPost(t, s.base, otherPath, env); a.status != http.StatusPaymentRequired || a.responded || json.Unmarshal(a.body, &v1) != nil || v1.X402Version != 1 {
		t.Errorf("the envelope for another query: %s; want a 402 challenge", a)
	}
	// The same payment without the (optional) resource: the scheme
	// replays it for the same request only, and answers another with
	// the corrective 402.
	bare := withoutResource(t, env)
	if a := mustPost(t, s.base, path, bare); a.status != http.StatusOK || !bytes.Equal(a.body, paid.body) || a.charged() != paid.charged() {
		t.Errorf("resend without resource: %s; want the recorded answer", a)
	}
	other := mustPost(t, s.base, otherPath, bare)
	e, _ := other.batchEntry()
	var st batch.ChannelState
	if other.status != http.StatusPaymentRequired || other.reason() != batch.ReasonCumulativeAmountMismatch || other.responded ||
		json.Unmarshal(e.Extra.Field("channelState"), &st) != nil || st.ChargedCumulativeAmount != times(price, 2).String() {
		t.Errorf("the payment for another query: %s, channelState %s; want the corrective 402 showing %s charged", other, e.Extra.Field("channelState"), times(price, 2))
	}

	// 2 answers, 2 prices claimed and received.
	terms, _ := batch.TermsOf(entry, big.NewInt(devnet.ChainID))
	_, id := c.sess.Payer.Channel(terms)
	served := times(price, 2)
	if !claimedAndSettled(t, w, payTo, payTo0, map[common.Hash]*big.Int{id: served}) {
		t.FailNow()
	}
	if n := len(w.logs(head, "Deposited(bytes32,address,uint128,uint128)", id)); n != 1 {
		t.Errorf("%d deposits, want 1", n)
	}
	// The rest goes back: the payer paid 2 prices in all.
	refund, err := c.sess.RefundEnvelope(entry, resource, big.NewInt(devnet.ChainID), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := mustPost(t, s.base, path, refund); a.status != http.StatusOK || a.settlement.Amount != new(big.Int).Sub(attackDeposit, served).String() {
		t.Fatalf("refund: %s", a)
	}
	if spent := new(big.Int).Sub(payer0, w.balance(payer)); spent.Cmp(served) != 0 {
		t.Errorf("the payer spent %s for 2 answers of %s", spent, price)
	}
	if balance, claimed := w.channel(id); balance.Cmp(served) != 0 || claimed.Cmp(served) != 0 {
		t.Errorf("the channel after the refund: balance %s totalClaimed %s, want %s and %s", balance, claimed, served, served)
	}
}
