package batch

import (
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
// channel c (found: the server has a record of it): charged + price for a
// deposit or a voucher, charged for a refund. A channel the server has no
// record of is taken at the payer's word (charged is inferred as max -
// price, and the chain's balance and totalClaimed then decide), as the
// official server does.
func (t Terms) Expected(c Channel, found bool, p *Payment) *big.Int {
	switch {
	case !found:
		return new(big.Int).Set(p.MaxClaimable)
	case p.Type == TypeRefund:
		return new(big.Int).Set(c.Charged)
	default:
		return new(big.Int).Add(c.Charged, t.Price)
	}
}

// Charged is what the server has charged on channel c before p: its
// record, or, for a channel it has none of, what p's voucher implies.
func (t Terms) Charged(c Channel, found bool, p *Payment) *big.Int {
	if found {
		return new(big.Int).Set(c.Charged)
	}
	if p.Type == TypeRefund {
		return new(big.Int).Set(p.MaxClaimable)
	}
	if p.MaxClaimable.Cmp(t.Price) < 0 {
		return new(big.Int)
	}
	return new(big.Int).Sub(p.MaxClaimable, t.Price)
}

// Mismatch is the corrective 402 of a voucher that does not sign what the
// server expects: its reason, and the state the client recovers from.
type Mismatch struct {
	*Error
	Channel ChannelState
	Voucher *VoucherState // nil when the server holds no voucher
}

// CheckCumulative refuses a voucher whose cumulative amount is not what
// Expected says, with the state the client needs to recover.
func (t Terms) CheckCumulative(c Channel, found bool, p *Payment) *Mismatch {
	want := t.Expected(c, found, p)
	switch {
	case found && p.MaxClaimable.Cmp(want) == 0:
		return nil
	case !found && (p.Type == TypeRefund || p.MaxClaimable.Cmp(t.Price) >= 0):
		return nil
	}
	m := &Mismatch{Error: refuse(ReasonCumulativeAmountMismatch, "voucher signs %s cumulative, the server expects %s", p.MaxClaimable, want)}
	st := c
	st.ID = p.ChannelID
	if !found {
		st.Charged = t.Charged(c, found, p)
	}
	m.Channel = st.State()
	if found && len(c.Signature) > 0 {
		m.Voucher = &VoucherState{SignedMaxClaimable: decimal(c.SignedMax), Signature: hexutil.Encode(c.Signature)}
	}
	return m
}

// VerifyLocally checks a voucher against the channel's mirrored on-chain
// state without asking anyone: its signature is the payer authorizer's,
// it stays within the deposit and above what was claimed. fresh reports
// whether the mirror was read within ttl of now; a stale mirror, or a
// channel whose payer authorizer is a contract (zero: EIP-1271), is the
// facilitator's to verify.
func (t Terms) VerifyLocally(c Channel, p *Payment, now time.Time, ttl time.Duration) (fresh bool, err error) {
	if c.SyncedAt.IsZero() || now.Sub(c.SyncedAt) > ttl || p.Config.PayerAuthorizer == (common.Address{}) {
		return false, nil
	}
	signer, err := payment.RecoverDigest(t.Escrow.VoucherDigest(p.ChannelID, p.MaxClaimable), p.Signature)
	if err != nil || signer != p.Config.PayerAuthorizer {
		return true, refuse(ReasonVoucherSignature, "the voucher is not signed by the channel's payerAuthorizer %s", p.Config.PayerAuthorizer.Hex())
	}
	switch {
	case c.Balance == nil || c.Balance.Sign() == 0:
		return true, refuse(ReasonChannelNotFound, "channel %s has no deposit", p.ChannelID.Hex())
	case p.MaxClaimable.Cmp(c.Balance) > 0:
		return true, refuse(ReasonCumulativeExceedsBalance, "voucher signs %s, the channel holds %s", p.MaxClaimable, c.Balance)
	case c.TotalClaimed != nil && p.MaxClaimable.Cmp(c.TotalClaimed) <= 0:
		return true, refuse(ReasonCumulativeBelowClaimed, "voucher signs %s, %s is claimed already", p.MaxClaimable, c.TotalClaimed)
	}
	return true, nil
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
	if c.Pending == nil || c.Pending.ID != id {
		return refuse(ReasonChannelBusy, "this request's hold on the channel was lost (it expired and another request took it); retry")
	}
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
	c.LastRequest, c.Pending = now, nil
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
