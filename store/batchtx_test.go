package store_test

import (
	"context"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment/batch"
)

// TestBatchTxs: claims and settles are recorded whole and listed newest
// first, limited or not, on both engines.
func TestBatchTxs(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s := openStore(t, e)
		if got, err := s.BatchTxs(ctx, 0); err != nil || len(got) != 0 {
			t.Fatalf("an empty history: %+v %v", got, err)
		}
		at := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
		recs := []batch.TxRecord{
			{ID: "a", Kind: batch.KindClaim, Tx: common.HexToHash("0xc1"), Amount: new(big.Int).Lsh(big.NewInt(1), 90), Rows: 3,
				Result: batch.ResultOK, At: at},
			{ID: "b", Kind: batch.KindClaim, Amount: big.NewInt(0), Rows: 1, Result: batch.ResultRefused,
				Reason: "invalid_batch_settlement_evm_claim_simulation_failed", Message: "ClaimExceedsBalance", At: at.Add(time.Second)},
			{ID: "c", Kind: batch.KindSettle, Tx: common.HexToHash("0x5e"), Receiver: common.HexToAddress("0x22"),
				Token: common.HexToAddress("0x44"), Amount: big.NewInt(150_000), Result: batch.ResultOK, At: at.Add(2 * time.Second)},
		}
		for _, r := range recs {
			if err := s.RecordBatchTx(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.BatchTxs(ctx, 0)
		if err != nil || len(got) != 3 {
			t.Fatalf("history: %+v %v", got, err)
		}
		for i, want := range recs {
			if g := got[len(got)-1-i]; !reflect.DeepEqual(g, want) {
				t.Errorf("record %d:\n%+v\nwant\n%+v", i, g, want)
			}
		}
		if got, err := s.BatchTxs(ctx, 1); err != nil || len(got) != 1 || got[0].ID != "c" {
			t.Errorf("the latest one: %+v %v", got, err)
		}
		// Without an id or a time, the store gives both.
		if err := s.RecordBatchTx(ctx, batch.TxRecord{Kind: batch.KindSettle, Result: batch.ResultNoop}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.BatchTxs(ctx, 1); len(got) != 1 || got[0].ID == "" || got[0].At.Before(at) || got[0].Amount.Sign() != 0 {
			t.Errorf("a record without id and time: %+v", got)
		}
	})
}

// TestBatchUnclaimed: the unclaimed value and its oldest age count only
// channels whose charged exceeds their claimed total.
func TestBatchUnclaimed(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s := openStore(t, e)
		n, sum, oldest, err := s.BatchUnclaimed(ctx)
		if err != nil || n != 0 || sum.Sign() != 0 || !oldest.IsZero() {
			t.Fatalf("no channels: %d %v %v %v", n, sum, oldest, err)
		}
		t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
		for i, c := range []struct {
			charged, claimed int64
			since            time.Time
		}{
			{100, 40, t0.Add(time.Minute)},
			{70, 0, t0},
			{50, 50, t0.Add(-time.Hour)}, // all claimed: a stale age does not count
			{30, 10, time.Time{}},        // written before ages were kept
		} {
			if _, err := s.UpdateChannel(ctx, channelID(byte(i)), func(ch *batch.Channel, _ bool) (batch.Change, error) {
				ch.Charged, ch.TotalClaimed, ch.UnclaimedSince = big.NewInt(c.charged), big.NewInt(c.claimed), c.since
				return batch.Save, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		n, sum, oldest, err = s.BatchUnclaimed(ctx)
		if err != nil || n != 3 || sum.Int64() != 60+70+20 || !oldest.Equal(t0) {
			t.Errorf("unclaimed: %d channels, %v, oldest %v (%v); want 3, 150, %v", n, sum, oldest, err, t0)
		}
	})
}
