// Package outside measures from outside the server what a
// batch-settlement voucher call costs, counted in unpaid 402s on the same
// route (issue 32, item 3: "a voucher call costs at most 10 unpaid
// 402s"). It builds cmd/tollgate and runs `tollgate serve` as its own
// process on its embedded devnet, on loopback, with the rate limits off,
// once on SQLite (in a temporary data dir) and once on PostgreSQL (a
// throwaway database of pgtest's cluster). Against that one server, one
// phase after the other:
//
//  1. unpaid GET /regime with wrk (-t2 -c16, -outside.wrk long): the 402
//     challenges a second that wrk reports;
//  2. voucher calls: 16 payers, each on its own channel (opened by a
//     deposit call before anything is measured), each sending b.N
//     vouchers signed in advance (cumulative k × price) in one sequential
//     stream on one keep-alive connection, the 16 streams at once: voucher
//     calls a second over the whole phase, and the p50 and p99 of one call.
//
// Run it with:
//
//	bash .ci/install-wrk   # Debian's wrk, if missing
//	go test -run x -bench Outside -benchtime 2000x ./bench/outside/
//
// Each leaf (BenchmarkOutside/sqlite/vouchers, …/postgres/vouchers)
// reports:
//   - 402/s (wrk's), vouchers/s, and 402s/voucher, their ratio: the unpaid
//     402s served in the time of one voucher call, the figure;
//   - p50-ms and p99-ms of a voucher call, 402-p50-ms and 402-p99-ms of a
//     402 (wrk's);
//   - the CPU the server side spent a call in each phase, server-us/402
//     and server-us/voucher (the tollgate process's, its in-process devnet
//     included, plus its PostgreSQL cluster's), and their ratio
//     cpu-402s/voucher; the load generators' CPU a call, wrk-us/402 and
//     client-us/voucher;
//   - others-cpu-%: the share of the cores that neither the server side
//     nor the load generator took in the busier phase, i.e. other work on
//     the machine, which the rates do not account for;
//   - ns/op: the wall time per voucher call.
//
// b.N is the number of vouchers per payer. Each run of the leaf measures
// both phases (so the first, b.N = 1, runs wrk too); -count N makes N
// runs on the same server, each channel's deposit covering depositCalls
// vouchers over them all.
//
// The load generators share this machine's cores with the server: wrk
// costs much less CPU a request than the Go client does a voucher call,
// so the ratio of rates counts some client CPU against the vouchers;
// cpu-402s/voucher is the same ratio over the server's CPU alone.
//
// What is not default, and why: the rate limits are off (one loopback
// address stands for every client); no claim is sent while measuring
// (--batch-claim-threshold 0, --batch-claim-interval 5m: a claim is the
// claimer's background work, once for many vouchers); the whale scan
// pauses an hour between cycles (background work too); the announced
// minimum deposit is the deposit the payers make.
//
// -outside.tollgate=BIN measures that binary instead of building
// ./cmd/tollgate (one built from another commit, for a before and after).
// -outside.cpuprofile=DIR saves CPU profiles of the server during the
// voucher phase, one a second from its operator listener's /debug/pprof
// (DIR/STORE-N.pprof; `go tool pprof -top DIR/sqlite-*.pprof` merges
// them).
//
// It skips without wrk, unless TOLLGATE_REQUIRE_WRK=1 makes that a
// failure, and skips the PostgreSQL leaf without PostgreSQL, unless
// TOLLGATE_REQUIRE_POSTGRES=1. It has no Test functions: plain `go test`
// compiles it and runs nothing.
package outside

import (
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
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bench/rig"
	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store/pgtest"
)

var (
	wrkDuration = flag.Duration("outside.wrk", 5*time.Second, "how long wrk sends unpaid requests")
	cpuProfile  = flag.String("outside.cpuprofile", "", "directory for CPU profiles of the server during the voucher calls, one a second")
	tollgateBin = flag.String("outside.tollgate", "", "a tollgate binary to measure instead of building ./cmd/tollgate")
)

const (
	payers = 16
	route  = "regime" // a cheap handler: the regime of cached closes
	// depositCalls is how many prices each channel's deposit covers: the
	// voucher calls a payer can make over a leaf's runs. Two payers share
	// a funded test account's 1,000 USD: at most 10,000 calls of $0.05.
	depositCalls = 9900
	// requireWrkEnv turns a missing wrk into a failure.
	requireWrkEnv = "TOLLGATE_REQUIRE_WRK"
)

// BenchmarkOutside: see the package comment.
func BenchmarkOutside(b *testing.B) {
	wrk := wrkPath(b)
	bin := *tollgateBin
	if bin == "" {
		bin = rig.BuildTollgate(b)
	}
	price := rig.RoutePrice(b, route)
	for _, st := range []string{"sqlite", "postgres"} {
		b.Run(st, func(b *testing.B) {
			srv := startServe(b, bin, st, new(big.Int).Mul(price, big.NewInt(depositCalls)))
			ps := openChannels(b, srv)
			profiles := ""
			if *cpuProfile != "" {
				profiles = filepath.Join(*cpuProfile, st)
			}
			// Each run of the leaf (-count) measures both, the 402s
			// first, then the vouchers, on the same server and route:
			// never at the same time.
			b.Run("vouchers", func(b *testing.B) {
				b.StopTimer()
				unpaid := runWrk(b, srv, wrk, srv.URL+"/"+route)
				paid := sendVouchers(b, srv, ps, b.N, profiles)
				b.ReportMetric(float64(paid.wall.Nanoseconds())/float64(paid.calls), "ns/op")
				b.ReportMetric(unpaid.rate, "402/s")
				b.ReportMetric(paid.rate(), "vouchers/s")
				b.ReportMetric(unpaid.rate/paid.rate(), "402s/voucher")
				b.ReportMetric(ms(paid.quantile(0.50)), "p50-ms")
				b.ReportMetric(ms(paid.quantile(0.99)), "p99-ms")
				b.ReportMetric(ms(unpaid.p50), "402-p50-ms")
				b.ReportMetric(ms(unpaid.p99), "402-p99-ms")
				perVoucher := paid.serverCPU / float64(paid.calls)
				b.ReportMetric(unpaid.serverCPU*1e6, "server-us/402")
				b.ReportMetric(perVoucher*1e6, "server-us/voucher")
				b.ReportMetric(perVoucher/unpaid.serverCPU, "cpu-402s/voucher")
				b.ReportMetric(unpaid.clientCPU*1e6, "wrk-us/402")
				b.ReportMetric(paid.clientCPU/float64(paid.calls)*1e6, "client-us/voucher")
				b.ReportMetric(100*max(unpaid.others, paid.others), "others-cpu-%")
			})
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// wrkPath finds wrk; without it the benchmark skips, or fails when
// requireWrkEnv is 1.
func wrkPath(b *testing.B) string {
	path, err := exec.LookPath("wrk")
	if err == nil {
		return path
	}
	if os.Getenv(requireWrkEnv) == "1" {
		b.Fatalf("wrk is not installed and %s=1 (bash .ci/install-wrk)", requireWrkEnv)
	}
	b.Skipf("wrk is not installed: bash .ci/install-wrk (apt-get install wrk); %s=1 makes this a failure", requireWrkEnv)
	return ""
}

// server is one `tollgate serve`, stopped when the benchmark ends.
type server struct {
	*rig.Serve
	// cpu is the CPU seconds the server side has used so far: the
	// process's (the devnet runs in it) and its PostgreSQL cluster's.
	cpu func() float64
}

// startServe runs `tollgate serve` on its embedded devnet with store st
// (sqlite or postgres), announcing deposit as its minimum deposit, and
// waits until it is ready.
func startServe(b *testing.B, bin, st string, deposit *big.Int) *server {
	args := []string{"--rate-limit", "0", "--paid-rate-limit", "0",
		"--batch-claim-threshold", "0", "--batch-claim-interval", "5m",
		"--whale-interval", "1h",
		"--batch-min-deposit", usd(deposit)}
	var db string
	if st == "postgres" {
		db = pgtest.URL(b) // skips without PostgreSQL
		args = append(args, "--database", db)
	}
	s := &server{Serve: rig.StartServe(b, bin, args...)}
	pid := s.Pid
	s.cpu = func() float64 { return rig.ProcCPU(pid) }
	if db != "" {
		s.cpu = func() float64 { return rig.ProcCPU(pid) + rig.ClusterCPU(db) }
	}
	return s
}

// usd writes an amount of the devnet token's atomic units in USD.
func usd(atomic *big.Int) string {
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(devnet.TokenDecimals), nil)
	return new(big.Rat).SetFrac(atomic, unit).FloatString(devnet.TokenDecimals)
}

// unpaid is the wrk phase's result.
type unpaid struct {
	rate      float64       // 402s a second
	p50, p99  time.Duration // of one 402, as wrk times it
	serverCPU float64       // CPU seconds the server side spent a 402
	clientCPU float64       // CPU seconds wrk spent a 402
	others    float64       // share of the cores neither the server nor wrk took
}

var (
	wrkRate     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkTotal    = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: (\d+)`)
	wrkQuantile = regexp.MustCompile(`(?m)^\s+(50|99)%\s+(\S+)`)
)

// runWrk sends unpaid GETs to url with wrk, 16 connections on 2
// threads, and reads its figures. Every answer must be a 402: one GET
// before and one after say so, and wrk must count every answer as
// non-2xx, with no socket error.
func runWrk(b *testing.B, s *server, wrk, url string) unpaid {
	if code := rig.Get(url); code != http.StatusPaymentRequired {
		b.Fatalf("unpaid GET %s: %d, want 402", url, code)
	}
	cpu := meter(s)
	cmd := exec.Command(wrk, "-t2", "-c16", "-d"+wrkDuration.String(), "--latency", url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("wrk: %v\n%s", err, out)
	}
	wrkCPU := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	serverCPU, others := cpu(wrkCPU)
	text := string(out)
	if code := rig.Get(url); code != http.StatusPaymentRequired {
		b.Fatalf("unpaid GET %s after wrk: %d, want 402", url, code)
	}
	total, non2xx := submatch(wrkTotal, text), submatch(wrkNon2xx, text)
	if total == "" || total != non2xx || strings.Contains(text, "Socket errors") {
		b.Fatalf("wrk: want every answer a 402 and no socket error, got %s answers, %s non-2xx:\n%s", total, non2xx, text)
	}
	var u unpaid
	u.rate, _ = strconv.ParseFloat(submatch(wrkRate, text), 64)
	if u.rate <= 0 {
		b.Fatalf("wrk: no Requests/sec in:\n%s", text)
	}
	for _, m := range wrkQuantile.FindAllStringSubmatch(text, -1) {
		d, err := time.ParseDuration(m[2]) // wrk writes us, ms, s or m
		if err != nil {
			b.Fatalf("wrk latency %q: %v", m[2], err)
		}
		if m[1] == "50" {
			u.p50 = d
		} else {
			u.p99 = d
		}
	}
	n, _ := strconv.ParseFloat(total, 64)
	u.serverCPU, u.clientCPU, u.others = serverCPU/n, wrkCPU/n, others
	b.Logf("wrk: %.0f 402s/s, p50 %s, p99 %s; CPU a 402: server %.0f µs, wrk %.0f µs; others took %.0f%% of the cores",
		u.rate, u.p50, u.p99, 1e6*u.serverCPU, 1e6*u.clientCPU, 100*others)
	return u
}

func submatch(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// channel is one payer's channel to the server, opened by its deposit.
type channel struct {
	session  *batch.Session // Charged and Balance as the server last said
	terms    batch.Terms
	entry    payment.RequirementsV2
	resource payment.ResourceV2
}

// openChannels funds 16 fresh payers on the devnet and makes each one's
// first paid call, its deposit (the server's announced minimum deposit),
// all at once.
func openChannels(b *testing.B, s *server) []*channel {
	resp, err := http.Get(s.URL + "/" + route)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
	var required payment.RequiredV2
	if err := json.Unmarshal(raw, &required); err != nil {
		b.Fatalf("PAYMENT-REQUIRED of /%s: %v", route, err)
	}
	i := slices.IndexFunc(required.Accepts, func(e payment.RequirementsV2) bool { return e.Scheme == batch.Scheme })
	if i < 0 {
		b.Fatalf("/%s does not offer batch-settlement:\n%s", route, s.Tail())
	}
	entry := required.Accepts[i]
	var minDeposit string
	_ = json.Unmarshal(entry.Extra.Field("minDeposit"), &minDeposit)
	deposit, ok := new(big.Int).SetString(minDeposit, 10)
	if !ok {
		b.Fatalf("extra.minDeposit %q", minDeposit)
	}
	terms, err := batch.TermsOf(entry, big.NewInt(devnet.ChainID))
	if err != nil {
		b.Fatal(err)
	}
	keys := rig.FundPayers(b, s.Chain, payers, deposit, []uint32{0, 2, 3, 4, 5, 6, 7, 8})
	cs := make([]*channel, len(keys))
	errs := make(chan error, len(keys))
	start := time.Now()
	for i, k := range keys {
		cs[i] = &channel{session: &batch.Session{Payer: batch.Payer{Key: k, Escrow: terms.Escrow}}, terms: terms, entry: entry,
			resource: required.Resource}
		go func() { errs <- cs[i].deposit(s.URL + "/" + route) }()
	}
	for range keys {
		if err := <-errs; err != nil {
			b.Fatalf("deposit call: %v", err)
		}
	}
	b.Logf("%d payers deposited %s each in %d ms", len(keys), deposit, time.Since(start).Milliseconds())
	return cs
}

// deposit makes c's first paid call: a deposit and its first voucher.
func (c *channel) deposit(url string) error {
	env, err := c.session.Envelope(c.entry, &c.resource, big.NewInt(devnet.ChainID), time.Now())
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set(payment.HeaderPaymentV2, env)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, body)
	}
	settled, err := settleResponse(resp.Header.Get(payment.HeaderPaymentResponseV2))
	if err != nil {
		return err
	}
	if settled.Transaction == "" {
		return fmt.Errorf("the first call made no deposit: %+v", settled)
	}
	return c.session.Settled(settled, c.terms.Price)
}

func settleResponse(header string) (payment.SettleResponse, error) {
	var r payment.SettleResponse
	raw, err := base64.StdEncoding.DecodeString(header)
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	if err != nil || !r.Success {
		return r, fmt.Errorf("PAYMENT-RESPONSE %q is not a success (%v)", raw, err)
	}
	return r, nil
}

// paid is the voucher phase's result.
type paid struct {
	calls     int
	wall      time.Duration
	latencies []time.Duration // sorted
	serverCPU float64         // CPU seconds the server side spent
	clientCPU float64         // CPU seconds this process (the payers) spent
	others    float64         // share of the cores neither the server nor this process took
}

func (p *paid) rate() float64 { return float64(p.calls) / p.wall.Seconds() }

func (p *paid) quantile(q float64) time.Duration {
	return p.latencies[min(len(p.latencies)-1, int(q*float64(len(p.latencies))))]
}

// sendVouchers has every channel send n vouchers signed in advance, each
// channel in one sequential stream on its own keep-alive connection, all
// channels at once. Every call must be a paid 200 with a
// PAYMENT-RESPONSE, and each channel's last one must say the server has
// charged all n. With profiles set, the server's CPU profile is saved
// while the calls run (profiles-N.pprof).
func sendVouchers(b *testing.B, s *server, cs []*channel, n int, profiles string) *paid {
	url := s.URL + "/" + route
	// Signed before the clock starts, as a payer's would be by the time
	// it sends them: the load generator shares the server's cores.
	signed := make([][]string, len(cs))
	for i, c := range cs {
		room := new(big.Int).Sub(c.session.Balance, c.session.Charged)
		if room.Cmp(new(big.Int).Mul(c.terms.Price, big.NewInt(int64(n)))) < 0 {
			b.Fatalf("the deposit covers %s more vouchers a payer, not %d: run a smaller -benchtime or -count", new(big.Int).Div(room, c.terms.Price), n)
		}
		for k := 1; k <= n; k++ {
			cumulative := new(big.Int).Add(c.session.Charged, new(big.Int).Mul(c.terms.Price, big.NewInt(int64(k))))
			inner, err := c.session.Payer.Payload(c.terms, batch.TypeVoucher, cumulative, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			env, err := payment.EncodeHeader(map[string]any{"x402Version": 2, "accepted": c.entry, "payload": json.RawMessage(inner),
				"resource": c.resource})
			if err != nil {
				b.Fatal(err)
			}
			signed[i] = append(signed[i], env)
		}
	}
	latencies := make([][]time.Duration, len(cs))
	last := make([]string, len(cs)) // each channel's last PAYMENT-RESPONSE
	var failed sync.Once
	var wg sync.WaitGroup
	stopProfiles := profileServer(b, s, profiles)
	self0, cpu := selfCPU(), meter(s)
	b.StartTimer()
	start := time.Now()
	for i := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute} // one connection: the calls are sequential
			defer c.CloseIdleConnections()
			for _, env := range signed[i] {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				req.Header.Set(payment.HeaderPaymentV2, env)
				t0 := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					failed.Do(func() { b.Errorf("voucher call: %v", err) })
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				latencies[i] = append(latencies[i], time.Since(t0))
				last[i] = resp.Header.Get(payment.HeaderPaymentResponseV2)
				if resp.StatusCode != http.StatusOK || last[i] == "" {
					failed.Do(func() {
						pr, _ := base64.StdEncoding.DecodeString(resp.Header.Get(payment.HeaderPaymentRequired))
						b.Errorf("voucher call: status %d, PAYMENT-RESPONSE %q, PAYMENT-REQUIRED %.300s, body %.200s", resp.StatusCode, last[i], pr, body)
					})
					return
				}
			}
		}()
	}
	wg.Wait()
	p := &paid{wall: time.Since(start)}
	b.StopTimer()
	p.clientCPU = selfCPU() - self0
	p.serverCPU, p.others = cpu(p.clientCPU)
	stopProfiles()
	if b.Failed() {
		b.FailNow()
	}
	for i, c := range cs {
		want := new(big.Int).Add(c.session.Charged, new(big.Int).Mul(c.terms.Price, big.NewInt(int64(n))))
		if got := chargedCumulative(last[i]); got != want.String() {
			b.Fatalf("payer %d: the server has charged %s in all, want %s", i, got, want)
		}
		c.session.Charged = want
		p.latencies = append(p.latencies, latencies[i]...)
	}
	p.calls = len(p.latencies)
	slices.Sort(p.latencies)
	return p
}

// chargedCumulative is the channel's charged total in a voucher call's
// PAYMENT-RESPONSE (extra.channelState), "" if it has none.
func chargedCumulative(header string) string {
	raw, _ := base64.StdEncoding.DecodeString(header)
	var r struct {
		Success bool `json:"success"`
		Extra   struct {
			ChannelState batch.ChannelState `json:"channelState"`
		} `json:"extra"`
	}
	if json.Unmarshal(raw, &r) != nil || !r.Success {
		return ""
	}
	return r.Extra.ChannelState.ChargedCumulativeAmount
}

// profileServer saves one-second CPU profiles of the server into
// prefix-N.pprof until the returned function is called, which waits for
// the last one. An empty prefix saves none.
func profileServer(b *testing.B, s *server, prefix string) func() {
	if prefix == "" {
		return func() {}
	}
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		b.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get(s.Admin + "/debug/pprof/profile?seconds=1")
			if err != nil {
				b.Errorf("profile: %v", err)
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err := os.WriteFile(fmt.Sprintf("%s-%d.pprof", prefix, k), raw, 0o644); err != nil {
				b.Errorf("profile: %v", err)
				return
			}
		}
	}()
	return func() { close(stop); <-done }
}

// selfCPU is the CPU seconds this process (the Go load generator) has
// used so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// meter starts measuring a phase's CPU; the function it returns takes
// the CPU seconds the load generator spent in the phase and returns the
// server side's, and the share of the cores that neither took.
func meter(s *server) func(client float64) (srv, others float64) {
	srv0, busy0, start := s.cpu(), machineBusy(), time.Now()
	return func(client float64) (float64, float64) {
		srv := s.cpu() - srv0
		others := machineBusy() - busy0 - srv - client
		return srv, max(0, others) / (time.Since(start).Seconds() * float64(runtime.NumCPU()))
	}
}

// machineBusy is the busy CPU seconds of all cores so far (/proc/stat:
// everything but idle and iowait), 0 when it cannot say.
func machineBusy() float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range fields[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100
