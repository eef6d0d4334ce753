// Package official measures Tollgate's batch-settlement voucher calls side
// by side with the official x402 server's on one devnet (issue 20, item
// 9). On one chain run the `tollgate serve` binary (its own facilitator,
// batch-settlement offered beside exact) and the official server
// (server.mjs: @x402/express 2.27.0's paymentMiddleware, @x402/evm's
// batch-settlement server scheme, the official facilitator in process),
// both serving GET /regime at the catalog's price with the same announced
// deposit. The same load pays each (load.mjs): 16 payers, fresh keys
// funded from the devnet's test accounts, each with its own channel on
// each server, deposit once, then make voucher calls one after another,
// all payers at once, with the official batch-settlement client
// (@x402/fetch wrapFetchWithPayment). Rounds of b.N voucher calls per
// payer alternate between the two servers (-official.rounds each, 3 by
// default), so that whatever else the machine runs weighs on both alike.
//
//	(cd bench/official && npm ci --no-audit --no-fund)
//	go test -run x -bench VoucherVsOfficial -benchtime 50x ./bench/official/
//
// One line per store reports, for each server, the median calls/s of its
// rounds (deposits excluded), p50 and p99 of its calls, and the CPU the
// server (cpu-ms/call; Tollgate's with its PostgreSQL cluster) and the
// client (client-cpu-ms/call) spent a call; tollgate/official, the median
// of the rounds' ratios of calls/s; cpu-official/tollgate, the servers'
// CPU a call compared; others-cpu-%, the share of all cores that neither
// server nor client took (the devnet, and whatever else runs here). The
// log has every round.
//
// Two stores, each on its own devnet:
//   - sqlite: `tollgate serve` in devnet mode with its in-process chain
//     (--devnet-rpc), SQLite in a temporary data dir; the official server
//     uses that chain. (serve --devnet-url offers batch-settlement only
//     with a shared PostgreSQL store: issue 20, item 8.)
//   - postgres: the devnet in this process (devnettest) and `tollgate
//     serve --devnet-url` on it with a throwaway PostgreSQL database
//     (pgtest); skipped without PostgreSQL.
//
// Everything shares this machine's cores: the chain, PostgreSQL and the
// load generator too. Once the cores are full, calls/s follows the CPU a
// call costs the server and the client together, so the official
// client's own CPU (several ms a call, more than either server's) bounds
// tollgate/official; cpu-official/tollgate compares the servers alone.
//
// Flags (after the package):
//   - -official.client: fetch (default) is the official client as an
//     application uses it, wrapFetchWithPayment: an unpaid request, its
//     402, then the voucher (two HTTP requests a call). direct is the
//     official client's voucher sent at once, against the 402 read once
//     (see load.mjs). go is Tollgate's Go client (payment/batch.Session)
//     in this process: about a tenth of the official client's CPU a call,
//     so that the servers, not the load generator, fill the cores.
//   - -official.rounds: rounds per server (3).
//   - -official.tollgate=BIN measures that binary instead of building
//     ./cmd/tollgate, e.g. one built from an earlier commit for a before
//     and after.
//
// It skips without node or without bench/official/node_modules, unless
// TOLLGATE_REQUIRE_OFFICIAL=1 makes that a failure. It has no Test
// functions: plain `go test` compiles it and runs nothing.
package official

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/bench/rig"
	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store/pgtest"
)

var (
	clientMode = flag.String("official.client", "fetch",
		"load: fetch (the official wrapFetchWithPayment, an unpaid request then the paid one), direct (the official client's voucher sent at once) or go (Tollgate's batch.Session in process)")
	rounds = flag.Int("official.rounds", 3,
		"rounds per server, alternating between the servers; each makes b.N voucher calls per payer")
	tollgateBin = flag.String("official.tollgate", "",
		"a tollgate binary to measure instead of building ./cmd/tollgate (e.g. one built from an earlier commit, for before and after)")
)

const (
	payers = 16
	route  = "regime" // Tollgate's route; the official server serves the same path at the same price
	// depositCalls is how many prices each channel's deposit covers: more
	// than any run here makes, so that no call deposits again.
	depositCalls = 2000
	// requireEnv turns a missing node or npm install into a failure.
	requireEnv = "TOLLGATE_REQUIRE_OFFICIAL"
)

// BenchmarkVoucherVsOfficial: see the package comment.
func BenchmarkVoucherVsOfficial(b *testing.B) {
	if !slices.Contains([]string{"fetch", "direct", "go"}, *clientMode) {
		b.Fatalf("-official.client %q: want fetch, direct or go", *clientMode)
	}
	if *rounds < 1 {
		b.Fatalf("-official.rounds %d: want at least 1", *rounds)
	}
	dir := nodeDir(b)
	bin := *tollgateBin
	if bin == "" {
		bin = rig.BuildTollgate(b)
	}
	price := rig.RoutePrice(b, route)
	deposit := new(big.Int).Mul(price, big.NewInt(depositCalls))
	for _, st := range []string{"sqlite", "postgres"} {
		b.Run(st, func(b *testing.B) {
			chainURL, tg := startTollgate(b, bin, st, deposit)
			official := startOfficial(b, dir, chainURL, price, deposit)
			keys := rig.FundPayers(b, chainURL, payers, new(big.Int).Mul(price, big.NewInt(2*(depositCalls+10))), []uint32{2, 3, 4, 5, 6, 7, 8})
			servers := []*server{{name: "tollgate", url: tg.url, cpu: tg.cpu}, {name: "official", url: official.url, cpu: official.cpu}}
			// The payers deposit here, once per server, since the leaf
			// runs more than once (b.N = 1 first). The official
			// facilitator sends concurrent deposits from its one gas
			// account with the same nonce, and all but one fail
			// ("replacement transaction underpriced"): its payers
			// deposit one after another. Deposits are not measured.
			for _, srv := range servers {
				url, atOnce := srv.url+"/"+route, payers
				if srv.name == "official" {
					atOnce = 1
				}
				if *clientMode == "go" {
					srv.load = startGoLoad(b, url, keys, atOnce)
				} else {
					srv.load = startLoad(b, dir, url, chainURL, keys, deposit, atOnce)
				}
				defer srv.load.close()
			}
			if avg, err := os.ReadFile("/proc/loadavg"); err == nil {
				b.Logf("load average before measuring: %s", bytes.TrimSpace(avg))
			}
			b.Run("client="+*clientMode, func(b *testing.B) {
				// Rounds alternate between the servers, so that
				// whatever else the machine runs weighs on both alike.
				rs := make([][]*result, len(servers))
				b.ResetTimer()
				for range *rounds {
					for i, srv := range servers {
						rs[i] = append(rs[i], measure(b, b.N, srv.load, srv.cpu))
					}
				}
				b.StopTimer()
				report(b, servers, rs)
			})
		})
	}
}

// server is one of the two servers measured, with its load.
type server struct {
	name string
	url  string
	cpu  func() float64 // CPU seconds the server has used so far
	load driver
}

// nodeDir returns bench/official when node and its npm packages are
// there, and skips (or fails, under requireEnv) otherwise.
func nodeDir(b *testing.B) string {
	missing := func(format string, args ...any) {
		b.Helper()
		if os.Getenv(requireEnv) == "1" {
			b.Fatalf(format+" (%s=1)", append(args, requireEnv)...)
		}
		b.Skipf(format, args...)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("node not found: install Node.js (20+) to compare with the official x402 server")
	}
	dir, err := filepath.Abs(".")
	if err != nil {
		b.Fatal(err)
	}
	for _, pkg := range []string{"@x402/express", "@x402/evm", "@x402/fetch", "@x402/core", "viem", "express"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
			missing("%s is not installed in %s: run `npm ci --no-audit --no-fund` there", pkg, dir)
		}
	}
	return dir
}

// proc is a process of the benchmark, stopped when b ends.
type proc struct {
	cmd   *exec.Cmd
	url   string
	stdin io.WriteCloser
	log   *bytes.Buffer // stderr (and stdout when not read)
	mu    *sync.Mutex
	// cpu returns the CPU seconds the server has used so far: its
	// process's, and its PostgreSQL cluster's when it has one.
	cpu func() float64
}

// logs returns the tail of what p wrote.
func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.log.String()
	if len(s) > 6000 {
		s = "…" + s[len(s)-6000:]
	}
	return s
}

// lockedWriter appends to a buffer under a lock.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// start runs cmd with its output collected; stop, at cleanup, sends
// SIGTERM (or closes stdin) and kills it after grace.
func start(b *testing.B, cmd *exec.Cmd, captureStdout bool, grace time.Duration) *proc {
	b.Helper()
	p := &proc{cmd: cmd, log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	w := lockedWriter{p.mu, p.log}
	cmd.Stderr = w
	if !captureStdout {
		cmd.Stdout = w
	}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	p.cpu = func() float64 { return rig.ProcCPU(cmd.Process.Pid) }
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = p.stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// tollgateEnv is this process's environment without TOLLGATE_ variables,
// which serve reads as flag defaults.
func tollgateEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// startTollgate runs `tollgate serve` for store st, announcing deposit
// as its minimum deposit, and returns the chain's JSON-RPC URL and the
// server.
func startTollgate(b *testing.B, bin, st string, deposit *big.Int) (string, *proc) {
	httpAddr := rig.FreeAddr(b)
	args := []string{"serve", "--http", httpAddr, "--public-url", "http://" + httpAddr, "--grpc", rig.FreeAddr(b), "--admin", rig.FreeAddr(b),
		"--data-dir", b.TempDir(), "--log-level", "warn",
		// One loopback address stands for all 16 payers: the per-client
		// rate limits would measure the load generator, not the server.
		"--rate-limit", "0", "--paid-rate-limit", "0",
		// No claim while measuring: the interval is long and no amount
		// triggers one (the official server claims nothing either).
		"--batch-claim-interval", "5m", "--batch-claim-threshold", "0",
		// The deposit every client makes (load.mjs's depositStrategy,
		// batch.Session's minDeposit), as the official server announces.
		"--batch-min-deposit", usd(deposit)}
	var chainURL, db string
	switch st {
	case "sqlite":
		rpc := rig.FreeAddr(b)
		chainURL = "http://" + rpc
		args = append(args, "--devnet-rpc", rpc)
	case "postgres":
		db = pgtest.URL(b) // skips without PostgreSQL
		chainURL = devnettest.StartChain(b).URL()
		args = append(args, "--devnet-url", chainURL, "--database", db)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = tollgateEnv()
	p := start(b, cmd, false, 20*time.Second)
	p.url = "http://" + httpAddr
	if db != "" {
		pid := cmd.Process.Pid
		p.cpu = func() float64 { return rig.ProcCPU(pid) + rig.ClusterCPU(db) }
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(p.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if p.cmd.ProcessState != nil || time.Now().After(deadline) {
			b.Fatalf("tollgate serve did not come up: %v\n%s", err, p.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !offersBatch(b, p.url+"/"+route) {
		b.Fatalf("tollgate serve (%s) does not offer batch-settlement on /%s:\n%s", st, route, p.logs())
	}
	return chainURL, p
}

// usd writes atomic units of the 6-decimal token as USD.
func usd(atomic *big.Int) string {
	return new(big.Rat).SetFrac(atomic, big.NewInt(1_000_000)).FloatString(6)
}

// offersBatch reports whether the 402 of url offers batch-settlement.
func offersBatch(b *testing.B, url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	var req struct{ Accepts []struct{ Scheme string } }
	_ = json.Unmarshal(raw, &req)
	return slices.ContainsFunc(req.Accepts, func(a struct{ Scheme string }) bool { return a.Scheme == "batch-settlement" })
}

// startOfficial runs server.mjs on the chain, serving /route at price
// and announcing deposit as its minimum deposit.
func startOfficial(b *testing.B, dir, chainURL string, price, deposit *big.Int) *proc {
	cmd := exec.Command("node", filepath.Join(dir, "server.mjs"), chainURL, "127.0.0.1:0", "/"+route, price.String(), deposit.String())
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p := start(b, cmd, true, 5*time.Second)
	line, err := readLine(bufio.NewReader(stdout), 60*time.Second)
	var ready struct{ URL string }
	if err != nil || json.Unmarshal(line, &ready) != nil || ready.URL == "" {
		b.Fatalf("official server did not start: %v %q\n%s", err, line, p.logs())
	}
	p.url = ready.URL
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if !offersBatch(b, p.url+"/"+route) {
		b.Fatalf("the official server does not offer batch-settlement:\n%s", p.logs())
	}
	return p
}

// readLine reads one line from r within d.
func readLine(r *bufio.Reader, d time.Duration) ([]byte, error) {
	type res struct {
		line []byte
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		line, err := r.ReadBytes('\n')
		ch <- res{bytes.TrimSpace(line), err}
	}()
	select {
	case x := <-ch:
		if x.err != nil && len(x.line) == 0 {
			return nil, x.err
		}
		return x.line, nil
	case <-time.After(d):
		return nil, fmt.Errorf("no answer within %s", d)
	}
}

// driver is a load whose payers have deposited: run makes n voucher
// calls per payer, all payers at once.
type driver interface {
	run(b *testing.B, n int) *result
	cpu() float64 // CPU seconds the load generator has used so far
	close()
}

// result is one round of a driver.
type result struct {
	Calls    int
	WallMs   float64
	Requests int
	Failed   int
	Errors   []string
	LatUs    []int64
	// CPU seconds spent during the round: by the server (with its
	// PostgreSQL), by the load generator, by the whole machine (busy, all
	// cores; total: busy or not), and by everything else.
	serverCPU, clientCPU, machineBusy, machineTotal, others float64
}

// measure runs a round of n calls per payer, timing it and the CPU spent.
func measure(b *testing.B, n int, d driver, serverCPU func() float64) *result {
	s0, c0, self0 := serverCPU(), d.cpu(), rig.ProcCPU(os.Getpid())
	busy0, total0 := machineCPU()
	r := d.run(b, n)
	r.serverCPU, r.clientCPU = serverCPU()-s0, d.cpu()-c0
	busy, total := machineCPU()
	r.machineBusy, r.machineTotal = busy-busy0, total-total0
	// Everything else: this process's CPU (the devnet of the postgres
	// runs, the Go client) is not the others'.
	r.others = r.machineBusy - r.serverCPU - r.clientCPU
	if _, inProcess := d.(*goLoad); !inProcess {
		r.others -= rig.ProcCPU(os.Getpid()) - self0
	}
	if r.Failed > 0 {
		b.Errorf("%d of %d calls failed, e.g.:\n%s", r.Failed, r.Calls, strings.Join(r.Errors, "\n"))
	}
	return r
}

// loader is a load.mjs process.
type loader struct {
	p   *proc
	out *bufio.Reader
}

// startLoad runs load.mjs against url and waits for its deposits.
func startLoad(b *testing.B, dir, url, chainURL string, keys []*ecdsa.PrivateKey, deposit *big.Int, depositsAtOnce int) *loader {
	hexKeys := make([]string, len(keys))
	for i, k := range keys {
		hexKeys[i] = fmt.Sprintf("0x%x", crypto.FromECDSA(k))
	}
	cfg, _ := json.Marshal(map[string]any{"url": url, "rpcUrl": chainURL, "keys": hexKeys, "deposit": deposit.String(),
		"depositsAtOnce": depositsAtOnce, "mode": *clientMode})
	path := filepath.Join(b.TempDir(), "load.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(dir, "load.mjs"), path)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	l := &loader{p: start(b, cmd, true, 5*time.Second), out: bufio.NewReaderSize(stdout, 1<<20)}
	line, err := readLine(l.out, 2*time.Minute)
	var ready struct {
		Ready         bool
		DepositWallMs int
	}
	if err != nil || json.Unmarshal(line, &ready) != nil || !ready.Ready {
		b.Fatalf("load.mjs %s: the deposits did not complete: %v %q\n%s", url, err, line, l.p.logs())
	}
	b.Logf("%s: %d payers deposited %s each in %d ms (official client)", url, len(keys), deposit, ready.DepositWallMs)
	return l
}

func (l *loader) close()       { _ = l.p.stdin.Close() }
func (l *loader) cpu() float64 { return l.p.cpu() }

func (l *loader) run(b *testing.B, n int) *result {
	if _, err := fmt.Fprintf(l.p.stdin, "go %d\n", n); err != nil {
		b.Fatalf("load.mjs: %v\n%s", err, l.p.logs())
	}
	line, err := readLine(l.out, 10*time.Minute)
	var r result
	if err != nil || json.Unmarshal(line, &r) != nil {
		b.Fatalf("load.mjs: %v %.300q\n%s", err, line, l.p.logs())
	}
	return &r
}

// goLoad pays from this process with Tollgate's client, one
// batch.Session per payer.
type goLoad struct {
	url    string
	c      *http.Client
	payers []*goPayer
}

type goPayer struct {
	s        *batch.Session
	entry    payment.RequirementsV2
	resource *payment.ResourceV2
	price    *big.Int
}

// startGoLoad reads url's 402 and makes every payer's first call (its
// deposit: the entry's minDeposit), depositsAtOnce at a time.
func startGoLoad(b *testing.B, url string, keys []*ecdsa.PrivateKey, depositsAtOnce int) *goLoad {
	g := &goLoad{url: url, c: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * payers}, Timeout: time.Minute}}
	b.Cleanup(g.c.CloseIdleConnections)
	resp, err := g.c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	var req payment.RequiredV2
	if err := json.Unmarshal(raw, &req); err != nil {
		b.Fatalf("%s: PAYMENT-REQUIRED: %v", url, err)
	}
	i := slices.IndexFunc(req.Accepts, func(e payment.RequirementsV2) bool { return e.Scheme == batch.Scheme })
	if i < 0 {
		b.Fatalf("%s: no batch-settlement entry", url)
	}
	price, _ := new(big.Int).SetString(req.Accepts[i].Amount, 10)
	for _, k := range keys {
		g.payers = append(g.payers, &goPayer{s: &batch.Session{Payer: batch.Payer{Key: k,
			Escrow: batch.Escrow{ChainID: big.NewInt(devnet.ChainID), Address: batch.EscrowAddress}}},
			entry: req.Accepts[i], resource: &req.Resource, price: price})
	}
	start := time.Now()
	sem := make(chan struct{}, max(1, depositsAtOnce))
	errs := make(chan string, len(g.payers))
	for _, p := range g.payers {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- g.call(p, true)
		}()
	}
	for range g.payers {
		if why := <-errs; why != "" {
			b.Fatalf("%s: deposit call: %s", url, why)
		}
	}
	b.Logf("%s: %d payers deposited %s each in %d ms (Go client)", url, len(keys), g.payers[0].s.Balance, time.Since(start).Milliseconds())
	return g
}

// call makes p's next paid call and returns "" or why it failed.
func (g *goLoad) call(p *goPayer, wantDeposit bool) string {
	env, err := p.s.Envelope(p.entry, p.resource, big.NewInt(devnet.ChainID), time.Now())
	if err != nil {
		return err.Error()
	}
	req, _ := http.NewRequest(http.MethodGet, g.url, nil)
	req.Header.Set(payment.HeaderPaymentV2, env)
	resp, err := g.c.Do(req)
	if err != nil {
		return err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var settle payment.SettleResponse
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentResponseV2))
	_ = json.Unmarshal(raw, &settle)
	switch {
	case resp.StatusCode != http.StatusOK:
		pr, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
		return fmt.Sprintf("status %d %.200s %.200s", resp.StatusCode, pr, body)
	case !json.Valid(body):
		return fmt.Sprintf("body not JSON: %.200s", body)
	case !settle.Success:
		return fmt.Sprintf("PAYMENT-RESPONSE not a success: %.300s", raw)
	case wantDeposit != (settle.Transaction != ""):
		return fmt.Sprintf("want a deposit %v, got transaction %q", wantDeposit, settle.Transaction)
	}
	if err := p.s.Settled(settle, p.price); err != nil {
		return err.Error()
	}
	return ""
}

func (g *goLoad) close()       {}
func (g *goLoad) cpu() float64 { return rig.ProcCPU(os.Getpid()) }

func (g *goLoad) run(b *testing.B, n int) *result {
	r := &result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, p := range g.payers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				t := time.Now()
				why := g.call(p, false)
				lat := time.Since(t).Microseconds()
				mu.Lock()
				r.Calls++
				r.Requests++
				r.LatUs = append(r.LatUs, lat)
				if why != "" {
					r.Failed++
					if len(r.Errors) < 5 {
						r.Errors = append(r.Errors, why)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.WallMs = float64(time.Since(start).Microseconds()) / 1000
	return r
}

func (r *result) rate() float64 { return float64(r.Calls) / (r.WallMs / 1000) }

// report reports, for each server, the median calls/s of its rounds,
// p50 and p99 of all its calls, and the server's and the client's CPU a
// call; then the median of the rounds' Tollgate/official ratios of
// calls/s, the official server's CPU a call over Tollgate's, and the CPU
// the rest of the machine took (per cent of all cores).
func report(b *testing.B, servers []*server, rs [][]*result) {
	var others, total float64
	for i, srv := range servers {
		var lat []int64
		var calls int
		var serverCPU, clientCPU float64
		for _, r := range rs[i] {
			lat = append(lat, r.LatUs...)
			calls += r.Calls
			serverCPU += r.serverCPU
			clientCPU += r.clientCPU
			others += r.others
			total += r.machineTotal
		}
		slices.Sort(lat)
		pct := func(p float64) float64 {
			if len(lat) == 0 {
				return 0
			}
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1000
		}
		b.ReportMetric(median(rs[i], (*result).rate), srv.name+"-calls/s")
		b.ReportMetric(pct(0.50), srv.name+"-p50-ms")
		b.ReportMetric(pct(0.99), srv.name+"-p99-ms")
		if calls > 0 {
			b.ReportMetric(serverCPU*1000/float64(calls), srv.name+"-cpu-ms/call")
			b.ReportMetric(clientCPU*1000/float64(calls), srv.name+"-client-cpu-ms/call")
		}
	}
	pairs := make([]float64, len(rs[0]))
	for k := range pairs {
		pairs[k] = rs[0][k].rate() / rs[1][k].rate()
	}
	slices.Sort(pairs)
	b.ReportMetric(pairs[len(pairs)/2], "tollgate/official")
	if c := cpuPerCall(rs[0]); c > 0 {
		b.ReportMetric(cpuPerCall(rs[1])/c, "cpu-official/tollgate")
	}
	if total > 0 {
		b.ReportMetric(100*others/total, "others-cpu-%")
	}
	for i, srv := range servers {
		for k, r := range rs[i] {
			b.Logf("%s round %d: %.0f calls/s, %d calls, %.1f ms server CPU and %.1f ms client CPU a call, machine %.0f%% busy (others %.0f%%)",
				srv.name, k+1, r.rate(), r.Calls, 1000*r.serverCPU/float64(max(r.Calls, 1)), 1000*r.clientCPU/float64(max(r.Calls, 1)),
				100*r.machineBusy/max(r.machineTotal, 1e-9), 100*r.others/max(r.machineTotal, 1e-9))
		}
	}
}

// median returns the median of f over rs (the upper one of an even count).
func median(rs []*result, f func(*result) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// cpuPerCall is the server's CPU seconds a call over rs.
func cpuPerCall(rs []*result) float64 {
	var cpu float64
	var calls int
	for _, r := range rs {
		cpu += r.serverCPU
		calls += r.Calls
	}
	return cpu / float64(max(calls, 1))
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// machineCPU returns the busy and total CPU seconds of all cores so far
// (/proc/stat), zeros when it cannot say.
func machineCPU() (busy, total float64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		total += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy / clockTicks, total / clockTicks
}
