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
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
)

// Chain is what the gas key's sender needs from an Ethereum node;
// *ethclient.Client provides it.
type Chain interface {
	// BlockReceipts serves the settlement poller: one call per new block,
	// whatever the number of settlements in flight.
	BlockReceipts(ctx context.Context, block rpc.BlockNumberOrHash) ([]*types.Receipt, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	EstimateGas(ctx context.Context, msg ethereum.CallMsg) (uint64, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, txHash common.Hash) (*types.Receipt, error)
}

// Asset is an EIP-3009 token a facilitator accepts, with its EIP-712
// domain.
type Asset struct {
	Address common.Address
	Name    string // EIP-712 domain name
	Version string // EIP-712 domain version
}

// LocalConfig configures the gas key's sender.
type LocalConfig struct {
	ChainID *big.Int
	// Key pays the gas of the facilitator's transactions. Never logged.
	Key *ecdsa.PrivateKey
	// ReceiptTimeout bounds the wait for a transaction's receipt; past it
	// the transaction is reported without one (it stays watched, and is
	// rebroadcast or replaced until mined).
	ReceiptTimeout time.Duration
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
	if c.ReceiptTimeout <= 0 {
		errs = append(errs, errors.New("local facilitator: receipt timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Local is the self-hosted facilitator's chain side, shared by every
// scheme's local facilitator (exact.Local, batch.Local): the gas key,
// its nonce manager (many transactions in flight at once, rebroadcast,
// replaced or their gaps filled until mined; see sender) and the wait
// for receipts. It is safe for concurrent use; one gas key must have one
// Local (one process) at a time.
type Local struct {
	cfg   LocalConfig
	chain Chain
	from  common.Address
	txs   *sender
}

// NewLocal returns the chain side over chain; it does no I/O.
func NewLocal(cfg LocalConfig, chain Chain) (*Local, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Local{cfg: cfg, chain: chain, from: crypto.PubkeyToAddress(cfg.Key.PublicKey), txs: newSender(chain, cfg.Key, cfg.ChainID)}, nil
}

// Signer returns the address that pays the gas.
func (l *Local) Signer() common.Address { return l.from }

// ChainID is the chain the key sends on.
func (l *Local) ChainID() *big.Int { return l.cfg.ChainID }

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

// Sent is the outcome of a call the facilitator's gas key made for a
// scheme (see Transact).
type Sent struct {
	// Refused is why the simulation reverted, the node's message; nothing
	// was sent. RevertData is the revert's data when the node gave it (a
	// custom error's selector and arguments).
	Refused    string
	RevertData []byte
	// Tx is the transaction's hash once sent, with the gas limit it was
	// sent with.
	Tx  common.Hash
	Gas uint64
	// Receipt is its receipt; nil when it was not mined within the
	// receipt timeout (it stays watched and may still land).
	Receipt *types.Receipt
}

// Transact sends data to contract to from the gas key and waits for the
// receipt: the way every scheme's facilitator side (exact's transfers,
// batch-settlement's deposits, claims, settles and refunds) sends
// transactions, sharing the key's nonces. The gas estimate is the
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
	return Sent{Tx: got.tx, Gas: got.gas, Receipt: got.rcpt}, nil
}
