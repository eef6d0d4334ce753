package store

import (
	"context"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/store/pgtest"
)

var pipePrice = big.NewInt(50_000)

// pipeChannel is the id of test channel k.
func pipeChannel(k int) common.Hash { return common.BytesToHash([]byte{0x90, byte(k)}) }

// openPipeChannel writes an opened, funded channel with nothing charged.
func openPipeChannel(t *testing.T, s *DB, id common.Hash) {
	t.Helper()
	if _, err := s.UpdateChannel(context.Background(), id, func(c *batch.Channel, _ bool) (batch.Change, error) {
		*c = batch.Channel{ID: id, Charged: new(big.Int), SignedMax: new(big.Int), Balance: big.NewInt(1e12), TotalClaimed: new(big.Int),
			RefundNonce: new(big.Int), OwnClaimed: new(big.Int), Opened: true}
		c.Config.Payer = common.HexToAddress("0x88E01A5eAE22D14dF00b1892576639534634e6aC")
		return batch.Save, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// voucherCall is a voucher's update of a channel: one price more, its
// charge and its answer.
func voucherCall(c *batch.Channel, _ bool) (batch.Change, error) {
	c.Charged = new(big.Int).Add(c.Charged, pipePrice)
	c.SignedMax = c.Charged
	c.NewCharge = &batch.Charge{Operation: "regime", Resource: "/regime", Amount: pipePrice, Cumulative: c.Charged, At: time.Now()}
	c.Answer = &batch.Answer{Resource: "/regime", ContentType: "application/json", Body: []byte(`{"regime":"RANGE"}`), At: time.Now()}
	return batch.Save, nil
}

// TestPipedCharges: PostgreSQL's voucher charges written in batches
// (pipe.go) by two replicas at once, two streams of vouchers a channel,
// so that some find their channel's row moved on in their batch and are
// written again from the row: every channel ends charged once per
// voucher, the books hold one charge per voucher, and the totals add up
// to them.
func TestPipedCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	var replicas [2]*DB
	for i := range replicas {
		s, err := OpenPostgres(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		replicas[i] = s
	}
	const channels, vouchers = 12, 30
	for k := range channels {
		openPipeChannel(t, replicas[0], pipeChannel(k))
	}
	var wg sync.WaitGroup
	for k := range channels {
		for lane := range 2 { // two sequential streams a channel
			wg.Go(func() {
				for i := range vouchers / 2 {
					s := replicas[(k+i+lane)%2]
					from, _, err := s.Channel(ctx, pipeChannel(k))
					if err == nil {
						_, err = s.UpdateChannelFrom(ctx, from, voucherCall)
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	want := new(big.Int).Mul(pipePrice, big.NewInt(vouchers))
	for k := range channels {
		c, _, err := replicas[1].Channel(ctx, pipeChannel(k))
		if err != nil || c.Charged.Cmp(want) != 0 {
			t.Errorf("channel %d: charged %v (%v); want %s", k, c.Charged, err, want)
		}
	}
	charges, err := replicas[0].BatchCharges(ctx, Filter{})
	if err != nil || len(charges) != channels*vouchers {
		t.Fatalf("%d charges in the books (%v); want %d", len(charges), err, channels*vouchers)
	}
	totals, err := replicas[1].Totals(ctx)
	wantSum := new(big.Int).Mul(want, big.NewInt(channels))
	if err != nil || totals["regime"].Paid != channels*vouchers || totals["regime"].Amount != wantSum.String() {
		t.Errorf("totals %+v (%v); want %d calls, %s", totals["regime"], err, channels*vouchers, wantSum)
	}
}

// TestPipeBatchFailure: a batch in which one charge fails (its key is
// already in the books) writes nothing, and hands every charge back to
// be written alone; written alone, the others succeed and the failing
// one fails by itself.
func TestPipeBatchFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := OpenPostgres(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var froms []batch.Channel
	var queued []*pipeCharge
	for k := range 3 {
		id := pipeChannel(k)
		openPipeChannel(t, s, id)
		from, _, err := s.Channel(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		froms = append(froms, from)
		c := from
		voucherCall(&c, true)
		was, updated, _ := parseVersion(from.Version)
		pc, err := newPipeCharge(ctx, c, append(voucherArgs(c), was, updated))
		if err != nil {
			t.Fatal(err)
		}
		pc.result = make(chan struct{})
		queued = append(queued, pc)
	}
	// The middle channel's first charge is already in the books.
	if _, err := s.db.ExecContext(ctx, insertBatchCharge, channelKey(pipeChannel(1)), pipePrice.String(), "regime", "/regime",
		"0x00", "0x00", "0x00", pipePrice.String(), stamp(time.Now())); err != nil {
		t.Fatal(err)
	}
	s.pipe.write(queued)
	for k, pc := range queued {
		if !pc.alone || pc.wrote || pc.err != nil {
			t.Errorf("charge %d: alone %v, wrote %v, err %v; want to be written alone", k, pc.alone, pc.wrote, pc.err)
		}
		if c, _, err := s.Channel(ctx, pipeChannel(k)); err != nil || c.Charged.Sign() != 0 {
			t.Errorf("channel %d charged %v after a failed batch (%v)", k, c.Charged, err)
		}
	}
	for k, from := range froms {
		_, err := s.UpdateChannelFrom(ctx, from, voucherCall)
		if (err != nil) != (k == 1) {
			t.Errorf("channel %d written alone: %v", k, err)
		}
	}
	totals, err := s.Totals(ctx)
	if err != nil || totals["regime"].Paid != 2 {
		t.Errorf("totals %+v (%v); want the 2 charges written alone", totals["regime"], err)
	}
}
