package exact

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// AuditChain is what the auditor reads from a node; *ethclient.Client
// provides it.
type AuditChain interface {
	CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error)
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
}

// Event topics of an EIP-3009 token (FiatToken and ours emit them all).
var (
	topicAuthorizationUsed     = crypto.Keccak256Hash([]byte("AuthorizationUsed(address,bytes32)"))
	topicAuthorizationCanceled = crypto.Keccak256Hash([]byte("AuthorizationCanceled(address,bytes32)"))
	topicTransfer              = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	selectorAuthorizationState = crypto.Keccak256([]byte("authorizationState(address,bytes32)"))[:4]
)

// Transfer names one authorization on chain: the token, the payer, the
// EIP-3009 nonce, and what it must pay to whom.
type Transfer struct {
	Asset common.Address
	From  common.Address
	To    common.Address
	Value *big.Int
	Nonce [32]byte
}

// Verdict is what the chain says of an authorization.
type Verdict int

// Verdicts.
const (
	// VerdictUnused: the nonce was neither used nor canceled as of the head read.
	VerdictUnused Verdict = iota
	// VerdictPaid: transaction Tx used the authorization and transferred Value
	// from From to To.
	VerdictPaid
	// VerdictCanceled: the payer burnt the nonce with cancelAuthorization.
	VerdictCanceled
	// VerdictMisused: the nonce was used by a transaction that did not make the
	// transfer (another authorization with the same nonce, or a token that
	// does not behave as EIP-3009 says). Nothing was paid to us.
	VerdictMisused
)

func (v Verdict) String() string {
	return [...]string{"unused", "paid", "canceled", "misused"}[v]
}

// Finding is the chain's answer about one authorization.
type Finding struct {
	Verdict Verdict
	// Tx is the transaction that used (or canceled) the nonce, when one did.
	Tx common.Hash
	// HeadTime is the timestamp of the block the answer holds at: an
	// Unused authorization whose validBefore is not after it can never be
	// used any more.
	HeadTime uint64
}

// Expired reports whether an unused authorization valid before
// validBefore can no longer land: every later block is later than the
// head the finding was read at.
func (f Finding) Expired(validBefore int64) bool {
	return f.Verdict == VerdictUnused && int64(f.HeadTime) >= validBefore
}

// AuditConfig tunes the auditor.
type AuditConfig struct {
	// MaxRange is the largest block range of one eth_getLogs request
	// (providers cap it; 2,000 is accepted by most).
	MaxRange uint64
	// Lookback widens the search before the time a payment was first seen,
	// for clock skew between this host and the chain.
	Lookback time.Duration
	// ReceiptWait bounds how long Confirm waits for a receipt that a
	// lagging node does not have yet.
	ReceiptWait time.Duration
}

// DefaultAuditConfig suits Base behind a public RPC provider.
func DefaultAuditConfig() AuditConfig {
	return AuditConfig{MaxRange: 2_000, Lookback: 2 * time.Minute, ReceiptWait: 10 * time.Second}
}

// Auditor establishes from the chain alone what happened to a payment:
// the transaction that used its authorization and whether that
// transaction paid us (the token's AuthorizationUsed log with its
// Transfer log in the same receipt), or that the payer canceled it. It
// never trusts a facilitator's word or authorizationState alone: a nonce
// that is "used" may have been canceled.
type Auditor struct {
	cfg   AuditConfig
	chain AuditChain
}

// NewAuditor returns an auditor over chain; it does no I/O.
func NewAuditor(cfg AuditConfig, chain AuditChain) (*Auditor, error) {
	if cfg.MaxRange == 0 || cfg.Lookback < 0 || cfg.ReceiptWait < 0 {
		return nil, errors.New("auditor: max range must be positive, lookback and receipt wait not negative")
	}
	return &Auditor{cfg: cfg, chain: chain}, nil
}

// ErrNoReceipt means a transaction the facilitator named has no receipt
// on chain (yet, or ever).
var ErrNoReceipt = errors.New("payment: no receipt for the settlement transaction")

// Confirm checks a settlement a facilitator reported: the receipt of tx
// must exist, have succeeded and carry both the token's
// AuthorizationUsed(from, nonce) and Transfer(from, to, value). A receipt
// without them is VerdictMisused; a missing receipt (after ReceiptWait) is
// ErrNoReceipt.
func (a *Auditor) Confirm(ctx context.Context, tx common.Hash, t Transfer) (Finding, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ReceiptWait)
	defer cancel()
	delay := 20 * time.Millisecond
	for {
		rcpt, err := a.chain.TransactionReceipt(ctx, tx)
		switch {
		case err == nil:
			return Finding{Verdict: judge(rcpt, t), Tx: tx}, nil
		case !errors.Is(err, ethereum.NotFound):
			if ctx.Err() != nil {
				return Finding{}, fmt.Errorf("%w: %s", ErrNoReceipt, tx)
			}
			return Finding{}, fmt.Errorf("auditor: receipt %s: %w", tx, err)
		}
		select {
		case <-ctx.Done():
			return Finding{}, fmt.Errorf("%w: %s", ErrNoReceipt, tx)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// judge reads a receipt: Paid only if it succeeded and holds the token's
// AuthorizationUsed for this payer and nonce and its Transfer of exactly
// the value from the payer to the recipient.
func judge(rcpt *types.Receipt, t Transfer) Verdict {
	if rcpt.Status != types.ReceiptStatusSuccessful {
		return VerdictMisused
	}
	var used, moved bool
	for _, l := range rcpt.Logs {
		if l.Address != t.Asset || len(l.Topics) == 0 {
			continue
		}
		switch {
		case l.Topics[0] == topicAuthorizationUsed && len(l.Topics) == 3:
			used = used || l.Topics[1] == addressTopic(t.From) && l.Topics[2] == common.Hash(t.Nonce)
		case l.Topics[0] == topicTransfer && len(l.Topics) == 3 && len(l.Data) == 32:
			moved = moved || l.Topics[1] == addressTopic(t.From) && l.Topics[2] == addressTopic(t.To) &&
				new(big.Int).SetBytes(l.Data).Cmp(t.Value) == 0
		}
	}
	if used && moved {
		return VerdictPaid
	}
	return VerdictMisused
}

func addressTopic(a common.Address) common.Hash { return common.BytesToHash(a.Bytes()) }

// Find looks the authorization up on chain: unused (one eth_call of
// authorizationState at the head), else the AuthorizationUsed or
// AuthorizationCanceled log for this payer and nonce at or after since
// (minus Lookback), and for a use, the receipt's Transfer.
func (a *Auditor) Find(ctx context.Context, t Transfer, since time.Time) (Finding, error) {
	head, err := a.chain.HeaderByNumber(ctx, nil)
	if err != nil {
		return Finding{}, fmt.Errorf("auditor: head: %w", err)
	}
	used, err := a.authorizationState(ctx, t, head.Number)
	if err != nil {
		return Finding{}, err
	}
	if !used {
		return Finding{Verdict: VerdictUnused, HeadTime: head.Time}, nil
	}
	from, err := a.blockAtOrBefore(ctx, head, since.Add(-a.cfg.Lookback))
	if err != nil {
		return Finding{}, err
	}
	to := head.Number.Uint64()
	topics := [][]common.Hash{{topicAuthorizationUsed, topicAuthorizationCanceled}, {addressTopic(t.From)}, {common.Hash(t.Nonce)}}
	for lo := from; lo <= to; lo += a.cfg.MaxRange {
		hi := min(lo+a.cfg.MaxRange-1, to)
		logs, err := a.chain.FilterLogs(ctx, ethereum.FilterQuery{
			FromBlock: new(big.Int).SetUint64(lo), ToBlock: new(big.Int).SetUint64(hi),
			Addresses: []common.Address{t.Asset}, Topics: topics,
		})
		if err != nil {
			return Finding{}, fmt.Errorf("auditor: logs %d-%d: %w", lo, hi, err)
		}
		for _, l := range logs {
			if l.Removed {
				continue
			}
			if l.Topics[0] == topicAuthorizationCanceled {
				return Finding{Verdict: VerdictCanceled, Tx: l.TxHash, HeadTime: head.Time}, nil
			}
			f, err := a.Confirm(ctx, l.TxHash, t)
			f.HeadTime = head.Time
			return f, err
		}
	}
	// authorizationState says used, but no log in the window: used before
	// the payment was first seen here, so not by its settlement.
	return Finding{Verdict: VerdictMisused, HeadTime: head.Time}, nil
}

func (a *Auditor) authorizationState(ctx context.Context, t Transfer, block *big.Int) (bool, error) {
	data := append(append(append([]byte{}, selectorAuthorizationState...), common.LeftPadBytes(t.From.Bytes(), 32)...), t.Nonce[:]...)
	out, err := a.chain.CallContract(ctx, ethereum.CallMsg{To: &t.Asset, Data: data}, block)
	if err != nil {
		return false, fmt.Errorf("auditor: authorizationState: %w", err)
	}
	if len(out) != 32 {
		return false, fmt.Errorf("auditor: authorizationState answered %d bytes", len(out))
	}
	return out[31] != 0, nil
}

// blockAtOrBefore returns a block number whose timestamp is at or before
// t (0 if none is), stepping back from head in doubling strides: a few
// headers for a payment minutes old, about 20 for one a week old.
func (a *Auditor) blockAtOrBefore(ctx context.Context, head *types.Header, t time.Time) (uint64, error) {
	want := t.Unix()
	if want < 0 {
		return 0, nil
	}
	n := head.Number.Uint64()
	if int64(head.Time) <= want {
		return n, nil
	}
	for stride := uint64(1); ; stride *= 2 {
		if stride >= n {
			return 0, nil
		}
		h, err := a.chain.HeaderByNumber(ctx, new(big.Int).SetUint64(n-stride))
		if err != nil {
			return 0, fmt.Errorf("auditor: header %d: %w", n-stride, err)
		}
		if int64(h.Time) <= want {
			return n - stride, nil
		}
	}
}
