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

// The topic0 of the escrow's events the watcher follows
// (docs/batch-settlement.md §1.3):
// WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizeAfter)
// and Claimed(bytes32 indexed channelId, address indexed sender, uint128 claimAmount, uint128 newTotalClaimed).
var (
	withdrawInitiatedTopic = crypto.Keccak256Hash([]byte("WithdrawInitiated(bytes32,uint128,uint40)"))
	claimedTopic           = crypto.Keccak256Hash([]byte("Claimed(bytes32,address,uint128,uint128)"))
)

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

// WatchObserver is told how the watcher fares; *admin.Metrics implements
// it.
type WatchObserver interface {
	// EscrowWatchStarted says Run began: the escrow is watched from now.
	EscrowWatchStarted()
	// EscrowWatched reports one pass: nil when it read the escrow's events
	// up to the chain head.
	EscrowWatched(err error)
	// StopObserver counts a channel found claimed on chain beyond what
	// this store claimed (once per channel, EvidenceClaimedElsewhere).
	StopObserver
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
	// Observer, when set, is told of each pass and of foreign claims.
	Observer WatchObserver
	// Now is the clock of a stop (default time.Now).
	Now func() time.Time
}

// Watcher follows the escrow's events on the channels in the store
// (channels the store does not hold are not ours and are ignored):
//
//   - WithdrawInitiated marks the channel as withdrawing
//     (WithdrawRequestedAt), which makes the claimer claim it at once:
//     signed but unclaimed vouchers are lost once a withdrawal is
//     finalized (§3.5).
//   - Claimed raises the mirrored claimed total (the claimer's own claims,
//     and a refund's, when the claimer could not read their effect), and
//     a newTotalClaimed beyond what the store claimed stops the channel
//     (EvidenceClaimedElsewhere): every claim of this store records its
//     total before it is sent (Channel.OwnClaimed), so someone else holds
//     vouchers of it (issue 20, item 8; issue 32).
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Watcher{cfg: cfg, logs: logs, store: store, logger: logger}, nil
}

// Start says the escrow is watched from now (the observer's
// EscrowWatchStarted, before Start returns, so the first scrape sees the
// watcher's series) and runs the watcher in the background until ctx
// ends.
func (w *Watcher) Start(ctx context.Context) {
	w.started()
	go w.poll(ctx)
}

// Run is Start in the foreground: it returns when ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	w.started()
	w.poll(ctx)
}

func (w *Watcher) started() {
	if w.cfg.Observer != nil {
		w.cfg.Observer.EscrowWatchStarted()
	}
}

// poll reads new blocks every Poll until ctx ends, when Turn says so.
func (w *Watcher) poll(ctx context.Context) {
	payment.Periodic(ctx, w.cfg.Poll, nil, w.cfg.Turn, func(ctx context.Context) error {
		_, err := w.Once(ctx)
		return err
	}, w.logger, "escrow watcher")
}

// WatchReport is what one pass of the watcher did to the store.
type WatchReport struct {
	// Withdrawing is the channels it marked as withdrawing.
	Withdrawing []common.Hash
	// Mirrored is the channels whose claimed total it raised.
	Mirrored []common.Hash
	// Foreign is the channels it found claimed beyond what the store
	// claimed (stopped by this pass).
	Foreign []common.Hash
}

// Once reads the blocks from where the last pass stopped (Lookback
// before the head, the first time) to the head. A failed read ends the
// pass; the next one starts again there. The observer hears of every
// pass but one cut short by ctx.
func (w *Watcher) Once(ctx context.Context) (WatchReport, error) {
	rep, err := w.once(ctx)
	if w.cfg.Observer != nil && ctx.Err() == nil {
		w.cfg.Observer.EscrowWatched(err)
	}
	return rep, err
}

func (w *Watcher) once(ctx context.Context) (WatchReport, error) {
	var rep WatchReport
	head, err := w.logs.BlockNumber(ctx)
	if err != nil {
		return rep, fmt.Errorf("watcher: head: %w", err)
	}
	if w.next == 0 {
		w.next = 1
		if head > w.cfg.Lookback {
			w.next = head - w.cfg.Lookback
		}
	}
	for w.next <= head {
		to := min(head, w.next+w.cfg.MaxRange-1)
		logs, err := w.logs.FilterLogs(ctx, ethereum.FilterQuery{
			FromBlock: new(big.Int).SetUint64(w.next), ToBlock: new(big.Int).SetUint64(to),
			Addresses: []common.Address{w.cfg.Escrow}, Topics: [][]common.Hash{{withdrawInitiatedTopic, claimedTopic}},
		})
		if err != nil {
			return rep, fmt.Errorf("watcher: logs of blocks %d-%d: %w", w.next, to, err)
		}
		for _, lg := range logs {
			if lg.Removed || lg.Address != w.cfg.Escrow || len(lg.Topics) == 0 {
				continue
			}
			var err error
			switch lg.Topics[0] {
			case withdrawInitiatedTopic:
				err = w.withdrawing(ctx, lg, &rep)
			case claimedTopic:
				err = w.claimed(ctx, lg, &rep)
			}
			if err != nil {
				return rep, err // this range is read again
			}
		}
		w.next = to + 1
	}
	return rep, nil
}

// withdrawing marks the channel of a WithdrawInitiated log as withdrawing
// since finalizeAfter − its withdraw delay, and wakes the claimer when the
// channel is ours.
func (w *Watcher) withdrawing(ctx context.Context, lg types.Log, rep *WatchReport) error {
	if len(lg.Topics) != 2 || len(lg.Data) != 64 {
		return nil
	}
	id := lg.Topics[1]
	finalizeAfter := new(big.Int).SetBytes(lg.Data[32:64])
	if !finalizeAfter.IsUint64() {
		return nil
	}
	ours := false
	_, err := w.store.UpdateChannel(ctx, id, func(c *Channel, found bool) (Change, error) {
		ours = found
		if !found {
			return Keep, nil
		}
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
		return fmt.Errorf("watcher: channel %s: %w", id.Hex(), err)
	}
	if !ours {
		return nil
	}
	rep.Withdrawing = append(rep.Withdrawing, id)
	w.logger.InfoContext(ctx, "escrow watcher: a payer started a timed withdrawal; claiming the channel now",
		"channel", id, "finalizeAfter", finalizeAfter, "block", lg.BlockNumber, "tx", lg.TxHash)
	if w.cfg.OnWithdraw != nil {
		w.cfg.OnWithdraw(id)
	}
	return nil
}

// claimed takes in a Claimed log: it raises the channel's mirrored
// claimed total to newTotalClaimed (never lowering it: the lookback reads
// old events again), and marks the channel as claimed by a stranger,
// once, when newTotalClaimed exceeds what the store claimed.
func (w *Watcher) claimed(ctx context.Context, lg types.Log, rep *WatchReport) error {
	if len(lg.Topics) != 3 || len(lg.Data) != 64 {
		return nil
	}
	id := lg.Topics[1]
	total := new(big.Int).SetBytes(lg.Data[32:64])
	now := w.cfg.Now()
	raised, foreign := false, false
	ch, err := w.store.UpdateChannel(ctx, id, func(c *Channel, found bool) (Change, error) {
		raised, foreign = false, false
		if !found {
			return Keep, nil
		}
		// The age of what is left unclaimed is not known here: kept.
		raised = raiseClaimed(c, total, time.Time{})
		foreign = markForeign(c, total, now)
		if raised || foreign {
			return Save, nil
		}
		return Keep, nil
	})
	if err != nil {
		return fmt.Errorf("watcher: channel %s: %w", id.Hex(), err)
	}
	if raised {
		rep.Mirrored = append(rep.Mirrored, id)
	}
	if foreign {
		rep.Foreign = append(rep.Foreign, id)
		w.logger.ErrorContext(ctx, "escrow watcher: the escrow claimed on a channel beyond what this store claimed (another server claims with this receiver authorizer, or the store lost records); the channel is no longer served",
			"channel", id, "newTotalClaimed", total, "ownClaimed", orZero(ch.OwnClaimed), "charged", orZero(ch.Charged), "payer", ch.Config.Payer,
			"sender", common.BytesToAddress(lg.Topics[2].Bytes()), "block", lg.BlockNumber, "tx", lg.TxHash)
		if w.cfg.Observer != nil {
			w.cfg.Observer.BatchChannelStopped(EvidenceClaimedElsewhere)
		}
	}
	return nil
}
