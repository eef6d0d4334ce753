package store

import (
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/payment/batch"
)

// TestVoucherOnly: casVoucher writes a charge's columns only when every
// other field of the channel is as it was read; a change to any other
// field, each tried alone, takes the whole row (casChannel). A field
// added to batch.Channel fails this test until it is classified.
func TestVoucherOnly(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	from := batch.Channel{ID: common.HexToHash("0x01"), Charged: big.NewInt(100), SignedMax: big.NewInt(100), Balance: big.NewInt(1000),
		TotalClaimed: big.NewInt(0), RefundNonce: big.NewInt(0), SyncedAt: t0, Opened: true, OwnClaimed: big.NewInt(0)}
	// What a voucher's charge writes (casVoucher), and what is not a column.
	charge := map[string]func(c *batch.Channel){
		"ID":             nil,
		"Charged":        func(c *batch.Channel) { c.Charged = big.NewInt(150) },
		"SignedMax":      func(c *batch.Channel) { c.SignedMax = big.NewInt(150) },
		"Signature":      func(c *batch.Channel) { c.Signature = []byte{1} },
		"LastRequest":    func(c *batch.Channel) { c.LastRequest = t0 },
		"UnclaimedSince": func(c *batch.Channel) { c.UnclaimedSince = t0 },
		"Answer":         func(c *batch.Channel) { c.Answer = &batch.Answer{Resource: "/regime", At: t0} },
		"NewCharge":      func(c *batch.Channel) { c.NewCharge = &batch.Charge{Operation: "regime"} },
		"Version":        func(c *batch.Channel) { c.Version = "1@x" },
	}
	other := map[string]func(c *batch.Channel){
		"Config":              func(c *batch.Channel) { c.Config.Salt = common.HexToHash("0x02") },
		"Balance":             func(c *batch.Channel) { c.Balance = big.NewInt(2000) },
		"TotalClaimed":        func(c *batch.Channel) { c.TotalClaimed = big.NewInt(50) },
		"WithdrawRequestedAt": func(c *batch.Channel) { c.WithdrawRequestedAt = 1 },
		"RefundNonce":         func(c *batch.Channel) { c.RefundNonce = big.NewInt(1) },
		"SyncedAt":            func(c *batch.Channel) { c.SyncedAt = t0.Add(time.Second) },
		"Pending":             func(c *batch.Channel) { c.Pending = &batch.Reservation{ID: "r"} },
		"RefundPending":       func(c *batch.Channel) { c.RefundPending = &batch.PendingRefund{Nonce: big.NewInt(0)} },
		"LastRefundAt":        func(c *batch.Channel) { c.LastRefundAt = t0 },
		"Opened":              func(c *batch.Channel) { c.Opened = false },
		"OwnClaimed":          func(c *batch.Channel) { c.OwnClaimed = big.NewInt(100) },
		"StoppedAt":           func(c *batch.Channel) { c.StoppedAt = t0 },
		"StopEvidence":        func(c *batch.Channel) { c.StopEvidence = batch.EvidenceVoucherAhead },
		"StopDetail":          func(c *batch.Channel) { c.StopDetail = "seen" },
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[batch.Channel]()) {
		_, c := charge[f.Name]
		_, o := other[f.Name]
		if c == o {
			t.Errorf("batch.Channel.%s is neither a charge's column nor another: classify it here and in voucherOnly", f.Name)
		}
	}
	for name, edit := range charge {
		c := from
		if edit != nil {
			edit(&c)
		}
		if !voucherOnly(from, c) {
			t.Errorf("a change of %s alone is taken for more than a charge", name)
		}
	}
	for name, edit := range other {
		c := from
		edit(&c)
		if voucherOnly(from, c) {
			t.Errorf("a change of %s is written as a charge only: it would be lost", name)
		}
	}
}
