package batch

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// Tollgate's own reason codes of the scheme's server side (the
// specification leaves these choices to the server).
const (
	// ReasonWithdrawalPending refuses new vouchers on a channel whose
	// payer's timed withdrawal is about to be finalizable.
	ReasonWithdrawalPending = reasonPrefix + "withdrawal_pending"
	// ReasonRefundTooSoon refuses a cooperative refund asked within
	// RefundInterval of the channel's last one.
	ReasonRefundTooSoon = reasonPrefix + "refund_too_soon"
	// ReasonRefundBelowMinimum refuses a cooperative refund of less than
	// MinRefund.
	ReasonRefundBelowMinimum = reasonPrefix + "refund_below_minimum"
	// ReasonChannelClaimedElsewhere refuses payments on a channel the
	// escrow shows claimed beyond what this server claimed.
	ReasonChannelClaimedElsewhere = reasonPrefix + "channel_claimed_elsewhere"
	// ReasonChannelChargedElsewhere refuses payments on a channel whose
	// payer signed a voucher ahead of this server's books: another server
	// charged it.
	ReasonChannelChargedElsewhere = reasonPrefix + "channel_charged_elsewhere"
	// ReasonChannelOpenedElsewhere refuses payments on a channel this
	// server did not open, which the escrow shows funded.
	ReasonChannelOpenedElsewhere = reasonPrefix + "channel_opened_elsewhere"
)

// ServerConfig is the scheme's server side: the channels it accepts and
// how it serves them.
type ServerConfig struct {
	Escrow Escrow
	// Authorizer is the receiver authorizer's key: its address is every
	// channel's receiverAuthorizer, and it signs the claims and the
	// cooperative refunds. Never logged.
	Authorizer *ecdsa.PrivateKey
	// WithdrawDelay is the channels' withdrawDelay, seconds: how long a
	// payer's timed withdrawal waits, the time the claimer has to claim.
	WithdrawDelay uint64
	// MinDeposit is announced as extra.minDeposit (atomic units), the
	// deposit the official client aims for; a route's price when larger.
	MinDeposit *big.Int
	// StateTTL is how long a mirrored on-chain state serves a voucher's
	// local verification; past it the facilitator verifies (and the
	// mirror is refreshed). 0: withdrawDelay/3, between 30 s and 5 min.
	StateTTL time.Duration
	// WithdrawMargin is how long before a pending timed withdrawal can be
	// finalized new vouchers on the channel stop being served: what is
	// served later might not be claimed in time. 0: 5 minutes.
	WithdrawMargin time.Duration
	// Timeout bounds the facilitator's work for one request (a deposit
	// waits for its block). 0: 60 s.
	Timeout time.Duration
	// MinRefund is the smallest cooperative refund sent (atomic units): a
	// refund costs the operator a transaction, and anyone holding the
	// payer's latest voucher (it is public once claimed) may ask one. The
	// payer's timed withdrawal returns any amount. nil: 10000 ($0.01 of a
	// 6-decimal token).
	MinRefund *big.Int
	// RefundInterval is the least time between two cooperative refunds of
	// one channel. 0: 10 minutes.
	RefundInterval time.Duration
	// Observer, when set, is told of every channel stopped.
	Observer StopObserver
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Validate reports every problem of c at once.
func (c ServerConfig) Validate() error {
	var errs []error
	if c.Escrow.ChainID == nil || c.Escrow.Address == (common.Address{}) {
		errs = append(errs, errors.New("batch: the escrow's chain id and address are required"))
	}
	if c.Authorizer == nil {
		errs = append(errs, errors.New("batch: a receiver authorizer key is required"))
	}
	if c.WithdrawDelay < MinWithdrawDelay || c.WithdrawDelay > MaxWithdrawDelay {
		errs = append(errs, fmt.Errorf("batch: withdraw delay %d s is outside [%d, %d]", c.WithdrawDelay, MinWithdrawDelay, MaxWithdrawDelay))
	}
	if c.MinDeposit != nil && c.MinDeposit.Sign() < 0 || c.MinRefund != nil && c.MinRefund.Sign() < 0 || c.StateTTL < 0 || c.WithdrawMargin < 0 ||
		c.Timeout < 0 || c.RefundInterval < 0 {
		errs = append(errs, errors.New("batch: min deposit and durations must not be negative"))
	}
	return errors.Join(errs...)
}

// Server is the scheme's server side, a payment.Scheme: it offers
// channels on every paid route, serves vouchers from the channel store
// (no chain I/O while the mirrored state is fresh), has deposits and
// refunds done by the facilitator, and answers a voucher that does not
// sign what it expects with the corrective 402.
//
// A channel serves one request at a time, across replicas: a request
// reserves the channel (Reserve) once its voucher verified, and commits
// the charge (Commit) only after the handler succeeded; a failed handler
// releases it uncharged. Deposits land before the handler runs: no
// voucher value exists before the deposit does.
type Server struct {
	cfg        ServerConfig
	store      Store
	f          Facilitator
	authorizer common.Address
	now        func() time.Time
	busy       sync.Map // channel id -> struct{}: served by a request of this process
	recent     recent   // the rows this process last wrote for vouchers
}

var _ payment.Scheme = (*Server)(nil)

// NewServer returns the scheme's server side over store and f; it does
// no I/O.
func NewServer(cfg ServerConfig, store Store, f Facilitator) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.StateTTL == 0 {
		cfg.StateTTL = min(max(time.Duration(cfg.WithdrawDelay)*time.Second/3, 30*time.Second), 5*time.Minute)
	}
	if cfg.WithdrawMargin == 0 {
		cfg.WithdrawMargin = 5 * time.Minute
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.MinRefund == nil {
		cfg.MinRefund = big.NewInt(10_000)
	}
	if cfg.RefundInterval == 0 {
		cfg.RefundInterval = 10 * time.Minute
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Server{cfg: cfg, store: store, f: f, authorizer: crypto.PubkeyToAddress(cfg.Authorizer.PublicKey), now: now}, nil
}

// Name implements payment.Scheme.
func (s *Server) Name() string { return Scheme }

// verifyReasons are what the facilitator's verification refuses a
// payment for (Local.Verify: the requirement, the deposit's
// authorization, the payer's balance, the channel's state, the deposit's
// simulation; Remote's default). A deposit is verified again as it is
// sent.
func verifyReasons() []string {
	return []string{ReasonScheme, ReasonNetworkMismatch, ReasonPayloadType, ReasonTokenMismatch, ReasonReceiverMismatch,
		ReasonReceiverAuthorizerMismatch, ReasonWithdrawDelayMismatch, ReasonWithdrawDelayOutOfRange, ReasonMissingEIP712Domain,
		ReasonValidBefore, ReasonValidAfter, ReasonReceiveAuthorizationSignature, ReasonInsufficientBalance,
		ReasonCumulativeExceedsBalance, ReasonChannelNotFound, ReasonCumulativeBelowClaimed, ReasonDepositSimulationFailed,
		payment.ReasonUnexpectedVerify}
}

// Reasons implements payment.Scheme. Refused: the payload
// (DecodePayload), the channel's terms and signature (Bind, Signed), the
// channel's state as the store has it (busy, a voucher that does not
// sign what is expected, beyond its balance, claimed elsewhere, a
// withdrawal near its end), a refund asked too soon or for too little or
// too much, the store or the facilitator unavailable, a verification's
// refusal. Failed: a deposit or a cooperative refund refused, reverted
// or pending. The claim and settle actions' codes belong to the claimer,
// not to a request.
func (s *Server) Reasons() payment.Reasons {
	return payment.Reasons{
		Refused: append([]string{ReasonDepositPayload, ReasonERC3009Required, ReasonVoucherSignature, ReasonChannelIDMismatch,
			ReasonChannelBusy, ReasonMissingChannel, ReasonCumulativeAmountMismatch, ReasonChargeExceedsSigned,
			ReasonChannelClaimedElsewhere, ReasonChannelChargedElsewhere, ReasonChannelOpenedElsewhere, ReasonWithdrawalPending, ReasonRefundTooSoon, ReasonRefundNoBalance,
			ReasonRefundAmountInvalid, ReasonRefundBelowMinimum, payment.ReasonUnavailable, payment.ReasonBadGateway}, verifyReasons()...),
		Failed: append([]string{ReasonDepositTransactionFailed, ReasonRefundPayload, ReasonRefundAmountInvalid, ReasonRefundNoBalance,
			ReasonRefundSimulationFailed, ReasonRefundTransactionFailed, payment.ReasonSettlementPending, payment.ReasonUnexpectedSettle},
			verifyReasons()...),
	}
}

// ReceiverAuthorizer is the address channels must name as their receiver
// authorizer.
func (s *Server) ReceiverAuthorizer() common.Address { return s.authorizer }

// Accepts implements payment.Scheme: the route's price as the per-request
// amount, and the channel's terms in extra.
func (s *Server) Accepts(req *payment.Requirement) payment.RequirementsV2 {
	minDeposit := req.Amount
	if s.cfg.MinDeposit != nil && s.cfg.MinDeposit.Cmp(minDeposit) > 0 {
		minDeposit = s.cfg.MinDeposit
	}
	extra := payment.Extra{Name: req.AssetName, Version: req.AssetVersion}.
		With("receiverAuthorizer", s.authorizer.Hex()).
		With("withdrawDelay", s.cfg.WithdrawDelay).
		With("minDeposit", minDeposit.String())
	return payment.RequirementsV2{Scheme: Scheme, Network: req.Network, Amount: req.Amount.String(), Asset: req.Asset.Hex(),
		PayTo: req.PayTo.Hex(), MaxTimeoutSeconds: req.MaxTimeout, Extra: extra}
}

// terms are what a channel paying req must be.
func (s *Server) terms(req *payment.Requirement) Terms {
	return Terms{Escrow: s.cfg.Escrow, Receiver: req.PayTo, ReceiverAuthorizer: s.authorizer, Token: req.Asset,
		WithdrawDelay: s.cfg.WithdrawDelay, Price: req.Amount}
}

// exchange is one request on a channel, as Serve carries it along.
type exchange struct {
	*payment.Exchange
	p     *Payment
	t     Terms
	payer string
	ctx   context.Context
	// opened: the deposit this request sent opened the channel.
	opened bool
}

// Serve implements payment.Scheme.
func (s *Server) Serve(px *payment.Exchange) {
	p, err := DecodePayload(px.Envelope.Payload)
	if err != nil {
		var e *Error
		errors.As(err, &e)
		px.Challenge(e.Reason, e.Message, "", nil, nil)
		return
	}
	ctx, cancel := context.WithTimeout(px.Context(), s.cfg.Timeout)
	defer cancel()
	x := &exchange{Exchange: px, p: p, t: s.terms(px.Requirement), payer: p.Config.Payer.Hex(), ctx: ctx}
	if err := x.t.Bind(p); err != nil {
		s.refuse(x, err)
		return
	}
	// Only a request signed by the channel's payer may see its state (the
	// corrective 402 carries the latest voucher) or move it.
	if err := x.t.Signed(p); err != nil {
		s.refuse(x, err)
		return
	}
	if p.Type == TypeRefund {
		s.refund(x)
		return
	}
	s.pay(x)
}

// pay serves a deposit or a voucher: check the channel (replay a lost
// answer), verify when the mirror cannot judge, deposit, run the handler,
// and charge in one update that checks everything again against the
// state it writes.
//
// A voucher holds nothing in the store while its handler runs: the charge
// commits only if the channel, as that update finds it, still expects
// this voucher and can pay it (a concurrent request that charged first,
// a refund or deposit in flight, a withdrawal, a claim elsewhere each
// refuse it there, uncharged and unanswered). One process serves one
// request per channel at a time (s.busy), so that a payer sending one
// voucher many times runs the handler once. Deposits and refunds, which
// move money on chain before the charge, still reserve the channel in
// the store, across replicas.
//
// Only a channel this store opened is served (Channel.Opened): a deposit
// that finds the channel empty opens it; a payment for any other channel
// the escrow shows funded stops it here (halt), as does a voucher ahead of
// this store's books (docs/batch-settlement.md, "Servers with separate
// books").
func (s *Server) pay(x *exchange) {
	p, now := x.p, s.now()
	if _, taken := s.busy.LoadOrStore(p.ChannelID, struct{}{}); taken {
		s.refuse(x, refuse(ReasonChannelBusy, "another request on this channel is being served; retry"))
		return
	}
	defer s.busy.Delete(p.ChannelID)
	// A voucher that the copy this process last wrote serves as it stands
	// starts from it; anything else is judged on the store's row.
	c, found := s.recent.get(p.ChannelID)
	if found && (p.Type != TypeVoucher || s.screen(x, c, true, now) != nil || Payable(c, p, now, s.cfg.StateTTL, false) != nil) {
		found = false
	}
	if p.Type != TypeVoucher {
		s.recent.drop(p.ChannelID)
	}
	if !found {
		var err error
		if c, found, err = s.store.Channel(x.ctx, p.ChannelID); err != nil {
			s.unavailable(x, err)
			return
		}
	}
	if answer := s.screen(x, c, found, now); answer != nil {
		answer()
		return
	}
	// A deposit on a channel this store opened is verified by the
	// facilitator as it is sent, under the channel's reservation: a resend
	// meanwhile, on any replica, is told to retry rather than judged
	// against a deposit about to land. Any other channel is read from the
	// chain first: only a deposit that finds it empty may open it.
	ours := found && c.Opened
	var verdict *Verdict
	if !ours || p.Type != TypeDeposit && Payable(c, p, now, s.cfg.StateTTL, false) == errStale {
		if verdict = s.verify(x); verdict == nil {
			return
		}
	}
	if !ours && (p.Type != TypeDeposit || !empty(verdict.State)) {
		// The escrow shows the channel funded (a voucher verifies only
		// then) or claimed: another server opened it.
		s.openedElsewhere(x, verdict.State, now)
		return
	}
	// judge checks, against channel c as an update found it, that p can
	// be charged there; errAnswered (and answered set) when the request
	// it resends was answered meanwhile (the payer gave up waiting).
	var answered Channel
	judge := func(c *Channel, found bool, at time.Time) error {
		if found && c.Opened && s.replayable(x, *c, at) {
			answered = *c
			return errAnswered
		}
		if c.Pending.Live(at) {
			return refuse(ReasonChannelBusy, "a deposit or refund of this channel is in flight; retry")
		}
		if err := s.servable(*c, at); err != nil {
			return err
		}
		if !found || !c.Opened {
			// Only a deposit that found the channel empty comes here
			// (above): it opens the channel, from nothing charged.
			if p.Type != TypeDeposit || verdict == nil || !empty(verdict.State) {
				return refuse(ReasonChannelBusy, "the channel's opening on this server changed meanwhile; retry")
			}
			c.Config, c.Charged = p.Config, new(big.Int)
		}
		if verdict != nil {
			Adopt(c, verdict.State, now)
		}
		if m := x.t.CheckCumulative(*c, p); m != nil {
			return mismatchError{m}
		}
		if p.Type == TypeDeposit && verdict == nil {
			return nil // the facilitator checks the deposit against the chain as it sends it
		}
		// The mirror was fresh when this request began, or read for it.
		return Payable(*c, p, at, s.cfg.StateTTL, true)
	}
	hold := ""
	settlement := payment.SettleResponse{Payer: x.payer}
	var deposited *OnChain
	if p.Type == TypeDeposit {
		hold = holdID()
		if _, err := s.store.UpdateChannel(x.ctx, p.ChannelID, func(c *Channel, found bool) (Change, error) {
			if err := judge(c, found, now); err != nil {
				return Keep, err
			}
			return Save, Reserve(c, hold, p.MaxClaimable, now, s.holdUntil(x, now))
		}); err != nil {
			if errors.Is(err, errAnswered) && s.replay(x, answered, now) {
				return
			}
			s.fail(x, err)
			return
		}
		o, err := s.f.Deposit(x.ctx, p, s.Accepts(x.Requirement), x.Envelope.Raw)
		if err != nil || !o.Success {
			s.release(x, hold, nil)
			if err != nil {
				s.facilitatorFailed(x, "deposit", err)
				return
			}
			x.Logger().WarnContext(x.ctx, "batch deposit failed", "channel", p.ChannelID.Hex(), "payer", x.payer, "reason", o.Reason, "message", o.Message)
			x.Challenge(o.Reason, o.Message, x.payer, nil, &payment.SettleResponse{ErrorReason: o.Reason, Transaction: hashOrEmpty(o.Tx), Payer: x.payer})
			return
		}
		settlement.Transaction, deposited = o.Tx.Hex(), o.State
		if o.Amount != nil {
			settlement.Amount = o.Amount.String()
		}
		x.Logger().InfoContext(x.ctx, "batch deposit", "channel", p.ChannelID.Hex(), "payer", x.payer, "amount", settlement.Amount, "tx", settlement.Transaction,
			"opened", o.Opened)
		if !ours && !o.Opened {
			// Another deposit, sent elsewhere, landed first: this one
			// joined a channel another server opened. It stays the
			// payer's, in the channel.
			s.halt(x, EvidenceOpenedElsewhere, func(c *Channel, found bool) (string, error) {
				if !found || c.Opened {
					return "", refuse(ReasonChannelBusy, "the channel's opening on this server changed meanwhile; retry")
				}
				Release(c, hold)
				if deposited != nil {
					Adopt(c, *deposited, s.now())
				}
				return fmt.Sprintf("this request's deposit (tx %s) landed on a channel another deposit had opened: it stays the payer's, in the channel",
					settlement.Transaction), nil
			})
			return
		}
		x.opened = !ours
	} else {
		// Refuse now what the charge would refuse, before the handler:
		// against the channel as it is after the read of the chain (a
		// refund may have landed meanwhile).
		if verdict != nil {
			var err error
			if c, found, err = s.store.Channel(x.ctx, p.ChannelID); err != nil {
				s.unavailable(x, err)
				return
			}
		}
		probe := c
		if err := judge(&probe, found, now); err != nil {
			if errors.Is(err, errAnswered) && s.replay(x, answered, now) {
				return
			}
			s.fail(x, err)
			return
		}
	}

	x.Verified()
	start := time.Now()
	resp := x.Run()
	if resp.Failed() {
		if hold != "" {
			s.release(x, hold, deposited)
		}
		x.WriteFailure(resp)
		return
	}
	resource := x.Resource()
	commit := func(c *Channel, found bool) (Change, error) {
		at := s.now()
		var err error
		switch {
		case hold == "":
			if err = judge(c, found, at); err == nil {
				err = charge(c, x.t.Price, p.MaxClaimable, p.Signature, at)
			}
		case !found:
			err = refuse(ReasonMissingChannel, "the channel's record is gone")
		default:
			if deposited != nil {
				Adopt(c, *deposited, at)
			}
			c.Opened = c.Opened || x.opened
			err = Commit(c, hold, x.t.Price, p.MaxClaimable, p.Signature, at)
		}
		if err != nil {
			return Keep, err
		}
		// The books and the answer a resend of this voucher gets are
		// written with the charge, in one transaction.
		settlement.Extra = map[string]any{"chargedAmount": x.t.Price.String(), "channelState": c.State()}
		recorded, err := json.Marshal(settlement)
		if err != nil {
			return Keep, err
		}
		c.Answer = &Answer{Resource: resource, ContentType: resp.ContentType(), Body: resp.Body(), Settlement: recorded, At: at}
		c.NewCharge = &Charge{Operation: x.Requirement.Operation, Resource: resource, Amount: x.t.Price, Cumulative: new(big.Int).Set(c.Charged), At: at}
		return Save, nil
	}
	var err error
	if hold == "" && found {
		// A voucher starts from the row it was judged on: unless the
		// channel moved meanwhile, one write and no second read.
		var written Channel
		if written, err = s.store.UpdateChannelFrom(x.ctx, c, commit); err == nil {
			s.recent.put(written, now)
		} else {
			s.recent.drop(p.ChannelID)
		}
	} else {
		_, err = s.store.UpdateChannel(x.ctx, p.ChannelID, commit)
	}
	if errors.Is(err, errAnswered) && s.replay(x, answered, s.now()) {
		return
	}
	if err != nil {
		// Served but not charged: the answer is not released.
		if hold != "" {
			s.release(x, hold, deposited)
		}
		s.fail(x, err)
		return
	}
	x.Deliver(resp, settlement, x.t.Price, time.Since(start))
}

// screen is the answer, before anything is asked or run, to a payment on
// channel c (found: on record): the recorded answer of a resend, the
// corrective 402, a refusal (a stopped channel, a voucher ahead of the
// books), or busy while a deposit or refund holds the channel; nil: go
// on. A channel on record that this store did not open is judged on the
// chain's state (pay), unless it is stopped or held.
func (s *Server) screen(x *exchange, c Channel, found bool, now time.Time) func() {
	if !found {
		return nil
	}
	if err := s.stopped(c); err != nil {
		return func() { s.refuse(x, err) }
	}
	if c.Opened && s.replayable(x, c, now) {
		return func() { s.replay(x, c, now) }
	}
	if c.Pending.Live(now) {
		// A deposit or a refund holds the channel (perhaps this very
		// request, sent again): judged now, this one would be judged
		// against money about to move, and a resend told to give up on
		// a request about to be answered.
		return func() {
			s.refuse(x, refuse(ReasonChannelBusy, "another request on this channel is being served; retry"))
		}
	}
	if !c.Opened {
		return nil
	}
	if m := x.t.CheckCumulative(c, x.p); m != nil {
		return func() { s.fail(x, mismatchError{m}) }
	}
	if err := s.servable(c, now); err != nil {
		return func() { s.refuse(x, err) }
	}
	return nil
}

// ReplayWindow is how long after a paid answer a resend of its voucher is
// answered again from the record (docs/payments.md, "Retries").
const ReplayWindow = 10 * time.Minute

// replay answers a resend of the voucher channel c last charged (a
// voucher, or the deposit that came with it), for the same resource
// within ReplayWindow, with the answer recorded then and no second charge
// (nor a second deposit): the answer was lost on the way back. ok false:
// not such a resend.
func (s *Server) replay(x *exchange, c Channel, now time.Time) bool {
	if !s.replayable(x, c, now) {
		return false
	}
	a, p := c.Answer, x.p
	var settlement payment.SettleResponse
	if err := json.Unmarshal(a.Settlement, &settlement); err != nil {
		return false
	}
	x.Logger().InfoContext(x.ctx, "batch voucher resent: the recorded answer is sent again, uncharged", "channel", p.ChannelID.Hex(), "payer", x.payer,
		"cumulative", p.MaxClaimable, "resource", a.Resource)
	x.Replay(a.ContentType, a.Body, settlement)
	return true
}

// replayable reports whether x resends the request channel c was last
// charged for (see replay).
func (s *Server) replayable(x *exchange, c Channel, now time.Time) bool {
	a, p := c.Answer, x.p
	return p.Type != TypeRefund && a != nil && c.SignedMax != nil && p.MaxClaimable.Cmp(c.SignedMax) == 0 && orZero(c.Charged).Cmp(c.SignedMax) == 0 &&
		bytes.Equal(p.Signature, c.Signature) && now.Sub(a.At) <= ReplayWindow && payment.SameResource(a.Resource, x.Resource())
}

// errAnswered ends a channel update that found its request answered.
var errAnswered = errors.New("batch: the request was answered already")

// refund has the facilitator return the rest of a channel's deposit to
// its payer, claiming what was charged in the same transaction; the
// handler is skipped. A refund costs the operator a transaction: it is
// sent only for at least MinRefund, at most once per RefundInterval per
// channel, and until the escrow shows it landed, every voucher is judged
// as if it had. Only a channel this store opened and serves is refunded:
// a refund elsewhere would return what another server charged and has
// not claimed (the escrow's timed withdrawal waits for every claim).
func (s *Server) refund(x *exchange) {
	p, now := x.p, s.now()
	s.recent.drop(p.ChannelID)
	c, found, err := s.store.Channel(x.ctx, p.ChannelID)
	if err != nil {
		s.unavailable(x, err)
		return
	}
	ours := found && c.Opened
	if found {
		if err := s.stopped(c); err != nil {
			s.refuse(x, err)
			return
		}
	}
	if ours {
		if m := x.t.CheckCumulative(c, p); m != nil {
			s.fail(x, mismatchError{m})
			return
		}
		if new(big.Int).Sub(orZero(c.Balance), orZero(c.Charged)).Sign() > 0 {
			if err := s.refundDue(c, now); err != nil {
				s.refuse(x, err)
				return
			}
		}
	}
	v := s.verify(x)
	if v == nil {
		return
	}
	if !ours {
		s.openedElsewhere(x, v.State, now)
		return
	}
	hold, expires := holdID(), now.Add(s.cfg.Timeout+time.Minute)
	var order RefundOrder
	var lastRefund time.Time
	if _, err := s.store.UpdateChannel(x.ctx, p.ChannelID, func(c *Channel, found bool) (Change, error) {
		if !found || !c.Opened {
			return Keep, refuse(ReasonChannelBusy, "the channel's record changed meanwhile; retry")
		}
		if err := s.stopped(*c); err != nil {
			return Keep, err
		}
		Adopt(c, v.State, now)
		if m := x.t.CheckCumulative(*c, p); m != nil {
			return Keep, mismatchError{m}
		}
		o, err := s.refundOrder(*c, p)
		if err != nil {
			return Keep, err
		}
		if err := s.refundDue(*c, now); err != nil {
			return Keep, err
		}
		if err := Reserve(c, hold, p.MaxClaimable, now, expires); err != nil {
			return Keep, err
		}
		order, lastRefund = o, c.LastRefundAt
		c.refundSent(o, now)
		c.claiming(o.Claimed())
		return Save, nil
	}); err != nil {
		s.fail(x, err)
		return
	}
	o, err := s.f.Refund(x.ctx, order)
	c, uerr := s.settleRefund(x, hold, order, o, err, lastRefund)
	switch {
	case err != nil:
		s.facilitatorFailed(x, "refund", err)
		return
	case !o.Success:
		x.Challenge(o.Reason, o.Message, x.payer, nil, &payment.SettleResponse{ErrorReason: o.Reason, Transaction: hashOrEmpty(o.Tx), Payer: x.payer})
		return
	case uerr != nil:
		x.Logger().ErrorContext(x.ctx, "batch refund not recorded", "channel", p.ChannelID.Hex(), "tx", o.Tx.Hex(), "err", uerr)
		c = Channel{ID: p.ChannelID, Charged: order.Claimed()}
		if o.State != nil {
			Adopt(&c, *o.State, s.now())
		}
	}
	x.Logger().InfoContext(x.ctx, "batch refund", "channel", p.ChannelID.Hex(), "payer", x.payer, "amount", o.Amount, "tx", o.Tx.Hex())
	settlement := payment.SettleResponse{Transaction: o.Tx.Hex(), Payer: x.payer, Extra: map[string]any{"channelState": c.State()}}
	if o.Amount != nil {
		settlement.Amount = o.Amount.String()
	}
	x.Answer(map[string]string{"message": "Refund acknowledged", "channelId": strings.ToLower(p.ChannelID.Hex())}, settlement)
}

// settleRefund records what became of a refund order: landed (the state
// after it), refused with nothing sent or reverted (no refund in flight,
// and the rate limit as it was), or unknown (sent and not mined, or the
// facilitator did not answer: the refund stays in flight, and every
// voucher is judged as if it landed until the escrow shows its nonce
// used). It drops the request's hold.
func (s *Server) settleRefund(x *exchange, hold string, order RefundOrder, o Outcome, ferr error, lastRefund time.Time) (Channel, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	landed := ferr == nil && o.Success
	gone := ferr == nil && !o.Success && o.Reason != payment.ReasonSettlementPending
	return s.store.UpdateChannel(ctx, x.p.ChannelID, func(c *Channel, found bool) (Change, error) {
		if !found {
			return Keep, nil
		}
		at := s.now()
		Release(c, hold)
		switch {
		case landed && o.State != nil:
			Adopt(c, *o.State, at)
		case landed:
			Adopt(c, OnChain{Balance: new(big.Int).Sub(orZero(c.Balance), orZero(o.Amount)), TotalClaimed: order.Claimed(),
				WithdrawRequestedAt: c.WithdrawRequestedAt, RefundNonce: new(big.Int).Add(order.Nonce, big.NewInt(1))}, at)
		case gone && c.refundFailed(order.Nonce):
			if o.Tx == (common.Hash{}) {
				c.LastRefundAt = lastRefund // nothing was sent: no gas spent
			}
		}
		return Save, nil
	})
}

// refundDue refuses a cooperative refund of channel c sooner than
// RefundInterval after the last one.
func (s *Server) refundDue(c Channel, now time.Time) error {
	if c.LastRefundAt.IsZero() || now.Sub(c.LastRefundAt) >= s.cfg.RefundInterval {
		return nil
	}
	return refuse(ReasonRefundTooSoon, "a refund of this channel was asked at %s; the next may be asked from %s", c.LastRefundAt.UTC().Format(time.RFC3339),
		c.LastRefundAt.Add(s.cfg.RefundInterval).UTC().Format(time.RFC3339))
}

// servable refuses new charges on channel c: stopped, or in a timed
// withdrawal too near its end.
func (s *Server) servable(c Channel, now time.Time) error {
	if err := s.stopped(c); err != nil {
		return err
	}
	return s.withdrawing(c, now)
}

// stopped refuses every payment on channel c once it is stopped, with
// its evidence.
func (s *Server) stopped(c Channel) error {
	if c.StoppedAt.IsZero() {
		return nil
	}
	reason := ReasonChannelChargedElsewhere
	switch c.StopEvidence {
	case EvidenceOpenedElsewhere:
		reason = ReasonChannelOpenedElsewhere
	case EvidenceClaimedElsewhere:
		reason = ReasonChannelClaimedElsewhere
	}
	return refuse(reason, "this channel is no longer served by this server (since %s, evidence %s: %s). Another server keeps other books of it: "+
		"pay it where it was opened, or open a new channel (another salt); what it holds beyond what was charged returns to the payer by the escrow's timed withdrawal",
		c.StoppedAt.UTC().Format(time.RFC3339), c.StopEvidence, c.StopDetail)
}

// openedElsewhere stops channel p, which this store did not open and the
// escrow shows as st (funded or claimed): unless a deposit of this store
// is opening it meanwhile.
func (s *Server) openedElsewhere(x *exchange, st OnChain, now time.Time) {
	s.halt(x, EvidenceOpenedElsewhere, func(c *Channel, found bool) (string, error) {
		if found && (c.Opened || c.Pending.Live(s.now())) {
			return "", refuse(ReasonChannelBusy, "the channel is being opened on this server; retry")
		}
		Adopt(c, st, now)
		return fmt.Sprintf("a %s for a channel this server did not open, which the escrow shows holding %s with %s claimed", x.p.Type,
			orZero(st.Balance), orZero(st.TotalClaimed)), nil
	})
}

// halt stops serving channel p on evidence, when check, run on the
// channel as an update finds it, confirms the evidence and says what was
// seen (check may move the channel: release a hold, mirror the chain); the
// request is refused with it, and the stop is logged at ERROR and
// counted. A channel stopped already is refused as it was, uncounted.
func (s *Server) halt(x *exchange, evidence string, check func(c *Channel, found bool) (string, error)) {
	p := x.p
	stopped := false
	c, err := s.store.UpdateChannel(x.ctx, p.ChannelID, func(c *Channel, found bool) (Change, error) {
		stopped = false
		if found {
			if err := s.stopped(*c); err != nil {
				return Keep, err
			}
		}
		detail, err := check(c, found)
		if err != nil {
			return Keep, err
		}
		if !found {
			c.Config, c.Charged = p.Config, new(big.Int)
		}
		stopped = c.stop(evidence, detail, s.now())
		return Save, nil
	})
	if err != nil {
		var m mismatchError
		if errors.As(err, &m) && m.Ahead {
			err = m.Mismatch.Error // never halted again from here
		}
		s.fail(x, err)
		return
	}
	s.recent.drop(p.ChannelID)
	if stopped {
		x.Logger().ErrorContext(x.ctx, "batch channel stopped: another server keeps other books of it; it is no longer served here",
			"channel", p.ChannelID.Hex(), "payer", x.payer, "evidence", evidence, "detail", c.StopDetail, "voucher", p.MaxClaimable,
			"charged", orZero(c.Charged), "type", p.Type)
		if s.cfg.Observer != nil {
			s.cfg.Observer.BatchChannelStopped(evidence)
		}
	}
	s.refuse(x, s.stopped(c))
}

// verify asks the facilitator to verify the payment, reading the
// channel's on-chain state; nil: refused or failed, answered.
func (s *Server) verify(x *exchange) *Verdict {
	v, err := s.f.Verify(x.ctx, x.p, s.Accepts(x.Requirement), x.Envelope.Raw)
	if err != nil {
		s.facilitatorFailed(x, "verify", err)
		return nil
	}
	if !v.Valid {
		// The chain may refuse what was answered meanwhile (the voucher
		// a resend carries, claimed since): the record answers first.
		if x.p.Type != TypeRefund {
			if c, found, err := s.store.Channel(x.ctx, x.p.ChannelID); err == nil && found && s.replay(x, c, s.now()) {
				return nil
			}
		}
		x.Challenge(v.Reason, v.Message, x.payer, nil, nil)
		return nil
	}
	return &v
}

// holdUntil is when a reservation made now expires: the route's
// maxTimeoutSeconds, between 5 s and 10 min.
func (s *Server) holdUntil(x *exchange, now time.Time) time.Time {
	return now.Add(min(max(time.Duration(x.Requirement.MaxTimeout)*time.Second, 5*time.Second), 10*time.Minute))
}

// refundOrder is the cooperative refund of channel c that payment p asks
// for: what remains above what was charged (or the amount asked, if
// less), with a claim of what was charged when the chain does not show
// it claimed yet, both signed by our authorizer.
func (s *Server) refundOrder(c Channel, p *Payment) (RefundOrder, error) {
	// A refund still in flight has the same nonce as this one (the
	// mirror's): only one of them can land (see refundSent).
	remainder := new(big.Int).Sub(orZero(c.Balance), c.Charged)
	if remainder.Sign() <= 0 {
		return RefundOrder{}, refuse(ReasonRefundNoBalance, "the channel holds %s and %s was charged: nothing to refund", orZero(c.Balance), c.Charged)
	}
	amount := remainder
	if p.RefundAmount != nil {
		if p.RefundAmount.Cmp(remainder) > 0 {
			return RefundOrder{}, refuse(ReasonRefundAmountInvalid, "refund of %s asked, %s is refundable", p.RefundAmount, remainder)
		}
		amount = p.RefundAmount
	}
	if amount.Cmp(s.cfg.MinRefund) < 0 {
		return RefundOrder{}, refuse(ReasonRefundBelowMinimum, "a refund of %s asked; cooperative refunds start at %s (a timed withdrawal returns any amount)", amount, s.cfg.MinRefund)
	}
	nonce := orZero(c.RefundNonce)
	o := RefundOrder{Config: p.Config, MaxClaimable: p.MaxClaimable, Signature: p.Signature, Amount: amount, Nonce: nonce}
	var err error
	if o.RefundSig, err = payment.SignDigest(s.cfg.Escrow.RefundDigest(p.ChannelID, nonce, amount), s.cfg.Authorizer); err != nil {
		return RefundOrder{}, err
	}
	if c.Charged.Cmp(orZero(c.TotalClaimed)) > 0 {
		// The refund's voucher signs exactly what was charged: it is the
		// claim's voucher.
		o.Claims = []Claim{{Config: p.Config, MaxClaimable: p.MaxClaimable, Signature: p.Signature, TotalClaimed: new(big.Int).Set(c.Charged)}}
		entries := []ClaimEntry{{ChannelID: p.ChannelID, MaxClaimableAmount: p.MaxClaimable, TotalClaimed: c.Charged}}
		if o.ClaimSig, err = payment.SignDigest(s.cfg.Escrow.ClaimBatchDigest(entries), s.cfg.Authorizer); err != nil {
			return RefundOrder{}, err
		}
	}
	return o, nil
}

// Claimed is the cumulative amount o's claims leave claimed (0 without
// claims).
func (o RefundOrder) Claimed() *big.Int {
	out := new(big.Int)
	for _, c := range o.Claims {
		if c.TotalClaimed.Cmp(out) > 0 {
			out.Set(c.TotalClaimed)
		}
	}
	return out
}

// withdrawing refuses new charges on a channel whose payer's timed
// withdrawal can be finalized within the margin: a voucher served then
// might be claimed too late.
func (s *Server) withdrawing(c Channel, now time.Time) error {
	if c.WithdrawRequestedAt == 0 {
		return nil
	}
	finalizable := time.Unix(int64(c.WithdrawRequestedAt)+int64(c.Config.WithdrawDelay), 0)
	if now.Add(s.cfg.WithdrawMargin).Before(finalizable) {
		return nil
	}
	return refuse(ReasonWithdrawalPending, "the payer's withdrawal from this channel can be finalized at %s: new vouchers are not accepted; deposit into a new channel", finalizable.UTC().Format(time.RFC3339))
}

// release drops hold, mirroring a deposit that landed.
func (s *Server) release(x *exchange, hold string, deposited *OnChain) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if _, err := s.store.UpdateChannel(ctx, x.p.ChannelID, func(c *Channel, found bool) (Change, error) {
		if !found {
			return Keep, nil
		}
		if deposited != nil {
			Adopt(c, *deposited, s.now())
			c.Opened = c.Opened || x.opened
		}
		if !Release(c, hold) && deposited == nil {
			return Keep, nil
		}
		return Save, nil
	}); err != nil {
		// The hold expires on its own.
		x.Logger().ErrorContext(ctx, "batch channel release failed", "channel", x.p.ChannelID.Hex(), "err", err)
	}
}

// corrective answers a voucher that does not sign what the server
// expects: a 402 whose batch entry carries the channel's state and the
// latest voucher, from which the client recovers.
func (s *Server) corrective(x *exchange, m *Mismatch) {
	entry := s.Accepts(x.Requirement)
	entry.Extra = entry.Extra.With("channelState", m.Channel)
	if m.Voucher != nil {
		entry.Extra = entry.Extra.With("voucherState", m.Voucher)
	}
	x.Challenge(m.Reason, m.Message, x.payer, &entry, nil)
}

// fail answers an error of a channel update: a voucher below what is
// expected (the corrective 402), one above it (the channel stops), a
// refusal of the scheme's rules, or an unavailable store.
func (s *Server) fail(x *exchange, err error) {
	var m mismatchError
	switch {
	case errors.As(err, &m) && m.Ahead:
		s.halt(x, EvidenceVoucherAhead, func(c *Channel, found bool) (string, error) {
			if !found || !c.Opened {
				return "", refuse(ReasonChannelBusy, "the channel's record changed meanwhile; retry")
			}
			switch m := x.t.CheckCumulative(*c, x.p); {
			case m == nil:
				return "", refuse(ReasonChannelBusy, "the channel moved meanwhile; retry")
			case !m.Ahead:
				return "", mismatchError{m}
			}
			return fmt.Sprintf("a %s signing %s cumulative while this server charged %s (price %s)", x.p.Type, x.p.MaxClaimable,
				orZero(c.Charged), x.t.Price), nil
		})
	case errors.As(err, &m):
		s.corrective(x, m.Mismatch)
	default:
		s.refuse(x, err)
	}
}

// refuse answers a refusal of the scheme's rules with a 402, and any
// other error as an unavailable store.
func (s *Server) refuse(x *exchange, err error) {
	var e *Error
	if errors.As(err, &e) {
		x.Challenge(e.Reason, e.Message, x.payer, nil, nil)
		return
	}
	s.unavailable(x, err)
}

func (s *Server) unavailable(x *exchange, err error) {
	x.Logger().ErrorContext(x.ctx, "batch channel store failed", "channel", x.p.ChannelID.Hex(), "err", err)
	x.Refuse(http.StatusServiceUnavailable, payment.ReasonUnavailable, "the channel store is unavailable; nothing was charged")
}

func (s *Server) facilitatorFailed(x *exchange, op string, err error) {
	x.Logger().ErrorContext(x.ctx, "batch facilitator failed", "op", op, "channel", x.p.ChannelID.Hex(), "err", err)
	x.Refuse(http.StatusBadGateway, payment.ReasonBadGateway, "the payment facilitator failed; nothing was charged, retry later")
}

// mismatchError carries a Mismatch out of a channel update.
type mismatchError struct{ *Mismatch }

func (e mismatchError) Error() string { return e.Mismatch.Error.Error() }

func holdID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func hashOrEmpty(h common.Hash) string {
	if h == (common.Hash{}) {
		return ""
	}
	return h.Hex()
}

// Payer implements payment.Authenticator: the payer of px's channel when
// its payload is bound to our terms and its voucher is signed by the
// channel's payer authorizer. Nothing is reserved, charged or sent.
func (s *Server) Payer(px *payment.Exchange) (common.Address, error) {
	p, err := DecodePayload(px.Envelope.Payload)
	if err != nil {
		return common.Address{}, err
	}
	t := s.terms(px.Requirement)
	if err := t.Bind(p); err != nil {
		return common.Address{}, err
	}
	if err := t.Signed(p); err != nil {
		return common.Address{}, err
	}
	return p.Config.Payer, nil
}
