package batch

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// Chain is what the batch facilitator reads from an Ethereum node;
// *ethclient.Client provides it.
type Chain interface {
	CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error)
	CodeAt(ctx context.Context, account common.Address, block *big.Int) ([]byte, error)
}

// Transactor sends the facilitator's transactions and waits for their
// receipts; *payment.Local provides it, sharing its gas key's nonces with
// the other schemes. A Sent with Refused set is a simulation that
// reverted (nothing was sent); a nil Receipt is a transaction not mined
// within the transactor's receipt timeout.
type Transactor interface {
	Transact(ctx context.Context, to common.Address, data []byte, gas uint64) (payment.Sent, error)
}

// settleGas is the gas limit of a settle, fixed as the official
// facilitator fixes it (docs/batch-settlement.md §2.7, T18).
const settleGas = 120_000

// validBeforeMargin is how long a deposit's authorization must still be
// valid when it is verified, seconds (the official facilitator's 6).
const validBeforeMargin = 6

// LocalConfig configures the self-hosted batch-settlement facilitator.
type LocalConfig struct {
	// Escrow is the escrow's chain and address (EscrowAddress on Base and
	// the devnet).
	Escrow Escrow
	// Tokens is the allow-list of deposit tokens, with their EIP-712
	// domain name and version (the ERC-3009 authorization's domain).
	Tokens []payment.Asset
	// Authorizer is the receiver authorizer's key, optional: with it the
	// facilitator signs the claim and refund authorizations a request
	// leaves out, and advertises its address. Never logged.
	Authorizer *ecdsa.PrivateKey
	// Now is the clock of the deposit authorization's time window; nil
	// means time.Now.
	Now func() time.Time
}

// Validate reports every problem of c at once.
func (c LocalConfig) Validate() error {
	var errs []error
	if c.Escrow.ChainID == nil || c.Escrow.ChainID.Sign() <= 0 {
		errs = append(errs, errors.New("batch facilitator: chain id is required"))
	}
	if c.Escrow.Address == (common.Address{}) {
		errs = append(errs, errors.New("batch facilitator: escrow address is required"))
	}
	if len(c.Tokens) == 0 {
		errs = append(errs, errors.New("batch facilitator: no token allowed"))
	}
	for _, t := range c.Tokens {
		if t.Address == (common.Address{}) || t.Name == "" || t.Version == "" {
			errs = append(errs, fmt.Errorf("batch facilitator: token %s needs an address and its EIP-712 name and version", t.Address.Hex()))
		}
	}
	return errors.Join(errs...)
}

// Local is the batch-settlement facilitator on a chain it reads and
// writes itself (docs/batch-settlement.md §2.6–2.7): it verifies deposit,
// voucher and refund payloads against the escrow's state, and sends
// deposits, claims, settles and refunds through a Transactor. Vouchers
// must be signed by an EOA payer authorizer (EIP-1271 vouchers are
// refused). It is safe for concurrent use.
type Local struct {
	cfg        LocalConfig
	chain      Chain
	tx         Transactor
	abi        abi.ABI
	now        func() time.Time
	authorizer common.Address // zero when no key is configured
	errNames   map[[4]byte]string
}

var _ Facilitator = (*Local)(nil)

// NewLocal returns a batch facilitator over chain, sending through tx; it
// does no I/O.
func NewLocal(cfg LocalConfig, chain Chain, tx Transactor) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if chain == nil || tx == nil {
		return nil, errors.New("batch facilitator: a chain and a transactor are required")
	}
	parsed, err := abi.JSON(strings.NewReader(escrowABI))
	if err != nil {
		return nil, err
	}
	l := &Local{cfg: cfg, chain: chain, tx: tx, abi: parsed, now: cfg.Now, errNames: map[[4]byte]string{}}
	if l.now == nil {
		l.now = time.Now
	}
	if cfg.Authorizer != nil {
		l.authorizer = crypto.PubkeyToAddress(cfg.Authorizer.PublicKey)
	}
	for _, e := range parsed.Errors {
		l.errNames[[4]byte(e.ID[:4])] = e.Name
	}
	return l, nil
}

// Authorizer returns the receiver authorizer's address, and whether a key
// is configured (what GET /supported advertises).
func (l *Local) Authorizer() (common.Address, bool) {
	return l.authorizer, l.cfg.Authorizer != nil
}

// ChannelState reads channel id's state in the escrow at the latest
// block: what the claimer checks a claim's effect against.
func (l *Local) ChannelState(ctx context.Context, id common.Hash) (OnChain, error) {
	st, err := l.state(ctx, id, nil)
	if err != nil {
		return OnChain{}, &payment.FacilitatorError{Op: "read", Err: err}
	}
	return st, nil
}

var _ ChannelReader = (*Local)(nil)

// Network is the CAIP-2 name of the escrow's chain, "eip155:8453".
func (l *Local) Network() string { return "eip155:" + l.cfg.Escrow.ChainID.String() }

// Verify implements Facilitator: the binding of p's channel to req, the
// deposit's authorization, the voucher's signature, the escrow's state,
// and for a deposit an eth_call of it. The verdict's State is the state
// read (before the deposit).
func (l *Local) Verify(ctx context.Context, p *Payment, req payment.RequirementsV2, raw []byte) (Verdict, error) {
	v := Verdict{Payer: p.Config.Payer}
	asset, e := l.check(p, req, raw)
	if e == nil && p.Type == TypeDeposit {
		e, err := l.checkDeposit(ctx, p, req, asset)
		if err != nil {
			return v, err
		}
		if e != nil {
			v.Reason, v.Message = e.Reason, e.Message
			return v, nil
		}
	}
	if e != nil {
		v.Reason, v.Message = e.Reason, e.Message
		return v, nil
	}
	st, err := l.state(ctx, p.ChannelID, nil)
	if err != nil {
		return v, &payment.FacilitatorError{Op: "verify", Err: err}
	}
	v.State = st
	if p.Type == TypeDeposit {
		bal, err := l.balanceOf(ctx, p.Config.Token, p.Config.Payer)
		if err != nil {
			return v, &payment.FacilitatorError{Op: "verify", Err: err}
		}
		if bal.Cmp(p.Deposit.Amount) < 0 {
			v.Reason, v.Message = ReasonInsufficientBalance, fmt.Sprintf("the payer holds %s, the deposit is %s", bal, p.Deposit.Amount)
			return v, nil
		}
	}
	if e := checkState(p, st); e != nil {
		v.Reason, v.Message = e.Reason, e.Message
		return v, nil
	}
	if p.Type == TypeDeposit {
		data, err := l.depositData(p)
		if err != nil {
			return v, err
		}
		escrow := l.cfg.Escrow.Address
		if _, err := l.chain.CallContract(ctx, ethereum.CallMsg{To: &escrow, Data: data}, nil); err != nil {
			revert, reverted := payment.Revert(err)
			if !reverted {
				return v, &payment.FacilitatorError{Op: "verify", Err: err}
			}
			v.Reason, v.Message = ReasonDepositSimulationFailed, l.revertName(revert, err.Error())
			return v, nil
		}
	}
	v.Valid = true
	return v, nil
}

// check applies the rules that need no chain: scheme and network, the
// token, the channel's binding to the requirement (receiver, receiver
// authorizer, token, withdraw delay, channel id), amounts in uint128, and
// the voucher's signature. It returns the token's allow-list entry.
func (l *Local) check(p *Payment, req payment.RequirementsV2, raw []byte) (payment.Asset, *Error) {
	var env struct {
		Accepted *struct{ Scheme, Network string } `json:"accepted"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &env) == nil && env.Accepted != nil {
		if env.Accepted.Scheme != Scheme {
			return payment.Asset{}, refuse(ReasonScheme, "accepted scheme %q, want %s", env.Accepted.Scheme, Scheme)
		}
		if env.Accepted.Network != req.Network {
			return payment.Asset{}, refuse(ReasonNetworkMismatch, "accepted network %q, the requirement's is %q", env.Accepted.Network, req.Network)
		}
	}
	switch {
	case req.Scheme != Scheme:
		return payment.Asset{}, refuse(ReasonScheme, "requirement scheme %q, want %s", req.Scheme, Scheme)
	case req.Network != l.Network():
		return payment.Asset{}, refuse(ReasonNetworkMismatch, "requirement network %q, this facilitator settles on %s", req.Network, l.Network())
	case !common.IsHexAddress(req.Asset) || !common.IsHexAddress(req.PayTo):
		return payment.Asset{}, refuse(ReasonPayloadType, "the requirement's asset or payTo is not an address")
	}
	asset, ok := l.token(common.HexToAddress(req.Asset))
	if !ok {
		return asset, refuse(ReasonTokenMismatch, "token %s is not accepted by this facilitator", req.Asset)
	}
	var authorizer string
	if f := req.Extra.Field("receiverAuthorizer"); f == nil || json.Unmarshal(f, &authorizer) != nil || !common.IsHexAddress(authorizer) ||
		common.HexToAddress(authorizer) == (common.Address{}) {
		return asset, refuse(ReasonReceiverAuthorizerMismatch, "the requirement names no receiverAuthorizer (extra.receiverAuthorizer)")
	}
	t := Terms{Escrow: l.cfg.Escrow, Receiver: common.HexToAddress(req.PayTo), ReceiverAuthorizer: common.HexToAddress(authorizer),
		Token: asset.Address, WithdrawDelay: p.Config.WithdrawDelay}
	if f := req.Extra.Field("withdrawDelay"); f != nil {
		if err := json.Unmarshal(f, &t.WithdrawDelay); err != nil {
			return asset, refuse(ReasonWithdrawDelayMismatch, "the requirement's extra.withdrawDelay %s is not a whole number of seconds", f)
		}
	}
	if err := t.Bind(p); err != nil {
		return asset, err.(*Error)
	}
	if d := p.Config.WithdrawDelay; d < MinWithdrawDelay || d > MaxWithdrawDelay {
		return asset, refuse(ReasonWithdrawDelayOutOfRange, "withdrawDelay %d s is outside [%d, %d]", d, MinWithdrawDelay, MaxWithdrawDelay)
	}
	if p.MaxClaimable.BitLen() > 128 || p.Deposit != nil && p.Deposit.Amount.BitLen() > 128 {
		return asset, refuse(ReasonPayloadType, "amounts must fit in uint128")
	}
	if err := t.Signed(p); err != nil {
		return asset, err.(*Error)
	}
	return asset, nil
}

func (l *Local) token(a common.Address) (payment.Asset, bool) {
	for _, t := range l.cfg.Tokens {
		if t.Address == a {
			return t, true
		}
	}
	return payment.Asset{}, false
}

// checkDeposit checks a deposit's ERC-3009 authorization: the token's
// EIP-712 domain named by the requirement, the time window by our clock,
// and the payer's signature (a payer with code is left to the token's
// own EIP-1271 check in the simulation).
func (l *Local) checkDeposit(ctx context.Context, p *Payment, req payment.RequirementsV2, asset payment.Asset) (*Error, error) {
	d := p.Deposit
	switch {
	case req.Extra.Name == "" || req.Extra.Version == "":
		return refuse(ReasonMissingEIP712Domain, "the requirement's extra lacks the token's EIP-712 name and version"), nil
	case req.Extra.Name != asset.Name || req.Extra.Version != asset.Version:
		return refuse(ReasonTokenMismatch, "token domain %q/%q, this facilitator knows %s as %q/%q", req.Extra.Name, req.Extra.Version,
			asset.Address.Hex(), asset.Name, asset.Version), nil
	}
	now := l.now().Unix()
	if d.ValidBefore.Cmp(big.NewInt(now+validBeforeMargin)) < 0 {
		return refuse(ReasonValidBefore, "the deposit authorization expires at %s, before now + %d s", d.ValidBefore, validBeforeMargin), nil
	}
	if d.ValidAfter.Cmp(big.NewInt(now)) > 0 {
		return refuse(ReasonValidAfter, "the deposit authorization is valid only after %s", d.ValidAfter), nil
	}
	dom := payment.Domain{Name: asset.Name, Version: asset.Version, ChainID: l.cfg.Escrow.ChainID, VerifyingContract: asset.Address}
	a := payment.Authorization{From: p.Config.Payer, To: ERC3009CollectorAddress, Value: d.Amount, ValidAfter: d.ValidAfter,
		ValidBefore: d.ValidBefore, Nonce: DepositNonce(p.ChannelID, d.Salt)}
	if signer, err := payment.RecoverDigest(dom.ReceiveDigest(a), d.Signature); err == nil && signer == p.Config.Payer {
		return nil, nil
	}
	code, err := l.chain.CodeAt(ctx, p.Config.Payer, nil)
	if err != nil {
		return nil, &payment.FacilitatorError{Op: "verify", Err: err}
	}
	if len(code) == 0 {
		return refuse(ReasonReceiveAuthorizationSignature, "the deposit authorization is not signed by the payer %s", p.Config.Payer.Hex()), nil
	}
	return nil, nil
}

// checkState applies the escrow's state to a payment (§2.6 step 5).
func checkState(p *Payment, st OnChain) *Error {
	max := p.MaxClaimable
	switch p.Type {
	case TypeDeposit:
		if after := new(big.Int).Add(st.Balance, p.Deposit.Amount); max.Cmp(after) > 0 {
			return refuse(ReasonCumulativeExceedsBalance, "voucher signs %s, the channel will hold %s", max, after)
		}
	default:
		if st.Balance.Sign() == 0 {
			return refuse(ReasonChannelNotFound, "channel %s has no deposit", p.ChannelID.Hex())
		}
		if max.Cmp(st.Balance) > 0 {
			return refuse(ReasonCumulativeExceedsBalance, "voucher signs %s, the channel holds %s", max, st.Balance)
		}
	}
	if p.Type == TypeRefund {
		if max.Cmp(st.TotalClaimed) < 0 {
			return refuse(ReasonCumulativeBelowClaimed, "voucher signs %s, %s is claimed already", max, st.TotalClaimed)
		}
	} else if max.Cmp(st.TotalClaimed) <= 0 {
		return refuse(ReasonCumulativeBelowClaimed, "voucher signs %s, %s is claimed already", max, st.TotalClaimed)
	}
	return nil
}

func (l *Local) depositData(p *Payment) ([]byte, error) {
	d := p.Deposit
	u256, _ := abi.NewType("uint256", "", nil)
	bs, _ := abi.NewType("bytes", "", nil)
	collectorData, err := abi.Arguments{{Type: u256}, {Type: u256}, {Type: u256}, {Type: bs}}.Pack(d.ValidAfter, d.ValidBefore, d.Salt, d.Signature)
	if err != nil {
		return nil, err
	}
	return l.abi.Pack("deposit", toABI(p.Config), d.Amount, ERC3009CollectorAddress, collectorData)
}

// Deposit implements Facilitator: it verifies p again, sends the deposit
// and reports the channel's state after it.
func (l *Local) Deposit(ctx context.Context, p *Payment, req payment.RequirementsV2, raw []byte) (Outcome, error) {
	v, err := l.Verify(ctx, p, req, raw)
	if err != nil {
		return Outcome{}, err
	}
	if !v.Valid {
		return Outcome{Reason: v.Reason, Message: v.Message}, nil
	}
	data, err := l.depositData(p)
	if err != nil {
		return Outcome{}, err
	}
	out, rcpt, err := l.send(ctx, data, 0, ReasonDepositSimulationFailed, ReasonDepositTransactionFailed)
	if err != nil || rcpt == nil {
		return out, err
	}
	out.Amount = new(big.Int).Set(p.Deposit.Amount)
	// The deposit opened the channel when its event shows the balance it
	// made equal to its amount: another deposit in the same block does
	// not blur that, as the state at the block's end would.
	if v, ok := l.logValues(rcpt, "Deposited", p.ChannelID[:]); ok && len(v) == 2 {
		out.Opened = v[1].Cmp(v[0]) == 0
	}
	st, err := l.state(ctx, p.ChannelID, rcpt.BlockNumber)
	if err != nil {
		// The deposit landed: report the state it made from the one verified.
		st = v.State
		st.Balance = new(big.Int).Add(v.State.Balance, p.Deposit.Amount)
	}
	out.State = &st
	return out, nil
}

// Claim implements Facilitator: claimWithSignature of rows, signed with
// the facilitator's authorizer key when sig is nil.
func (l *Local) Claim(ctx context.Context, rows []Claim, sig []byte) (Outcome, error) {
	if e := checkClaims(l.cfg.Escrow, rows); e != nil {
		return Outcome{Reason: e.Reason, Message: e.Message}, nil
	}
	data, e, err := l.claimData(rows, sig)
	if err != nil || e != nil {
		return refusal(e), err
	}
	out, _, err := l.send(ctx, data, 0, ReasonClaimSimulationFailed, ReasonClaimTransactionFailed)
	return out, err
}

// checkClaims refuses rows that cannot make one claim: none, a missing
// amount, amounts beyond uint128, receiver authorizers that differ, a
// claim beyond its voucher, or a voucher the escrow would refuse (not
// signed by the row's payer authorizer as ECDSA.recover checks it).
func checkClaims(escrow Escrow, rows []Claim) *Error {
	if len(rows) == 0 {
		return refuse(ReasonClaimPayload, "a claim needs at least one row")
	}
	for i, r := range rows {
		if r.MaxClaimable == nil || r.TotalClaimed == nil || r.MaxClaimable.BitLen() > 128 || r.TotalClaimed.BitLen() > 128 {
			return refuse(ReasonClaimPayload, "row %d: maxClaimableAmount and totalClaimed must be uint128 amounts", i)
		}
		if r.Config.ReceiverAuthorizer != rows[0].Config.ReceiverAuthorizer {
			return refuse(ReasonClaimPayload, "row %d: the rows of one claim must share their receiverAuthorizer", i)
		}
		if r.TotalClaimed.Cmp(r.MaxClaimable) > 0 {
			return refuse(ReasonClaimPayload, "row %d: claims %s beyond its voucher's %s", i, r.TotalClaimed, r.MaxClaimable)
		}
		p := &Payment{Config: r.Config, ChannelID: escrow.ChannelID(r.Config), MaxClaimable: r.MaxClaimable, Signature: r.Signature}
		if err := (Terms{Escrow: escrow}).Signed(p); err != nil {
			return refuse(ReasonClaimPayload, "row %d: %s", i, err.(*Error).Message)
		}
	}
	return nil
}

func (l *Local) claimData(rows []Claim, sig []byte) ([]byte, *Error, error) {
	if sig == nil {
		entries := make([]ClaimEntry, len(rows))
		for i, r := range rows {
			entries[i] = ClaimEntry{ChannelID: l.cfg.Escrow.ChannelID(r.Config), MaxClaimableAmount: r.MaxClaimable, TotalClaimed: r.TotalClaimed}
		}
		var e *Error
		if sig, e = l.sign(rows[0].Config.ReceiverAuthorizer, l.cfg.Escrow.ClaimBatchDigest(entries)); e != nil {
			return nil, e, nil
		}
	}
	data, err := l.abi.Pack("claimWithSignature", claimsABI(rows), sig)
	return data, nil, err
}

// sign signs digest with the authorizer key, which must be want's.
func (l *Local) sign(want common.Address, digest common.Hash) ([]byte, *Error) {
	if l.cfg.Authorizer == nil {
		return nil, refuse(ReasonAuthorizerNotConfigured, "no receiver authorizer signature given, and this facilitator holds no authorizer key")
	}
	if want != l.authorizer {
		return nil, refuse(ReasonAuthorizerAddressMismatch, "the channel's receiverAuthorizer is %s, this facilitator's is %s", want.Hex(), l.authorizer.Hex())
	}
	sig, err := payment.SignDigest(digest, l.cfg.Authorizer)
	if err != nil {
		return nil, refuse(ReasonAuthorizerNotConfigured, "signing: %v", err)
	}
	return sig, nil
}

// Settle implements Facilitator: settle(receiver, token) when the
// receiver has claimed more than was settled, nothing_to_settle
// otherwise. Amount is the Settled event's.
func (l *Local) Settle(ctx context.Context, receiver, token common.Address) (Outcome, error) {
	vals, err := l.call(ctx, l.cfg.Escrow.Address, nil, "receivers", receiver, token)
	if err != nil {
		return Outcome{}, &payment.FacilitatorError{Op: "settle", Err: err}
	}
	claimed, settled := vals[0].(*big.Int), vals[1].(*big.Int)
	if claimed.Cmp(settled) <= 0 {
		return Outcome{Reason: ReasonNothingToSettle, Message: fmt.Sprintf("%s claimed %s in %s, all of it settled", receiver.Hex(), claimed, token.Hex())}, nil
	}
	data, err := l.abi.Pack("settle", receiver, token)
	if err != nil {
		return Outcome{}, err
	}
	out, rcpt, err := l.send(ctx, data, settleGas, ReasonSettleSimulationFailed, ReasonSettleTransactionFailed)
	if err != nil || rcpt == nil {
		return out, err
	}
	out.Amount = new(big.Int).Sub(claimed, settled)
	if amt, ok := l.logAmount(rcpt, "Settled", receiver.Bytes(), token.Bytes()); ok {
		out.Amount = amt
	}
	return out, nil
}

// Refund implements Facilitator: refundWithSignature alone, or with the
// order's claims in one multicall, for min(amount, balance − claimed);
// refund_no_balance when that is 0. Signatures left out are the
// facilitator's authorizer's. State is the channel's state after it.
func (l *Local) Refund(ctx context.Context, o RefundOrder) (Outcome, error) {
	if o.Amount == nil || o.Amount.Sign() <= 0 || o.Amount.BitLen() > 128 {
		return Outcome{Reason: ReasonRefundAmountInvalid, Message: "a refund's amount must be a positive uint128"}, nil
	}
	if len(o.Claims) > 0 {
		if e := checkClaims(l.cfg.Escrow, o.Claims); e != nil {
			return Outcome{Reason: ReasonRefundPayload, Message: e.Message}, nil
		}
	}
	id := l.cfg.Escrow.ChannelID(o.Config)
	st, err := l.state(ctx, id, nil)
	if err != nil {
		return Outcome{}, &payment.FacilitatorError{Op: "settle", Err: err}
	}
	nonce := o.Nonce
	if nonce == nil {
		nonce = st.RefundNonce
	}
	claimed := new(big.Int).Set(st.TotalClaimed)
	for _, c := range o.Claims {
		if l.cfg.Escrow.ChannelID(c.Config) == id && c.TotalClaimed.Cmp(claimed) > 0 {
			claimed.Set(c.TotalClaimed)
		}
	}
	refundable := new(big.Int).Sub(st.Balance, claimed)
	if refundable.Cmp(o.Amount) > 0 {
		refundable.Set(o.Amount)
	}
	if refundable.Sign() <= 0 {
		return Outcome{Reason: ReasonRefundNoBalance, Message: fmt.Sprintf("channel %s holds %s, of which %s is claimed: nothing to refund", id.Hex(), st.Balance, claimed)}, nil
	}
	refundSig := o.RefundSig
	if refundSig == nil {
		var e *Error
		if refundSig, e = l.sign(o.Config.ReceiverAuthorizer, l.cfg.Escrow.RefundDigest(id, nonce, o.Amount)); e != nil {
			return refusal(e), nil
		}
	}
	data, err := l.abi.Pack("refundWithSignature", toABI(o.Config), o.Amount, nonce, refundSig)
	if err != nil {
		return Outcome{}, err
	}
	if len(o.Claims) > 0 {
		claim, e, err := l.claimData(o.Claims, o.ClaimSig)
		if err != nil || e != nil {
			return refusal(e), err
		}
		if data, err = l.abi.Pack("multicall", [][]byte{claim, data}); err != nil {
			return Outcome{}, err
		}
	}
	out, rcpt, err := l.send(ctx, data, 0, ReasonRefundSimulationFailed, ReasonRefundTransactionFailed)
	if err != nil || rcpt == nil {
		return out, err
	}
	out.Amount = refundable
	if amt, ok := l.logAmount(rcpt, "Refunded", id.Bytes()); ok {
		out.Amount = amt
	}
	after, err := l.state(ctx, id, rcpt.BlockNumber)
	if err != nil {
		after = OnChain{Balance: new(big.Int).Sub(st.Balance, out.Amount), TotalClaimed: claimed, WithdrawRequestedAt: st.WithdrawRequestedAt,
			RefundNonce: new(big.Int).Add(nonce, big.NewInt(1))}
	}
	out.State = &after
	return out, nil
}

func refusal(e *Error) Outcome {
	if e == nil {
		return Outcome{}
	}
	return Outcome{Reason: e.Reason, Message: e.Message}
}

// send sends data to the escrow through the transactor (its gas estimate
// is the simulation) and reads the result: the receipt of a mined,
// successful transaction, or an Outcome saying why not (simReason with
// the escrow's error name, txReason for a reverted transaction,
// settlement_pending for one not mined in time).
func (l *Local) send(ctx context.Context, data []byte, gas uint64, simReason, txReason string) (Outcome, *types.Receipt, error) {
	sent, err := l.tx.Transact(ctx, l.cfg.Escrow.Address, data, gas)
	if err != nil {
		return Outcome{Tx: sent.Tx}, nil, err
	}
	switch {
	case sent.Refused != "":
		return Outcome{Reason: simReason, Message: l.revertName(sent.RevertData, sent.Refused)}, nil, nil
	case sent.Receipt == nil:
		return Outcome{Reason: payment.ReasonSettlementPending, Message: "sent; no receipt within the receipt timeout", Tx: sent.Tx}, nil, nil
	case sent.Receipt.Status != types.ReceiptStatusSuccessful:
		return Outcome{Reason: txReason, Message: fmt.Sprintf("transaction %s reverted in block %s", sent.Tx.Hex(), sent.Receipt.BlockNumber), Tx: sent.Tx}, nil, nil
	}
	return Outcome{Success: true, Tx: sent.Tx}, sent.Receipt, nil
}

// logAmount is the amount of the escrow's event name in rcpt whose
// indexed topics start with topics.
func (l *Local) logAmount(rcpt *types.Receipt, name string, topics ...[]byte) (*big.Int, bool) {
	vals, ok := l.logValues(rcpt, name, topics...)
	if !ok {
		return nil, false
	}
	return vals[0], true
}

// logValues are the amounts (every non-indexed field) of the escrow's
// event name in rcpt whose indexed topics start with topics.
func (l *Local) logValues(rcpt *types.Receipt, name string, topics ...[]byte) ([]*big.Int, bool) {
	ev := l.abi.Events[name]
	for _, lg := range rcpt.Logs {
		if lg.Address != l.cfg.Escrow.Address || len(lg.Topics) <= len(topics) || lg.Topics[0] != ev.ID {
			continue
		}
		match := true
		for i, t := range topics {
			match = match && lg.Topics[i+1] == common.BytesToHash(t)
		}
		if !match {
			continue
		}
		vals, err := ev.Inputs.NonIndexed().Unpack(lg.Data)
		if err != nil || len(vals) == 0 {
			continue
		}
		out := make([]*big.Int, 0, len(vals))
		for _, v := range vals {
			if amt, ok := v.(*big.Int); ok {
				out = append(out, amt)
			}
		}
		if len(out) == len(vals) {
			return out, true
		}
	}
	return nil, false
}

// state reads channel id's state in the escrow at block (nil: latest),
// in one eth_call of the escrow's own multicall: three separate calls
// could straddle a block and mix a balance from before a refund with a
// refund nonce from after it, a state that never was (and that Adopt
// would take as news).
func (l *Local) state(ctx context.Context, id common.Hash, block *big.Int) (OnChain, error) {
	methods := []string{"channels", "pendingWithdrawals", "refundNonce"}
	calls := make([][]byte, len(methods))
	for i, m := range methods {
		data, err := l.abi.Pack(m, id)
		if err != nil {
			return OnChain{}, err
		}
		calls[i] = data
	}
	vals, err := l.call(ctx, l.cfg.Escrow.Address, block, "multicall", calls)
	if err != nil {
		return OnChain{}, err
	}
	results, ok := vals[0].([][]byte)
	if !ok || len(results) != len(methods) {
		return OnChain{}, fmt.Errorf("multicall: %d results, want %d", len(results), len(methods))
	}
	out := make([][]any, len(methods))
	for i, m := range methods {
		if out[i], err = l.abi.Unpack(m, results[i]); err != nil {
			return OnChain{}, fmt.Errorf("%s: %w", m, err)
		}
	}
	ch, pw, rn := out[0], out[1], out[2]
	return OnChain{Balance: ch[0].(*big.Int), TotalClaimed: ch[1].(*big.Int), WithdrawRequestedAt: pw[1].(*big.Int).Uint64(), RefundNonce: rn[0].(*big.Int)}, nil
}

func (l *Local) balanceOf(ctx context.Context, token, who common.Address) (*big.Int, error) {
	vals, err := l.call(ctx, token, nil, "balanceOf", who)
	if err != nil {
		return nil, err
	}
	return vals[0].(*big.Int), nil
}

// call makes one eth_call of method on to and unpacks its outputs.
func (l *Local) call(ctx context.Context, to common.Address, block *big.Int, method string, args ...any) ([]any, error) {
	data, err := l.abi.Pack(method, args...)
	if err != nil {
		return nil, err
	}
	out, err := l.chain.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, block)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	vals, err := l.abi.Unpack(method, out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return vals, nil
}

// revertName names a revert from its data: the escrow's (or the
// collector's, or OpenZeppelin's) custom error, or an Error(string)'s
// text; fallback when the data says nothing.
func (l *Local) revertName(data []byte, fallback string) string {
	if len(data) >= 4 {
		if name, ok := l.errNames[[4]byte(data[:4])]; ok {
			return name
		}
		if msg, err := abi.UnpackRevert(data); err == nil {
			return msg
		}
	}
	return fallback
}
