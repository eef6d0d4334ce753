package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/whales"
)

func startServeB(b *testing.B) *served { return startServe(b, nil, nil) }

// startServe runs serve in process with a throwaway data dir for the rest
// of the test.
func startServe(t testing.TB, args []string, env map[string]string) *served {
	t.Helper()
	s, err := serveFor(t, append([]string{"--data-dir", t.TempDir()}, args...), env)
	if err != nil {
		t.Fatalf("serve did not start: %v", err)
	}
	return s
}

// TestRugCheckScenario: every devnet scenario contract gets the verdict
// docs/rules.md predicts; an EOA is refused; and a second process pointed
// at the first one's devnet with --chain-rpc gives identical answers.
func TestRugCheckScenario(t *testing.T) {
	t.Parallel()
	first := startServe(t, nil, nil)
	cl := tollgatev1.NewAnalyticsServiceClient(first.conn)
	proj, err := tollgatev1.NewDiscoveryServiceClient(first.conn).GetProject(context.Background(), &tollgatev1.GetProjectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var scenario []*tollgatev1.DevnetContract
	roles := map[string]string{}
	for _, c := range proj.GetDevnetContracts() {
		roles[c.GetName()] = c.GetRole()
		if c.GetExpect() != "" {
			scenario = append(scenario, c)
		}
	}
	if len(scenario) != 22 || !strings.Contains(roles["dex-factory"], "factory") || !strings.Contains(roles["mcat"], "rug") ||
		!strings.Contains(roles["v4-pool-manager"], "PoolManager") || !strings.Contains(roles["vapr"], "rug; v4 pool 0x") {
		t.Fatalf("devnet contracts %v", proj.GetDevnetContracts())
	}
	wantFlags := map[string][]string{
		"clean":                 {"owner-renounced"},
		"mintable":              {"mintable", "owner-active"},
		"blacklist":             {"blacklist", "owner-active"},
		"pausable":              {"owner-active", "pausable"},
		"fee":                   {"fee-setter", "owner-active"},
		"bytes32-name":          {"no-owner"},
		"proxy":                 {"owner-active", "proxy", "upgradeable"},
		"clone":                 {"owner-active", "proxy"},
		"beacon":                {"owner-active", "proxy", "upgradeable"},
		"transparent":           {"owner-active", "proxy", "upgradeable"},
		"transparent-renounced": {"owner-active", "proxy", "upgrade-renounced"},
		"roles":                 {"mintable", "no-owner", "pausable", "role-based-access", "roles-held"},
		"roles-renounced":       {"mintable", "no-owner", "pausable", "role-based-access"},
		"roles-plain":           {"mintable", "no-owner", "pausable", "role-based-access", "roles-held"},
		"legacy-proxy":          {"blacklist", "mintable", "owner-active", "pausable", "proxy", "upgradeable"},
		"limit":                 {"owner-active", "tx-limits"},
		"limit-floor":           {"owner-active", "tx-limit-floor", "tx-limits"},
		"uniswap-v2-pair":       {"no-owner"},
		"custom-slot-proxy":     {"owner-active", "unresolved-proxy"},
	}
	key, _ := devnet.DeriveKey(devnet.Mnemonic, 7)
	second := startServe(t, []string{"--chain-rpc", first.devnetRPC,
		"--pay-to", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
		"--dex-factories", "v2:" + byRole(proj, "dex-factory") + ",v4:" + byRole(proj, "v4-pool-manager"), "--quote-tokens", byRole(proj, "weth"), "--whale-confirmations", "0"}, map[string]string{"TOLLGATE_FACILITATOR_KEY": fmt.Sprintf("%x", crypto.FromECDSA(key))})
	cl2 := tollgatev1.NewAnalyticsServiceClient(second.conn)
	for _, c := range scenario {
		r, err := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: c.GetAddress()})
		if c.GetExpect() == devnet.ExpectRefused {
			// Not a token: refused like an EOA (before any charge).
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "without ERC-20 behaviour") {
				t.Errorf("%s: %v %v", c.GetName(), r.GetVerdict(), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.GetName(), err)
		}
		got := map[tollgatev1.Verdict]string{1: "PASS", 2: "WARN", 3: "FAIL"}[r.GetVerdict()]
		if got != c.GetExpect() || fmt.Sprint(r.GetFlags()) != fmt.Sprint(wantFlags[c.GetName()]) {
			t.Errorf("%s: %s %v, want %s %v", c.GetName(), got, r.GetFlags(), c.GetExpect(), wantFlags[c.GetName()])
		}
		if r.GetChecks().GetActivity().GetTransfers() == 0 || r.GetChecks().GetCodeHash() == "" {
			t.Errorf("%s: checks %v", c.GetName(), r.GetChecks())
		}
		// Provenance: the block read, and a rule per flag.
		ck := r.GetChecks()
		if ck.GetBlock() == 0 || ck.GetBlock() != ck.GetActivity().GetToBlock() || len(ck.GetRules()) != len(r.GetFlags()) {
			t.Errorf("%s: block %d, %d rules for %d flags", c.GetName(), ck.GetBlock(), len(ck.GetRules()), len(r.GetFlags()))
		}
		for i, fr := range ck.GetRules() {
			if fr.GetFlag() != r.GetFlags()[i] || !strings.HasPrefix(fr.GetRule(), "RC-") || fr.GetEvidence() == "" {
				t.Errorf("%s: rule %v", c.GetName(), fr)
			}
		}
		if p := ck.GetProxy(); p != nil && p.GetKind() != tollgatev1.ProxyKind_PROXY_KIND_EIP1167 && p.GetKind() != tollgatev1.ProxyKind_PROXY_KIND_UNRESOLVED &&
			p.GetImplementationCodeHash() == "" {
			t.Errorf("%s: no implementation code hash: %v", c.GetName(), p)
		}
		r2, err := cl2.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: c.GetAddress()})
		if err != nil {
			t.Fatal(err)
		}
		r.AsOf, r2.AsOf = "", ""
		// The head moves between the two calls: a block may land between them
		// (a cold check of the V2 pair's code takes about 100 ms).
		r.Checks.Activity, r2.Checks.Activity = nil, nil
		r.Checks.Block, r2.Checks.Block = 0, 0
		for _, h := range []*tollgatev1.HolderShares{r.GetChecks().GetHolders(), r2.GetChecks().GetHolders()} {
			if h != nil {
				h.Note = numbers.ReplaceAllString(h.Note, "N") // it names the blocks it read
			}
		}
		if !proto.Equal(r, r2) {
			t.Errorf("%s: the --chain-rpc process answers differently:\n%v\n%v", c.GetName(), r, r2)
		}
	}
	byName := map[string]string{}
	for _, c := range scenario {
		byName[c.GetName()] = c.GetAddress()
	}
	b32, err := cl.GetToken(context.Background(), &tollgatev1.GetTokenRequest{Addr: byName["bytes32-name"]})
	if err != nil || b32.GetToken().GetName() != "Bytes32 Token" || b32.GetToken().GetSymbol() != "B32" || b32.GetToken().GetDecimals() != 18 ||
		b32.GetToken().GetTotalSupply() != "1000000000000000000000000" {
		t.Errorf("bytes32 token: %v %v", b32, err)
	}
	proxy, err := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byName["proxy"]})
	if err != nil || proxy.GetName() != "Proxy Token" || proxy.GetChecks().GetProxy().GetKind() != tollgatev1.ProxyKind_PROXY_KIND_EIP1967 ||
		proxy.GetChecks().GetProxy().GetAdmin().GetValue() == "" {
		t.Errorf("proxy: %v %v", proxy, err)
	}
	clone, _ := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byName["clone"]})
	if clone.GetChecks().GetProxy().GetKind() != tollgatev1.ProxyKind_PROXY_KIND_EIP1167 || clone.GetChecks().GetProxy().GetImplementation() != proxy.GetChecks().GetProxy().GetImplementation() {
		t.Errorf("clone: %v", clone.GetChecks().GetProxy())
	}
	// A forwarder through a slot of its own: unresolved, named as such.
	custom, _ := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byName["custom-slot-proxy"]})
	if custom.GetChecks().GetProxy().GetKind() != tollgatev1.ProxyKind_PROXY_KIND_UNRESOLVED || custom.GetVerdict() == tollgatev1.Verdict_VERDICT_PASS ||
		!strings.Contains(custom.GetChecks().GetRules()[1].GetEvidence(), "storage slot 0x") {
		t.Errorf("custom slot proxy: %v %v", custom.GetVerdict(), custom.GetChecks())
	}
	// Families: who can upgrade, who holds roles, the legacy layout.
	wantUpgrader := map[string]string{"beacon": "beacon-owner", "transparent": "admin-contract-owner", "transparent-renounced": "renounced",
		"proxy": "admin-account", "legacy-proxy": "admin-account", "clone": "immutable"}
	for name, src := range wantUpgrader {
		r, err := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byName[name]})
		p := r.GetChecks().GetProxy()
		if err != nil || p.GetUpgraderSource() != src || (src != "renounced" && src != "immutable") != (p.GetUpgrader() != nil) {
			t.Errorf("%s: upgrader %v (%s), want %s; %v", name, p.GetUpgrader(), p.GetUpgraderSource(), src, err)
		}
		if name == "beacon" || name == "transparent" {
			if p.GetUpgrader().GetValue() != devnetAccount(t, devnet.ScenarioAccount) {
				t.Errorf("%s: upgrader %s, want the scenario account (an EOA)", name, p.GetUpgrader().GetValue())
			}
		}
	}
	legacy, _ := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byName["legacy-proxy"]})
	if legacy.GetChecks().GetProxy().GetKind() != tollgatev1.ProxyKind_PROXY_KIND_ZEPPELINOS || legacy.GetName() != "Legacy USD" ||
		legacy.GetChecks().GetProxy().GetAdmin().GetValue() != devnetAccount(t, devnet.LegacyAdminAccount) {
		t.Errorf("legacy proxy: %v", legacy.GetChecks().GetProxy())
	}
	// By name and by effect: FiatToken's masterMinter, blacklister and
	// pauser are guards of their own slots (a hidden owner each).
	var implClasses, effectClasses []tollgatev1.CapabilityClass
	for _, c := range legacy.GetChecks().GetCapabilities() {
		switch {
		case c.GetSource() == "implementation" && c.GetEffect() == "":
			implClasses = append(implClasses, c.GetClass())
		case c.GetSource() == "implementation":
			effectClasses = append(effectClasses, c.GetClass())
			if !strings.Contains(c.GetEffect(), "; callable when ") {
				t.Errorf("legacy proxy: effect %q names no guard", c.GetEffect())
			}
		}
	}
	if fmt.Sprint(implClasses) != "[CAPABILITY_CLASS_MINT CAPABILITY_CLASS_BLACKLIST CAPABILITY_CLASS_PAUSE]" {
		t.Errorf("legacy proxy: implementation capabilities %v", implClasses)
	}
	if !slices.Contains(effectClasses, tollgatev1.CapabilityClass_CAPABILITY_CLASS_MINT) || !slices.Contains(effectClasses, tollgatev1.CapabilityClass_CAPABILITY_CLASS_BLACKLIST) {
		t.Errorf("legacy proxy: capabilities by effect %v", effectClasses)
	}
	for name, want := range map[string]string{"roles": "enumerable", "roles-renounced": "enumerable", "roles-plain": "events"} {
		r, _ := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byName[name]})
		held := 0
		for _, rh := range r.GetChecks().GetRoles() {
			if rh.GetSource() != want {
				t.Errorf("%s: role %v", name, rh)
			}
			if rh.GetHeld() {
				held++
			}
		}
		if (name == "roles-renounced") != (held == 0) || len(r.GetChecks().GetRoles()) < 3 {
			t.Errorf("%s: roles %v", name, r.GetChecks().GetRoles())
		}
	}

	// An EOA is not a token: a clear 400-class refusal, never a verdict.
	_, err = cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("EOA: %v", err)
	}
	resp, err := http.Get(first.base + "/rugcheck/0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	if err != nil || resp.StatusCode != 402 {
		t.Errorf("unpaid REST rugcheck: %v %v", resp, err)
	}

	// The whale shortlist of both processes, once their first scans are
	// done: the devnet's smart trader leads, and the lists are identical.
	w1, w2 := waitWhales(t, cl), waitWhales(t, cl2)
	if w1.GetTokensScanned() != 5 || len(w1.GetWallets()) == 0 ||
		w1.GetWallets()[0].GetAddress() != devnetAccount(t, devnet.SmartTrader) {
		t.Errorf("whales: %v", w1)
	}
	w1.AsOf, w2.AsOf = "", ""
	if !proto.Equal(w1, w2) {
		t.Errorf("whales differ through --chain-rpc:\n%v\n%v", w1, w2)
	}
	// History: a launch whose pool collapsed in the whale scan's window is
	// at least WARN with pool-collapsed, whatever its code, with its venue
	// (VAPR's pool is its V4 pool id); the live one is not.
	for _, name := range []string{"mcat", "rdog", "burn", "eddy", "vapr"} {
		r, err := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: byRole(proj, name)})
		collapsed := slices.Contains(r.GetFlags(), "pool-collapsed")
		want := map[string]string{"mcat": "liquidity", "rdog": "liquidity", "burn": "drawdown", "vapr": "liquidity"}[name]
		venue, poolLen := "v2", 42
		if name == "vapr" {
			venue, poolLen = "v4", 66
		}
		pc := r.GetChecks().GetPoolCollapse()
		if err != nil || collapsed != (want != "") || pc.GetKind() != want || (collapsed && (r.GetVerdict() == tollgatev1.Verdict_VERDICT_PASS ||
			pc.GetVenue() != venue || len(pc.GetPool()) != poolLen || !strings.Contains(roles[name], pc.GetPool()))) {
			t.Errorf("%s: %v %v %v %v", name, r.GetVerdict(), r.GetFlags(), pc, err)
		}
		// The deployer's record: the scenario account launched every one
		// of them and pulled MCAT's and RDOG's liquidity within the week,
		// so each launch, EDDY the live one too, carries its record.
		dep := r.GetChecks().GetDeployer()
		if dep.GetAddress().GetValue() != devnetAccount(t, devnet.ScenarioAccount) || !dep.GetPulledRecently() || !slices.Contains(r.GetFlags(), "deployer-pulled") {
			t.Errorf("%s: deployer %v (pulled recently %v), flags %v", name, dep.GetAddress(), dep.GetPulledRecently(), r.GetFlags())
		}
	}
	// Not a token, through the gate with a payment: 400, and nothing settled.
	var refusedOut, refusedErr bytes.Buffer
	err = run(context.Background(), []string{"pay", first.base + "/rugcheck/" + byName["proxy-admin"]}, envOf(nil), &refusedOut, &refusedErr)
	if err == nil || !strings.Contains(err.Error(), "HTTP 400") || strings.Contains(refusedErr.String(), "settlement:") ||
		!strings.Contains(refusedOut.String(), "without ERC-20 behaviour") {
		t.Errorf("paid rugcheck of a proxy admin: %v\n%s\n%s", err, refusedOut.String(), refusedErr.String())
	}
	// Paid over REST with x402, as a caller does.
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"pay", first.base + "/whales"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("pay /whales: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `"tokensScanned":5`) || !strings.Contains(out.String(), `"address":"`+devnetAccount(t, devnet.SmartTrader)+`"`) ||
		!strings.Contains(errOut.String(), "settlement: success=true") {
		t.Errorf("paid /whales: %s / %s", out.String(), errOut.String())
	}
}

// waitWhales polls /whales until the first scan completes (Unavailable
// before).
func waitWhales(t *testing.T, cl tollgatev1.AnalyticsServiceClient) *tollgatev1.GetWhalesResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w, err := cl.GetWhales(context.Background(), &tollgatev1.GetWhalesRequest{})
		if err == nil {
			return w
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("whales: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func devnetAccount(t *testing.T, i uint32) string {
	t.Helper()
	key, err := devnet.DeriveKey(devnet.Mnemonic, i)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(key.PublicKey).Hex()
}

// BenchmarkRugCheckHot is a rug check of an already-seen contract (its
// bytecode analysis cached by code hash) through the gRPC server against
// the devnet: the state batch with the logs asked in parallel (the head is
// known), then the second batch if the contract needs one, the rules and
// the encoding. Reported: p50 and p99 (target: p50 at most 1 ms).
// BenchmarkRugCheckCold reports the round trips of a cold one.
func BenchmarkRugCheckHot(b *testing.B) {
	r := startServeB(b)
	cl := tollgatev1.NewAnalyticsServiceClient(r.conn)
	proj, err := tollgatev1.NewDiscoveryServiceClient(r.conn).GetProject(context.Background(), &tollgatev1.GetProjectRequest{})
	if err != nil {
		b.Fatal(err)
	}
	addr := proj.GetDevnetContracts()[1].GetAddress()
	rc, err := rpc.Dial(r.devnetRPC)
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	cc, _ := chain.New(rc, chain.DefaultConfig())
	direct := service.NewAnalytics(service.Sources{Chain: cc})
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"service", func() error {
			_, err := direct.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: addr})
			return err
		}},
		{"grpc", func() error {
			_, err := cl.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: addr})
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			_ = c.call() // warm: code hash seen, head known
			var durations []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := c.call(); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(start))
			}
			slices.Sort(durations)
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

func byRole(proj *tollgatev1.GetProjectResponse, name string) string {
	for _, c := range proj.GetDevnetContracts() {
		if c.GetName() == name {
			return c.GetAddress()
		}
	}
	return ""
}

// roundTripsBefore are the cold rug check's round trips by family before
// issue 31 (docs/figures.md).
var roundTripsBefore = map[string]int64{"clean": 2, "transparent": 2, "legacy-proxy": 3, "roles": 2, "limit": 3, "beacon": 3, "eddy": 2}

// pairOf asks a V2-style factory for the pair of two tokens.
func pairOf(b *testing.B, url, factory, a, c string) common.Address {
	rc, err := rpc.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer rc.Close()
	data := append(crypto.Keccak256([]byte("getPair(address,address)"))[:4], common.LeftPadBytes(common.HexToAddress(a).Bytes(), 32)...)
	data = append(data, common.LeftPadBytes(common.HexToAddress(c).Bytes(), 32)...)
	var out hexutil.Bytes
	if err := rc.Call(&out, "eth_call", map[string]any{"to": factory, "data": hexutil.Bytes(data)}, "latest"); err != nil || len(out) != 32 {
		b.Fatalf("getPair: %v", err)
	}
	return common.BytesToAddress(out[12:])
}

// poolsOf is a whale scan that has published s.
type poolsOf struct{ s *whales.Snapshot }

func (p poolsOf) Snapshot() *whales.Snapshot { return p.s }

// BenchmarkWhales is /whales through the gRPC server, answered from the
// scan's snapshot (target: p50 at most 1 ms).
func BenchmarkWhales(b *testing.B) {
	r := startServeB(b)
	cl := tollgatev1.NewAnalyticsServiceClient(r.conn)
	for {
		_, err := cl.GetWhales(context.Background(), &tollgatev1.GetWhalesRequest{})
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var durations []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := cl.GetWhales(context.Background(), &tollgatev1.GetWhalesRequest{}); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds())/1000, "p99-ms")
}

// countingRPC counts JSON-RPC requests (a batch is one).
type countingRPC struct {
	*rpc.Client
	n atomic.Int64
}

func (c *countingRPC) CallContext(ctx context.Context, result any, method string, args ...any) error {
	c.n.Add(1)
	return c.Client.CallContext(ctx, result, method, args...)
}

func (c *countingRPC) BatchCallContext(ctx context.Context, b []rpc.BatchElem) error {
	c.n.Add(1)
	return c.Client.BatchCallContext(ctx, b)
}

// BenchmarkRugCheckCold is the first rug check of a contract by a new
// server (no head seen, no bytecode analysis cached) for each family of
// the devnet scenario. Reported: JSON-RPC round trips per check (the
// published bound is 3: two batches, a third for a beacon proxy's
// implementation code; one batch more reads the guard fields of powers
// found by effect) and p50.
func BenchmarkRugCheckCold(b *testing.B) {
	r := startServeB(b)
	proj, err := tollgatev1.NewDiscoveryServiceClient(r.conn).GetProject(context.Background(), &tollgatev1.GetProjectRequest{})
	if err != nil {
		b.Fatal(err)
	}
	// EDDY, a launch the devnet trades on its V2-style pair: the trading
	// probes read a buy and a sale against it (the whale scan's pool).
	eddy, eddyPair := common.HexToAddress(byRole(proj, "eddy")), pairOf(b, r.devnetRPC, byRole(proj, "dex-factory"), byRole(proj, "eddy"), byRole(proj, "weth"))
	pools := poolsOf{&whales.Snapshot{Pools: map[common.Address][]whales.Pool{eddy: {{ID: eddyPair.Hex(), Holder: eddyPair, Venue: whales.UniswapV2}}}}}
	for _, name := range []string{"clean", "transparent", "legacy-proxy", "roles", "limit", "beacon", "eddy"} {
		addr := byRole(proj, name)
		b.Run(name, func(b *testing.B) {
			rc, err := rpc.Dial(r.devnetRPC)
			if err != nil {
				b.Fatal(err)
			}
			defer rc.Close()
			var durations []time.Duration
			var trips int64
			for b.Loop() {
				counting := &countingRPC{Client: rc}
				cc, _ := chain.New(counting, chain.DefaultConfig())
				svc := service.NewAnalytics(service.Sources{Chain: cc, Whales: pools})
				start := time.Now()
				if _, err := svc.GetRugCheck(context.Background(), &tollgatev1.GetRugCheckRequest{Addr: addr}); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(start))
				trips = max(trips, counting.n.Load())
			}
			// Issue 31: what a buyer faces, the holders, the deployer and
			// the liquidity cost at most three round trips more than the
			// rug check read before them (its powers: 2-3).
			if before := roundTripsBefore[name]; trips > before+3 {
				b.Errorf("%s: %d round trips, more than %d + 3", name, trips, before)
			}
			slices.Sort(durations)
			b.ReportMetric(float64(trips), "rpc-round-trips")
			b.ReportMetric(float64(durations[len(durations)/2].Microseconds())/1000, "p50-ms")
		})
	}
}

// numbers are the numbers in a note, among them the blocks it read.
var numbers = regexp.MustCompile(`\d+`)
