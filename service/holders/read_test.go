package holders_test

import (
	"context"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/holders"
)

var _ holders.Chain = (*chain.Client)(nil)

// TestReadFakeNode: synthetic histories (fakenode_test.go) read through
// the chain client from a node with a provider's caps. Whatever the
// history, every balance in the answer is the node's at the block read,
// the top holders are the largest of the addresses the logs read
// credited, the supply is split into burned and circulating as the node
// holds it, and the read keeps its bounds: one batch, no call outside
// it, every call at the block, at most MaxQueries log queries. A history
// within the bounds is read whole and its holder count is exact; past
// them, the answer says it is estimated and what was read.
func TestReadFakeNode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		synth synth
		head  uint64
		// unknown: the token's creation is not given (From 0).
		unknown bool
		// whole: the history is read whole; cut: the confirmations are.
		whole, cut bool
		// note holds these.
		note []string
		// queries: the log queries a read takes (0: not checked).
		queries int64
	}{
		{name: "whole history", synth: synth{moves: 2_000, span: [2]uint64{1_000, 50_000}, holders: 300, seed: 1}, head: 60_000,
			whole: true, note: []string{"Read every Transfer log", "is exact"}},
		{name: "more candidates than a batch", synth: synth{moves: 18_000, span: [2]uint64{1_000, 100_000}, holders: 4_000, seed: 2}, head: 100_000,
			whole: true, cut: true, note: []string{"Read every Transfer log", "the batch bound", "exact for a token whose balances move only by Transfer"}},
		{name: "history longer than MaxBlocks", synth: synth{moves: 3_000, span: [2]uint64{1_000, 2_000_000}, holders: 400, seed: 3}, head: 2_000_000,
			note: []string{"Estimated", "between them", "is a lower bound"}, queries: holders.MaxQueries},
		{name: "more logs than MaxLogs", synth: synth{moves: 60_000, span: [2]uint64{1_000, 40_000}, holders: 500, seed: 4}, head: 40_000,
			note: []string{"Estimated", "between them", "is a lower bound"}},
		{name: "launch burst", synth: synth{moves: 100_000, span: [2]uint64{1_000, 300_000}, burst: 0.5, burstBlocks: 2_000, holders: 500, seed: 5}, head: 300_000,
			note: []string{"Estimated", "between them"}},
		{name: "creation not known", synth: synth{moves: 3_000, span: [2]uint64{500_000, 1_500_000}, holders: 400, seed: 6}, head: 1_500_000, unknown: true,
			note: []string{"Estimated", "creation block is not known", "before them", "is a lower bound"}},
		{name: "creation not known, short chain", synth: synth{moves: 1_000, span: [2]uint64{50, 90_000}, holders: 200, seed: 7}, head: 90_000, unknown: true,
			whole: true, note: []string{"back to the chain's first block", "is exact"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node, c := newFakeNode(t, tc.synth.history(), tc.head)
			deployer, pool := holderAddr(iDeployer), holderAddr(iPool)
			tok := holders.Token{Address: fakeToken, Block: tc.head, From: tc.synth.span[0] - 10, Owner: &deployer, Deployer: &deployer,
				Exclude: map[common.Address]string{pool: "the token's pool"}}
			if tc.unknown {
				tok.From = 0
			}
			got, err := holders.Read(context.Background(), c, tok)
			if err != nil {
				t.Fatal(err)
			}
			checkCost(t, node, got, tok)
			if q := node.getLogs.Load(); tc.queries > 0 && q != tc.queries {
				t.Errorf("%d log queries, want %d", q, tc.queries)
			}
			checkBalances(t, node, got, tok)
			var spans [][2]uint64
			for _, s := range got.Spans {
				spans = append(spans, [2]uint64{s.From, s.To})
			}
			truth, credited := node.truth(tok.Block, spans)
			fixed := map[common.Address]bool{deployer: true, pool: true, fakeToken: true, {}: true, deadAddr: true}
			for a := range fixed {
				credited[a] = true
			}
			want := node.largest(tok.Block, credited, map[common.Address]bool{pool: true, {}: true, deadAddr: true}, holders.TopN)
			if len(got.Top) != len(want) {
				t.Fatalf("%d top holders, want %d", len(got.Top), len(want))
			}
			for i, h := range got.Top {
				if h.Address != want[i] {
					t.Errorf("top holder %d is %s, want %s (%s)", i, h.Address, want[i], node.balance(want[i], tok.Block))
				}
			}
			if want := !tc.whole || tc.cut; got.Estimated != want {
				t.Errorf("estimated %v, want %v", got.Estimated, want)
			}
			if got.CountExact != (tc.whole && !tc.cut) {
				t.Errorf("count exact %v, want %v", got.CountExact, tc.whole && !tc.cut)
			}
			switch {
			case tc.whole && int(got.Count) != truth:
				t.Errorf("%d holders, want %d", got.Count, truth)
			case !tc.whole && (int(got.Count) > truth || got.Count == 0):
				t.Errorf("%d holders, want a lower bound of %d", got.Count, truth)
			}
			if tc.whole != (len(got.Spans) == 1 && got.Spans[0] == holders.Span{From: tok.From, To: tok.Block}) {
				t.Errorf("read %v of blocks %d to %d; whole: %v", got.Spans, tok.From, tok.Block, tc.whole)
			}
			for _, s := range tc.note {
				if !strings.Contains(got.Note, s) {
					t.Errorf("the note does not say %q: %s", s, got.Note)
				}
			}
			t.Logf("%s: %d logs in %d queries (%d refused), %d kB; %d candidates, %d confirmed; top 10 %.4f; %d holders (of %d)\n%s",
				tc.name, got.Logs, node.getLogs.Load(), node.refused.Load(), node.bytes.Load()/1000, got.Candidates, got.Confirmed, got.Top10Share, got.Count, truth, got.Note)
		})
	}
}

// checkCost holds a read to its bounds.
func checkCost(t *testing.T, node *fakeNode, got holders.Holders, tok holders.Token) {
	t.Helper()
	if b := node.batches.Load(); b != 1 {
		t.Errorf("%d batches, want 1", b)
	}
	if n := node.lone.Load(); n != 0 {
		t.Errorf("%d calls outside the batch", n)
	}
	if n := node.calls.Load(); n != int64(got.Confirmed)+1 || got.Confirmed > holders.MaxBatch-1 {
		t.Errorf("%d calls for %d balances and the supply; a batch holds %d", n, got.Confirmed, holders.MaxBatch)
	}
	if len(node.atBlocks) != 1 || !node.atBlocks[big.NewInt(int64(tok.Block)).String()] {
		t.Errorf("calls at blocks %v, want %d only", node.atBlocks, tok.Block)
	}
	if q := node.getLogs.Load() - node.refused.Load(); q > holders.MaxQueries {
		t.Errorf("%d log queries answered, want at most %d", q, holders.MaxQueries)
	}
	if int64(got.Logs) != node.served.Load() {
		t.Errorf("%d logs read, the node served %d", got.Logs, node.served.Load())
	}
	read := uint64(0)
	for i, s := range got.Spans {
		read += s.Blocks()
		if s.From < tok.From || s.To > tok.Block || i > 0 && s.From <= got.Spans[i-1].To {
			t.Errorf("spans %v out of blocks %d to %d", got.Spans, tok.From, tok.Block)
		}
	}
	if read > holders.MaxBlocks || got.Spans[len(got.Spans)-1].To != tok.Block {
		t.Errorf("read %v: %d blocks, want at most %d up to %d", got.Spans, read, holders.MaxBlocks, tok.Block)
	}
}

// checkBalances: every balance and share in the answer is the node's.
func checkBalances(t *testing.T, node *fakeNode, got holders.Holders, tok holders.Token) {
	t.Helper()
	if got.Supply.Cmp(node.supply(tok.Block)) != 0 {
		t.Errorf("supply %s, want %s", got.Supply, node.supply(tok.Block))
	}
	burned := new(big.Int).Add(node.balance(deadAddr, tok.Block), node.balance(common.Address{}, tok.Block))
	if got.Burned.Cmp(burned) != 0 || new(big.Int).Add(got.Circulating, got.Burned).Cmp(got.Supply) != 0 {
		t.Errorf("burned %s, circulating %s of %s; want %s burned", got.Burned, got.Circulating, got.Supply, burned)
	}
	check := func(what string, h holders.Holder, of *big.Int) {
		want := node.balance(h.Address, tok.Block)
		if h.Balance.Cmp(want) != 0 {
			t.Errorf("%s %s: balance %s, want %s", what, h.Address, h.Balance, want)
		}
		share, _ := new(big.Rat).SetFrac(want, of).Float64()
		if math.Abs(h.Share-share) > 1e-12 {
			t.Errorf("%s %s: share %g, want %g", what, h.Address, h.Share, share)
		}
	}
	sum := 0.0
	for i, h := range got.Top {
		check("top holder", h, got.Circulating)
		sum += h.Share
		if i > 0 && h.Balance.Cmp(got.Top[i-1].Balance) > 0 {
			t.Errorf("top holder %d holds more than the one before", i)
		}
		if _, excluded := tok.Exclude[h.Address]; excluded || h.Address == deadAddr || h.Address == (common.Address{}) {
			t.Errorf("top holder %s is excluded or a burn address", h.Address)
		}
	}
	if math.Abs(sum-got.Top10Share) > 1e-12 {
		t.Errorf("top 10 share %g, their shares add up to %g", got.Top10Share, sum)
	}
	for _, h := range got.Excluded {
		check("excluded", h, got.Circulating)
		if h.Why != tok.Exclude[h.Address] {
			t.Errorf("excluded %s: why %q, want %q", h.Address, h.Why, tok.Exclude[h.Address])
		}
	}
	if len(got.Excluded) != len(tok.Exclude) {
		t.Errorf("%d excluded, want %d", len(got.Excluded), len(tok.Exclude))
	}
	for _, h := range got.Burns {
		check("burn address", h, got.Supply)
	}
	for what, h := range map[string]*holders.Holder{"owner": got.Owner, "deployer": got.Deployer} {
		if h == nil {
			t.Errorf("no %s", what)
			continue
		}
		check(what, *h, got.Circulating)
	}
}

// TestReadErrors: what a read refuses, and a node failing.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	_, c := newFakeNode(t, synth{moves: 100, span: [2]uint64{10, 1_000}, holders: 10, seed: 8}.history(), 1_000)
	many := map[common.Address]string{}
	for i := range holders.MaxBatch {
		many[holderAddr(uint32(iFirstHolder+i))] = "a locker"
	}
	cases := []struct {
		name string
		tok  holders.Token
		want string
	}{
		{"no address", holders.Token{Block: 10}, "no token address"},
		{"from after block", holders.Token{Address: fakeToken, From: 11, Block: 10}, "after the block read"},
		{"negative supply", holders.Token{Address: fakeToken, Block: 10, Supply: big.NewInt(-1)}, "negative supply"},
		{"too many exclusions", holders.Token{Address: fakeToken, Block: 1_000, Exclude: many}, "more than a batch"},
		{"the node refuses the logs", holders.Token{Address: common.HexToAddress("0x1"), Block: 1_000, From: 10}, "Transfer logs of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := holders.Read(ctx, c, tc.tok)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// BenchmarkMillionTransfers reads a token with a million Transfer logs
// from the fake node, however they spread: over about 23 days of Base
// blocks (a million), over a year (16 million: the block bound and the
// log bound are both reached, the most queries), in a day with half of
// them in the launch's first hour, and all in 10,000 blocks (the most
// refusals). It reports per read the eth_getLogs asked (and refused),
// the logs and the bytes the node answered, the batch's calls.
//
//	go test ./service/holders/ -run '^$' -bench MillionTransfers -benchtime 5x
func BenchmarkMillionTransfers(b *testing.B) {
	const n = 1_000_000
	for _, bc := range []struct {
		name  string
		synth synth
	}{
		{"over 1M blocks", synth{moves: n, span: [2]uint64{1_000_000, 1_999_999}, holders: 200_000, seed: 9}},
		{"over 16M blocks", synth{moves: n, span: [2]uint64{1_000_000, 16_999_999}, holders: 200_000, seed: 9}},
		{"in a day, half in the first hour", synth{moves: n, span: [2]uint64{1_000_000, 1_043_199}, burst: 0.5, burstBlocks: 1_800, holders: 200_000, seed: 9}},
		{"in 10,000 blocks", synth{moves: n, span: [2]uint64{1_000_000, 1_009_999}, holders: 200_000, seed: 9}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			moves := bc.synth.history()
			head := bc.synth.span[1]
			node, c := newFakeNode(b, moves, head)
			node.balancesAt(head)
			deployer, pool := holderAddr(iDeployer), holderAddr(iPool)
			tok := holders.Token{Address: fakeToken, Block: head, From: bc.synth.span[0], Owner: &deployer, Deployer: &deployer,
				Exclude: map[common.Address]string{pool: "the token's pool"}}
			b.ResetTimer()
			var got holders.Holders
			for b.Loop() {
				var err error
				if got, err = holders.Read(context.Background(), c, tok); err != nil {
					b.Fatal(err)
				}
			}
			ops := float64(b.N)
			b.ReportMetric(float64(node.getLogs.Load())/ops, "getLogs/op")
			b.ReportMetric(float64(node.refused.Load())/ops, "refused/op")
			b.ReportMetric(float64(node.served.Load())/ops, "logs/op")
			b.ReportMetric(float64(node.bytes.Load())/ops/1e6, "MB/op")
			b.ReportMetric(float64(node.calls.Load())/ops, "calls/op")
			b.ReportMetric(float64(node.batches.Load())/ops, "batches/op")
			if !got.Estimated {
				b.Errorf("a million transfers read whole: %s", got.Note)
			}
		})
	}
}
