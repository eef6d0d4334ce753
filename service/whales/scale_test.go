package whales_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/service/whales"
)

// The scan's JSON-RPC cost (docs/rules.md, "Cycles and cost") held to its
// formula on a synthetic Base-like history served by a fake node with a
// provider's caps (fakenode_test.go, synth_test.go).

// followed counts the launches a scan over [oldest, to] follows, by
// whether their pools are their own contracts or live in the PoolManager.
func (s *synth) followed(oldest, to uint64, maxPools int) (contracts, inside int) {
	var in []synthLaunch
	for _, l := range s.launches {
		if l.created >= oldest && l.created <= to {
			in = append(in, l)
		}
	}
	if len(in) > maxPools { // the newest are kept
		in = in[len(in)-maxPools:]
	}
	for _, l := range in {
		if l.venue == whales.UniswapV4 {
			inside++
		} else {
			contracts++
		}
	}
	return contracts, inside
}

// cycleCost is the documented cost of a cycle over [from, to] with the
// scanner's default log range of 10,000 blocks: eth_blockNumber, then per
// range the creations of every venue, two queries per 500 pools that are
// their own contracts and three per 500 V4 pools.
func cycleCost(from, to uint64, contracts, inside int, newPools bool) int64 {
	ranges := int64((to - from + 10_000) / 10_000)
	chunks := func(n int) int64 { return int64((n + 499) / 500) }
	creators := int64(0)
	if newPools {
		creators = 1 // one batch: the new pools' creation transactions
	}
	return 1 + creators + ranges*(1+2*chunks(contracts)+3*chunks(inside))
}

// TestScanCost: on a history of 1,300 launches over every venue (60,000
// blocks, two cycles), quote/quote and token/token pools, launches from
// before the window and wallet-to-wallet transfers, every cycle costs
// exactly what docs/rules.md says; nothing the scan does not follow is
// ever served to it; it skips and counts the pools it must; and the
// collapses and the planted smart wallet come out as generated.
func TestScanCost(t *testing.T) {
	t.Parallel()
	h := newSynth(synthConfig{seed: 7, pre: 5_000, window: 60_000, extra: 2_000, launches: 1_300,
		meanSwaps: 20, wallets: 2_000, skipped: 60, noiseSwaps: 20_000}).build()
	safe := h.cfg.pre + h.cfg.window - 1
	node, client := newFakeNode(t, h.logs, h.noise, safe+3)
	cfg := whales.DefaultConfig()
	cfg.WindowBlocks, cfg.MaxPools = h.cfg.window, 5_000
	s, err := whales.New(client, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	skippedIn := func(from, to uint64) (n int) {
		for _, b := range h.skipped {
			if b >= from && b <= to {
				n++
			}
		}
		return n
	}
	cycle := func(oldest uint64) whales.Stats {
		t.Helper()
		before := node.calls()
		st, err := s.Scan(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, v := h.followed(oldest, st.To, cfg.MaxPools)
		if want, got := cycleCost(st.From, st.To, c, v, st.NewPools > 0), node.calls()-before; got != want || st.Calls != want {
			t.Errorf("cycle %d-%d over %d contract and %d V4 pools: %d calls (scanner counted %d), want %d", st.From, st.To, c, v, got, st.Calls, want)
		}
		if want := skippedIn(st.From, st.To); st.Skipped != want {
			t.Errorf("cycle %d-%d skipped %d pools, want %d", st.From, st.To, st.Skipped, want)
		}
		return st
	}
	for n := 0; ; n++ {
		if st := cycle(h.cfg.pre); st.CaughtUp {
			break
		}
		if n > 5 {
			t.Fatal("the scan does not catch up")
		}
	}
	// A caught-up cycle a minute later (30 Base blocks): the pools older
	// than the window are dropped.
	node.head.Add(30)
	cycle(h.cfg.pre + 30)
	safe += 30
	if node.refused.Load() != 0 || node.maxRange > 10_000 {
		t.Errorf("%d queries refused; widest range %d", node.refused.Load(), node.maxRange)
	}
	if n := node.noiseServed.Load(); n != 0 {
		t.Errorf("%d logs of unfollowed pools or wallet transfers served to the scan", n)
	}

	snap := s.Snapshot()
	want := map[common.Address]whales.Collapse{}
	var entries, dodges int
	venues := map[whales.Kind]int{}
	for _, l := range h.launches {
		if l.created < h.cfg.pre+30 || l.created >= safe {
			continue
		}
		entries++
		venues[l.venue]++
		if l.collapse != 0 && l.collapse <= safe {
			kind := map[string]string{"rug": "liquidity", "dump": "drawdown"}[l.fate]
			want[l.token] = whales.Collapse{Pool: l.pool, Venue: l.venue, Kind: kind, Block: l.collapse}
			dodges++
		}
	}
	if len(venues) != len(whales.Kinds()) {
		t.Errorf("launches on %d venues, want every one of %d", len(venues), len(whales.Kinds()))
	}
	for token, c := range want {
		if got := snap.Collapses[token]; got != c {
			t.Errorf("token %s: collapse %+v, want %+v", token, got, c)
		}
	}
	for token, c := range snap.Collapses {
		if _, ok := want[token]; !ok {
			t.Errorf("token %s: collapse %+v, generated none", token, c)
		}
	}
	top := snap.Wallets[0]
	if top.Address != h.smart || top.SmartEntries != entries || top.Dodges != dodges || top.Caught != 0 {
		t.Errorf("first wallet %s: %d entries, %d dodges, %d caught; want the smart wallet %s with %d, %d, 0",
			top.Address, top.SmartEntries, top.Dodges, top.Caught, h.smart, entries, dodges)
	}
}

// baseSized is a week of Base-like launches: 2,400 launches over 7 days
// and 30,000 blocks after it, about 300,000 swaps on them, 300 skipped
// pools carrying 100,000 more and 50,000 wallets.
var baseSized = synthConfig{seed: 1, pre: 5_000, window: 302_400, extra: 30_000, launches: 2_400,
	meanSwaps: 170, wallets: 50_000, skipped: 300, noiseSwaps: 100_000}

// BenchmarkScanBase runs the default scan (7 days, 2,000 pools at most)
// on baseSized through the fake node's 10,000-block, 10,000-result caps:
// a cold scan from nothing to caught up, and a caught-up cycle a minute
// (30 blocks) later. Reported: JSON-RPC calls, logs served, refusals, and
// the heap the scanner keeps (the allocation figures include the fake
// node's JSON encoding, in the same process).
func BenchmarkScanBase(b *testing.B) {
	h := newSynth(baseSized).build()
	b.Logf("history: %d logs, %d swaps, %d launches, %d skipped pools", len(h.logs), h.swaps, len(h.launches), len(h.skipped))
	head := h.cfg.pre + h.cfg.window - 1 + 3
	node, client := newFakeNode(b, h.logs, h.noise, head)
	ctx := context.Background()
	cold := func(b *testing.B) *whales.Scanner {
		s, err := whales.New(client, whales.DefaultConfig(), quiet())
		if err != nil {
			b.Fatal(err)
		}
		for {
			st, err := s.Scan(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if st.CaughtUp {
				return s
			}
		}
	}
	measure := func(b *testing.B, run func()) {
		calls, served, refused := node.calls(), node.served.Load(), node.refused.Load()
		run()
		n := float64(b.N)
		b.ReportMetric(float64(node.calls()-calls)/n, "rpc-calls/op")
		b.ReportMetric(float64(node.served.Load()-served)/n, "logs/op")
		b.ReportMetric(float64(node.refused.Load()-refused)/n, "refused/op")
	}
	b.Run("cold-7-days", func(b *testing.B) {
		node.head.Store(head)
		b.ReportAllocs()
		var s *whales.Scanner
		measure(b, func() {
			for b.Loop() {
				s = cold(b)
			}
		})
		if ws := s.Snapshot().Wallets; len(ws) == 0 || ws[0].Address != h.smart {
			b.Error("the smart wallet is not first")
		}
		b.ReportMetric(retainedMB(func() { s = nil }), "retained-MB")
	})
	b.Run("caught-up-cycle", func(b *testing.B) {
		node.head.Store(head)
		s := cold(b)
		b.ReportAllocs()
		measure(b, func() {
			for b.Loop() {
				node.head.Add(30)
				if _, err := s.Scan(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

// retainedMB is the heap freed by drop (which lets go of what was
// measured), in MB.
func retainedMB(drop func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	drop()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(int64(before.HeapAlloc)-int64(after.HeapAlloc)) / 1e6
}
