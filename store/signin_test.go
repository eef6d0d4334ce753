package store_test

import (
	"context"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/batch"
)

// TestSignInNonces: of many requests spending one nonce at once, on two
// stores of one database, exactly one finds it fresh; a nonce spent more
// than an hour ago is forgotten.
func TestSignInNonces(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		replicas := twoStores(t, e, e.place(t))
		now := time.Now()
		var fresh atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				ok, err := replicas[i%2].UseNonce(ctx, "a1b2c3d4e5f67890a1b2c3d4e5f67890", now)
				if err != nil {
					t.Error(err)
				}
				if ok {
					fresh.Add(1)
				}
			})
		}
		wg.Wait()
		if fresh.Load() != 1 {
			t.Errorf("%d requests spent one nonce; want 1", fresh.Load())
		}
		if ok, err := replicas[0].UseNonce(ctx, "a1b2c3d4e5f67890a1b2c3d4e5f67890", now.Add(2*time.Hour)); err != nil || !ok {
			t.Errorf("a nonce spent two hours ago: fresh %v (%v); want forgotten", ok, err)
		}
	})
}

// TestPurchases: a wallet's purchases are its settled exact payments'
// answers, its channels' last answers and its payment identifiers'
// answers within the window; another wallet's are not among them.
func TestPurchases(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s, err := e.open(ctx, e.place(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		now := time.Now()
		payer, other := common.HexToAddress("0x88E01A5eAE22D14dF00b1892576639534634e6aC"), common.HexToAddress("0x00000000000000000000000000000000000000aa")
		price := big.NewInt(50_000)
		// A voucher call on payer's channel, its answer kept on the channel.
		if _, err := s.UpdateChannel(ctx, common.HexToHash("0x77"), func(c *batch.Channel, _ bool) (batch.Change, error) {
			c.Config.Payer = payer
			c.Charged, c.SignedMax, c.Balance = price, price, big.NewInt(1e9)
			c.NewCharge = &batch.Charge{Operation: "regime", Resource: "/regime", Amount: price, Cumulative: price, At: now}
			c.Answer = &batch.Answer{Resource: "/regime", ContentType: "application/json", Body: []byte(`{"from":"channel"}`),
				Settlement: []byte(`{"success":true,"transaction":"","network":"eip155:8453","payer":"` + payer.Hex() + `"}`), At: now}
			return batch.Save, nil
		}); err != nil {
			t.Fatal(err)
		}
		// An answered payment identifier, and one of another wallet.
		for i, who := range []common.Address{payer, other} {
			r := payment.IDRecord{ID: "pay_purchase_" + string(rune('a'+i)) + "_0123456789", Operation: "regime", Resource: "/regime?window=7",
				PayloadHash: "00", Owner: "o", Created: now}
			if _, _, err := s.ReserveID(ctx, r, now.Add(-time.Minute), now.Add(-time.Hour)); err != nil {
				t.Fatal(err)
			}
			r.Payer, r.Done, r.ContentType, r.Body, r.Settlement, r.Finished = who.Hex(), true, "application/json", []byte(`{"from":"id"}`),
				[]byte(`{"success":true,"transaction":"0xabc","network":"eip155:8453","payer":"`+who.Hex()+`"}`), now
			if err := s.FinishID(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Purchases(ctx, payer, "regime", now.Add(-10*time.Minute))
		bodies := map[string]string{}
		for _, p := range got {
			bodies[p.Resource] = string(p.Body)
		}
		if err != nil || len(got) != 2 || bodies["/regime"] != `{"from":"channel"}` || bodies["/regime?window=7"] != `{"from":"id"}` {
			t.Errorf("payer's purchases %v (%v); want the channel's answer and the id's", bodies, err)
		}
		if later, err := s.Purchases(ctx, payer, "regime", now.Add(time.Minute)); err != nil || len(later) != 0 {
			t.Errorf("purchases after the window's start: %d (%v); want none", len(later), err)
		}
		if others, err := s.Purchases(ctx, payer, "lanes", now.Add(-10*time.Minute)); err != nil || len(others) != 0 {
			t.Errorf("purchases of another operation: %d (%v); want none", len(others), err)
		}
	})
}
