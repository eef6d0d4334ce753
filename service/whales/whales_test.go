package whales_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/devnet/devnettest"
	"github.com/tollgate/tollgate/service/whales"
)

func startDevnet(t testing.TB) (*devnet.Chain, *rpc.Client) {
	t.Helper()
	c := devnettest.StartChain(t)
	r, err := rpc.Dial(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return c, r
}

func devnetConfig(c *devnet.Chain) whales.Config {
	cfg := whales.DefaultConfig()
	cfg.Factories = []whales.Factory{{Address: c.Dex.Factory, Kind: whales.UniswapV2}}
	cfg.Quotes = []common.Address{c.Dex.WETH}
	cfg.Confirmations = 0
	return cfg
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRankingOnScriptedHistory: on the devnet's history the smart trader
// (early on four launches, out before all three collapses) ranks first;
// the lucky one (early twice, out of one of its two collapses) above the
// holder (early four times, caught by three collapses); the late buyer
// (never early, caught three times) scores below zero and is not listed.
// The same ranking comes out of many small cycles as of one big one.
func TestRankingOnScriptedHistory(t *testing.T) {
	c, r := startDevnet(t)
	acct := func(i int) common.Address { return c.Account(i).Address }

	big, err := whales.New(r, devnetConfig(c), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if big.Snapshot() != nil {
		t.Fatal("a snapshot before any scan")
	}
	st, err := big.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// One cycle over the whole history: the head, the pool creations, the
	// pool events and the transfers into pools.
	if !st.CaughtUp || !st.Completed || st.Pools != 4 || st.NewPools != 4 || st.Calls != 4 {
		t.Fatalf("stats %+v", st)
	}
	snap := big.Snapshot()
	if snap == nil || snap.TokensScanned != 4 || time.Since(snap.AsOf) > time.Minute {
		t.Fatalf("snapshot %+v", snap)
	}
	all := big.Ranking()
	pos := map[common.Address]int{}
	byAddr := map[common.Address]whales.Wallet{}
	for i, w := range all {
		pos[w.Address], byAddr[w.Address] = i, w
	}
	smart, holder, lucky, late := byAddr[acct(devnet.SmartTrader)], byAddr[acct(devnet.HolderTrader)], byAddr[acct(devnet.LuckyTrader)], byAddr[acct(devnet.LateTrader)]
	for _, tc := range []struct {
		name                             string
		w                                whales.Wallet
		score                            float64
		entries, crossed, dodges, caught int
	}{
		{"smart", smart, 10, 4, 4, 3, 0},
		{"lucky", lucky, 3, 2, 2, 1, 1},
		{"holder", holder, 1, 4, 4, 0, 3},
		{"late", late, -3, 0, 4, 0, 3},
	} {
		if tc.w.Score != tc.score || tc.w.SmartEntries != tc.entries || tc.w.TokensCrossed != tc.crossed || tc.w.Dodges != tc.dodges || tc.w.Caught != tc.caught {
			t.Errorf("%s: %+v, want score %g entries %d crossed %d dodges %d caught %d", tc.name, tc.w, tc.score, tc.entries, tc.crossed, tc.dodges, tc.caught)
		}
	}
	if pos[smart.Address] != 0 || !(pos[lucky.Address] < pos[holder.Address] && pos[holder.Address] < pos[late.Address]) {
		t.Errorf("order smart %d lucky %d holder %d late %d", pos[smart.Address], pos[lucky.Address], pos[holder.Address], pos[late.Address])
	}
	if smart.EarlyRate != 1 || smart.DodgeRate != 1 || lucky.DodgeRate != 0.5 || holder.DodgeRate != 0 || late.EarlyRate != 0 {
		t.Errorf("rates smart %v/%v lucky %v holder %v late %v", smart.EarlyRate, smart.DodgeRate, lucky.DodgeRate, holder.DodgeRate, late.EarlyRate)
	}
	if len(smart.EvidenceTokens) != 4 || len(late.EvidenceTokens) != 0 {
		t.Errorf("evidence smart %v late %v", smart.EvidenceTokens, late.EvidenceTokens)
	}
	if snap.Wallets[0].Address != smart.Address {
		t.Errorf("snapshot leads with %s", snap.Wallets[0].Address)
	}
	for _, w := range snap.Wallets {
		if w.Score <= 0 || w.Address == late.Address {
			t.Errorf("listed %+v", w)
		}
	}
	// The collapses the rug check reports: MCAT and RDOG rugged (liquidity
	// pulled), BURN dumped (price crash), EDDY alive.
	wantKind := map[string]string{"rug": "liquidity", "dump": "drawdown", "alive": ""}
	for _, lt := range c.Dex.Tokens {
		col, found := snap.Collapses[lt.Token]
		if col.Kind != wantKind[lt.Fate] || found != (lt.Fate != "alive") || (found && (col.Pool != lt.Pair.Hex() || col.Venue != whales.UniswapV2 || col.Block == 0)) {
			t.Errorf("%s (%s): collapse %+v", lt.Name, lt.Fate, col)
		}
	}

	// Many small cycles: the snapshot appears only once caught up, and the
	// ranking is the same.
	cfg := devnetConfig(c)
	cfg.MaxBlocksPerCycle = 7
	small, err := whales.New(r, cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	cycles := 0
	for {
		st, err := small.Scan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		cycles++
		if st.CaughtUp {
			break
		}
		if small.Snapshot() != nil {
			t.Fatal("snapshot published while catching up")
		}
	}
	if cycles < 5 {
		t.Errorf("only %d cycles of 7 blocks", cycles)
	}
	got := small.Ranking()
	if len(got) != len(all) {
		t.Fatalf("%d wallets incrementally, %d at once", len(got), len(all))
	}
	small.Scan(context.Background()) // publishes once caught up
	if fmt.Sprint(small.Snapshot().Collapses) != fmt.Sprint(snap.Collapses) {
		t.Errorf("collapses incrementally %v, at once %v", small.Snapshot().Collapses, snap.Collapses)
	}
	for i := range all {
		if got[i].Address != all[i].Address || got[i].Score != all[i].Score || got[i].Dodges != all[i].Dodges {
			t.Errorf("#%d: %+v incrementally, %+v at once", i, got[i], all[i])
		}
	}
	// Nothing new: the cycle costs one call and refreshes asOf. An idle
	// devnet seals an empty block every 2 s; a cycle that found one was
	// not idle, so scan again.
	before := small.Snapshot().AsOf
	for attempt := 0; ; attempt++ {
		st, err = small.Scan(context.Background())
		if err == nil && st.From <= st.To && attempt < 5 {
			continue
		}
		if err != nil || !st.Completed || st.Calls != 1 || small.Snapshot().AsOf.Before(before) {
			t.Errorf("idle cycle %+v %v", st, err)
		}
		break
	}
}

// BenchmarkScan is a full scan of the devnet's history by a fresh scanner;
// reported: JSON-RPC round trips per token scanned.
func BenchmarkScan(b *testing.B) {
	c, r := startDevnet(b)
	var st whales.Stats
	for b.Loop() {
		s, err := whales.New(r, devnetConfig(c), quiet())
		if err != nil {
			b.Fatal(err)
		}
		if st, err = s.Scan(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Calls)/float64(st.Pools), "rpc-calls/token")
	b.ReportMetric(float64(st.Logs), "logs")
}
