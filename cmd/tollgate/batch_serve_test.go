package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
)

// batchCaller pays one server's paid routes from one channel with the Go
// side of the scheme (batch.Session).
type batchCaller struct {
	t    testing.TB
	base string
	sess *batch.Session
}

func newBatchCaller(t testing.TB, base string, account uint32) *batchCaller {
	t.Helper()
	key, err := devnet.DeriveKey(devnet.Mnemonic, account)
	if err != nil {
		t.Fatal(err)
	}
	return &batchCaller{t: t, base: base, sess: &batch.Session{Payer: batch.Payer{Key: key,
		Escrow: batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress}}}}
}

// entry asks path's 402 for its batch-settlement entry.
func (c *batchCaller) entry(path string) (payment.RequirementsV2, *payment.ResourceV2) {
	c.t.Helper()
	resp, err := http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	var req payment.RequiredV2
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	if err := json.Unmarshal(raw, &req); err != nil {
		c.t.Fatalf("%s: PAYMENT-REQUIRED: %v", path, err)
	}
	for _, e := range req.Accepts {
		if e.Scheme == batch.Scheme {
			return e, &req.Resource
		}
	}
	c.t.Fatalf("%s: no batch-settlement entry in %+v", path, req.Accepts)
	return payment.RequirementsV2{}, nil
}

type batchAnswer struct {
	status     int
	body       []byte
	settlement payment.SettleResponse
	required   *payment.RequiredV2
}

// send sends a signed envelope to path.
func (c *batchCaller) send(path, envelope string) batchAnswer {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	req.Header.Set(payment.HeaderPaymentV2, envelope)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := batchAnswer{status: resp.StatusCode}
	a.body, _ = io.ReadAll(resp.Body)
	if v := resp.Header.Get(payment.HeaderPaymentResponseV2); v != "" {
		raw, _ := base64.StdEncoding.DecodeString(v)
		_ = json.Unmarshal(raw, &a.settlement)
	}
	if v := resp.Header.Get(payment.HeaderPaymentRequired); v != "" && resp.StatusCode == http.StatusPaymentRequired {
		raw, _ := base64.StdEncoding.DecodeString(v)
		a.required = new(payment.RequiredV2)
		_ = json.Unmarshal(raw, a.required)
	}
	return a
}

// pay pays one call to path with the next voucher (a deposit first when
// the channel needs one), recovering once from a corrective 402.
func (c *batchCaller) pay(path string, entry payment.RequirementsV2, resource *payment.ResourceV2) batchAnswer {
	c.t.Helper()
	chainID := big.NewInt(devnet.ChainID)
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	for attempt := 0; ; attempt++ {
		env, err := c.sess.Envelope(entry, resource, chainID, time.Now())
		if err != nil {
			c.t.Fatal(err)
		}
		a := c.send(path, env)
		if a.status == http.StatusPaymentRequired && attempt == 0 && a.required != nil && a.required.Error == batch.ReasonCumulativeAmountMismatch {
			for _, e := range a.required.Accepts {
				if e.Scheme == batch.Scheme {
					if err := c.sess.RecoverFrom(e, chainID); err != nil {
						c.t.Fatalf("recover: %v", err)
					}
				}
			}
			continue
		}
		if a.status == http.StatusOK {
			if err := c.sess.Settled(a.settlement, price); err != nil {
				c.t.Fatal(err)
			}
		}
		return a
	}
}

// TestBatchSettlementServe: serve offers batch-settlement on devnet; a
// payer deposits once and pays vouchers; the claimer claims and settles
// what was served to payTo; a cooperative refund returns the rest.
func TestBatchSettlementServe(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir(), "--batch-claim-interval", "3s", "--batch-claim-threshold", "100", "--batch-min-deposit", "1.00"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The 402 offers exact first, then batch-settlement; the v1 body,
	// exact alone.
	resp, err := http.Get(s.base + "/regime")
	if err != nil {
		t.Fatal(err)
	}
	var v1 payment.RequiredV1
	err = json.NewDecoder(resp.Body).Decode(&v1)
	resp.Body.Close()
	var v2 payment.RequiredV2
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	if err != nil || json.Unmarshal(raw, &v2) != nil || len(v2.Accepts) != 2 || v2.Accepts[0].Scheme != exact.Scheme || v2.Accepts[1].Scheme != batch.Scheme ||
		len(v1.Accepts) != 1 || v1.Accepts[0].Scheme != exact.Scheme {
		t.Fatalf("offers: v2 %+v, v1 %+v (%v)", v2.Accepts, v1.Accepts, err)
	}
	c := newBatchCaller(t, s.base, devnet.PayerAccount)
	entry, resource := c.entry("/regime")
	price, _ := new(big.Int).SetString(entry.Amount, 10)
	payTo := common.HexToAddress(entry.PayTo)
	w := &escrowWatch{t: t, ctx: context.Background(), c: client, token: common.HexToAddress(entry.Asset)}
	payer := c.sess.Payer.Address()
	payToBefore, payerBefore := w.balance(payTo), w.balance(payer)

	const calls = 5
	for i := 1; i <= calls; i++ {
		a := c.pay("/regime", entry, resource)
		if a.status != http.StatusOK || !json.Valid(a.body) {
			t.Fatalf("call %d: %d %s %+v", i, a.status, a.body, a.required)
		}
		if (i == 1) != (a.settlement.Transaction != "") {
			t.Errorf("call %d: transaction %q; only the first (the deposit) sends one", i, a.settlement.Transaction)
		}
	}
	deposit := big.NewInt(1_000_000)
	if c.sess.Balance.Cmp(deposit) != 0 || c.sess.Charged.Cmp(new(big.Int).Mul(price, big.NewInt(calls))) != 0 {
		t.Fatalf("session: balance %s charged %s", c.sess.Balance, c.sess.Charged)
	}
	terms, err := batch.TermsOf(entry, big.NewInt(devnet.ChainID))
	if err != nil {
		t.Fatal(err)
	}
	_, id := c.sess.Payer.Channel(terms)

	// The claimer claims within its interval and settles to payTo.
	served := new(big.Int).Mul(price, big.NewInt(calls))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, claimed := w.channel(id)
		got := new(big.Int).Sub(w.balance(payTo), payToBefore)
		if claimed.Cmp(served) == 0 && got.Cmp(served) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: claimed %s, payTo received %s; want %s", claimed, got, served)
		}
		time.Sleep(300 * time.Millisecond)
	}

	// The operator sees the claim and the settle, and nothing unclaimed.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(s.admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		exposition, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ok := true
		for _, series := range []string{`tollgate_batch_transactions_total{kind="claim",result="ok"} 1`,
			`tollgate_batch_transactions_total{kind="settle",result="ok"} 1`, "tollgate_batch_unclaimed_channels 0", "tollgate_batch_usd_total{kind=\"claim\"} 0.25"} {
			ok = ok && strings.Contains(string(exposition), series)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics after the claim:\n%s", grepLines(string(exposition), "tollgate_batch"))
		}
	}

	// The cooperative refund returns the rest of the deposit.
	env, err := c.sess.RefundEnvelope(entry, resource, big.NewInt(devnet.ChainID), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.send("/regime", env)
	rest := new(big.Int).Sub(deposit, served)
	if a.status != http.StatusOK || a.settlement.Amount != rest.String() {
		t.Fatalf("refund: %d %s %+v %+v", a.status, a.body, a.settlement, a.required)
	}
	if spent := new(big.Int).Sub(payerBefore, w.balance(payer)); spent.Cmp(served) != 0 {
		t.Errorf("the payer spent %s in all, want %s", spent, served)
	}
	if balance, claimed := w.channel(id); balance.Cmp(claimed) != 0 {
		t.Errorf("after the refund the channel holds %s with %s claimed: want nothing refundable", balance, claimed)
	}
}

// BenchmarkPaidCall compares a paid call's latency under exact (each call
// waits for its transfer's block) and batch-settlement (a voucher is a
// signature check), on a devnet sealing a block every 2 s as Base does;
// it reports p50 and p99 (batch-settlement: of the voucher calls; the
// channel's first call, which waits for its deposit's block, is reported
// apart) and the transactions the calls put on chain per 100 calls
// (batch-settlement: the deposit, and the claimer's claim and settle,
// which it waits for). Run it with a fixed count:
//
//	go test -run x -bench PaidCall -benchtime 100x ./cmd/tollgate/
func BenchmarkPaidCall(b *testing.B) {
	s, err := serveFor(b, []string{"--data-dir", b.TempDir(), "--devnet-block-time", "2s", "--log-level", "warn",
		"--batch-claim-interval", "2s", "--batch-claim-threshold", "1000", "--batch-min-deposit", "10.00"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	client, err := ethclient.Dial(s.devnetRPC)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	url := s.base + "/regime"
	b.Run("exact", func(b *testing.B) {
		key, err := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
		if err != nil {
			b.Fatal(err)
		}
		p := &payment.Payer{HTTP: http.DefaultClient, Version: 2, MaxAmount: big.NewInt(1_000_000), Networks: map[string]int64{"base": devnet.ChainID},
			Schemes: []payment.SchemeClient{exact.Payer{Key: key}}}
		signed := make([]payment.SignedPayment, b.N)
		for i := range signed {
			if signed[i], err = p.Sign(context.Background(), url); err != nil {
				b.Fatal(err)
			}
		}
		from := blockNumber(b, client)
		took := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			res, err := p.Send(context.Background(), url, signed[i])
			if err != nil || res.Status != http.StatusOK {
				b.Fatalf("call %d: %v %+v", i, err, res)
			}
			took = append(took, time.Since(start))
		}
		b.StopTimer()
		reportLatency(b, took, countTxs(b, client, from, blockNumber(b, client)))
	})
	account := uint32(2) // each run pays from a new channel: its deposit is counted
	b.Run("batch-settlement", func(b *testing.B) {
		c := newBatchCaller(b, s.base, account)
		account++
		entry, resource := c.entry("/regime")
		from := blockNumber(b, client)
		took := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		var deposit time.Duration // the channel's first call, which waits for its deposit's block
		for i := 0; i < b.N; i++ {
			start := time.Now()
			a := c.pay("/regime", entry, resource)
			if a.status != http.StatusOK {
				b.Fatalf("call %d: %d %s", i, a.status, a.body)
			}
			if a.settlement.Transaction != "" {
				deposit = time.Since(start)
				continue
			}
			took = append(took, time.Since(start))
		}
		b.StopTimer()
		// Wait for the claimer's claim and settle of what was served.
		terms, _ := batch.TermsOf(entry, big.NewInt(devnet.ChainID))
		_, id := c.sess.Payer.Channel(terms)
		w := &escrowWatch{t: b, ctx: context.Background(), c: client}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
			if _, claimed := w.channel(id); claimed.Cmp(c.sess.Charged) == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the claimer did not claim within a minute")
			}
		}
		time.Sleep(5 * time.Second) // the settle follows the claim
		b.ReportMetric(float64(deposit.Microseconds())/1000, "deposit-call-ms")
		reportLatency(b, took, countTxs(b, client, from, blockNumber(b, client)))
	})
}

func blockNumber(b testing.TB, client *ethclient.Client) uint64 {
	n, err := client.BlockNumber(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// countTxs counts the transactions in blocks (from, to].
func countTxs(b testing.TB, client *ethclient.Client, from, to uint64) int {
	n := 0
	for i := from + 1; i <= to; i++ {
		c, err := client.TransactionCount(context.Background(), mustBlockHash(b, client, i))
		if err != nil {
			b.Fatal(err)
		}
		n += int(c)
	}
	return n
}

func mustBlockHash(b testing.TB, client *ethclient.Client, n uint64) common.Hash {
	h, err := client.HeaderByNumber(context.Background(), new(big.Int).SetUint64(n))
	if err != nil {
		b.Fatal(err)
	}
	return h.Hash()
}

// reportLatency reports the latencies took and the transactions of b.N
// calls per 100.
func reportLatency(b *testing.B, took []time.Duration, txs int) {
	b.ReportMetric(float64(txs)*100/float64(b.N), "txs/100calls")
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	pct := func(p float64) float64 {
		return float64(took[min(len(took)-1, int(p*float64(len(took))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// grepLines returns the lines of text containing sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
