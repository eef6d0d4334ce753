package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/payment"
)

// TestPaymentIDs: of many requests reserving one id at once, on two
// stores of one database (two replicas), exactly one holds it; the
// others read it back. A finished id keeps its answer; a released one is
// free again; a reservation gone stale, or an id past its keeping, is
// taken over by the next request.
func TestPaymentIDs(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		replicas := twoStores(t, e, e.place(t))
		now := time.Now()
		rec := func(id, owner string, at time.Time) payment.IDRecord {
			return payment.IDRecord{ID: id, Operation: "regime", Resource: "/regime", PayloadHash: "ab", Owner: owner, Created: at}
		}
		reserve := func(s int, r payment.IDRecord) (payment.IDRecord, bool) {
			t.Helper()
			known, ok, err := replicas[s].ReserveID(ctx, r, now.Add(-5*time.Minute), now.Add(-24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return known, ok
		}
		var held atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				if _, ok := reserve(i%2, rec("pay_race_0123456789", string(rune('a'+i)), now)); ok {
					held.Add(1)
				}
			})
		}
		wg.Wait()
		if held.Load() != 1 {
			t.Fatalf("%d requests hold one id; want 1", held.Load())
		}

		first := rec("pay_done_0123456789", "owner1", now)
		if _, ok := reserve(0, first); !ok {
			t.Fatal("a new id was not reserved")
		}
		first.Payer, first.ContentType, first.Body, first.Settlement, first.Finished = "0xPayer", "application/json", []byte(`{"a":1}`), []byte(`{"success":true}`), now
		if err := replicas[1].FinishID(ctx, first); err != nil {
			t.Fatal(err)
		}
		known, ok := reserve(1, rec("pay_done_0123456789", "owner2", now))
		if ok || !known.Done || known.Payer != "0xPayer" || string(known.Body) != `{"a":1}` || string(known.Settlement) != `{"success":true}` {
			t.Errorf("a finished id read back as %+v (taken: %v)", known, ok)
		}

		if _, ok := reserve(0, rec("pay_free_0123456789", "owner1", now)); !ok {
			t.Fatal("a new id was not reserved")
		}
		if err := replicas[1].ReleaseID(ctx, "pay_free_0123456789", "owner1"); err != nil {
			t.Fatal(err)
		}
		if _, ok := reserve(1, rec("pay_free_0123456789", "owner2", now)); !ok {
			t.Error("a released id is not free again")
		}

		if _, ok := reserve(0, rec("pay_stale_012345678", "owner1", now.Add(-6*time.Minute))); !ok {
			t.Fatal("a new id was not reserved")
		}
		if _, ok := reserve(1, rec("pay_stale_012345678", "owner2", now)); !ok {
			t.Error("a stale reservation was not taken over")
		}
		if err := replicas[0].FinishID(ctx, rec("pay_stale_012345678", "owner1", now)); err == nil {
			t.Error("the stale reservation's first holder finished it after it was taken over")
		}

		old := rec("pay_old_0123456789a", "owner1", now.Add(-25*time.Hour))
		if _, ok := reserve(0, old); !ok {
			t.Fatal("a new id was not reserved")
		}
		old.Finished = old.Created
		if err := replicas[0].FinishID(ctx, old); err != nil {
			t.Fatal(err)
		}
		if _, ok := reserve(1, rec("pay_old_0123456789a", "owner2", now)); !ok {
			t.Error("an id past its keeping was not new again")
		}
	})
}
