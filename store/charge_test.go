package store_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/store"
)

var (
	chargePayerA = common.HexToAddress("0xA11CE00000000000000000000000000000000001")
	chargePayerB = common.HexToAddress("0xB0B0000000000000000000000000000000000002")
	chargePayTo  = common.HexToAddress("0x22")
	chargeToken  = common.HexToAddress("0x44")
)

// charge commits one voucher call of amount on channel id as the server
// does: the channel's charged total moves and the charge goes to the
// books in the same update. cumulative, when not nil, replaces the
// charge's key (a resend or a replica's stale view).
func charge(ctx context.Context, s *store.DB, id common.Hash, payer common.Address, amount int64, at time.Time, cumulative *big.Int) (batch.Channel, error) {
	return s.UpdateChannel(ctx, id, func(c *batch.Channel, found bool) (batch.Change, error) {
		if !found {
			c.Config = batch.Config{Payer: payer, PayerAuthorizer: payer, Receiver: chargePayTo, Token: chargeToken}
			c.Charged = new(big.Int)
		}
		c.Charged = new(big.Int).Add(c.Charged, big.NewInt(amount))
		c.LastRequest = at
		key := cumulative
		if key == nil {
			key = new(big.Int).Set(c.Charged)
		}
		c.NewCharge = &batch.Charge{Operation: "regime", Resource: "/regime?asset=ETH", Amount: big.NewInt(amount), Cumulative: key, At: at}
		return batch.Save, nil
	})
}

// TestBatchCharges: three voucher calls and one exact settlement are four
// paid calls in the totals, the voucher calls read back whole with List's
// filters, and a charge booked twice, or one the books could not add up,
// fails its whole update, on both engines.
func TestBatchCharges(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		replicas := twoStores(t, e, e.place(t))
		s := replicas[0]
		t1 := time.Date(2026, 11, 25, 9, 0, 0, 123456789, time.UTC)
		t2, t3 := t1.Add(time.Minute), t1.Add(2*time.Minute)
		chA, chB := channelID(0xa1), channelID(0xb2)
		for _, c := range []struct {
			id     common.Hash
			payer  common.Address
			amount int64
			at     time.Time
		}{{chA, chargePayerA, 10_000, t1}, {chB, chargePayerB, 15_000, t2}, {chA, chargePayerA, 10_000, t3}} {
			if _, err := charge(ctx, s, c.id, c.payer, c.amount, c.at, nil); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.Claim(ctx, rec("0xc1"), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		r.State, r.Tx = exact.StateSettled, txA
		if err := s.Finish(ctx, r); err != nil {
			t.Fatal(err)
		}
		wantTotals := payment.Totals{Paid: 4, Amount: "85000"} // 10000 + 15000 + 10000 + exact's 50000
		if got, err := s.Totals(ctx); err != nil || got["regime"] != wantTotals {
			t.Fatalf("totals %+v (%v), want regime %+v", got, err, wantTotals)
		}

		all, err := s.BatchCharges(ctx, store.Filter{})
		if err != nil || len(all) != 3 {
			t.Fatalf("%d charges (%v), want 3: %+v", len(all), err, all)
		}
		first := all[0]
		if first.Channel != chA || first.Payer != chargePayerA || first.PayTo != chargePayTo || first.Asset != chargeToken ||
			first.Operation != "regime" || first.Resource != "/regime?asset=ETH" || first.Amount.Int64() != 10_000 ||
			first.Cumulative.Int64() != 10_000 || !first.At.Equal(t1) {
			t.Errorf("first charge read back as %+v", first)
		}
		if all[1].Channel != chB || all[1].Cumulative.Int64() != 15_000 || all[2].Channel != chA || all[2].Cumulative.Int64() != 20_000 {
			t.Errorf("charges not oldest first, or keys wrong: %+v", all)
		}

		for _, tt := range []struct {
			name   string
			filter store.Filter
			want   int
		}{
			{"everything", store.Filter{}, 3},
			{"charged", store.Filter{State: store.StateCharged}, 3},
			{"an exact state", store.Filter{State: exact.StateSettled}, 0},
			{"payer upper-case", store.Filter{Payer: "0x" + strings.ToUpper(chargePayerB.Hex()[2:])}, 1},
			{"payer checksummed", store.Filter{Payer: chargePayerB.Hex()}, 1},
			{"payer lower-case", store.Filter{Payer: strings.ToLower(chargePayerA.Hex())}, 2},
			{"since, inclusive", store.Filter{Since: t2}, 2},
			{"since after the last", store.Filter{Since: t3.Add(time.Nanosecond)}, 0},
			{"since and payer", store.Filter{Since: t2, Payer: chargePayerA.Hex()}, 1},
		} {
			if got, err := s.BatchCharges(ctx, tt.filter); err != nil || len(got) != tt.want {
				t.Errorf("%s: %d charges (%v), want %d", tt.name, len(got), err, tt.want)
			}
		}

		// The same (channel, cumulative) again, from the other replica:
		// the key refuses it and nothing of the update is written.
		before, _, err := s.Channel(ctx, chA)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name       string
			amount     int64
			cumulative *big.Int
			want       string // in the error
		}{
			{"booked twice", 10_000, big.NewInt(20_000), "store: record charge: "}, // the key, on either engine
			{"zero amount", 0, big.NewInt(30_000), "want a positive amount"},
			{"cumulative below the amount", 10_000, big.NewInt(5_000), "the cumulative total includes the charge"},
		} {
			if _, err := charge(ctx, replicas[1], chA, chargePayerA, tt.amount, t3.Add(time.Minute), tt.cumulative); err == nil ||
				!strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
			}
		}
		after, _, err := s.Channel(ctx, chA)
		if err != nil || after.Charged.Cmp(before.Charged) != 0 || !after.LastRequest.Equal(before.LastRequest) {
			t.Errorf("a refused charge moved the channel: charged %v -> %v, last request %v -> %v (%v)",
				before.Charged, after.Charged, before.LastRequest, after.LastRequest, err)
		}
		if got, err := s.Totals(ctx); err != nil || got["regime"] != wantTotals {
			t.Errorf("totals after refused charges %+v (%v), want regime %+v", got, err, wantTotals)
		}
		if got, err := s.BatchCharges(ctx, store.Filter{}); err != nil || len(got) != 3 {
			t.Errorf("%d charges after refused ones (%v), want 3", len(got), err)
		}
	})
}
