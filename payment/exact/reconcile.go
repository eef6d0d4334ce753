package exact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/tollgate/tollgate/payment"
)

// Book is what the reconciler needs of the ledger; *store.DB provides
// it.
type Book interface {
	// Unresolved returns up to limit payments still verified or pending,
	// last updated before before, oldest first.
	Unresolved(ctx context.Context, before time.Time, limit int) ([]Record, error)
	Resolve(ctx context.Context, rec Record) error
}

// ReconcilerConfig tunes the reconciler.
type ReconcilerConfig struct {
	// Interval is the pause between passes.
	Interval time.Duration
	// MinAge leaves alone payments updated more recently than this: their
	// request is most likely still running and will record the outcome.
	MinAge time.Duration
	// Batch is how many payments one pass looks at, at most.
	Batch int
	// PayTo is the recipient of records written before the ledger kept
	// one per payment.
	PayTo common.Address
	// Turn, when set, is asked before each pass of Run: the pass runs only
	// when it returns true. Replicas sharing a store give it a store lease,
	// so that one of them reconciles at a time instead of all asking the
	// chain about the same payments (Once itself never asks).
	Turn func(ctx context.Context) (bool, error)
}

// DefaultReconcilerConfig checks every 30 s the payments left unresolved
// for more than 30 s.
func DefaultReconcilerConfig() ReconcilerConfig {
	return ReconcilerConfig{Interval: 30 * time.Second, MinAge: 30 * time.Second, Batch: 200}
}

// Reconciler resolves, from the chain alone, the payments the ledger
// still has as verified or pending (a settlement whose answer was lost, a
// ledger write that failed after the transfer, a process that died): a
// transfer of the authorization to its payTo makes it settled with the
// real transaction hash; a cancellation, a use that did not pay us, or an
// expiry without use makes it failed; an authorization still unused and
// valid is left for its request or a retry.
type Reconciler struct {
	cfg    ReconcilerConfig
	book   Book
	audit  *Auditor
	logger *slog.Logger
}

// NewReconciler returns a reconciler; it does no I/O.
func NewReconciler(cfg ReconcilerConfig, book Book, audit *Auditor, logger *slog.Logger) (*Reconciler, error) {
	if cfg.Interval <= 0 || cfg.MinAge < 0 || cfg.Batch <= 0 {
		return nil, errors.New("reconciler: interval and batch must be positive, min age not negative")
	}
	if book == nil || audit == nil {
		return nil, errors.New("reconciler: a ledger and a chain auditor are required")
	}
	return &Reconciler{cfg: cfg, book: book, audit: audit, logger: logger}, nil
}

// Resolution is one payment the reconciler resolved.
type Resolution struct {
	Record        // as it was before
	State  string // settled or failed
	Tx     string // the transaction that paid (settled) or canceled/used it
	Reason string // why it failed
}

// Run reconciles every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) {
	payment.Periodic(ctx, r.cfg.Interval, nil, r.cfg.Turn, func(ctx context.Context) error {
		_, err := r.Once(ctx)
		return err
	}, r.logger, "reconciler")
}

// Once runs one pass and returns what it resolved. A payment the chain
// cannot be asked about is skipped (and reported in the error); the
// others are still resolved.
func (r *Reconciler) Once(ctx context.Context) ([]Resolution, error) {
	recs, err := r.book.Unresolved(ctx, time.Now().Add(-r.cfg.MinAge), r.cfg.Batch)
	if err != nil {
		return nil, fmt.Errorf("reconciler: %w", err)
	}
	var out []Resolution
	var errs []error
	for _, rec := range recs {
		res, ok, err := r.resolve(ctx, rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("payment %s/%s: %w", rec.Payer, rec.Nonce, err))
			continue
		}
		if ok {
			out = append(out, res)
		}
	}
	return out, errors.Join(errs...)
}

func (r *Reconciler) resolve(ctx context.Context, rec Record) (Resolution, bool, error) {
	if rec.PayTo == "" && r.cfg.PayTo != (common.Address{}) {
		rec.PayTo = r.cfg.PayTo.Hex()
	}
	t, err := recordTransfer(rec)
	if err != nil {
		return Resolution{}, false, err
	}
	f, err := r.audit.Find(ctx, t, rec.CreatedAt)
	if err != nil {
		return Resolution{}, false, err
	}
	res := Resolution{Record: rec, Tx: txOrEmpty(f.Tx)}
	switch {
	case f.Verdict == VerdictPaid:
		res.State = StateSettled
	case f.Verdict == VerdictCanceled:
		res.State, res.Reason = StateFailed, ReasonAuthorizationCanceled
	case f.Verdict == VerdictMisused:
		res.State, res.Reason = StateFailed, ReasonNonceUsed
	case f.Expired(rec.ValidBefore):
		res.State, res.Reason = StateFailed, ReasonExpiredUnused
	default:
		return res, false, nil // unused and still valid: its request or a retry will settle it
	}
	err = r.book.Resolve(ctx, withOutcome(rec, res.State, res.Tx, res.Reason))
	if errors.Is(err, ErrLostClaim) {
		return res, false, nil // resolved meanwhile by a request
	}
	if err != nil {
		return res, false, err
	}
	r.logger.WarnContext(ctx, "reconciled an unresolved payment", "state", res.State, "reason", res.Reason, "tx", res.Tx,
		"was", rec.State, "op", rec.Operation, "payer", rec.Payer, "nonce", rec.Nonce, "amount", rec.Amount,
		"age", time.Since(rec.CreatedAt).Round(time.Second).String())
	return res, true, nil
}

// recordTransfer is what the chain must show for rec to have paid.
func recordTransfer(rec Record) (Transfer, error) {
	t := Transfer{Asset: common.HexToAddress(rec.Asset), From: common.HexToAddress(rec.Payer), To: common.HexToAddress(rec.PayTo)}
	var ok bool
	if t.Value, ok = new(big.Int).SetString(rec.Amount, 10); !ok {
		return t, fmt.Errorf("amount %q is not an integer", rec.Amount)
	}
	nonce := common.FromHex(rec.Nonce)
	if len(nonce) != 32 || !common.IsHexAddress(rec.PayTo) {
		return t, fmt.Errorf("record without a 32-byte nonce (%q) or a payTo (%q)", rec.Nonce, rec.PayTo)
	}
	copy(t.Nonce[:], nonce)
	return t, nil
}
