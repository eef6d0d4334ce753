package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// stoppedMetric counts, on the admin listener, the channels a server
// stopped serving, by evidence.
const stoppedMetric = "tollgate_batch_channels_stopped_total"

// The devnet accounts paying, each on a channel of its own: the official
// client from the payer account, the project's own client from #6 and #7
// (funded with the token like #0 to #9, and no traders of the devnet's
// history).
const (
	officialAccount = devnet.PayerAccount
	handAccount     = 6
	aheadAccount    = 7
)

// TestSeparateStores (issue 32, item 2): two `tollgate serve` on one
// devnet chain, each keeping its own books (its own SQLite data dir, or
// its own PostgreSQL database), behind HAProxy's round robin. One payer
// pays with the official @x402/fetch batch-settlement client through the
// balancer and another with the project's own client (batch.Session) by
// hand, straight to each replica in turn: alternating calls, a claim
// between calls, concurrent calls (the same voucher sent to both replicas
// at once, by hand), each replica restarted on its store, and a
// cooperative refund. Which server refuses what is not asserted (either
// may open a channel); what is:
//
//   - every answered call is paid: once both servers' claimers have
//     claimed what they charged, the escrow's totalClaimed of each channel
//     is its price times its answered calls, and payTo received the sum;
//   - a refused call carries a reason saying the channel is another
//     server's (or channel_busy, retryable; or, for calls in flight
//     together, a corrective 402 the official client's one retry did not
//     get past) and costs nothing: the payer paid deposits minus refunds,
//     which after the refund is exactly what was claimed;
//   - every channel has answered calls, and a server that refused counted
//     the channel it stopped in tollgate_batch_channels_stopped_total.
//
// A third channel, paid by hand at one replica, gets a voucher signed
// ahead of that replica's books (as if the payer had paid another server
// meanwhile): the channel stops there, and what was answered before is
// still claimed, no more.
//
// It needs haproxy, node with .ci/interop's npm packages, and PostgreSQL
// for the second variant: without them it skips, unless
// TOLLGATE_REQUIRE_HAPROXY=1, TOLLGATE_REQUIRE_INTEROP=1 or
// TOLLGATE_REQUIRE_POSTGRES=1 make it fail.
func TestSeparateStores(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		stores storeLayout
	}{
		{name: "sqlite", stores: ownSQLite},
		{name: "postgres", stores: ownPostgres},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := interopDir(t)
			c := startCluster(t, clusterConfig{replicas: 2, whaleInterval: time.Hour, stores: tt.stores, serveArgs: []string{
				// Claims come a second after a charge: several land between
				// the calls of this test, and all within its run.
				"--batch-claim-interval", "1s", "--batch-claim-threshold", "0",
				"--rate-limit", "0", "--paid-rate-limit", "0",
			}})
			separateBooks(t, c, dir)
		})
	}
}

// separateBooks pays three channels through c and checks the chain.
func separateBooks(t *testing.T, c *cluster, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	chain := newEscrowView(t, ctx, c)
	start := chain.head()
	payTo0 := chain.balance(chain.payTo)
	a, b := c.replicas[0], c.replicas[1]
	stops := newStopCounts(c)
	official := &officialPayer{dir: dir, c: c, state: t.TempDir(), book: newChannelBook(t, c, chain, "official client", officialAccount)}
	hand := newHandPayer(t, c, newChannelBook(t, c, chain, "own client by hand", handAccount))
	ahead := newHandPayer(t, c, newChannelBook(t, c, chain, "own client ahead of the books", aheadAccount))
	ahead.book.keepsDeposit = true
	paths := candlePaths()
	next := 0
	path := func() string { next++; return paths[next%len(paths)] }
	began := time.Now()
	mark := func(done string) { t.Logf("%s after %s", done, time.Since(began).Round(100*time.Millisecond)) }

	// Alternating: the official client through the balancer, and by hand
	// at b, a, b, a….
	official.calls(t, ctx, "alternating", 8, 1)
	for i := range 6 {
		hand.pay(t, ctx, "alternating", []*replica{b, a}[i%2], path())
	}
	mark("alternating calls")

	// A claim between calls: everything charged so far is claimed before
	// the next calls.
	waitSettled(t, ctx, c, chain, 45*time.Second)
	for _, bk := range []*channelBook{official.book, hand.book} {
		if _, claimed := chain.channel(bk.id); claimed.Sign() == 0 {
			t.Errorf("%s: nothing claimed on channel %s after %d answered calls", bk.name, bk.id.Hex(), bk.answered())
		}
	}
	mark("claims")
	official.calls(t, ctx, "after a claim", 4, 1)
	for i := range 2 {
		hand.pay(t, ctx, "after a claim", []*replica{a, b}[i%2], path())
	}

	// Concurrent: the official client four calls at a time; by hand, one
	// voucher sent to both replicas at the same instant, three times.
	official.calls(t, ctx, "concurrent", 8, 4)
	for range 3 {
		hand.payBoth(t, ctx, "same voucher to both", path())
	}
	mark("concurrent calls")

	// A restart of each replica on its store (SIGTERM, then the same
	// flags), with calls while it is down and after it is back.
	for i, r := range c.replicas {
		other := c.replicas[1-i]
		stops.endOfLife(t, r)
		r.stop()
		official.calls(t, ctx, r.name+" down", 3, 1)
		hand.pay(t, ctx, r.name+" down", other, path())
		c.restart(t, r)
		official.calls(t, ctx, r.name+" restarted", 4, 1)
		for j := range 2 {
			hand.pay(t, ctx, r.name+" restarted", []*replica{r, other}[j%2], path())
		}
		mark(r.name + "'s restart")
	}

	// A voucher ahead of the books: two calls at a, then a voucher of two
	// prices more than a charged, then the next voucher a expects.
	for range 2 {
		ahead.pay(t, ctx, "opening", a, path())
	}
	ahead.payAhead(t, ctx, "a voucher ahead", a, path())
	ahead.pay(t, ctx, "after a voucher ahead", a, path())
	ahead.refund(t, ctx, a)
	mark("a voucher ahead")

	// The cooperative refund: the official client's through the balancer
	// until one is acknowledged (a free GET between tries moves the
	// balancer on: each try sends three requests, and haproxy.cfg's three
	// servers are a, b, a); by hand at a, then at b if a refused (b, which
	// the hand's first call went to, is likely the one that opened its
	// channel).
	for try := 0; try < 3 && !official.book.refunded(); try++ {
		if try > 0 {
			if err := healthy(ctx, c.lb+"/health"); err != nil {
				t.Error(err)
			}
		}
		official.refund(t, ctx)
	}
	for _, r := range []*replica{a, b} {
		if !hand.book.refunded() {
			hand.refund(t, ctx, r)
		}
	}

	mark("refunds")
	waitSettled(t, ctx, c, chain, 45*time.Second)
	mark("the last claims and settles")
	for _, r := range c.replicas {
		stops.endOfLife(t, r)
	}

	// The invariant, from the chain.
	books := []*channelBook{official.book, hand.book, ahead.book}
	logBooks(t, books...)
	claimedAll := new(big.Int)
	for _, bk := range books {
		claimedAll.Add(claimedAll, checkChannel(t, chain, start, bk))
	}
	if got := new(big.Int).Sub(chain.balance(chain.payTo), payTo0); got.Cmp(claimedAll) != 0 {
		t.Errorf("payTo received %s; the escrow claimed %s on the channels", got, claimedAll)
	}
	stops.check(t, books...)
}

// checkChannel asserts the invariant of one channel and returns its
// claimed total.
func checkChannel(t *testing.T, chain *escrowView, start uint64, bk *channelBook) *big.Int {
	t.Helper()
	if bk.id == (common.Hash{}) {
		t.Errorf("%s: no channel", bk.name)
		return new(big.Int)
	}
	balance, claimed := chain.channel(bk.id)
	answered := bk.answered()
	want := new(big.Int).Mul(bk.price, big.NewInt(int64(answered)))
	var badCharge, badRefusal []string
	for _, cl := range bk.calls {
		switch {
		case cl.Status == http.StatusOK:
			if charged := cl.charged(); charged == nil || charged.Cmp(bk.price) != 0 {
				badCharge = append(badCharge, fmt.Sprintf("%s: PAYMENT-RESPONSE %s", cl, cl.settleJSON()))
			}
		case !refusal(cl.Reason) && !(cl.Concurrent && cl.Reason == batch.ReasonCumulativeAmountMismatch):
			badRefusal = append(badRefusal, cl.String()+cl.detail())
		}
	}
	if len(badCharge) > 0 {
		t.Errorf("%s: %d answers do not charge the price %s:\n  %s", bk.name, len(badCharge), bk.price, strings.Join(badCharge, "\n  "))
	}
	if len(badRefusal) > 0 {
		t.Errorf("%s: %d calls refused for other reasons than %s, %s, %s or %s (or, among calls in flight together, a corrective 402 the client's one retry did not get past):\n  %s",
			bk.name, len(badRefusal), batch.ReasonChannelOpenedElsewhere, batch.ReasonChannelChargedElsewhere, batch.ReasonChannelClaimedElsewhere, batch.ReasonChannelBusy,
			strings.Join(badRefusal, "\n  "))
	}
	if answered == 0 {
		t.Errorf("%s: no call answered", bk.name)
	}
	t.Logf("%s: channel %s: %d calls, %d answered at %s each (%s), %d refused; the escrow: balance %s, totalClaimed %s", bk.name, bk.id.Hex(),
		len(bk.calls), answered, bk.price, want, len(bk.calls)-answered, balance, claimed)
	if claimed.Cmp(want) != 0 {
		unpaid := new(big.Int).Sub(want, claimed)
		t.Errorf("%s: %d answered calls are worth %s, but the escrow claimed %s on channel %s: %s answered and never paid (%s prices)",
			bk.name, answered, want, claimed, bk.id.Hex(), unpaid, new(big.Int).Quo(unpaid, bk.price))
	}
	deposits := chain.sumEvents(start, "Deposited(bytes32,address,uint128,uint128)", bk.id)
	refunds := chain.sumEvents(start, "Refunded(bytes32,address,uint128)", bk.id)
	paid := new(big.Int).Sub(bk.payerBalance0, chain.balance(bk.payer))
	if net := new(big.Int).Sub(deposits, refunds); paid.Cmp(net) != 0 {
		t.Errorf("%s: the payer %s paid %s; deposits %s minus refunds %s is %s", bk.name, bk.payer.Hex(), paid, deposits, refunds, net)
	}
	if bk.refunded() && paid.Cmp(claimed) != 0 {
		t.Errorf("%s: after its refund the payer paid %s in all (deposits %s, refunds %s), the escrow claimed %s", bk.name, paid, deposits, refunds, claimed)
	}
	if !bk.refunded() && !bk.keepsDeposit {
		t.Errorf("%s: no refund was acknowledged: %v", bk.name, bk.refunds)
	}
	for _, r := range bk.refunds {
		if r.Status != http.StatusOK && !refusal(r.Reason) {
			t.Errorf("%s: refund %s%s; want it acknowledged, or refused as the channel of another server", bk.name, r, r.detail())
		}
	}
	return claimed
}

// refusal reports whether reason is one a server with separate books may
// refuse a payment for, costing nothing.
func refusal(reason string) bool {
	return elsewhere(reason) || reason == batch.ReasonChannelBusy
}

// evidenceOf is the evidence label under which a server counts the
// channel it stopped with reason.
func evidenceOf(reason string) string {
	switch reason {
	case batch.ReasonChannelOpenedElsewhere:
		return "opened_elsewhere"
	case batch.ReasonChannelChargedElsewhere:
		return "voucher_ahead"
	case batch.ReasonChannelClaimedElsewhere:
		return "claimed_elsewhere"
	}
	return ""
}

// elsewhere reports whether reason says the channel is another server's.
func elsewhere(reason string) bool {
	return reason == batch.ReasonChannelOpenedElsewhere || reason == batch.ReasonChannelChargedElsewhere || reason == batch.ReasonChannelClaimedElsewhere
}

// channelBook is what a payer saw of its channel: every call and refund.
type channelBook struct {
	name          string
	account       uint32 // the payer's, of the devnet's mnemonic
	payer         common.Address
	payerBalance0 *big.Int // before its first call
	// id and price are the channel's and its calls', known from the
	// first 402.
	id      common.Hash
	price   *big.Int
	calls   []call
	refunds []call
	// keepsDeposit: the channel may be refused a refund (it stopped at
	// the server that opened it); the deposit then waits for the payer's
	// timed withdrawal.
	keepsDeposit bool
}

// newChannelBook starts the book of the devnet account's channel.
func newChannelBook(t *testing.T, c *cluster, chain *escrowView, name string, account uint32) *channelBook {
	t.Helper()
	key, err := devnet.DeriveKey(c.desc.Mnemonic, account)
	if err != nil {
		t.Fatal(err)
	}
	payer := crypto.PubkeyToAddress(key.PublicKey)
	return &channelBook{name: name, account: account, payer: payer, payerBalance0: chain.balance(payer)}
}

func (bk *channelBook) answered() int {
	n := 0
	for _, cl := range bk.calls {
		if cl.Status == http.StatusOK {
			n++
		}
	}
	return n
}

func (bk *channelBook) refunded() bool {
	return slices.ContainsFunc(bk.refunds, func(r call) bool { return r.Status == http.StatusOK })
}

// call is one paid call or refund as its client saw it. The JSON names
// are batch-rr.mjs's.
type call struct {
	Phase string `json:"-"`
	Via   string `json:"-"` // "lb" or the replica's name
	// Concurrent: the client had other calls in flight on the channel.
	Concurrent bool                    `json:"-"`
	I          int                     `json:"i"`
	URL        string                  `json:"url"`
	Status     int                     `json:"status"` // 0: no answer (Error)
	Reason     string                  `json:"reason"`
	Settle     *payment.SettleResponse `json:"settle"`
	Sent       []string                `json:"sent"` // payload types sent
	Error      string                  `json:"error"`
	Body       string                  `json:"body"`
}

func (cl call) String() string {
	s := fmt.Sprintf("%s#%d via %s: %d", cl.Phase, cl.I, cl.Via, cl.Status)
	if cl.Reason != "" {
		s += " " + strings.TrimPrefix(cl.Reason, "invalid_batch_settlement_evm_")
	}
	if cl.Error != "" {
		s += " (" + cl.Error + ")"
	}
	if len(cl.Sent) > 0 {
		s += " " + strings.Join(cl.Sent, "+")
	}
	return s
}

// detail is what a refusal's answer said beyond its reason.
func (cl call) detail() string {
	switch {
	case cl.Reason == "" && cl.Body != "":
		return ": " + cl.Body
	case cl.Settle != nil:
		return ": PAYMENT-RESPONSE " + cl.settleJSON()
	}
	return ""
}

func (cl call) settleJSON() string {
	b, _ := json.Marshal(cl.Settle)
	return string(b)
}

// charged is the amount an answer's PAYMENT-RESPONSE charged, nil if it
// has none.
func (cl call) charged() *big.Int {
	if cl.Settle == nil || !cl.Settle.Success {
		return nil
	}
	b, _ := json.Marshal(cl.Settle.Extra)
	var e struct {
		ChargedAmount string `json:"chargedAmount"`
	}
	if json.Unmarshal(b, &e) != nil {
		return nil
	}
	n, ok := new(big.Int).SetString(e.ChargedAmount, 10)
	if !ok {
		return nil
	}
	return n
}

// logBooks logs each channel's calls and refunds.
func logBooks(t *testing.T, books ...*channelBook) {
	t.Helper()
	for _, bk := range books {
		var lines []string
		for _, cl := range bk.calls {
			lines = append(lines, cl.String())
		}
		for _, r := range bk.refunds {
			lines = append(lines, r.String())
		}
		t.Logf("%s: %d of %d calls answered\n  %s", bk.name, bk.answered(), len(bk.calls), strings.Join(lines, "\n  "))
	}
}

// candlePaths are the ten /candles resources, all of one price: calls in
// flight together ask for different resources, so that no call is
// answered as a resend of another (payment.SameResource).
func candlePaths() []string {
	var out []string
	for _, product := range []string{"BTC-USD", "ETH-USD"} {
		for _, g := range []int{300, 900, 3600, 21600, 86400} {
			out = append(out, fmt.Sprintf("/candles?product=%s&granularity=%d", product, g))
		}
	}
	return out
}

// officialPayer runs .ci/interop/batch-rr.mjs: the official client,
// through the load balancer, its channel's records kept in state.
type officialPayer struct {
	dir, state string
	c          *cluster
	book       *channelBook
}

// rrOutput is what batch-rr.mjs prints.
type rrOutput struct {
	Payer     common.Address
	ChannelID common.Hash
	Price     string
	Calls     []call
	Refund    *struct {
		call
		Refund *payment.SettleResponse `json:"refund"`
	}
}

func (o *officialPayer) run(t *testing.T, ctx context.Context, args ...string) rrOutput {
	t.Helper()
	args = append([]string{filepath.Join(o.dir, "batch-rr.mjs"), args[0], o.c.lb, o.c.devnetURL, o.state, strconv.Itoa(int(o.book.account))}, args[1:]...)
	cmd := exec.CommandContext(ctx, "node", args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node batch-rr.mjs %s: %v\n%s\n%s", args[1], err, out.String(), errOut.String())
	}
	var res rrOutput
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("batch-rr.mjs %s wrote %q: %v (stderr %s)", args[1], out.String(), err, errOut.String())
	}
	if res.Payer != o.book.payer {
		t.Fatalf("batch-rr.mjs paid from %s, want %s", res.Payer, o.book.payer)
	}
	o.book.id = res.ChannelID
	if o.book.price == nil {
		price, ok := new(big.Int).SetString(res.Price, 10)
		if !ok {
			t.Fatalf("batch-rr.mjs: price %q", res.Price)
		}
		o.book.price = price
	}
	return res
}

// calls makes n paid calls, at most conc at a time.
func (o *officialPayer) calls(t *testing.T, ctx context.Context, phase string, n, conc int) {
	t.Helper()
	res := o.run(t, ctx, "calls", strconv.Itoa(n), strconv.Itoa(conc))
	for _, cl := range res.Calls {
		cl.Phase, cl.Via, cl.Concurrent = phase, "lb", conc > 1
		o.book.calls = append(o.book.calls, cl)
	}
}

// refund asks for the cooperative refund once.
func (o *officialPayer) refund(t *testing.T, ctx context.Context) {
	t.Helper()
	res := o.run(t, ctx, "refund")
	if res.Refund == nil {
		t.Fatal("batch-rr.mjs refund printed no refund")
	}
	r := res.Refund.call
	r.Phase, r.Via, r.I = "refund", "lb", len(o.book.refunds)
	if res.Refund.Refund != nil {
		r.Settle = res.Refund.Refund
	}
	if r.Status == http.StatusOK && (r.Settle == nil || !r.Settle.Success) {
		r.Status, r.Error = 0, "a 200 without a successful PAYMENT-RESPONSE: "+r.Error
	}
	o.book.refunds = append(o.book.refunds, r)
}

// handPayer pays by hand with the project's own client (batch.Session),
// each payment sent to the replica the test names.
type handPayer struct {
	c      *cluster
	sess   *batch.Session
	payer  payment.Payer // for the unpaid 402s
	book   *channelBook
	called int
}

// newHandPayer pays bk's channel from its devnet account.
func newHandPayer(t *testing.T, c *cluster, bk *channelBook) *handPayer {
	t.Helper()
	key, err := devnet.DeriveKey(c.desc.Mnemonic, bk.account)
	if err != nil {
		t.Fatal(err)
	}
	return &handPayer{c: c, book: bk, sess: &batch.Session{Payer: batch.Payer{Key: key}},
		payer: payment.Payer{Version: 2, HTTP: &http.Client{Timeout: 90 * time.Second}}}
}

// offer is r's batch-settlement offer for path; it fails t when there is
// none.
func (h *handPayer) offer(t *testing.T, ctx context.Context, r *replica, path string) payment.Offer {
	t.Helper()
	o, err := h.payer.Offer(ctx, r.base+path, batch.Scheme)
	if err != nil {
		t.Fatalf("%s %s: %v", r.name, path, err)
	}
	terms, err := batch.TermsOf(o.Entry, big.NewInt(o.ChainID))
	if err != nil {
		t.Fatal(err)
	}
	h.sess.Payer.Escrow = terms.Escrow
	_, id := h.sess.Payer.Channel(terms)
	h.book.id = id
	if h.book.price == nil {
		h.book.price = terms.Price
	}
	return o
}

// pay makes one paid call of path at r: a corrective 402 is recovered
// from and the payment signed again once, as payment.Payer.Get does.
func (h *handPayer) pay(t *testing.T, ctx context.Context, phase string, r *replica, path string) {
	t.Helper()
	o := h.offer(t, ctx, r, path)
	var cl call
	for attempt := 0; ; attempt++ {
		value, err := h.sess.Envelope(o.Entry, o.Resource, big.NewInt(o.ChainID), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var required *payment.RequiredV2
		cl, required = send(ctx, r.base+path, value)
		cl.Sent = append(cl.Sent, payloadType(value))
		if attempt == 0 && required != nil && h.sess.Recover(*required) {
			continue
		}
		break
	}
	h.record(t, phase, r.name, o, cl, true)
}

// payAhead sends r a voucher of two prices above what the payer was
// charged, as if another server had served a call meanwhile; the session
// follows the answer only if r answers it.
func (h *handPayer) payAhead(t *testing.T, ctx context.Context, phase string, r *replica, path string) {
	t.Helper()
	o := h.offer(t, ctx, r, path)
	charged := h.sess.Charged
	if charged == nil {
		charged = new(big.Int)
	}
	h.sess.Charged = new(big.Int).Add(charged, h.book.price)
	value, err := h.sess.Envelope(o.Entry, o.Resource, big.NewInt(o.ChainID), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := send(ctx, r.base+path, value)
	cl.Sent = []string{payloadType(value)}
	if cl.Status != http.StatusOK {
		h.sess.Charged = charged
	}
	h.record(t, phase, r.name, o, cl, true)
}

// payBoth signs one payment of path and sends it to both replicas at the
// same instant: at most one may answer it.
func (h *handPayer) payBoth(t *testing.T, ctx context.Context, phase, path string) {
	t.Helper()
	o := h.offer(t, ctx, h.c.replicas[0], path)
	value, err := h.sess.Envelope(o.Entry, o.Resource, big.NewInt(o.ChainID), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]call, len(h.c.replicas))
	var wg sync.WaitGroup
	gun := make(chan struct{})
	for i, r := range h.c.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gun
			outs[i], _ = send(ctx, r.base+path, value)
		}()
	}
	close(gun)
	wg.Wait()
	answered := 0
	for i, cl := range outs {
		cl.Sent = []string{payloadType(value)}
		if cl.Status == http.StatusOK {
			answered++
		}
		// The client's books follow the first answer; a second one is
		// recorded as answered all the same (the invariant counts it).
		h.record(t, phase, h.c.replicas[i].name, o, cl, answered <= 1)
	}
	if answered > 1 {
		t.Errorf("%s: one voucher answered by both replicas", phase)
	}
}

// record adds cl to the book and, if follow, the answer's charge to the
// session.
func (h *handPayer) record(t *testing.T, phase, via string, o payment.Offer, cl call, follow bool) {
	t.Helper()
	cl.Phase, cl.Via, cl.I = phase, via, h.called
	h.called++
	if follow && cl.Status == http.StatusOK && cl.Settle != nil {
		if err := h.sess.Paid(o, *cl.Settle); err != nil {
			t.Errorf("%s: %v", cl, err)
		}
	}
	h.book.calls = append(h.book.calls, cl)
}

// refund asks r for the cooperative refund of the rest.
func (h *handPayer) refund(t *testing.T, ctx context.Context, r *replica) {
	t.Helper()
	path := "/candles"
	o := h.offer(t, ctx, r, path)
	value, err := h.sess.RefundEnvelope(o.Entry, o.Resource, big.NewInt(o.ChainID), nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := send(ctx, r.base+path, value)
	cl.Phase, cl.Via, cl.I, cl.Sent = "refund", r.name, len(h.book.refunds), []string{batch.TypeRefund}
	if cl.Status == http.StatusOK && (cl.Settle == nil || !cl.Settle.Success) {
		cl.Status, cl.Error = 0, "a 200 without a successful PAYMENT-RESPONSE"
	}
	h.book.refunds = append(h.book.refunds, cl)
}

// send GETs url with the PAYMENT-SIGNATURE value and reads the answer:
// its status, settlement, and for a 402 its reason and requirement.
func send(ctx context.Context, url, value string) (call, *payment.RequiredV2) {
	cl := call{URL: url}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cl.Error = err.Error()
		return cl, nil
	}
	req.Header.Set(payment.HeaderPaymentV2, value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cl.Error = err.Error()
		return cl, nil
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	cl.Status = resp.StatusCode
	if v := resp.Header.Get(payment.HeaderPaymentResponseV2); v != "" {
		var s payment.SettleResponse
		if decodeHeader(v, &s) == nil {
			cl.Settle = &s
		}
	}
	if cl.Status == http.StatusOK {
		return cl, nil
	}
	cl.Body = body.String()
	if len(cl.Body) > 500 {
		cl.Body = cl.Body[:500]
	}
	var required *payment.RequiredV2
	if v := resp.Header.Get(payment.HeaderPaymentRequired); v != "" {
		var r payment.RequiredV2
		if decodeHeader(v, &r) == nil {
			required, cl.Reason = &r, r.Error
		}
	}
	if cl.Reason == "" {
		var e struct{ Error string }
		_ = json.Unmarshal(body.Bytes(), &e)
		cl.Reason = e.Error
	}
	if cl.Settle != nil { // a failed settlement: no recovery
		required = nil
	}
	return cl, required
}

func decodeHeader(v string, out any) error {
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// payloadType is the payload type of a PAYMENT-SIGNATURE value.
func payloadType(value string) string {
	var env struct {
		Payload struct{ Type string }
	}
	_ = decodeHeader(value, &env)
	return env.Payload.Type
}

// stopCounts adds up each replica's stopped-channels counter over its
// lives: a restart starts it at zero again.
type stopCounts struct {
	byReplica map[string]map[string]float64 // replica -> evidence -> stops
}

func newStopCounts(c *cluster) *stopCounts {
	s := &stopCounts{byReplica: map[string]map[string]float64{}}
	for _, r := range c.replicas {
		s.byReplica[r.name] = map[string]float64{}
	}
	return s
}

// endOfLife adds r's counter, read now, before r stops (or at the end).
func (s *stopCounts) endOfLife(t *testing.T, r *replica) {
	t.Helper()
	samples, err := adminSamples(r, stoppedMetric)
	if err != nil {
		t.Errorf("%s: %v", r.name, err)
		return
	}
	for labels, v := range samples {
		s.byReplica[r.name][labels] += v
	}
}

// check asserts that a replica that refused a channel by hand as
// another server's counted it stopped, under the evidence its reason
// names, and that some replica counted a stop if calls through the
// balancer were so refused.
func (s *stopCounts) check(t *testing.T, books ...*channelBook) {
	t.Helper()
	viaLB := false
	for _, bk := range books {
		first := map[string]bool{} // replicas that refused the channel already
		for _, cl := range append(slices.Clone(bk.calls), bk.refunds...) {
			if !elsewhere(cl.Reason) {
				continue
			}
			if cl.Via == "lb" {
				viaLB = true
				continue
			}
			// The first refusal at a replica is its stop, counted under
			// the evidence its reason names.
			if ev := evidenceOf(cl.Reason); !first[cl.Via] && s.byReplica[cl.Via][`evidence="`+ev+`"`] == 0 {
				t.Errorf("%s refused %s (%s), but its %s{evidence=%q} stayed at zero", cl.Via, cl, bk.name, stoppedMetric, ev)
			}
			first[cl.Via] = true
		}
	}
	all := 0.0
	for _, byEvidence := range s.byReplica {
		for _, n := range byEvidence {
			all += n
		}
	}
	if viaLB && all == 0 {
		t.Errorf("calls through the balancer were refused as served elsewhere, but no replica's %s rose", stoppedMetric)
	}
	t.Logf("%s over each replica's lives: %v", stoppedMetric, s.byReplica)
}

// adminSamples reads the samples of the Prometheus metric name on r's
// admin listener, by their label set ("" when none).
func adminSamples(r *replica, name string) (map[string]float64, error) {
	resp, err := http.Get(r.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %d", r.admin, resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		rest := strings.TrimPrefix(series, name)
		if !ok || rest != "" && !strings.HasPrefix(rest, "{") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q", name, line)
		}
		out[strings.Trim(rest, "{}")] = v
	}
	return out, sc.Err()
}

// waitSettled waits until every replica's store holds nothing charged
// and unclaimed and the escrow has swept every claim to payTo, or for at
// most within (the invariant's checks then say what is missing).
func waitSettled(t *testing.T, ctx context.Context, c *cluster, chain *escrowView, within time.Duration) {
	t.Helper()
	began := time.Now()
	deadline := began.Add(within)
	var seen []string // what was waited for, once each
	for {
		var waiting []string
		for _, r := range c.replicas {
			s, err := adminSamples(r, "tollgate_batch_unclaimed_channels")
			switch {
			case err != nil:
				waiting = append(waiting, fmt.Sprintf("%s: %v", r.name, err))
			case s[""] != 0:
				waiting = append(waiting, fmt.Sprintf("%s: %v channels unclaimed", r.name, s[""]))
			}
		}
		if claimed, settled := chain.receiver(); claimed.Cmp(settled) != 0 {
			waiting = append(waiting, fmt.Sprintf("the escrow: %s claimed for payTo, %s settled", claimed, settled))
		}
		for _, w := range waiting {
			if !slices.Contains(seen, w) {
				seen = append(seen, w)
			}
		}
		if len(waiting) == 0 {
			if took := time.Since(began); took > 5*time.Second {
				t.Logf("claims took %s, waiting for: %s", took.Round(100*time.Millisecond), strings.Join(seen, "; "))
			}
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Logf("still waiting for claims after %s: %s (before: %s)", within, strings.Join(waiting, "; "), strings.Join(seen, "; "))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// escrowView reads the escrow, its events and the token on the cluster's
// chain.
type escrowView struct {
	t            *testing.T
	ctx          context.Context
	c            *ethclient.Client
	token, payTo common.Address
}

func newEscrowView(t *testing.T, ctx context.Context, c *cluster) *escrowView {
	t.Helper()
	client, err := ethclient.Dial(c.devnetURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	payTo, ok := c.desc.Account(devnet.RolePayTo)
	if !ok {
		t.Fatal("the devnet names no payTo account")
	}
	return &escrowView{t: t, ctx: ctx, c: client, token: c.desc.Token.Address, payTo: payTo.Address}
}

func (w *escrowView) head() uint64 {
	w.t.Helper()
	n, err := w.c.BlockNumber(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *escrowView) call(to common.Address, sig string, args ...[]byte) []byte {
	w.t.Helper()
	data := crypto.Keccak256([]byte(sig))[:4]
	for _, a := range args {
		data = append(data, common.LeftPadBytes(a, 32)...)
	}
	out, err := w.c.CallContract(w.ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil {
		w.t.Fatalf("eth_call %s: %v", sig, err)
	}
	return out
}

// balance is who's token balance.
func (w *escrowView) balance(who common.Address) *big.Int {
	w.t.Helper()
	return new(big.Int).SetBytes(w.call(w.token, "balanceOf(address)", who.Bytes()))
}

// channel is the escrow's channels(id): balance and totalClaimed.
func (w *escrowView) channel(id common.Hash) (balance, totalClaimed *big.Int) {
	w.t.Helper()
	out := w.call(batch.EscrowAddress, "channels(bytes32)", id.Bytes())
	if len(out) != 64 {
		w.t.Fatalf("channels(%s): %x", id, out)
	}
	return new(big.Int).SetBytes(out[:32]), new(big.Int).SetBytes(out[32:])
}

// receiver is the escrow's receivers(payTo, token): claimed and settled.
func (w *escrowView) receiver() (claimed, settled *big.Int) {
	w.t.Helper()
	out := w.call(batch.EscrowAddress, "receivers(address,address)", w.payTo.Bytes(), w.token.Bytes())
	if len(out) != 64 {
		w.t.Fatalf("receivers(%s, %s): %x", w.payTo, w.token, out)
	}
	return new(big.Int).SetBytes(out[:32]), new(big.Int).SetBytes(out[32:])
}

// sumEvents adds up the first data word (the amount) of the escrow's
// events of signature on channel id since block from.
func (w *escrowView) sumEvents(from uint64, signature string, id common.Hash) *big.Int {
	w.t.Helper()
	logs, err := w.c.FilterLogs(w.ctx, ethereum.FilterQuery{FromBlock: new(big.Int).SetUint64(from), Addresses: []common.Address{batch.EscrowAddress},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte(signature))}, {id}}})
	if err != nil {
		w.t.Fatal(err)
	}
	sum := new(big.Int)
	for _, l := range logs {
		if len(l.Data) >= 32 {
			sum.Add(sum, new(big.Int).SetBytes(l.Data[:32]))
		}
	}
	return sum
}

// interopDir returns .ci/interop if node is on the PATH and the official
// batch-settlement client is installed in its node_modules (npm ci).
// Otherwise it skips t, or fails it when TOLLGATE_REQUIRE_INTEROP is set
// (CI).
func interopDir(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs("../.ci/interop")
	_, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@x402", "evm"))
	}
	if err != nil {
		if os.Getenv("TOLLGATE_REQUIRE_INTEROP") != "" {
			t.Fatalf("node and the npm x402 packages in %s are needed (cd .ci/interop && npm ci): %v", dir, err)
		}
		t.Skipf("capability x402-npm-clients not tested: the official x402 clients paying Tollgate (%v); to test it: (cd .ci/interop && npm ci)", err)
	}
	return dir
}
