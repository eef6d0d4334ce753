package exact

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/tollgate/tollgate/payment"
)

// Chain is what the local facilitator reads from an Ethereum node;
// *ethclient.Client provides it.
type Chain interface {
	CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error)
	CodeAt(ctx context.Context, account common.Address, block *big.Int) ([]byte, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
}

// Transactor sends the facilitator's transactions from its gas key and
// waits for their receipts; *payment.Local provides it, sharing the key's
// nonces with the other schemes. A Sent with Refused set is a simulation
// that reverted (nothing was sent); a nil Receipt is a transaction not
// mined in time (it may still land).
type Transactor interface {
	Transact(ctx context.Context, to common.Address, data []byte, gas uint64) (payment.Sent, error)
	// Signer is the gas key's address, the simulations' sender.
	Signer() common.Address
}

// LocalConfig configures exact's self-hosted facilitator.
type LocalConfig struct {
	ChainID *big.Int
	// Assets is the allow-list; payments in anything else are refused.
	Assets []payment.Asset
	// Grace is how long before validBefore a payment stops being accepted
	// (the reference uses 6 s, about three blocks).
	Grace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate reports every problem of c at once.
func (c LocalConfig) Validate() error {
	var errs []error
	if c.ChainID == nil || c.ChainID.Sign() <= 0 {
		errs = append(errs, errors.New("exact facilitator: chain id is required"))
	}
	if len(c.Assets) == 0 {
		errs = append(errs, errors.New("exact facilitator: no asset allowed"))
	}
	if c.Grace < 0 {
		errs = append(errs, errors.New("exact facilitator: grace must be >= 0"))
	}
	return errors.Join(errs...)
}

// Local verifies payments and settles them on chain itself, per the
// exact-EVM rules of x402: the EIP-712 signer (EIP-1271 for contract
// wallets), exact value, recipient, allowed asset and domain, time window,
// and an eth_call simulation of transferWithAuthorization (which also
// covers an unused nonce and the balance); settlement sends the transfer
// through the gas key's Transactor and waits for its own receipt. It is
// safe for concurrent use.
type Local struct {
	cfg   LocalConfig
	chain Chain
	tx    Transactor
	from  common.Address
	abi   abi.ABI
	now   func() time.Time
}

var _ Facilitator = (*Local)(nil)

// eip3009ABI holds the calls the facilitator makes.
const eip3009ABI = `[
 {"type":"function","name":"transferWithAuthorization","stateMutability":"nonpayable","inputs":[
  {"name":"from","type":"address"},{"name":"to","type":"address"},{"name":"value","type":"uint256"},
  {"name":"validAfter","type":"uint256"},{"name":"validBefore","type":"uint256"},{"name":"nonce","type":"bytes32"},
  {"name":"signature","type":"bytes"}],"outputs":[]},
 {"type":"function","name":"authorizationState","stateMutability":"view","inputs":[
  {"name":"authorizer","type":"address"},{"name":"nonce","type":"bytes32"}],"outputs":[{"name":"","type":"bool"}]},
 {"type":"function","name":"balanceOf","stateMutability":"view","inputs":[{"name":"account","type":"address"}],"outputs":[{"name":"","type":"uint256"}]},
 {"type":"function","name":"isValidSignature","stateMutability":"view","inputs":[
  {"name":"hash","type":"bytes32"},{"name":"signature","type":"bytes"}],"outputs":[{"name":"","type":"bytes4"}]}
]`

// NewLocal returns exact's self-hosted facilitator, reading chain and
// sending through tx; it does no I/O.
func NewLocal(cfg LocalConfig, chain Chain, tx Transactor) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if chain == nil || tx == nil {
		return nil, errors.New("exact facilitator: a chain and a transactor are required")
	}
	parsed, err := abi.JSON(strings.NewReader(eip3009ABI))
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Local{cfg: cfg, chain: chain, tx: tx, from: tx.Signer(), abi: parsed, now: now}, nil
}

// Verify implements Facilitator.
func (l *Local) Verify(ctx context.Context, p *Payment, r *payment.Requirement) (Verification, error) {
	v := Verification{Payer: p.Authorization.From}
	if reason, msg := l.check(p, r); reason != "" {
		v.Reason, v.Message = reason, msg
		return v, nil
	}
	if reason, msg, err := l.checkSignature(ctx, p, r); err != nil || reason != "" {
		v.Reason, v.Message = reason, msg
		return v, err
	}
	data, err := l.transferData(p)
	if err != nil {
		return v, err
	}
	if _, err := l.chain.CallContract(ctx, ethereum.CallMsg{From: l.from, To: &r.Asset, Data: data}, nil); err != nil {
		if !reverted(err) {
			return v, &payment.FacilitatorError{Op: "verify", Err: err}
		}
		v.Reason, v.Message = l.diagnose(ctx, p, r, err)
		return v, nil
	}
	v.Valid = true
	return v, nil
}

// clockSkew is how far ahead of ours a payer's clock may run: an
// authorization valid from a few seconds in our future is accepted (the
// chain's own check, block.timestamp > validAfter, still applies).
const clockSkew = 5

// check applies the rules that need no chain: scheme, network, asset and
// domain, recipient, exact value, time window (and a window no longer than
// the requirement's maxTimeoutSeconds: an authorization valid for a year
// stays a bearer instrument for a year).
func (l *Local) check(p *Payment, r *payment.Requirement) (reason, message string) {
	a := p.Authorization
	now := l.now().Unix()
	switch {
	case p.Scheme != Scheme:
		return ReasonInvalidScheme, fmt.Sprintf("scheme %q; only exact is supported", p.Scheme)
	case p.Network != r.Network && !(p.Version == 1 && p.Network == r.NetworkV1):
		return ReasonNetworkMismatch, fmt.Sprintf("network %q; want %s", p.Network, r.Network)
	case r.ChainID.Cmp(l.cfg.ChainID) != 0:
		return ReasonNetworkMismatch, "requirement for another chain"
	case !l.allowed(r):
		return payment.ReasonNoMatch, fmt.Sprintf("asset %s (%q, %q) is not accepted", r.Asset, r.AssetName, r.AssetVersion)
	case a.To != r.PayTo:
		return ReasonRecipientMismatch, fmt.Sprintf("authorization pays %s; want %s", a.To, r.PayTo)
	case a.Value.Cmp(r.Amount) != 0:
		return ReasonValueMismatch, fmt.Sprintf("authorization value %s; want exactly %s", a.Value, r.Amount)
	case a.ValidAfter.Cmp(big.NewInt(now+clockSkew)) > 0:
		return ReasonValidAfter, fmt.Sprintf("valid only after %s", a.ValidAfter)
	case a.ValidBefore.Cmp(big.NewInt(now+int64(l.cfg.Grace/time.Second))) < 0:
		return ReasonValidBefore, fmt.Sprintf("expired or expiring: validBefore %s", a.ValidBefore)
	case a.ValidBefore.Cmp(big.NewInt(now+int64(r.MaxTimeout)+validitySlack)) > 0:
		// The gate's bound: x402 clients sign validBefore = now +
		// maxTimeoutSeconds on their own clock.
		return ReasonValidityTooLong, fmt.Sprintf("validBefore %s is later than now + maxTimeoutSeconds (%d s) + %d s skew = %d",
			a.ValidBefore, r.MaxTimeout, validitySlack, now+int64(r.MaxTimeout)+validitySlack)
	}
	return "", ""
}

func (l *Local) allowed(r *payment.Requirement) bool {
	for _, as := range l.cfg.Assets {
		if as.Address == r.Asset && as.Name == r.AssetName && as.Version == r.AssetVersion {
			return true
		}
	}
	return false
}

// checkSignature recovers an EOA signer, or asks a contract wallet
// (EIP-1271).
func (l *Local) checkSignature(ctx context.Context, p *Payment, r *payment.Requirement) (reason, message string, err error) {
	d := r.Domain()
	if len(p.Signature) == 65 {
		if signer, rerr := d.Recover(p.Authorization, p.Signature); rerr == nil && signer == p.Authorization.From {
			return "", "", nil
		}
	}
	code, err := l.chain.CodeAt(ctx, p.Authorization.From, nil)
	if err != nil {
		return "", "", &payment.FacilitatorError{Op: "verify", Err: err}
	}
	if len(code) == 0 || isDelegation(code) && len(p.Signature) == 65 {
		return ReasonInvalidSignature, "the signature is not from the authorization's from address", nil
	}
	digest := d.Digest(p.Authorization)
	data, err := l.abi.Pack("isValidSignature", digest, p.Signature)
	if err != nil {
		return "", "", err
	}
	out, err := l.chain.CallContract(ctx, ethereum.CallMsg{To: &p.Authorization.From, Data: data}, nil)
	if err != nil && !reverted(err) {
		return "", "", &payment.FacilitatorError{Op: "verify", Err: err}
	}
	if err != nil || len(out) < 4 || [4]byte(out[:4]) != [4]byte{0x16, 0x26, 0xba, 0x7e} {
		return ReasonInvalidSignature, "the contract wallet does not accept the signature (EIP-1271)", nil
	}
	return "", "", nil
}

// isDelegation reports EIP-7702 delegated EOA code (0xef0100 || address).
func isDelegation(code []byte) bool {
	return len(code) == 23 && code[0] == 0xef && code[1] == 0x01 && code[2] == 0x00
}

func (l *Local) transferData(p *Payment) ([]byte, error) {
	a := p.Authorization
	return l.abi.Pack("transferWithAuthorization", a.From, a.To, a.Value, a.ValidAfter, a.ValidBefore, a.Nonce, p.Signature)
}

// diagnose names why a simulated transfer reverted.
func (l *Local) diagnose(ctx context.Context, p *Payment, r *payment.Requirement, revert error) (reason, message string) {
	if reason := revertReason(revert.Error()); reason != "" {
		return reason, revert.Error()
	}
	a := p.Authorization
	if used, err := l.callBool(ctx, r.Asset, "authorizationState", a.From, a.Nonce); err == nil && used {
		return ReasonNonceUsed, "the authorization's nonce is used or canceled"
	}
	if data, err := l.abi.Pack("balanceOf", a.From); err == nil {
		if out, err := l.chain.CallContract(ctx, ethereum.CallMsg{To: &r.Asset, Data: data}, nil); err == nil && len(out) >= 32 {
			if new(big.Int).SetBytes(out[:32]).Cmp(a.Value) < 0 {
				return ReasonInsufficientBalance, "the payer's balance is below the price"
			}
		}
	}
	return ReasonSimulationFailed, revert.Error()
}

func (l *Local) callBool(ctx context.Context, to common.Address, method string, args ...any) (bool, error) {
	data, err := l.abi.Pack(method, args...)
	if err != nil {
		return false, err
	}
	out, err := l.chain.CallContract(ctx, ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil || len(out) < 32 {
		return false, fmt.Errorf("%s: %v", method, err)
	}
	return out[31] == 1, nil
}

// revertReason maps FiatToken's revert strings to reason codes.
func revertReason(msg string) string {
	switch {
	case strings.Contains(msg, "authorization is expired"):
		return ReasonValidBefore
	case strings.Contains(msg, "authorization is not yet valid"):
		return ReasonValidAfter
	case strings.Contains(msg, "authorization is used or canceled"):
		return ReasonNonceUsed
	case strings.Contains(msg, "exceeds balance"):
		return ReasonInsufficientBalance
	case strings.Contains(msg, "invalid signature"):
		return ReasonInvalidSignature
	}
	return ""
}

// Settle implements Facilitator: it re-checks what needs no chain and the
// signature, then sends transferWithAuthorization (its gas estimate is the
// simulation) and waits for its receipt: Success once mined, a
// ReasonTransactionFailed with the diagnosis if it reverted, Pending with
// the hash if the receipt did not come within ReceiptTimeout.
func (l *Local) Settle(ctx context.Context, p *Payment, r *payment.Requirement) (Settlement, error) {
	s := Settlement{Payer: p.Authorization.From}
	if reason, msg := l.check(p, r); reason != "" {
		s.Reason, s.Message = reason, msg
		return s, nil
	}
	if reason, msg, err := l.checkSignature(ctx, p, r); err != nil || reason != "" {
		s.Reason, s.Message = reason, msg
		return s, err
	}
	data, err := l.transferData(p)
	if err != nil {
		return s, err
	}
	sent, err := l.tx.Transact(ctx, r.Asset, data, 0)
	s.Tx = sent.Tx
	if err != nil {
		// The node never confirmed it has the transaction: the chain could
		// not be asked. It is rebroadcast until the node takes or refuses
		// it, so the outcome is unknown, not failed.
		return s, err
	}
	switch {
	case sent.Refused != "":
		// The gas estimate is the simulation: nothing was sent.
		if s.Reason = revertReason(sent.Refused); s.Reason != "" {
			s.Message = "the transfer would revert"
		} else {
			s.Reason, s.Message = l.diagnose(ctx, p, r, errors.New("execution reverted"))
		}
	case sent.Receipt == nil:
		s.Pending, s.Reason = true, payment.ReasonSettlementPending
		s.Message = "sent; no receipt in time"
		if err := ctx.Err(); err != nil {
			s.Message = "sent; no receipt yet: " + err.Error()
		}
	case sent.Receipt.Status != types.ReceiptStatusSuccessful:
		s.Reason, s.Message = ReasonTransactionFailed, l.whyReverted(ctx, p, r, data, sent)
	default:
		s.Success, s.Receipt = true, sent.Receipt
	}
	return s, nil
}

// whyReverted explains a mined settlement that reverted: out of gas, the
// authorization's window at the block's time, FiatToken's revert string
// for the same call at the parent block, or what the token says now (the
// authorization used or canceled, the balance).
func (l *Local) whyReverted(ctx context.Context, p *Payment, r *payment.Requirement, data []byte, got payment.Sent) string {
	rcpt := got.Receipt
	what := fmt.Sprintf("transaction %s reverted in block %s", rcpt.TxHash, rcpt.BlockNumber)
	a := p.Authorization
	if rcpt.GasUsed >= got.Gas {
		return fmt.Sprintf("%s: out of gas (limit %d)", what, got.Gas)
	}
	if h, err := l.chain.HeaderByNumber(ctx, rcpt.BlockNumber); err == nil {
		switch t := new(big.Int).SetUint64(h.Time); {
		case t.Cmp(a.ValidBefore) >= 0:
			return fmt.Sprintf("%s: the authorization expired (validBefore %s, block time %d)", what, a.ValidBefore, h.Time)
		case t.Cmp(a.ValidAfter) <= 0:
			return fmt.Sprintf("%s: the authorization was not yet valid (validAfter %s, block time %d)", what, a.ValidAfter, h.Time)
		}
	}
	parent := new(big.Int).Sub(rcpt.BlockNumber, big.NewInt(1))
	if _, err := l.chain.CallContract(ctx, ethereum.CallMsg{From: l.from, To: &r.Asset, Data: data}, parent); err != nil && reverted(err) {
		return what + ": " + err.Error()
	}
	if reason, msg := l.diagnose(ctx, p, r, errors.New("execution reverted")); reason != ReasonSimulationFailed {
		return what + ": " + msg
	}
	return what
}

// reverted tells an execution revert (a verdict) from a node failure.
func reverted(err error) bool {
	_, ok := payment.Revert(err)
	return ok
}
