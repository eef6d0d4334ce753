package store_test

import (
	"context"
	"errors"
	"math/big"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment/batch"
)

func channelID(b byte) common.Hash { return common.BytesToHash([]byte{0x80, b}) }

// TestChannels: a channel is created, read back whole, updated, kept,
// refused by its update function without a trace, listed and deleted,
// on both engines.
func TestChannels(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s, err := e.open(ctx, e.place(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		id := channelID(1)
		if _, found, err := s.Channel(ctx, id); found || err != nil {
			t.Fatalf("an unknown channel: found %v, %v", found, err)
		}
		synced := time.Date(2026, 11, 23, 8, 0, 0, 123456789, time.UTC)
		want := batch.Channel{
			ID: id,
			Config: batch.Config{Payer: common.HexToAddress("0x11"), PayerAuthorizer: common.HexToAddress("0x11"),
				Receiver: common.HexToAddress("0x22"), ReceiverAuthorizer: common.HexToAddress("0x33"), Token: common.HexToAddress("0x44"),
				WithdrawDelay: 900, Salt: common.HexToHash("0x5a")},
			Charged: big.NewInt(50_000), SignedMax: big.NewInt(50_000), Signature: []byte{1, 2, 3},
			// a uint128 beyond int64, as the chain allows
			Balance: new(big.Int).Lsh(big.NewInt(1), 100), TotalClaimed: big.NewInt(0), RefundNonce: big.NewInt(0),
			WithdrawRequestedAt: 0, SyncedAt: synced, LastRequest: synced, UnclaimedSince: synced.Add(-time.Second),
			Pending: &batch.Reservation{ID: "r1", SignedMax: big.NewInt(100_000), ExpiresAt: synced.Add(time.Minute)},
			Opened:  true, OwnClaimed: big.NewInt(40_000), StoppedAt: synced.Add(time.Hour), StopEvidence: batch.EvidenceVoucherAhead,
			StopDetail: "a voucher signing 150000 while this server charged 50000",
		}
		got, err := s.UpdateChannel(ctx, id, func(c *batch.Channel, found bool) (batch.Change, error) {
			if found || c.ID != id {
				t.Errorf("a new channel: found %v, id %s", found, c.ID.Hex())
			}
			*c = want
			return batch.Save, nil
		})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("create: %+v %v", got, err)
		}
		read, found, err := s.Channel(ctx, id)
		if read.Version == "" {
			t.Error("a channel read back carries no version")
		}
		read.Version = ""
		if err != nil || !found || !reflect.DeepEqual(read, want) {
			t.Fatalf("read back:\n%+v\nwant\n%+v (%v)", read, want, err)
		}

		// An update that fails or keeps writes nothing.
		boom := errors.New("voucher does not match")
		if _, err := s.UpdateChannel(ctx, id, func(c *batch.Channel, _ bool) (batch.Change, error) {
			c.Charged = big.NewInt(1)
			return batch.Save, boom
		}); !errors.Is(err, boom) {
			t.Errorf("a failing update: %v", err)
		}
		if _, err := s.UpdateChannel(ctx, id, func(c *batch.Channel, _ bool) (batch.Change, error) {
			c.Charged = big.NewInt(2)
			return batch.Keep, nil
		}); err != nil {
			t.Fatal(err)
		}
		if read, _, _ := s.Channel(ctx, id); read.Charged.Cmp(want.Charged) != 0 {
			t.Errorf("charged %s after a failed and a kept update, want %s", read.Charged, want.Charged)
		}

		// Commit: charged moves, the reservation goes.
		if _, err := s.UpdateChannel(ctx, id, func(c *batch.Channel, found bool) (batch.Change, error) {
			c.Charged.Add(c.Charged, big.NewInt(50_000))
			c.Pending = nil
			return batch.Save, nil
		}); err != nil {
			t.Fatal(err)
		}
		if read, _, _ := s.Channel(ctx, id); read.Charged.Int64() != 100_000 || read.Pending != nil {
			t.Errorf("after commit: charged %s, pending %+v", read.Charged, read.Pending)
		}

		other := channelID(2)
		if _, err := s.UpdateChannel(ctx, other, func(c *batch.Channel, _ bool) (batch.Change, error) {
			c.Charged = big.NewInt(7)
			return batch.Save, nil
		}); err != nil {
			t.Fatal(err)
		}
		all, err := s.Channels(ctx)
		if err != nil || len(all) != 2 || all[0].ID != id || all[1].ID != other || all[1].Balance.Sign() != 0 {
			t.Fatalf("channels: %+v %v", all, err)
		}
		if _, err := s.UpdateChannel(ctx, id, func(*batch.Channel, bool) (batch.Change, error) { return batch.Delete, nil }); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := s.Channel(ctx, id); found {
			t.Error("a deleted channel is still there")
		}
	})
}

// TestUpdateChannelFrom: an update started from a copy read earlier is
// written from the copy only while the row is as it was read; after any
// write in between (another update, a deletion and a new row) it runs
// again on the row as it is, and so does an update that refuses the copy.
func TestUpdateChannelFrom(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		s, err := e.open(ctx, e.place(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		set := func(id common.Hash, charged int64) {
			t.Helper()
			if _, err := s.UpdateChannel(ctx, id, func(c *batch.Channel, _ bool) (batch.Change, error) {
				c.Charged = big.NewInt(charged)
				return batch.Save, nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		for i, tc := range []struct {
			name string
			// between runs after the copy is read, before the update.
			between func(id common.Hash)
			// refuse makes the update refuse a charged total below it.
			refuse int64
			// runs is how many times the update runs; charged what it
			// leaves.
			runs    int
			charged int64
		}{
			{name: "unchanged", between: func(common.Hash) {}, runs: 1, charged: 11},
			{name: "written meanwhile", between: func(id common.Hash) { set(id, 5) }, runs: 2, charged: 6},
			{name: "same value written meanwhile", between: func(id common.Hash) { set(id, 10) }, runs: 2, charged: 11},
			{name: "deleted and written again", between: func(id common.Hash) {
				if _, err := s.UpdateChannel(ctx, id, func(*batch.Channel, bool) (batch.Change, error) { return batch.Delete, nil }); err != nil {
					t.Fatal(err)
				}
				set(id, 20)
			}, runs: 2, charged: 21},
			{name: "refused on the copy", between: func(id common.Hash) { set(id, 30) }, refuse: 30, runs: 2, charged: 31},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := channelID(byte(0x40 + i))
				set(id, 10)
				from, found, err := s.Channel(ctx, id)
				if err != nil || !found {
					t.Fatal(found, err)
				}
				tc.between(id)
				runs := 0
				got, err := s.UpdateChannelFrom(ctx, from, func(c *batch.Channel, found bool) (batch.Change, error) {
					runs++
					if !found {
						return batch.Keep, errors.New("not found")
					}
					if c.Charged.Int64() < tc.refuse {
						return batch.Keep, errors.New("refused")
					}
					c.Charged = new(big.Int).Add(c.Charged, big.NewInt(1))
					return batch.Save, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				read, _, err := s.Channel(ctx, id)
				if err != nil || runs != tc.runs || got.Charged.Int64() != tc.charged || read.Charged.Int64() != tc.charged {
					t.Errorf("ran %d times, returned %s, stored %s (%v); want %d runs, %d", runs, got.Charged, read.Charged, err, tc.runs, tc.charged)
				}
				if read.Version == from.Version {
					t.Error("the version did not change with the write")
				}
			})
		}
	})
}

// TestChannelUpdatesAcrossInstances: concurrent read-modify-write updates
// of one channel from two stores on one database (two replicas), the
// channel's creation included, lose none, whether they read the row in
// the update or start from a copy read before it.
func TestChannelUpdatesAcrossInstances(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, e engine) {
		ctx := context.Background()
		place := e.place(t)
		replicas := twoStores(t, e, place)
		const channels, updates = 3, 24
		var wg sync.WaitGroup
		for k := range channels {
			for i := range updates {
				wg.Go(func() {
					r, id := replicas[i%2], channelID(byte(k))
					increment := func(c *batch.Channel, found bool) (batch.Change, error) {
						if !found {
							c.Charged = new(big.Int)
						}
						c.Charged = new(big.Int).Add(c.Charged, big.NewInt(1))
						return batch.Save, nil
					}
					// Half start from a copy read first, as a voucher does.
					from, found, err := r.Channel(ctx, id)
					if err == nil && found && i%4 >= 2 {
						_, err = r.UpdateChannelFrom(ctx, from, increment)
					} else if err == nil {
						_, err = r.UpdateChannel(ctx, id, increment)
					}
					if err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		for k := range channels {
			c, found, err := replicas[0].Channel(ctx, channelID(byte(k)))
			if err != nil || !found || c.Charged.Int64() != updates {
				t.Errorf("channel %d: charged %v after %d increments (%v)", k, c.Charged, updates, err)
			}
		}
	})
}
