package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLease: one holder at a time, renewals by the holder, takeover after
// expiry or release, and a snapshot written only by the holder, newest
// wins.
func TestLease(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		db, err := e.open(ctx, e.place(t))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()

		lease := func(holder string, ttl time.Duration) bool {
			t.Helper()
			ok, err := db.Lease(ctx, "scan", holder, ttl)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !lease("a", time.Hour) || lease("b", time.Hour) || !lease("a", time.Hour) {
			t.Fatal("a first, b refused, a renews")
		}
		if ok, _ := db.Lease(ctx, "other", "b", time.Hour); !ok {
			t.Fatal("another name is free")
		}

		at, body, err := db.WhaleSnapshot(ctx)
		if err != nil || body != nil || !at.IsZero() {
			t.Fatalf("before any: %v %q %v", at, body, err)
		}
		t0 := time.Now().UTC().Truncate(time.Microsecond)
		if ok, err := db.PutWhaleSnapshot(ctx, "scan", "b", t0, []byte(`{"b":1}`)); ok || err != nil {
			t.Fatalf("non-holder wrote: %v %v", ok, err)
		}
		if ok, err := db.PutWhaleSnapshot(ctx, "scan", "a", t0, []byte(`{"a":1}`)); !ok || err != nil {
			t.Fatalf("holder: %v %v", ok, err)
		}
		if ok, _ := db.PutWhaleSnapshot(ctx, "scan", "a", t0.Add(-time.Second), []byte(`{"old":1}`)); ok {
			t.Fatal("an older snapshot replaced a newer one")
		}
		at, body, err = db.WhaleSnapshot(ctx)
		if err != nil || string(body) != `{"a":1}` || !at.Equal(t0) {
			t.Fatalf("stored %v %q %v, want %v", at, body, err, t0)
		}
		if at2, err := db.WhaleSnapshotTime(ctx); err != nil || !at2.Equal(t0) {
			t.Fatalf("time %v %v", at2, err)
		}

		// Release: b takes it at once; a is refused and cannot write.
		if err := db.ReleaseLease(ctx, "scan", "a"); err != nil {
			t.Fatal(err)
		}
		if !lease("b", 50*time.Millisecond) || lease("a", time.Hour) {
			t.Fatal("b after a's release")
		}
		if ok, _ := db.PutWhaleSnapshot(ctx, "scan", "a", t0.Add(time.Second), []byte(`{"a":2}`)); ok {
			t.Fatal("a former holder wrote")
		}
		// Expiry: b stops renewing, a takes over.
		time.Sleep(100 * time.Millisecond)
		if ok, _ := db.PutWhaleSnapshot(ctx, "scan", "b", t0.Add(time.Second), []byte(`{"b":2}`)); ok {
			t.Fatal("an expired holder wrote")
		}
		if !lease("a", time.Hour) {
			t.Fatal("a after b's expiry")
		}

		// A race for a free lease has one winner.
		if err := db.ReleaseLease(ctx, "scan", "a"); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := db.Lease(ctx, "scan", string(rune('p'+i)), time.Hour)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d winners", wins.Load())
		}
	})
}
