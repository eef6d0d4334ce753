package batch

import (
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment"
)

// Terms is what the server asks of a channel that pays one route: the
// channel's receiver side and token, and the price of one request.
type Terms struct {
	Escrow             Escrow
	Receiver           common.Address // payTo
	ReceiverAuthorizer common.Address
	Token              common.Address
	WithdrawDelay      uint64
	Price              *big.Int
}

// Bind checks that p's channel is one these terms accept: the receiver
// side, the token and the delay are ours, and the channel id is the one
// its config derives.
func (t Terms) Bind(p *Payment) error {
	c := p.Config
	switch {
	case c.Receiver != t.Receiver:
		return refuse(ReasonReceiverMismatch, "channel receiver %s, want %s", c.Receiver.Hex(), t.Receiver.Hex())
	case c.ReceiverAuthorizer != t.ReceiverAuthorizer:
		return refuse(ReasonReceiverAuthorizerMismatch, "channel receiverAuthorizer %s, want %s", c.ReceiverAuthorizer.Hex(), t.ReceiverAuthorizer.Hex())
	case c.Token != t.Token:
		return refuse(ReasonTokenMismatch, "channel token %s, want %s", c.Token.Hex(), t.Token.Hex())
	case c.WithdrawDelay != t.WithdrawDelay:
		return refuse(ReasonWithdrawDelayMismatch, "channel withdrawDelay %d, want %d", c.WithdrawDelay, t.WithdrawDelay)
	}
	if id := t.Escrow.ChannelID(c); id != p.ChannelID {
		return refuse(ReasonChannelIDMismatch, "voucher channelId %s, the config's is %s", p.ChannelID.Hex(), id.Hex())
	}
	return nil
}

// Expected is the cumulative amount a payment's voucher must sign on
// channel c, which this store opened: charged + price for a deposit or a
// voucher, charged for a refund.
func (t Terms) Expected(c Channel, p *Payment) *big.Int {
	if p.Type == TypeRefund {
		return new(big.Int).Set(orZero(c.Charged))
	}
	return new(big.Int).Add(orZero(c.Charged), t.Price)
}

// Mismatch is a voucher that does not sign what the server expects. One
// below is answered with the corrective 402: its reason, and the state
// the client recovers from. One above (Ahead) is never corrected: the
// payer signed for charges this store did not make, which another server
// made (docs/batch-settlement.md, "Servers with separate books"), and a
// corrective 402 would have the payer sign that range again here.
type Mismatch struct {
	*Error
	Ahead   bool
	Channel ChannelState
	Voucher *VoucherState // nil when the server holds no voucher
}

// CheckCumulative refuses a voucher on channel c (opened by this store)
// whose cumulative amount is not what Expected says.
func (t Terms) CheckCumulative(c Channel, p *Payment) *Mismatch {
	want := t.Expected(c, p)
	switch p.MaxClaimable.Cmp(want) {
	case 0:
		return nil
	case 1:
		return &Mismatch{Ahead: true, Error: refuse(ReasonChannelChargedElsewhere,
			"the voucher signs %s cumulative; this server charged %s on the channel and expects %s: the payer signed for charges made at another server",
			p.MaxClaimable, orZero(c.Charged), want)}
	}
	m := &Mismatch{Error: refuse(ReasonCumulativeAmountMismatch, "voucher signs %s cumulative, the server expects %s", p.MaxClaimable, want)}
	st := c
	st.ID = p.ChannelID
	m.Channel = st.State()
	if len(c.Signature) > 0 {
		m.Voucher = &VoucherState{SignedMaxClaimable: decimal(c.SignedMax), Signature: hexutil.Encode(c.Signature)}
	}
	return m
}

// Signed checks that p's voucher is signed by its channel's payer
// authorizer exactly as the escrow will check it when it is claimed
// (payment.RecoverDigest: 65 bytes, v 27/28, low s), before anything
// about the channel is read or revealed. A payer authorizer of zero (a
// voucher checked by EIP-1271 against the payer) is not accepted.
func (t Terms) Signed(p *Payment) error {
	if p.Config.PayerAuthorizer == (common.Address{}) {
		return refuse(ReasonVoucherSignature, "payerAuthorizer is zero (a voucher checked by EIP-1271 against the payer): not supported")
	}
	signer, err := payment.RecoverDigest(t.Escrow.VoucherDigest(p.ChannelID, p.MaxClaimable), p.Signature)
	if err != nil || signer != p.Config.PayerAuthorizer {
		msg := fmt.Sprintf("the voucher is not signed by the channel's payerAuthorizer %s", p.Config.PayerAuthorizer.Hex())
		if err != nil {
			msg += " (" + err.Error() + "; the escrow accepts 65-byte signatures with v 27 or 28 and a low s)"
		}
		return refuse(ReasonVoucherSignature, "%s", msg)
	}
	return nil
}

// errStale asks for the escrow's state to be read again: the mirror is
// too old to judge a voucher by, or does not cover it (a deposit may have
// landed that the mirror does not show yet, a refund may have landed).
var errStale = errors.New("batch: the channel's mirror must be refreshed")

// Payable checks, against channel c as the update that reserves it is
// about to write it, that p's voucher can be claimed on chain: the
// channel holds a deposit, the voucher stays within what the escrow will
// hold once any refund in flight lands (plus, for a deposit, the deposit
// itself) and above what was claimed. With verified false (no state was
// read for this request) a mirror older than ttl, a refund in flight or a
// voucher beyond the mirrored balance ask for a fresh read (errStale)
// rather than a refusal: a deposit someone else landed is then seen at
// once.
func Payable(c Channel, p *Payment, now time.Time, ttl time.Duration, verified bool) error {
	if !verified && (c.SyncedAt.IsZero() || now.Sub(c.SyncedAt) > ttl || c.RefundPending != nil) {
		return errStale
	}
	holds := new(big.Int).Set(orZero(c.Balance))
	if p.Deposit != nil {
		holds.Add(holds, p.Deposit.Amount)
	}
	if r := c.RefundPending; r != nil {
		holds.Sub(holds, orZero(r.Amount))
	}
	switch {
	case holds.Sign() <= 0 && p.Deposit == nil && c.RefundPending == nil:
		if !verified {
			return errStale
		}
		return refuse(ReasonChannelNotFound, "channel %s has no deposit", p.ChannelID.Hex())
	case p.MaxClaimable.Cmp(holds) > 0:
		if !verified {
			return errStale
		}
		if c.RefundPending != nil {
			return refuse(ReasonCumulativeExceedsBalance, "voucher signs %s; once the refund in flight lands the channel holds %s", p.MaxClaimable, holds)
		}
		return refuse(ReasonCumulativeExceedsBalance, "voucher signs %s, the channel holds %s", p.MaxClaimable, holds)
	case p.MaxClaimable.Cmp(orZero(c.TotalClaimed)) <= 0:
		return refuse(ReasonCumulativeBelowClaimed, "voucher signs %s, %s is claimed already", p.MaxClaimable, orZero(c.TotalClaimed))
	}
	return nil
}

// refundSent records on c a cooperative refund o asked of the
// facilitator at now: in flight until a read shows its nonce used (Adopt).
// Refunds at one nonce are counted and the largest amount kept: only one
// can land, and which is not known.
func (c *Channel) refundSent(o RefundOrder, now time.Time) {
	if r := c.RefundPending; r != nil && r.Nonce.Cmp(o.Nonce) == 0 {
		if o.Amount.Cmp(r.Amount) > 0 {
			r.Amount = new(big.Int).Set(o.Amount)
		}
		r.Orders++
	} else {
		c.RefundPending = &PendingRefund{Nonce: new(big.Int).Set(o.Nonce), Amount: new(big.Int).Set(o.Amount), Orders: 1, At: now}
	}
	c.LastRefundAt = now
}

// refundFailed records on c that a refund at nonce cannot land (refused,
// reverted); it reports whether c had it in flight. Another sent at that
// nonce still may (its amount stays counted: the largest). The refusal
// may also mean one landed that the mirror does not show: the next
// voucher reads the chain first.
func (c *Channel) refundFailed(nonce *big.Int) bool {
	r := c.RefundPending
	if r == nil || r.Nonce.Cmp(nonce) != 0 {
		return false
	}
	if r.Orders--; r.Orders <= 0 {
		c.RefundPending = nil
	}
	c.SyncedAt = time.Time{}
	return true
}

// Adopt merges a read of the escrow's state, made at or after now's
// request began, into channel c's mirror, never letting an older read
// undo what a newer one (or the watcher) recorded. Reads race: a
// request's read may finish after a refund's, yet show the state from
// before it. The refund nonce orders them: it only grows, and every
// refund moves it. Within one nonce the balance only grows (deposits)
// except when a timed withdrawal is finalized, which also clears the
// withdrawal; claims only grow. A read showing the nonce past a refund in
// flight ends it: that refund landed (no one else can sign one).
func Adopt(c *Channel, st OnChain, now time.Time) {
	nonce, balance, claimed := orZero(st.RefundNonce), orZero(st.Balance), orZero(st.TotalClaimed)
	switch cmp := nonce.Cmp(orZero(c.RefundNonce)); {
	case cmp < 0:
		// Older than the mirror: only its claims can be news.
	case cmp > 0 || c.SyncedAt.IsZero():
		// Newer, or a mirror that must be read again: its balance is
		// taken. A withdrawal the mirror holds (perhaps the watcher's,
		// newer than the read) stays unless the read shows it ended: gone
		// with the balance fallen (a refund covering it, or finalized).
		ended := st.WithdrawRequestedAt == 0 && balance.Cmp(orZero(c.Balance)) < 0
		if ended || st.WithdrawRequestedAt > c.WithdrawRequestedAt {
			c.WithdrawRequestedAt = st.WithdrawRequestedAt
		}
		c.Balance = new(big.Int).Set(balance)
	case c.WithdrawRequestedAt != 0 && st.WithdrawRequestedAt == 0 && balance.Cmp(orZero(c.Balance)) < 0:
		// The withdrawal was finalized: the balance fell.
		c.Balance, c.WithdrawRequestedAt = new(big.Int).Set(balance), 0
	default:
		if balance.Cmp(orZero(c.Balance)) > 0 {
			c.Balance = new(big.Int).Set(balance)
		}
		c.WithdrawRequestedAt = max(c.WithdrawRequestedAt, st.WithdrawRequestedAt)
	}
	if nonce.Cmp(orZero(c.RefundNonce)) > 0 {
		c.RefundNonce = new(big.Int).Set(nonce)
	}
	if claimed.Cmp(orZero(c.TotalClaimed)) > 0 {
		c.TotalClaimed = new(big.Int).Set(claimed)
	}
	if r := c.RefundPending; r != nil && orZero(c.RefundNonce).Cmp(orZero(r.Nonce)) > 0 {
		c.RefundPending = nil
	}
	if now.After(c.SyncedAt) {
		c.SyncedAt = now
	}
}

// empty reports whether st is a channel no one has opened: no balance
// and nothing claimed (claims never exceed the balance, which only
// refunds and withdrawals lower).
func empty(st OnChain) bool {
	return orZero(st.Balance).Sign() == 0 && orZero(st.TotalClaimed).Sign() == 0
}

// claiming records on c that a claim of total is about to be sent (the
// claimer's, or a refund's): a claimed total the escrow shows above the
// highest of them was claimed by someone else.
func (c *Channel) claiming(total *big.Int) {
	if total != nil && total.Cmp(orZero(c.OwnClaimed)) > 0 {
		c.OwnClaimed = new(big.Int).Set(total)
	}
}

// Reserve holds channel c for request id until expires, for a voucher of
// max: one request at a time per channel. It refuses with channel_busy
// while another live reservation holds it.
func Reserve(c *Channel, id string, max *big.Int, now, expires time.Time) error {
	if c.Pending.Live(now) && c.Pending.ID != id {
		return refuse(ReasonChannelBusy, "another request on this channel is being served; retry")
	}
	c.Pending = &Reservation{ID: id, SignedMax: new(big.Int).Set(max), ExpiresAt: expires}
	return nil
}

// Commit charges price on channel c for the request holding reservation
// id, after its handler succeeded, and stores its voucher.
func Commit(c *Channel, id string, price, max *big.Int, sig []byte, now time.Time) error {
	if c.Pending == nil || c.Pending.ID != id || !c.Pending.Live(now) {
		return refuse(ReasonChannelBusy, "this request's hold on the channel expired before it was answered; retry")
	}
	if err := charge(c, price, max, sig, now); err != nil {
		return err
	}
	c.Pending = nil
	return nil
}

// charge adds price to channel c's charged total under the voucher of max
// (never beyond it) and stores the voucher.
func charge(c *Channel, price, max *big.Int, sig []byte, now time.Time) error {
	charged := new(big.Int).Add(orZero(c.Charged), price)
	if charged.Cmp(max) > 0 {
		return refuse(ReasonChargeExceedsSigned, "charging %s would exceed the voucher's %s", charged, max)
	}
	claimed := orZero(c.TotalClaimed)
	// The channel's value starts waiting for a claim: it held none
	// unclaimed before (or was written before the age was kept).
	if charged.Cmp(claimed) > 0 && (orZero(c.Charged).Cmp(claimed) <= 0 || c.UnclaimedSince.IsZero()) {
		c.UnclaimedSince = now
	}
	c.Charged, c.SignedMax, c.Signature = charged, new(big.Int).Set(max), append([]byte(nil), sig...)
	c.LastRequest = now
	return nil
}

// Release drops reservation id (a handler that failed, a refused
// settlement): nothing is charged.
func Release(c *Channel, id string) bool {
	if c.Pending == nil || c.Pending.ID != id {
		return false
	}
	c.Pending = nil
	return true
}

func orZero(x *big.Int) *big.Int {
	if x == nil {
		return new(big.Int)
	}
	return x
}
