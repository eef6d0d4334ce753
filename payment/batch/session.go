package batch

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/tollgate/tollgate/payment"
)

// Session is the payer's side of one channel to one server: what the
// server has charged and what the channel holds, as the payer tracks them
// between calls (the official client's record), and how it signs the
// next payment. It is not safe for concurrent use: a channel pays one
// request at a time.
type Session struct {
	Payer Payer
	// Charged is what the server has charged so far (cumulative); Balance
	// what the payer has deposited. Both start at 0 for a new channel.
	Charged *big.Int `json:"charged"`
	Balance *big.Int `json:"balance"`
	// A deposit is what the next voucher needs above the balance, or the
	// entry's extra.minDeposit when larger; MaxDeposit caps it (nil: no
	// cap).
	MaxDeposit *big.Int `json:"-"`
}

// SessionState is what a Session keeps between runs.
type SessionState struct {
	ChannelID common.Hash `json:"channelId"`
	Charged   string      `json:"chargedCumulativeAmount"`
	Balance   string      `json:"balance"`
}

// State returns s's state for channel id.
func (s *Session) State(id common.Hash) SessionState {
	return SessionState{ChannelID: id, Charged: orZero(s.Charged).String(), Balance: orZero(s.Balance).String()}
}

// Restore sets s's state from st.
func (s *Session) Restore(st SessionState) error {
	c, ok1 := new(big.Int).SetString(st.Charged, 10)
	b, ok2 := new(big.Int).SetString(st.Balance, 10)
	if !ok1 || !ok2 {
		return errors.New("batch: session state amounts are not decimal")
	}
	s.Charged, s.Balance = c, b
	return nil
}

// TermsOf reads a server's batch-settlement accepts entry as the terms a
// channel to it has.
func TermsOf(entry payment.RequirementsV2, chainID *big.Int) (Terms, error) {
	var t Terms
	if entry.Scheme != Scheme {
		return t, fmt.Errorf("batch: entry of scheme %q", entry.Scheme)
	}
	var authorizer string
	var delay uint64
	if err := json.Unmarshal(entry.Extra.Field("receiverAuthorizer"), &authorizer); err != nil || !common.IsHexAddress(authorizer) {
		return t, errors.New("batch: extra.receiverAuthorizer is missing or not an address")
	}
	if err := json.Unmarshal(entry.Extra.Field("withdrawDelay"), &delay); err != nil {
		return t, errors.New("batch: extra.withdrawDelay is missing or not a number")
	}
	price, ok := new(big.Int).SetString(entry.Amount, 10)
	if !ok || !common.IsHexAddress(entry.PayTo) || !common.IsHexAddress(entry.Asset) {
		return t, errors.New("batch: the entry's amount, payTo or asset is malformed")
	}
	return Terms{Escrow: Escrow{ChainID: chainID, Address: EscrowAddress}, Receiver: common.HexToAddress(entry.PayTo),
		ReceiverAuthorizer: common.HexToAddress(authorizer), Token: common.HexToAddress(entry.Asset), WithdrawDelay: delay, Price: price}, nil
}

// Envelope builds the PAYMENT-SIGNATURE value paying entry (a server's
// batch-settlement accepts entry) for resource: a voucher of Charged +
// price, with a deposit first when the balance does not cover it.
func (s *Session) Envelope(entry payment.RequirementsV2, resource *payment.ResourceV2, chainID *big.Int, now time.Time) (string, error) {
	t, err := TermsOf(entry, chainID)
	if err != nil {
		return "", err
	}
	cumulative := new(big.Int).Add(orZero(s.Charged), t.Price)
	typ, dep := TypeVoucher, (*DepositRequest)(nil)
	if cumulative.Cmp(orZero(s.Balance)) > 0 {
		need := new(big.Int).Sub(cumulative, orZero(s.Balance))
		amount := new(big.Int).Set(need)
		var minDeposit string
		if json.Unmarshal(entry.Extra.Field("minDeposit"), &minDeposit) == nil {
			if m, ok := new(big.Int).SetString(minDeposit, 10); ok && m.Cmp(amount) > 0 {
				amount = m
			}
		}
		if s.MaxDeposit != nil && amount.Cmp(s.MaxDeposit) > 0 {
			if need.Cmp(s.MaxDeposit) > 0 {
				return "", fmt.Errorf("batch: a deposit of %s is needed, above the cap of %s", need, s.MaxDeposit)
			}
			amount = new(big.Int).Set(s.MaxDeposit)
		}
		salt, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 255))
		if err != nil {
			return "", err
		}
		typ = TypeDeposit
		dep = &DepositRequest{Amount: amount, Salt: salt,
			Token:       payment.Domain{Name: entry.Extra.Name, Version: entry.Extra.Version, ChainID: chainID, VerifyingContract: t.Token},
			ValidBefore: big.NewInt(now.Unix() + int64(max(entry.MaxTimeoutSeconds, 60)))}
	}
	inner, err := s.Payer.Payload(t, typ, cumulative, dep, nil)
	if err != nil {
		return "", err
	}
	return wrap(entry, resource, inner)
}

// RefundEnvelope builds a cooperative refund of amount (nil: everything
// left) of the channel to entry's server.
func (s *Session) RefundEnvelope(entry payment.RequirementsV2, resource *payment.ResourceV2, chainID *big.Int, amount *big.Int) (string, error) {
	t, err := TermsOf(entry, chainID)
	if err != nil {
		return "", err
	}
	inner, err := s.Payer.Payload(t, TypeRefund, orZero(s.Charged), nil, amount)
	if err != nil {
		return "", err
	}
	return wrap(entry, resource, inner)
}

func wrap(entry payment.RequirementsV2, resource *payment.ResourceV2, inner []byte) (string, error) {
	env := map[string]any{"x402Version": 2, "accepted": entry, "payload": json.RawMessage(inner)}
	if resource != nil {
		env["resource"] = resource
	}
	return payment.EncodeHeader(env)
}

// Settled updates s from a paid answer's PAYMENT-RESPONSE: the deposit
// it made and the amount charged. A charge above price is refused.
func (s *Session) Settled(r payment.SettleResponse, price *big.Int) error {
	if !r.Success {
		return nil
	}
	extra, _ := json.Marshal(r.Extra)
	var e struct {
		ChargedAmount string        `json:"chargedAmount"`
		ChannelState  *ChannelState `json:"channelState"`
	}
	if err := json.Unmarshal(extra, &e); err != nil {
		return fmt.Errorf("batch: PAYMENT-RESPONSE extra: %w", err)
	}
	if r.Amount != "" && r.Transaction != "" && e.ChargedAmount != "" { // a deposit
		if d, ok := new(big.Int).SetString(r.Amount, 10); ok {
			s.Balance = new(big.Int).Add(orZero(s.Balance), d)
		}
	}
	if e.ChargedAmount == "" {
		return nil
	}
	charged, ok := new(big.Int).SetString(e.ChargedAmount, 10)
	if !ok || charged.Sign() < 0 || charged.Cmp(price) > 0 {
		return fmt.Errorf("batch: charged %q for a price of %s", e.ChargedAmount, price)
	}
	s.Charged = new(big.Int).Add(orZero(s.Charged), charged)
	return nil
}

// RecoverFrom adopts the server's state from a corrective 402's entry, after
// checking it: the server may say more was charged only by showing a
// voucher of ours that signs at least that much.
func (s *Session) RecoverFrom(entry payment.RequirementsV2, chainID *big.Int) error {
	t, err := TermsOf(entry, chainID)
	if err != nil {
		return err
	}
	var st ChannelState
	if err := json.Unmarshal(entry.Extra.Field("channelState"), &st); err != nil {
		return errors.New("batch: the corrective 402 has no channelState")
	}
	charged, ok1 := new(big.Int).SetString(st.ChargedCumulativeAmount, 10)
	balance, ok2 := new(big.Int).SetString(st.Balance, 10)
	if !ok1 || !ok2 {
		return errors.New("batch: the corrective 402's channelState is malformed")
	}
	if charged.Cmp(orZero(s.Charged)) > 0 {
		var vs VoucherState
		if err := json.Unmarshal(entry.Extra.Field("voucherState"), &vs); err != nil {
			return fmt.Errorf("batch: the server claims %s charged without a voucher to show", charged)
		}
		signed, ok := new(big.Int).SetString(vs.SignedMaxClaimable, 10)
		sig, err := hexutil.Decode(vs.Signature)
		_, id := s.Payer.Channel(t)
		if !ok || err != nil || signed.Cmp(charged) < 0 || !strings.EqualFold(st.ChannelID, id.Hex()) {
			return errors.New("batch: the corrective 402's voucher does not cover what it says was charged")
		}
		if signer, err := payment.RecoverDigest(t.Escrow.VoucherDigest(id, signed), sig); err != nil || signer != s.Payer.Address() {
			return errors.New("batch: the corrective 402's voucher is not ours")
		}
	}
	s.Charged, s.Balance = charged, balance
	return nil
}

var _ payment.SchemeClient = (*Session)(nil)

// Name implements payment.SchemeClient.
func (s *Session) Name() string { return Scheme }

// Pay implements payment.SchemeClient: Envelope, now.
func (s *Session) Pay(o payment.Offer) (payment.SignedPayment, error) {
	if o.Version != 2 {
		return payment.SignedPayment{}, errors.New("batch: batch-settlement is x402 v2 only")
	}
	value, err := s.Envelope(o.Entry, o.Resource, big.NewInt(o.ChainID), time.Now())
	return payment.SignedPayment{Header: payment.HeaderPaymentV2, Value: value}, err
}

// Paid implements payment.SchemeClient: Settled at the offer's price.
func (s *Session) Paid(o payment.Offer, r payment.SettleResponse) error {
	price, ok := new(big.Int).SetString(o.Entry.Amount, 10)
	if !ok {
		return fmt.Errorf("batch: amount %q is not an integer", o.Entry.Amount)
	}
	return s.Settled(r, price)
}

// Recover implements payment.SchemeClient: a corrective 402's state is
// adopted (see RecoverFrom's checks) and the payment signed again. A
// channel the server finds without a deposit (a devnet restarted under
// a kept channel file: a new chain, an empty escrow) is opened again:
// the kept state is forgotten and the next payment deposits, within
// MaxDeposit, into the payer's own channel.
func (s *Session) Recover(refused payment.RequiredV2) bool {
	if refused.Error == ReasonChannelNotFound && orZero(s.Balance).Sign() > 0 {
		s.Charged, s.Balance = new(big.Int), new(big.Int)
		return true
	}
	if refused.Error != ReasonCumulativeAmountMismatch && refused.Error != ReasonCumulativeBelowClaimed {
		return false
	}
	for _, e := range refused.Accepts {
		if e.Scheme != Scheme || len(e.Extra.Field("channelState")) == 0 {
			continue
		}
		id, ok := new(big.Int).SetString(strings.TrimPrefix(e.Network, "eip155:"), 10)
		return ok && s.RecoverFrom(e, id) == nil
	}
	return false
}
