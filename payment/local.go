package payment

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
)

// Chain is what the local facilitator needs from an Ethereum node;
// *ethclient.Client provides it.
type Chain interface {
	// BlockReceipts serves the settlement poller: one call per new block,
	// whatever the number of settlements in flight.
	BlockReceipts(ctx context.Context, block rpc.BlockNumberOrHash) ([]*types.Receipt, error)
	CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error)
	CodeAt(ctx context.Context, account common.Address, block *big.Int) ([]byte, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
}

// Asset is an EIP-3009 token the local facilitator accepts.
type Asset struct {
	Address common.Address
	Name    string // EIP-712 domain name
	Version string // EIP-712 domain version
}

// LocalConfig configures the self-hosted facilitator.
type LocalConfig struct {
	ChainID *big.Int
	// Key pays the gas of settlement transactions. Never logged.
	Key *ecdsa.PrivateKey
	// Assets is the allow-list; payments in anything else are refused.
	Assets []Asset
	// Grace is how long before validBefore a payment stops being accepted
	// (the reference uses 6 s, about three blocks).
	Grace time.Duration
	// ReceiptTimeout bounds the wait for a settlement's receipt; past it
	// the settlement is reported pending with its transaction hash (the
	// transaction stays watched, and is rebroadcast or replaced until
	// mined).
	ReceiptTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Validate reports every problem of c at once.
func (c LocalConfig) Validate() error {
	var errs []error
	if c.ChainID == nil || c.ChainID.Sign() <= 0 {
		errs = append(errs, errors.New("local facilitator: chain id is required"))
	}
	if c.Key == nil {
		errs = append(errs, errors.New("local facilitator: a gas key is required"))
	}
	if len(c.Assets) == 0 {
		errs = append(errs, errors.New("local facilitator: no asset allowed"))
	}
	if c.Grace < 0 || c.ReceiptTimeout <= 0 {
		errs = append(errs, errors.New("local facilitator: grace must be >= 0 and receipt timeout positive"))
	}
	return errors.Join(errs...)
}

// Local verifies payments and settles them on chain itself, per the
// exact-EVM rules of x402: the EIP-712 signer (EIP-1271 for contract
// wallets), exact value, recipient, allowed asset and domain, time window,
// and an eth_call simulation of transferWithAuthorization (which also
// covers an unused nonce and the balance); settlement sends the transfer
// from the gas key, many in flight at once (see sender), and waits for its
// own receipt. It is safe for concurrent use; one gas key must have one
// Local (one process) at a time.
type Local struct {
	cfg   LocalConfig
	chain Chain
	from  common.Address
	abi   abi.ABI
	now   func() time.Time
	txs   *sender
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

// NewLocal returns a self-hosted facilitator over chain; it does no I/O.
func NewLocal(cfg LocalConfig, chain Chain) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	parsed, err := abi.JSON(strings.NewReader(eip3009ABI))
	if err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Local{cfg: cfg, chain: chain, from: crypto.PubkeyToAddress(cfg.Key.PublicKey), abi: parsed, now: now,
		txs: newSender(chain, cfg.Key, cfg.ChainID)}, nil
}

// Signer returns the address that pays settlement gas.
func (l *Local) Signer() common.Address { return l.from }

// Verify implements Facilitator.
func (l *Local) Verify(ctx context.Context, p *Payment, r *Requirement) (Verification, error) {
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
		if !isRevert(err) {
			return v, &FacilitatorError{Op: "verify", Err: err}
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
func (l *Local) check(p *Payment, r *Requirement) (reason, message string) {
	a := p.Authorization
	now := l.now().Unix()
	switch {
	case p.Scheme != "exact":
		return ReasonInvalidScheme, fmt.Sprintf("scheme %q; only exact is supported", p.Scheme)
	case p.Network != r.Network && !(p.Version == 1 && p.Network == r.NetworkV1):
		return ReasonNetworkMismatch, fmt.Sprintf("network %q; want %s", p.Network, r.Network)
	case r.ChainID.Cmp(l.cfg.ChainID) != 0:
		return ReasonNetworkMismatch, "requirement for another chain"
	case !l.allowed(r):
		return ReasonNoMatch, fmt.Sprintf("asset %s (%q, %q) is not accepted", r.Asset, r.AssetName, r.AssetVersion)
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

func (l *Local) allowed(r *Requirement) bool {
	for _, as := range l.cfg.Assets {
		if as.Address == r.Asset && as.Name == r.AssetName && as.Version == r.AssetVersion {
			return true
		}
	}
	return false
}

// checkSignature recovers an EOA signer, or asks a contract wallet
// (EIP-1271).
func (l *Local) checkSignature(ctx context.Context, p *Payment, r *Requirement) (reason, message string, err error) {
	d := r.Domain()
	if len(p.Signature) == 65 {
		if signer, rerr := d.Recover(p.Authorization, p.Signature); rerr == nil && signer == p.Authorization.From {
			return "", "", nil
		}
	}
	code, err := l.chain.CodeAt(ctx, p.Authorization.From, nil)
	if err != nil {
		return "", "", &FacilitatorError{Op: "verify", Err: err}
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
	if err != nil && !isRevert(err) {
		return "", "", &FacilitatorError{Op: "verify", Err: err}
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
func (l *Local) diagnose(ctx context.Context, p *Payment, r *Requirement, revert error) (reason, message string) {
	if reason := revertReason(revert); reason != "" {
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
func revertReason(err error) string {
	msg := err.Error()
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

// isRevert tells an execution revert (a verdict) from a node failure.
func isRevert(err error) bool {
	_, reverted := Revert(err)
	return reverted
}

// Revert reads an eth_call or eth_estimateGas error: whether the call
// reverted (a verdict on the call, not a node failure), and the revert's
// data when the node gave it (a custom error's selector and arguments).
func Revert(err error) (data []byte, reverted bool) {
	var de rpc.DataError
	if errors.As(err, &de) {
		if h, ok := de.ErrorData().(string); ok {
			data, _ = hexutil.Decode(h)
		}
		return data, true
	}
	return nil, strings.Contains(err.Error(), "execution reverted")
}

// Settle implements Facilitator: it re-checks what needs no chain and the
// signature, then sends transferWithAuthorization (its gas estimate is the
// simulation) and waits for its receipt: Success once mined, a
// ReasonTransactionFailed with the diagnosis if it reverted, Pending with
// the hash if the receipt did not come within ReceiptTimeout.
func (l *Local) Settle(ctx context.Context, p *Payment, r *Requirement) (Settlement, error) {
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
	f, reason, err := l.send(ctx, r.Asset, data)
	if err != nil {
		return s, &FacilitatorError{Op: "settle", Err: err}
	}
	if reason != "" {
		s.Reason, s.Message = reason, "the transfer would revert"
		if reason == ReasonSimulationFailed {
			s.Reason, s.Message = l.diagnose(ctx, p, r, errors.New("execution reverted"))
		}
		return s, nil
	}
	got := l.txs.wait(ctx, f, l.cfg.ReceiptTimeout)
	s.Tx = got.tx
	switch {
	case got.rcpt == nil && !got.accepted:
		// The node never confirmed it has the transaction: the chain could
		// not be asked. It is rebroadcast until the node takes or refuses
		// it, so the outcome is unknown, not failed.
		return s, &FacilitatorError{Op: "settle", Err: fmt.Errorf("transaction %s not confirmed by the node: %w", got.tx, got.sendErr)}
	case got.rcpt == nil:
		s.Pending, s.Reason = true, ReasonSettlementPending
		s.Message = fmt.Sprintf("sent; no receipt within %s", l.cfg.ReceiptTimeout)
		if err := ctx.Err(); err != nil {
			s.Message = "sent; no receipt yet: " + err.Error()
		}
	case got.rcpt.Status != types.ReceiptStatusSuccessful:
		s.Reason, s.Message = ReasonTransactionFailed, l.whyReverted(ctx, p, r, data, got)
	default:
		s.Success, s.Receipt = true, got.rcpt
	}
	return s, nil
}

// send estimates the gas of a call from the gas key (the estimate is the
// simulation: a revert is a reason, not an error) and puts it in flight.
// Only the nonce, signing and the send itself are serialized.
func (l *Local) send(ctx context.Context, to common.Address, data []byte) (*flight, string, error) {
	gas, err := l.chain.EstimateGas(ctx, ethereum.CallMsg{From: l.from, To: &to, Data: data})
	if err != nil {
		if isRevert(err) {
			if reason := revertReason(err); reason != "" {
				return nil, reason, nil
			}
			return nil, ReasonSimulationFailed, nil
		}
		return nil, "", err
	}
	f, err := l.txs.submit(ctx, call{to: to, data: data, gas: gas * 12 / 10})
	return f, "", err
}

// whyReverted explains a mined settlement that reverted: out of gas, the
// authorization's window at the block's time, FiatToken's revert string
// for the same call at the parent block, or what the token says now (the
// authorization used or canceled, the balance).
func (l *Local) whyReverted(ctx context.Context, p *Payment, r *Requirement, data []byte, got landing) string {
	rcpt := got.rcpt
	what := fmt.Sprintf("transaction %s reverted in block %s", rcpt.TxHash, rcpt.BlockNumber)
	a := p.Authorization
	if rcpt.GasUsed >= got.gas {
		return fmt.Sprintf("%s: out of gas (limit %d)", what, got.gas)
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
	if _, err := l.chain.CallContract(ctx, ethereum.CallMsg{From: l.from, To: &r.Asset, Data: data}, parent); err != nil && isRevert(err) {
		return what + ": " + err.Error()
	}
	if reason, msg := l.diagnose(ctx, p, r, errors.New("execution reverted")); reason != ReasonSimulationFailed {
		return what + ": " + msg
	}
	return what
}

// Sent is the outcome of a call the facilitator's gas key made for a
// scheme (see Transact).
type Sent struct {
	// Refused is why the simulation reverted, the node's message; nothing
	// was sent. RevertData is the revert's data when the node gave it (a
	// custom error's selector and arguments).
	Refused    string
	RevertData []byte
	// Tx is the transaction's hash once sent.
	Tx common.Hash
	// Receipt is its receipt; nil when it was not mined within the
	// receipt timeout (it stays watched and may still land).
	Receipt *types.Receipt
}

// Transact sends data to contract to from the gas key and waits for the
// receipt: the way a scheme's facilitator side (batch-settlement's
// deposits, claims, settles and refunds) sends transactions, sharing the
// key's nonces with exact's settlements. The gas estimate is the
// simulation; gas, when not 0, is the limit used instead of the estimate
// with a margin.
func (l *Local) Transact(ctx context.Context, to common.Address, data []byte, gas uint64) (Sent, error) {
	est, err := l.chain.EstimateGas(ctx, ethereum.CallMsg{From: l.from, To: &to, Data: data})
	if err != nil {
		if data, reverted := Revert(err); reverted {
			return Sent{Refused: err.Error(), RevertData: data}, nil
		}
		return Sent{}, &FacilitatorError{Op: "transact", Err: err}
	}
	if gas == 0 {
		gas = est * 12 / 10
	}
	f, err := l.txs.submit(ctx, call{to: to, data: data, gas: gas})
	if err != nil {
		return Sent{}, &FacilitatorError{Op: "transact", Err: err}
	}
	got := l.txs.wait(ctx, f, l.cfg.ReceiptTimeout)
	if got.rcpt == nil && !got.accepted {
		return Sent{Tx: got.tx}, &FacilitatorError{Op: "transact", Err: fmt.Errorf("transaction %s not confirmed by the node: %w", got.tx, got.sendErr)}
	}
	return Sent{Tx: got.tx, Receipt: got.rcpt}, nil
}
