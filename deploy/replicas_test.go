package deploy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

// TestReplicasBehindLoadBalancer is the production layout, end to end,
// from real parts: PostgreSQL, one `tollgate devnet` chain, three `tollgate
// serve` processes and HAProxy with deploy/haproxy.cfg. Through it every
// paid endpoint is paid; one payment sent to all three replicas at once
// is settled once; killing the replica that scans for whales moves the
// scan; killing a replica in the middle of a burst of paid calls loses no
// payment; and /metrics counts every replica's calls.
func TestReplicasBehindLoadBalancer(t *testing.T) {
	t.Parallel()
	c := startCluster(t, clusterConfig{replicas: 3, whaleInterval: 4 * time.Second})
	ctx := context.Background()
	chain, err := ethclient.Dial(c.devnetURL)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	start, err := chain.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := newPayments(t, c)

	t.Run("every replica reports the binary's version and revision", func(t *testing.T) {
		for _, r := range c.replicas {
			resp, err := http.Get(r.base + "/health")
			if err != nil {
				t.Fatal(err)
			}
			var h struct{ Status, Version, Revision, CommitTime string }
			_ = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Status != "ok" || !strings.HasPrefix(h.Version, "v") || len(h.Revision) < 40 || h.CommitTime == "" {
				t.Errorf("%s /health: %+v, want the stamped module version, revision and commit time", r.name, h)
			}
		}
	})

	t.Run("every paid endpoint through the load balancer", func(t *testing.T) {
		paths := paidPaths(t, c)
		if len(paths) < 9 {
			t.Fatalf("the OpenAPI document lists %d paid paths: %v", len(paths), paths)
		}
		challenges := 0
		for _, path := range paths {
			resp, err := http.Get(c.lb + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusPaymentRequired {
				t.Errorf("unpaid GET %s: %d, want 402", path, resp.StatusCode)
			}
			out := p.pay(t, c.lb+path) // a second 402, then the paid call
			challenges += 2
			if out.status != http.StatusOK || out.tx == "" {
				t.Errorf("paid GET %s: %d %s (settlement %q)", path, out.status, out.body, out.tx)
			}
		}
		// A 402 straight from each replica: /metrics through the load
		// balancer must count them all, whichever replica answers it.
		for _, r := range c.replicas {
			resp, err := http.Get(r.base + "/regime")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			challenges++
		}
		want := counters{Challenges: challenges, Paid: len(paths)}
		var got counters
		agreed := 0
		deadline := time.Now().Add(40 * time.Second) // replicas flush their counts every 10 s
		for agreed < 6 && time.Now().Before(deadline) {
			if got = metrics(t, c.lb); got == want {
				agreed++ // six answers in a row: every replica has had its turn
			} else {
				agreed = 0
				time.Sleep(250 * time.Millisecond)
			}
		}
		if agreed < 6 {
			t.Errorf("/metrics through the load balancer: %+v, want %+v", got, want)
		}
	})

	t.Run("one payment sent to every replica at once settles once", func(t *testing.T) {
		before, err := chain.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Twenty payments, four at a time; each sent to the three
		// replicas at the same instant.
		rounds := make(chan int, 20)
		for round := range 20 {
			rounds <- round
		}
		close(rounds)
		var workers sync.WaitGroup
		for range 4 {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for round := range rounds {
					sameToAll(t, c, p, round)
				}
			}()
		}
		workers.Wait()
		after, err := chain.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(transfers(t, chain, c.desc, before+1, after)); n != 20 {
			t.Errorf("%d transfers for 20 payments", n)
		}
	})

	t.Run("killing the scanning replica moves the whale scan", func(t *testing.T) {
		db := c.sql(t)
		var holder string
		var taken string
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			err := db.QueryRow(`SELECT l.holder, s.taken_at FROM leases l, whale_snapshots s WHERE l.name = 'whale-scan' AND s.id = 1`).Scan(&holder, &taken)
			if err == nil && c.byPID(holderPID(holder)) != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		scanner := c.byPID(holderPID(holder))
		if scanner == nil {
			t.Fatalf("no replica holds the whale scan lease (holder %q) with a snapshot stored", holder)
		}
		scanner.kill()
		killed := time.Now().UTC()
		var next, nextTaken string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			err := db.QueryRow(`SELECT l.holder, s.taken_at FROM leases l, whale_snapshots s WHERE l.name = 'whale-scan' AND s.id = 1`).Scan(&next, &nextTaken)
			if err == nil && next != holder && nextTaken > killed.Format("2006-01-02T15:04:05.000000000Z") {
				break
			}
		}
		if r := c.byPID(holderPID(next)); r == nil || r == scanner || nextTaken <= killed.Format("2006-01-02T15:04:05.000000000Z") {
			t.Fatalf("after %s (holder %s) was killed: holder %q, snapshot of %s", scanner.name, holder, next, nextTaken)
		} else {
			t.Logf("whale scan moved from %s to %s; new snapshot %s after the kill", scanner.name, r.name, time.Since(killed).Round(100*time.Millisecond))
		}
		if out := p.pay(t, c.lb+"/whales"); out.status != http.StatusOK {
			t.Errorf("/whales after the scanner died: %d %s", out.status, out.body)
		}
		c.restart(t, scanner)
	})

	t.Run("kill -9 during a burst of paid calls loses no payment", func(t *testing.T) {
		// A burst proves something only if the kill cut a call short; the
		// load balancer may still count the victim down after an earlier
		// restart (it then serves nothing), so a burst the kill did not
		// touch is run again, up to three times.
		victim := c.replicas[1]
		for attempt := 1; ; attempt++ {
			proved := burstAndKill(t, ctx, c, p, victim)
			c.restart(t, victim)
			if proved {
				break
			}
			if attempt == 3 {
				t.Error("three kills interrupted no paid call: this proved nothing")
				break
			}
			time.Sleep(3 * time.Second) // the balancer's health checks see the victim up again
		}
	})

	t.Run("after reconciliation every transfer is a settled, servable payment", func(t *testing.T) {
		time.Sleep(3 * time.Second) // what the killed replica sent is sealed
		t.Log(strings.TrimSpace(c.tollgate(t, "ledger", "reconcile", "--database", c.database, "--chain-rpc", c.devnetURL)))
		rows := ledger(t, c)
		head, err := chain.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		settled := map[string]ledgerRow{} // by tx
		for _, r := range rows {
			if r.state != exact.StateSettled {
				continue
			}
			if _, dup := settled[r.tx]; dup || r.tx == "" {
				t.Errorf("settled rows share transaction %q", r.tx)
			}
			settled[r.tx] = r
		}
		onChain := transfers(t, chain, c.desc, start+1, head)
		for _, tx := range onChain {
			if _, ok := settled[tx]; !ok {
				t.Errorf("transfer %s on chain has no settled row", tx)
			}
		}
		if len(settled) != len(onChain) {
			t.Errorf("%d settled rows, %d transfers on chain", len(settled), len(onChain))
		}
		if n := reverted(t, chain, start+1, head); n != 0 {
			t.Errorf("%d reverted transactions: a payment was sent to the chain twice", n)
		}
		// Every settled row: served already, or served now to a retry,
		// with its own transaction and no second charge.
		for tx, r := range settled {
			sent, ok := p.byNonce(r.nonce)
			if !ok {
				t.Errorf("settled row %s has nonce %s, which this test never signed", tx, r.nonce)
				continue
			}
			o := p.send(ctx, sent.url, sent.pay)
			if o.status != http.StatusOK || o.tx != "" && o.tx != tx {
				t.Errorf("retry of settled payment %s: %d %s (settlement %q)", tx, o.status, o.body, o.tx)
			}
		}
		for _, o := range p.served() {
			if r, ok := settled[o.tx]; !ok || !strings.EqualFold(r.nonce, o.pay.ID) {
				t.Errorf("answer served with settlement %q, which no settled row of its nonce records", o.tx)
			}
		}
		last, err := chain.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if after := len(transfers(t, chain, c.desc, start+1, last)); after != len(onChain) {
			t.Errorf("the retries moved money: %d transfers, then %d", len(onChain), after)
		}
	})

	t.Run("one tool-call payment sent to every replica at once settles once and buys no REST call", func(t *testing.T) {
		before, err := chain.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sessions := make([]*mcp.ClientSession, len(c.replicas))
		for i, r := range c.replicas {
			client := mcp.NewClient(&mcp.Implementation{Name: "replicas-test", Version: "v0"}, nil)
			if sessions[i], err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.base + "/mcp"}, nil); err != nil {
				t.Fatal(err)
			}
			defer sessions[i].Close()
		}
		o, err := p.payer.ToolOffer(ctx, sessions[0], "regime", nil, exact.Scheme)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := p.payer.Schemes[0].Pay(o)
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := base64.StdEncoding.DecodeString(signed.Value)
		results := make([]*mcp.CallToolResult, len(sessions))
		var wg sync.WaitGroup
		gun := make(chan struct{})
		for i, sess := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gun
				results[i], _ = sess.CallTool(ctx, &mcp.CallToolParams{Name: "regime", Meta: mcp.Meta{payment.MetaPayment: json.RawMessage(payload)}})
			}()
		}
		close(gun)
		wg.Wait()
		txs := map[any]bool{}
		for i, r := range results {
			switch {
			case r == nil:
				t.Errorf("replica %d: no result", i+1)
			case !r.IsError:
				txs[r.Meta[payment.MetaPaymentResponse].(map[string]any)["transaction"]] = true
			case !strings.Contains(fmt.Sprint(r.Content[0]), payment.ReasonPaymentInFlight) && !strings.Contains(fmt.Sprint(r.StructuredContent), payment.ReasonPaymentInFlight):
				t.Errorf("replica %d: %v %v", i+1, r.Content[0], r.StructuredContent)
			}
		}
		if len(txs) != 1 {
			t.Errorf("the tool-call payment was served with settlements %v, want one", txs)
		}
		if res, err := p.payer.Send(ctx, c.lb+"/regime", signed); err != nil || res.Status == http.StatusOK {
			t.Errorf("a tool-call payment sent over REST: %v %+v", err, res)
		}
		after, err := chain.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(transfers(t, chain, c.desc, before+1, after)); n != 1 {
			t.Errorf("%d transfers for one payment", n)
		}
	})

	t.Run("a replica shutting down is taken out on readiness before it stops listening", func(t *testing.T) {
		// serve --drain-delay 1500ms: /readyz answers 503 at once, and the
		// listeners stay open 1.5 s, in which HAProxy's checks (every 0.5 s,
		// down after two) see a 503, not a refused connection.
		r := c.replicas[2]
		r.stop()
		if lines := logLines(c.haproxy, "replicas/r3 is DOWN", "Layer7"); len(lines) == 0 {
			t.Errorf("HAProxy did not take r3 out on a failed readiness check:\n%s", c.haproxy.tail(10))
		}
		c.restart(t, r)
	})
}

// logLines are the lines of p's log holding every one of want.
func logLines(p *process, want ...string) []string {
	var out []string
	raw, _ := os.ReadFile(p.log)
next:
	for _, line := range strings.Split(string(raw), "\n") {
		for _, w := range want {
			if !strings.Contains(line, w) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// sameToAll signs one payment and sends it to every replica at the same
// instant: one of them settles it, the others answer with the stored
// response or payment_in_flight.
func sameToAll(t *testing.T, c *cluster, p *payments, round int) {
	path := []string{"/regime", "/signal", "/lanes", "/candles"}[round%4]
	pay, err := p.trySign(c.lb + path)
	if err != nil {
		t.Errorf("round %d: %v", round, err)
		return
	}
	outs := make([]outcome, len(c.replicas))
	var wg sync.WaitGroup
	gun := make(chan struct{})
	for i, r := range c.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gun
			outs[i] = p.send(context.Background(), r.base+path, pay)
		}()
	}
	close(gun)
	wg.Wait()
	var served []outcome
	for i, o := range outs {
		switch {
		case o.status == http.StatusOK:
			served = append(served, o)
		case o.status == http.StatusPaymentRequired && bytes.Contains(o.body, []byte(payment.ReasonPaymentInFlight)):
		default:
			t.Errorf("round %d, replica %d: %d %s (%v)", round, i+1, o.status, o.body, o.err)
		}
	}
	if len(served) == 0 {
		t.Errorf("round %d: no replica served the payment: %+v", round, outs)
	}
	for _, o := range served[min(1, len(served)):] {
		if o.tx != served[0].tx || !bytes.Equal(o.body, served[0].body) {
			t.Errorf("round %d: two answers for one payment: %s %s / %s %s", round, served[0].tx, served[0].body, o.tx, o.body)
		}
	}
}

// counters are the totals of the free JSON /metrics.
type counters struct{ Challenges, Paid int }

func metrics(t *testing.T, base string) counters {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Totals counters }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.Totals
}

// paidPaths are the paid paths of the service's OpenAPI document, with a
// devnet contract for {addr} and the parameters' defaults.
func paidPaths(t *testing.T, c *cluster) []string {
	t.Helper()
	resp, err := http.Get(c.lb + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]map[string]any
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, ops := range doc.Paths {
		if _, paid := ops["get"]["x-price-usd"]; paid {
			out = append(out, strings.ReplaceAll(path, "{addr}", c.desc.Token.Address.Hex()))
		}
	}
	slices.Sort(out)
	return out
}

// payments signs and sends payments from the devnet's payer and keeps
// every one, so that the ledger can be checked against them.
type payments struct {
	payer payment.Payer

	mu   sync.Mutex
	sent map[string]sentPayment // by nonce, lower case
}

type sentPayment struct {
	url string
	pay payment.SignedPayment
	out []outcome
}

// outcome is one GET with a payment.
type outcome struct {
	pay    payment.SignedPayment
	status int
	body   []byte
	tx     string // of the settlement header, if any
	tries  int
	err    error
}

func newPayments(t *testing.T, c *cluster) *payments {
	t.Helper()
	key, err := devnet.DeriveKey(c.desc.Mnemonic, devnet.PayerAccount)
	if err != nil {
		t.Fatal(err)
	}
	return &payments{
		payer: payment.Payer{Version: 2, HTTP: &http.Client{Timeout: 90 * time.Second}, MaxAmount: big.NewInt(1_000_000),
			Schemes: []payment.SchemeClient{exact.Payer{Key: key}}},
		sent: map[string]sentPayment{},
	}
}

// sign asks url for its 402 and signs a payment for it.
func (p *payments) sign(t *testing.T, url string) payment.SignedPayment {
	t.Helper()
	pay, err := p.trySign(url)
	if err != nil {
		t.Fatal(err)
	}
	return pay
}

func (p *payments) trySign(url string) (payment.SignedPayment, error) {
	pay, err := p.payer.Sign(context.Background(), url)
	if err != nil {
		return pay, err
	}
	p.mu.Lock()
	p.sent[strings.ToLower(pay.ID)] = sentPayment{url: url, pay: pay}
	p.mu.Unlock()
	return pay, nil
}

// pay signs a payment for url and sends it.
func (p *payments) pay(t *testing.T, url string) outcome {
	t.Helper()
	return p.send(context.Background(), url, p.sign(t, url))
}

// send GETs url with pay once.
func (p *payments) send(ctx context.Context, url string, pay payment.SignedPayment) outcome {
	o := outcome{pay: pay, tries: 1}
	res, err := p.payer.Send(ctx, url, pay)
	if err != nil {
		o.err = err
	} else {
		o.status, o.body = res.Status, res.Body
		if res.Settlement != nil && res.Settlement.Success {
			o.tx = strings.ToLower(res.Settlement.Transaction)
		}
	}
	p.mu.Lock()
	k := strings.ToLower(pay.ID)
	s := p.sent[k]
	s.out = append(s.out, o)
	p.sent[k] = s
	p.mu.Unlock()
	return o
}

// deliver sends pay to url until it is served, retrying what a client
// would retry (no answer, a gateway error, payment_in_flight), until ctx
// ends.
func (p *payments) deliver(ctx context.Context, url string, pay payment.SignedPayment) outcome {
	for tries := 1; ; tries++ {
		o := p.send(ctx, url, pay)
		o.tries = tries
		retry := o.err != nil || o.status == http.StatusBadGateway || o.status == http.StatusServiceUnavailable ||
			o.status == http.StatusGatewayTimeout ||
			o.status == http.StatusPaymentRequired && bytes.Contains(o.body, []byte(payment.ReasonPaymentInFlight))
		if !retry {
			return o
		}
		select {
		case <-ctx.Done():
			return o
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// byNonce is the payment this test signed with nonce.
func (p *payments) byNonce(nonce string) (sentPayment, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sent[strings.ToLower(nonce)]
	return s, ok
}

// served is every answer with a body and a settlement this test received.
func (p *payments) served() []outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []outcome
	for _, s := range p.sent {
		for _, o := range s.out {
			if o.status == http.StatusOK && o.tx != "" {
				out = append(out, o)
			}
		}
	}
	return out
}

// ledgerRow is a row of `tollgate ledger export`.
type ledgerRow struct{ state, tx, nonce string }

func ledger(t *testing.T, c *cluster) []ledgerRow {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(c.tollgate(t, "ledger", "export", "--database", c.database))).ReadAll()
	if err != nil || len(recs) == 0 {
		t.Fatalf("ledger export: %v", err)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	var rows []ledgerRow
	for _, r := range recs[1:] {
		rows = append(rows, ledgerRow{state: r[col["state"]], tx: strings.ToLower(r[col["tx"]]), nonce: strings.ToLower(r[col["nonce"]])})
	}
	return rows
}

// transfers are the hashes of the transactions moving the devnet token
// to payTo in blocks [from, to].
func transfers(t *testing.T, chain *ethclient.Client, desc *devnet.Description, from, to uint64) []string {
	t.Helper()
	var payTo common.Address
	for _, a := range desc.Accounts {
		if a.Role == devnet.RolePayTo {
			payTo = a.Address
		}
	}
	logs, err := chain.FilterLogs(context.Background(), ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(from), ToBlock: new(big.Int).SetUint64(to), Addresses: []common.Address{desc.Token.Address},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))}, nil, {common.BytesToHash(payTo.Bytes())}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range logs {
		out = append(out, strings.ToLower(l.TxHash.Hex()))
	}
	return out
}

// reverted counts the failed transactions in blocks [from, to].
func reverted(t *testing.T, chain *ethclient.Client, from, to uint64) int {
	t.Helper()
	n := 0
	for b := from; b <= to; b++ {
		rcpts, err := chain.BlockReceipts(context.Background(), rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rcpts {
			if r.Status != types.ReceiptStatusSuccessful {
				n++
			}
		}
	}
	return n
}

// holderPID is the process id in a whale scan lease holder
// ("host/pid/random"), 0 if none.
func holderPID(holder string) int {
	parts := strings.Split(holder, "/")
	if len(parts) != 3 {
		return 0
	}
	pid, _ := strconv.Atoi(parts[1])
	return pid
}

// burstAndKill pays 60 calls from twelve clients, each paying its calls
// one after another (calls at every stage: claim, handler, settlement,
// waiting for the block, on every replica), kills victim with SIGKILL once
// a fifth of them are answered, and checks that every call was served or
// left unsettled for the reconciler. It reports whether the kill cut a
// call short (a call retried or left in flight).
func burstAndKill(t *testing.T, ctx context.Context, c *cluster, p *payments, victim *replica) bool {
	t.Helper()
	paths := []string{"/regime", "/signal", "/lanes", "/candles", "/token/" + c.desc.Token.Address.Hex()}
	var pays []payment.SignedPayment
	var urls []string
	for i := range 60 {
		u := c.lb + paths[i%len(paths)]
		urls = append(urls, u)
		pays = append(pays, p.sign(t, u))
	}
	outs := make([]outcome, len(pays))
	next := make(chan int, len(pays))
	for i := range pays {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var delivered atomic.Int64
	// Every call must end (served, retried or refused as in flight), not
	// end fast: a loaded 2-core CI machine running the whole suite once
	// took more than 20 s to answer a retried call, so the burst has 60 s.
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				outs[i] = p.deliver(dctx, urls[i], pays[i])
				delivered.Add(1)
			}
		}()
	}
	// The kill lands once the burst is under way (a fifth of it answered),
	// not at a fixed time: on a loaded machine a fixed sleep can fall
	// before the first call or after the last.
	for start := time.Now(); delivered.Load() < int64(len(pays)/5) && time.Since(start) < 10*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
	victim.kill()
	wg.Wait()
	served, retried := 0, 0
	for i, o := range outs {
		switch {
		case o.status == http.StatusOK:
			served++
		case o.status == http.StatusPaymentRequired && bytes.Contains(o.body, []byte(payment.ReasonPaymentInFlight)):
			// claimed by the killed replica before it settled: the
			// authorization is unused and the reconciler fails it once it
			// expires
		default:
			t.Errorf("call %d (%s): %d %s (%v)", i, urls[i], o.status, o.body, o.err)
		}
		if o.tries > 1 {
			retried++
		}
	}
	t.Logf("burst of %d paid calls, %s killed: %d served, %d retried, %d left in flight", len(outs), victim.name, served, retried, len(outs)-served)
	return retried > 0 || served < len(outs)
}
