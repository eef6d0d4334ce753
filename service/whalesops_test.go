package service

import (
	"context"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/whales"
)

type fixedWhales struct{ snap *whales.Snapshot }

func (f *fixedWhales) Snapshot() *whales.Snapshot { return f.snap }

func sampleSnapshot() *whales.Snapshot {
	token := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	return &whales.Snapshot{
		AsOf: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), Block: 99, TokensScanned: 4,
		Wallets: []whales.Wallet{{Address: common.HexToAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"), Score: 10,
			SmartEntries: 4, TokensCrossed: 4, EarlyRate: 1, DodgeRate: 1, Dodges: 3, EvidenceTokens: []common.Address{token}}},
	}
}

// TestGetWhales: no scanner is Unimplemented, no completed scan is
// Unavailable (which the gate never settles), and a snapshot maps field by
// field, the same response object reused until the next snapshot.
func TestGetWhales(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := NewAnalytics(Sources{}).GetWhales(ctx, nil); status.Code(grpcError(ctx, discard, err)) != codes.Unimplemented {
		t.Errorf("no scanner: %v", err)
	}
	src := &fixedWhales{}
	a := NewAnalytics(Sources{Whales: src})
	_, err := a.GetWhales(ctx, nil)
	if st := status.Convert(grpcError(ctx, discard, err)); st.Code() != codes.Unavailable || st.Message() == "" {
		t.Errorf("before the first scan: %v", st)
	}
	src.snap = sampleSnapshot()
	got, err := a.GetWhales(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := got.GetWallets()[0]
	if got.GetAsOf() != "2026-11-21T12:00:00Z" || got.GetTokensScanned() != 4 || w.GetAddress() != "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC" ||
		w.GetScore() != 10 || w.GetSmartEntries() != 4 || w.GetTokensCrossed() != 4 || w.GetEarlyRate() != 1 || w.GetDodgeRate() != 1 ||
		len(w.GetEvidenceTokens()) != 1 || w.GetEvidenceTokens()[0] != "0x00000000000000000000000000000000000000AA" {
		t.Errorf("mapped %v", got)
	}
	if again, _ := a.GetWhales(ctx, nil); again != got {
		t.Error("the response of an unchanged snapshot was rebuilt")
	}
	src.snap = sampleSnapshot()
	if next, _ := a.GetWhales(ctx, nil); next == got {
		t.Error("a new snapshot served the old response")
	}
}

// BenchmarkGetWhales is /whales served from a snapshot of 50 wallets, in
// the service (target: p50 at most 1 ms).
func BenchmarkGetWhales(b *testing.B) {
	snap := sampleSnapshot()
	for len(snap.Wallets) < 50 {
		snap.Wallets = append(snap.Wallets, snap.Wallets[0])
	}
	a := NewAnalytics(Sources{Whales: &fixedWhales{snap: snap}})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.GetWhales(ctx, &tollgatev1.GetWhalesRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}
