package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/tollgate/tollgate/payment"
)

// withdrawInitiatedTopic is topic0 of the escrow's
// WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizeAfter)
// (docs/batch-settlement.md §1.3).
var withdrawInitiatedTopic = crypto.Keccak256Hash([]byte("WithdrawInitiated(bytes32,uint128,uint40)"))

// Logs is what the watcher reads of the chain; *ethclient.Client
// provides it.
type Logs interface {
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
	BlockNumber(ctx context.Context) (uint64, error)
}

// WatchStore is what the watcher needs of the channel store; *store.DB
// provides it.
type WatchStore interface {
	UpdateChannel(ctx context.Context, id common.Hash, fn func(c *Channel, found bool) (Change, error)) (Channel, error)
}

// WatcherConfig tunes the watcher.
type WatcherConfig struct {
	// Escrow is the escrow's address.
	Escrow common.Address
	// Poll is how often Run reads new blocks.
	Poll time.Duration
	// Lookback is how many blocks before the head the first pass reads
	// (default 1800, an hour of Base's 2 s blocks): a withdrawal started
	// while no watcher ran is still seen, if it is that recent. Make it
	// cover the channels' withdraw delay.
	Lookback uint64
	// MaxRange is the most blocks one eth_getLogs asks for (default 1000).
	MaxRange uint64
	// Turn, when set, is asked before each pass of Run (a store lease, as
	// the claimer's).
	Turn func(ctx context.Context) (bool, error)
	// OnWithdraw, when set, is called for each channel of ours whose timed
	// withdrawal was seen: give it Claimer.Wake, so that the claim goes out
	// at once.
	OnWithdraw func(id common.Hash)
}

// Watcher follows the escrow's WithdrawInitiated events and marks the
// channels they name as withdrawing in the store (WithdrawRequestedAt),
// which makes the claimer claim them at once: signed but unclaimed
// vouchers are lost once a withdrawal is finalized (§3.5). Channels the
// store does not hold are not ours and are ignored.
type Watcher struct {
	cfg    WatcherConfig
	logs   Logs
	store  WatchStore
	logger *slog.Logger
	next   uint64 // the first block not read yet; 0 before the first pass
}

// NewWatcher returns a watcher; it does no I/O.
func NewWatcher(cfg WatcherConfig, logs Logs, store WatchStore, logger *slog.Logger) (*Watcher, error) {
	var errs []error
	if cfg.Escrow == (common.Address{}) {
		errs = append(errs, errors.New("the escrow's address is required"))
	}
	if cfg.Poll <= 0 {
		errs = append(errs, errors.New("poll must be positive"))
	}
	if logs == nil || store == nil || logger == nil {
		errs = append(errs, errors.New("a log reader, a store and a logger are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	}
	if cfg.Lookback == 0 {
		cfg.Lookback = 1800
	}
	if cfg.MaxRange == 0 {
		cfg.MaxRange = 1000
	}
	return &Watcher{cfg: cfg, logs: logs, store: store, logger: logger}, nil
}

// Run reads new blocks every Poll until ctx ends, when Turn says so.
func (w *Watcher) Run(ctx context.Context) {
	payment.Periodic(ctx, w.cfg.Poll, nil, w.cfg.Turn, func(ctx context.Context) error {
		_, err := w.Once(ctx)
		return err
	}, w.logger, "escrow watcher")
}

// Once reads the blocks from where the last pass stopped (Lookback
// before the head, the first time) to the head, and returns the channels
// of ours it marked as withdrawing. A failed read ends the pass; the
// next one starts again there.
func (w *Watcher) Once(ctx context.Context) ([]common.Hash, error) {
	head, err := w.logs.BlockNumber(ctx)
	if err != nil {
		return nil, fmt.Errorf("watcher: head: %w", err)
	}
	if w.next == 0 {
		w.next = 1
		if head > w.cfg.Lookback {
			w.next = head - w.cfg.Lookback
		}
	}
	var marked []common.Hash
	for w.next <= head {
		to := min(head, w.next+w.cfg.MaxRange-1)
		logs, err := w.logs.FilterLogs(ctx, ethereum.FilterQuery{
			FromBlock: new(big.Int).SetUint64(w.next), ToBlock: new(big.Int).SetUint64(to),
			Addresses: []common.Address{w.cfg.Escrow}, Topics: [][]common.Hash{{withdrawInitiatedTopic}},
		})
		if err != nil {
			return marked, fmt.Errorf("watcher: logs of blocks %d-%d: %w", w.next, to, err)
		}
		for _, lg := range logs {
			ok, err := w.apply(ctx, lg)
			if err != nil {
				return marked, err // this range is read again
			}
			if ok {
				marked = append(marked, lg.Topics[1])
			}
		}
		w.next = to + 1
	}
	return marked, nil
}

// apply marks the channel of a WithdrawInitiated log as withdrawing since
// finalizeAfter − its withdraw delay, and reports whether it is ours.
func (w *Watcher) apply(ctx context.Context, lg types.Log) (bool, error) {
	if lg.Removed || lg.Address != w.cfg.Escrow || len(lg.Topics) != 2 || lg.Topics[0] != withdrawInitiatedTopic || len(lg.Data) != 64 {
		return false, nil
	}
	id := lg.Topics[1]
	finalizeAfter := new(big.Int).SetBytes(lg.Data[32:64])
	if !finalizeAfter.IsUint64() {
		return false, nil
	}
	ours := false
	_, err := w.store.UpdateChannel(ctx, id, func(c *Channel, found bool) (Change, error) {
		if !found {
			return Keep, nil
		}
		ours = true
		at := finalizeAfter.Uint64()
		if at >= c.Config.WithdrawDelay {
			at -= c.Config.WithdrawDelay
		}
		if c.WithdrawRequestedAt == at {
			return Keep, nil
		}
		c.WithdrawRequestedAt = at
		return Save, nil
	})
	if err != nil {
		return false, fmt.Errorf("watcher: channel %s: %w", id.Hex(), err)
	}
	if !ours {
		return false, nil
	}
	w.logger.InfoContext(ctx, "escrow watcher: a payer started a timed withdrawal; claiming the channel now",
		"channel", id, "finalizeAfter", finalizeAfter, "block", lg.BlockNumber, "tx", lg.TxHash)
	if w.cfg.OnWithdraw != nil {
		w.cfg.OnWithdraw(id)
	}
	return true, nil
}
