package deployer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/whales"
)

// Chain is what a Read asks of the node: one log query and one batch of
// calls. *chain.Client provides it.
type Chain interface {
	Logs(ctx context.Context, q chain.LogQuery) ([]types.Log, error)
	Batch(ctx context.Context, elems []rpc.BatchElem) error
}

// The bounds of a Read on Base (2-second blocks), DefaultConfig's.
const (
	// CreationWindow is how many blocks, ending at the block of the
	// token's first followed pool, are searched for the token's first
	// mint: one day. A launchpad creates the token and its pool in one
	// transaction; a direct launch pools its token within hours. A token
	// minted earlier than that falls back to its pool's creator.
	CreationWindow = 43_200
	// RecentWindow is how recent a collapse of one of the deployer's
	// other tokens must be, in blocks before the read block, to set
	// PulledRecently: seven days, the whale scan's own window.
	RecentWindow = 302_400
	// MaxTokens caps the deployer's other tokens listed, newest first.
	MaxTokens = 20
)

// Where a Record's deployer was read from.
const (
	// SourceCreation: the sender of the transaction that created the
	// token (the transaction of its first mint, which deployed it or
	// called the factory that did).
	SourceCreation = "creation"
	// SourceMint: the sender of the token's first mint in the window,
	// which called the token itself: the token existed before it, and the
	// sender is one who may mint it, not necessarily who deployed it.
	SourceMint = "mint"
	// SourcePoolCreator: no mint in the window; the sender of the
	// creation of the token's first followed pool.
	SourcePoolCreator = "pool-creator"
	// ByKnown ties another token to the deployer through Input.Known.
	ByKnown = "known"
)

// ErrInput is a Read without a token or a block.
var ErrInput = errors.New("deployer: a token and a block are required")

// Config configures Read.
type Config struct {
	// Launchpads names the known launchpad factories by address: a
	// launchpad's name, then its contract's version ("clanker v4").
	Launchpads map[common.Address]string
	// CreationWindow, RecentWindow and MaxTokens: see the constants.
	CreationWindow uint64
	RecentWindow   uint64
	MaxTokens      int
}

// DefaultConfig returns the settings for Base: its launchpads and the
// package's bounds.
func DefaultConfig() Config {
	return Config{Launchpads: BaseLaunchpads(), CreationWindow: CreationWindow, RecentWindow: RecentWindow, MaxTokens: MaxTokens}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.CreationWindow == 0 || c.RecentWindow == 0 || c.MaxTokens <= 0 {
		errs = append(errs, errors.New("deployer: creation window, recent window and token cap must be positive"))
	}
	for a, name := range c.Launchpads {
		if a == (common.Address{}) || name == "" {
			errs = append(errs, fmt.Errorf("deployer: launchpad %s %q: want a non-zero address and a name", a, name))
		}
	}
	return errors.Join(errs...)
}

// Input is the token whose deployer is read.
type Input struct {
	Token common.Address
	// Block is the block the token is judged at: the window of recent
	// collapses ends there, and so does the creation window when the
	// token has no followed pool.
	Block uint64
	// Pools are the token's followed pools (nil: the snapshot's).
	Pools []whales.Pool
	// Snapshot is the whale scan's, whose tokens are searched for the
	// deployer's others; nil: none are.
	Snapshot *whales.Snapshot
	// Known are deployers already read of other tokens, by token (e.g.
	// earlier Records); nil: none.
	Known map[common.Address]common.Address
}

// Record is a token's deployer and the deployer's other launches.
type Record struct {
	// Deployer is the sender of Tx (for a user operation, its smart
	// account); nil when no transaction could be read.
	Deployer *common.Address
	// Source is where Deployer was read (SourceCreation, SourceMint,
	// SourcePoolCreator); empty with no deployer.
	Source string
	// Tx and Block are the transaction Deployer sent: the token's first
	// mint found, or its first pool's creation.
	Tx    common.Hash
	Block uint64
	// Factory is the contract the creating transaction called, which
	// created the token (nil: deployed directly, or not known);
	// Launchpad its name when it is a known launchpad.
	Factory   *common.Address
	Launchpad string
	// Searched is the block range searched for the token's first mint.
	Searched Range
	// Tokens are the deployer's other tokens the whale snapshot follows,
	// newest first, at most Config.MaxTokens; More counts those left out.
	Tokens []Token
	More   int
	// PulledRecently: a pool of one of the deployer's other tokens (all
	// of them, listed or not) collapsed (liquidity pulled, or a drawdown)
	// within Config.RecentWindow blocks of Input.Block.
	PulledRecently bool
	// Note says what could not be read, and what was assumed instead.
	Note string
}

// Range is a range of blocks, both ends included.
type Range struct{ From, To uint64 }

// Token is another token of the deployer.
type Token struct {
	Address common.Address
	// Pool is its first followed pool, and Created that pool's creation
	// block: the token's launch, as the whale scan saw it.
	Pool    whales.Pool
	Created uint64
	// Collapse is the collapse of its pools, nil when none; Recent when
	// it lies within Config.RecentWindow blocks of Input.Block.
	Collapse *whales.Collapse
	Recent   bool
	// By says how it was tied to the deployer: SourcePoolCreator (a
	// pool's creator is the deployer) or ByKnown (Input.Known).
	By string
}

var (
	// topicUserOperation is ERC-4337's UserOperationEvent, which an
	// entry point (v0.6 and v0.7 alike) emits after each user operation
	// of a bundle has run.
	topicUserOperation = crypto.Keccak256Hash([]byte("UserOperationEvent(bytes32,address,address,uint256,bool,uint256,uint256)"))
)

// Read reads who deployed in.Token, whether a known launchpad created
// it, and the deployer's other tokens in in.Snapshot, with at most one
// log query and one batch: the token's first Transfer from 0x0 in the
// creation window, then its transaction and receipt. Without that mint,
// the first pool's creation transaction stands in.
func Read(ctx context.Context, c Chain, in Input, cfg Config) (Record, error) {
	if err := cfg.Validate(); err != nil {
		return Record{}, err
	}
	if in.Token == (common.Address{}) || in.Block == 0 {
		return Record{}, ErrInput
	}
	pools := in.Pools
	if len(pools) == 0 && in.Snapshot != nil {
		pools = in.Snapshot.Pools[in.Token]
	}
	first := earliest(pools)
	r := reading{cfg: cfg, token: in.Token}

	end := in.Block
	if first != nil && first.Created > 0 && first.Created < end {
		end = first.Created
	} else if first == nil {
		r.note("no followed pool: the mint is searched for in the %d blocks ending at block %d", cfg.CreationWindow, end)
	}
	r.rec.Searched = Range{From: end - min(end, cfg.CreationWindow-1), To: end}
	logs, err := c.Logs(ctx, chain.LogQuery{From: r.rec.Searched.From, To: r.rec.Searched.To,
		Addresses: []common.Address{in.Token}, Topics: [][]common.Hash{{chain.TopicTransfer}, {{}}}})
	if err != nil {
		return Record{}, fmt.Errorf("deployer: mints of %s: %w", in.Token, err)
	}
	batched := false
	if m := firstMint(logs, in.Token); m != nil {
		tx, receipt, err := readTx(ctx, c, m.TxHash)
		if err != nil {
			return Record{}, err
		}
		batched = true
		if tx != nil {
			r.creation(m, tx, receipt)
		} else {
			r.note("the node did not return the mint's transaction %s", m.TxHash)
		}
	} else {
		r.note("no mint (Transfer from 0x0) in blocks %d-%d", r.rec.Searched.From, r.rec.Searched.To)
	}
	if r.rec.Deployer == nil {
		if err := r.poolCreator(ctx, c, first, batched); err != nil {
			return Record{}, err
		}
	}
	r.others(in)
	r.rec.Note = strings.Join(r.notes, "; ")
	return r.rec, nil
}

// reading is one Read's record and notes.
type reading struct {
	cfg   Config
	token common.Address
	rec   Record
	notes []string
}

func (r *reading) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// earliest is the pool created first, nil with none.
func earliest(pools []whales.Pool) *whales.Pool {
	var first *whales.Pool
	for i := range pools {
		if first == nil || pools[i].Created < first.Created {
			first = &pools[i]
		}
	}
	return first
}

// firstMint is the earliest Transfer from 0x0 the token emitted.
func firstMint(logs []types.Log, token common.Address) *types.Log {
	var first *types.Log
	for i, l := range logs {
		if l.Removed || l.Address != token || len(l.Topics) < 3 || l.Topics[0] != chain.TopicTransfer || l.Topics[1] != (common.Hash{}) {
			continue
		}
		if first == nil || l.BlockNumber < first.BlockNumber || l.BlockNumber == first.BlockNumber && l.Index < first.Index {
			first = &logs[i]
		}
	}
	return first
}

// rpcTx and rpcReceipt are the fields read of eth_getTransactionByHash
// and eth_getTransactionReceipt.
type rpcTx struct {
	From  common.Address  `json:"from"`
	To    *common.Address `json:"to"`
	Nonce hexutil.Uint64  `json:"nonce"`
}

type rpcReceipt struct {
	ContractAddress *common.Address `json:"contractAddress"`
	Logs            []rpcLog        `json:"logs"`
}

type rpcLog struct {
	Address common.Address `json:"address"`
	Topics  []common.Hash  `json:"topics"`
	Index   hexutil.Uint   `json:"logIndex"`
}

// readTx reads a transaction and its receipt in one batch; nil when the
// node does not know them.
func readTx(ctx context.Context, c Chain, h common.Hash) (*rpcTx, *rpcReceipt, error) {
	var tx *rpcTx
	var receipt *rpcReceipt
	b := []rpc.BatchElem{
		{Method: "eth_getTransactionByHash", Args: []any{h}, Result: &tx},
		{Method: "eth_getTransactionReceipt", Args: []any{h}, Result: &receipt},
	}
	if err := c.Batch(ctx, b); err != nil {
		return nil, nil, fmt.Errorf("deployer: transaction %s: %w", h, err)
	}
	for _, e := range b {
		if e.Error != nil {
			return nil, nil, fmt.Errorf("deployer: %s %s: %w", e.Method, h, e.Error)
		}
	}
	return tx, receipt, nil
}

// creation reads the deployer from the transaction of the token's first
// mint m.
func (r *reading) creation(m *types.Log, tx *rpcTx, receipt *rpcReceipt) {
	from := tx.From
	r.rec.Deployer, r.rec.Source, r.rec.Tx, r.rec.Block = &from, SourceCreation, m.TxHash, m.BlockNumber
	switch {
	case tx.To == nil:
		created := crypto.CreateAddress(tx.From, uint64(tx.Nonce))
		if receipt != nil && receipt.ContractAddress != nil {
			created = *receipt.ContractAddress
		}
		if created != r.token {
			r.rec.Factory = &created
			r.note("created while deploying contract %s", created)
		}
		return
	case *tx.To == r.token:
		r.rec.Source = SourceMint
		r.note("the first mint in the window called the token itself: it existed before, and its sender may mint it but need not have deployed it")
		return
	}
	// A call: the token was created inside it, by a factory. Through an
	// ERC-4337 entry point, the user operation that ran the mint is the
	// first whose UserOperationEvent follows it, and its logs lie after
	// the one before.
	var logs []rpcLog
	if receipt != nil {
		logs = receipt.Logs
	}
	own := func(rpcLog) bool { return true }
	ops := userOperations(logs, *tx.To)
	i := slices.IndexFunc(ops, func(op rpcLog) bool { return uint(op.Index) > uint(m.Index) })
	viaOp := i >= 0
	if viaOp {
		account := common.BytesToAddress(ops[i].Topics[2][:])
		lo, hi := uint(0), uint(ops[i].Index)
		if i > 0 {
			lo = uint(ops[i-1].Index) + 1
		}
		own = func(l rpcLog) bool { return uint(l.Index) >= lo && uint(l.Index) < hi }
		r.rec.Deployer = &account
		r.note("sent by bundler %s through the ERC-4337 entry point %s: the deployer is the user operation's account", tx.From, *tx.To)
	} else if name, ok := r.cfg.Launchpads[*tx.To]; ok {
		r.launchpad(*tx.To, name)
		return
	}
	for _, l := range logs {
		if name, ok := r.cfg.Launchpads[l.Address]; ok && own(l) {
			r.launchpad(l.Address, name)
			if !viaOp {
				r.note("launched through %s, called by contract %s", l.Address, *tx.To)
			}
			return
		}
	}
	if !viaOp {
		to := *tx.To
		r.rec.Factory = &to
		r.note("created in a call to %s, not a known launchpad", to)
	}
}

// userOperations are the UserOperationEvents an entry point emitted in a
// bundle's logs, in order; none when the transaction is no bundle.
func userOperations(logs []rpcLog, entryPoint common.Address) []rpcLog {
	var ops []rpcLog
	for _, l := range logs {
		if l.Address == entryPoint && len(l.Topics) == 4 && l.Topics[0] == topicUserOperation {
			ops = append(ops, l)
		}
	}
	return ops
}

func (r *reading) launchpad(factory common.Address, name string) {
	r.rec.Factory, r.rec.Launchpad = &factory, name
}

// poolCreator falls back to the sender of the first pool's creation,
// read from its transaction when the batch is still free (a launchpad's
// pool creation is the token's own), or from the snapshot.
func (r *reading) poolCreator(ctx context.Context, c Chain, first *whales.Pool, batched bool) error {
	if first == nil {
		r.note("no followed pool to fall back to: the deployer is not known")
		return nil
	}
	creator := first.Creator
	if first.CreatedTx != (common.Hash{}) && !batched {
		tx, receipt, err := readTx(ctx, c, first.CreatedTx)
		if err != nil {
			return err
		}
		if tx != nil {
			creator = r.poolSender(tx, receipt)
			r.poolLaunchpad(tx, receipt)
		}
	}
	if creator == (common.Address{}) {
		r.note("the creator of pool %s is not known: the deployer is not known", first.ID)
		return nil
	}
	r.rec.Deployer, r.rec.Source, r.rec.Tx, r.rec.Block = &creator, SourcePoolCreator, first.CreatedTx, first.Created
	r.note("the deployer is taken to be the creator of the first pool %s", first.ID)
	return nil
}

// poolSender is who sent a pool's creation: its transaction's sender, or
// the account of the one user operation of a bundle; zero for a bundle of
// several, which does not tell which one created the pool.
func (r *reading) poolSender(tx *rpcTx, receipt *rpcReceipt) common.Address {
	if tx.To == nil || receipt == nil {
		return tx.From
	}
	switch ops := userOperations(receipt.Logs, *tx.To); len(ops) {
	case 0:
		return tx.From
	case 1:
		r.note("the pool was created by a user operation sent through the ERC-4337 entry point %s", *tx.To)
		return common.BytesToAddress(ops[0].Topics[2][:])
	default:
		r.note("the pool was created in a bundle of %d ERC-4337 user operations, which does not tell whose", len(ops))
		return common.Address{}
	}
}

// poolLaunchpad names the known launchpad a pool's creation called or
// whose log it holds: a launchpad creates the token with its pool.
func (r *reading) poolLaunchpad(tx *rpcTx, receipt *rpcReceipt) {
	if tx.To != nil {
		if name, ok := r.cfg.Launchpads[*tx.To]; ok {
			r.launchpad(*tx.To, name)
			return
		}
	}
	if receipt == nil {
		return
	}
	for _, l := range receipt.Logs {
		if name, ok := r.cfg.Launchpads[l.Address]; ok {
			r.launchpad(l.Address, name)
			return
		}
	}
}

// others lists the deployer's other tokens in the snapshot: a token any
// of whose pools the deployer created, or whose known deployer it is.
func (r *reading) others(in Input) {
	if r.rec.Deployer == nil {
		return
	}
	if in.Snapshot == nil {
		r.note("no whale snapshot: the deployer's other tokens were not read")
		return
	}
	d := *r.rec.Deployer
	var ts []Token
	for tok, pools := range in.Snapshot.Pools {
		first := earliest(pools)
		if tok == in.Token || first == nil {
			continue
		}
		t := Token{Address: tok, Pool: *first, Created: first.Created}
		if k, ok := in.Known[tok]; ok && k == d {
			t.By = ByKnown
		} else if slices.ContainsFunc(pools, func(p whales.Pool) bool { return p.Creator == d }) {
			t.By = SourcePoolCreator
		} else {
			continue
		}
		if c, ok := in.Snapshot.Collapses[tok]; ok {
			t.Collapse = &c
			t.Recent = c.Block+r.cfg.RecentWindow >= in.Block
			r.rec.PulledRecently = r.rec.PulledRecently || t.Recent
		}
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b Token) int {
		return cmp.Or(cmp.Compare(b.Created, a.Created), a.Address.Cmp(b.Address))
	})
	if len(ts) > r.cfg.MaxTokens {
		r.rec.More = len(ts) - r.cfg.MaxTokens
		ts = ts[:r.cfg.MaxTokens]
	}
	r.rec.Tokens = ts
}
