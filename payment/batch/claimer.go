package batch

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/tollgate/tollgate/payment"
)

// The kinds of transaction the claimer sends through the facilitator.
const (
	KindClaim  = "claim"
	KindSettle = "settle"
)

// The results of a claim or settle, as the claimer's observer and its
// history record them.
const (
	ResultOK      = "ok"      // the transaction landed
	ResultRefused = "refused" // the facilitator answered no (a simulation or the transaction failed)
	ResultError   = "error"   // no answer from the facilitator
	ResultNoop    = "noop"    // a settle with nothing claimed to sweep
)

// reasonNothingToSettle is the official facilitator's answer to a settle
// with nothing claimed since the last one (docs/batch-settlement.md §2.7,
// T14); the claimer takes it as done.
const reasonNothingToSettle = reasonPrefix + "nothing_to_settle"

// TxRecord is one claim or settle the claimer asked for, as its history
// keeps it.
type TxRecord struct {
	ID   string // the store's key; set by the store when empty
	Kind string // KindClaim or KindSettle
	// Tx is the transaction, zero when none was sent.
	Tx common.Hash
	// Receiver and Token are the settle's pair; zero for a claim, which may
	// span several.
	Receiver, Token common.Address
	// Amount is what a claim raised the channels' claimed totals by, or
	// what a settle swept (atomic units; 0 when unknown).
	Amount *big.Int
	Rows   int    // channels in a claim; 0 for a settle
	Result string // ResultOK, ResultRefused or ResultNoop
	// Reason and Message are the facilitator's, for a refusal.
	Reason, Message string
	At              time.Time
}

// ClaimStore is what the claimer needs of the channel store; *store.DB
// provides it.
type ClaimStore interface {
	Channels(ctx context.Context) ([]Channel, error)
	UpdateChannel(ctx context.Context, id common.Hash, fn func(c *Channel, found bool) (Change, error)) (Channel, error)
	// RecordBatchTx appends r to the history of claims and settles.
	RecordBatchTx(ctx context.Context, r TxRecord) error
}

// ClaimObserver is told of every claim and settle the claimer asks for;
// *admin.Metrics implements it.
type ClaimObserver interface {
	// BatchTransaction counts one claim or settle; usd is the amount
	// claimed or settled, 0 unless result is ResultOK.
	BatchTransaction(kind, result string, usd float64)
	// StopObserver counts a channel found claimed on chain beyond what
	// this store claimed (once per channel, EvidenceClaimedElsewhere).
	StopObserver
}

// ChannelReader reads a channel's state in the escrow; *Local provides it.
// The claimer reads it after each claim the facilitator reports landed:
// the escrow's totals, not the facilitator's word, say what was claimed.
type ChannelReader interface {
	ChannelState(ctx context.Context, id common.Hash) (OnChain, error)
}

// ClaimerConfig tunes the claimer (docs/batch-settlement.md §3.6: the
// periodic, threshold and on-withdrawal strategies).
type ClaimerConfig struct {
	// Escrow is the escrow's domain, in which Authorizer signs claims.
	Escrow Escrow
	// Authorizer is the receiver authorizer's key: it signs every
	// claimWithSignature. Channels naming another receiverAuthorizer are
	// not ours to claim and are skipped.
	Authorizer *ecdsa.PrivateKey
	// Period is the longest any charged value waits unclaimed (judged by
	// the channels' UnclaimedSince): once the oldest is this old, every
	// unclaimed channel is claimed.
	Period time.Duration
	// Threshold, when set, claims as soon as the total unclaimed reaches
	// it (atomic units, summed over every token).
	Threshold *big.Int
	// Poll is how often Run looks at the store.
	Poll time.Duration
	// MaxRows is the most rows in one claimWithSignature (default 100).
	MaxRows int
	// Retry is how long a row the escrow refused (isolated from its batch)
	// is left out of claims, unless its channel is charged again
	// (default Period).
	Retry time.Duration
	// Decimals turns atomic amounts into USD for Observer (default 6).
	Decimals int
	// Turn, when set, is asked before each pass of Run, as the
	// reconciler's: replicas sharing a store give it a store lease, so that
	// one of them claims.
	Turn func(ctx context.Context) (bool, error)
	// Chain, when set, is read after every claim the facilitator reports
	// landed: a claim counts only as far as the escrow's claimed totals
	// show it, and a total beyond what the store charged marks a foreign
	// claim. Nil takes the facilitator's word (the escrow watcher's
	// Claimed events are then the only check).
	Chain ChannelReader
	// Observer, when set, counts the claims and settles.
	Observer ClaimObserver
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Validate reports every problem of c at once.
func (c ClaimerConfig) Validate() error {
	var errs []error
	if c.Escrow.ChainID == nil || c.Escrow.Address == (common.Address{}) {
		errs = append(errs, errors.New("the escrow's chain id and address are required"))
	}
	if c.Authorizer == nil {
		errs = append(errs, errors.New("the receiver authorizer's key is required"))
	}
	if c.Period <= 0 || c.Poll <= 0 {
		errs = append(errs, errors.New("period and poll must be positive"))
	}
	if c.Threshold != nil && c.Threshold.Sign() <= 0 {
		errs = append(errs, errors.New("a threshold must be positive"))
	}
	if c.MaxRows < 0 || c.Retry < 0 || c.Decimals < 0 {
		errs = append(errs, errors.New("max rows, retry and decimals must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("claimer: %w", err)
	}
	return nil
}

// Claimer claims what the server charged on its channels and settles it
// to the receivers (docs/batch-settlement.md §3.6): it signs
// claimWithSignature over the channels whose Charged exceeds their
// mirrored TotalClaimed, once any of them is in a timed withdrawal, the
// unclaimed total reaches the threshold, or the oldest unclaimed value is
// Period old; then it raises the mirror and sweeps each receiver and
// token it claimed for.
//
// It keeps nothing it cannot lose: the store holds every served voucher,
// so a restarted claimer claims whatever the store shows unclaimed, and a
// row at or below the escrow's total is a no-op on chain (T12); what it
// claimed and did not settle yet is settled again after a restart (see
// Once).
type Claimer struct {
	cfg        ClaimerConfig
	store      ClaimStore
	f          Facilitator
	logger     *slog.Logger
	authorizer common.Address
	wake       chan struct{}

	// Run's state, touched by one pass at a time.
	bad       map[common.Hash]quarantine // rows the escrow refused
	foreign   map[common.Hash]bool       // channels of another authorizer, logged once
	unsettled map[pair]bool              // claimed, not swept yet
	started   bool                       // a pass has read the store
}

type pair struct{ receiver, token common.Address }

// quarantine leaves a refused row out until a new charge or a retry.
type quarantine struct {
	charged *big.Int
	until   time.Time
}

// NewClaimer returns a claimer; it does no I/O.
func NewClaimer(cfg ClaimerConfig, store ClaimStore, f Facilitator, logger *slog.Logger) (*Claimer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || f == nil || logger == nil {
		return nil, errors.New("claimer: a store, a facilitator and a logger are required")
	}
	if cfg.MaxRows == 0 {
		cfg.MaxRows = 100
	}
	if cfg.Retry == 0 {
		cfg.Retry = cfg.Period
	}
	if cfg.Decimals == 0 {
		cfg.Decimals = 6
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Claimer{cfg: cfg, store: store, f: f, logger: logger,
		authorizer: crypto.PubkeyToAddress(cfg.Authorizer.PublicKey),
		wake:       make(chan struct{}, 1),
		bad:        map[common.Hash]quarantine{}, foreign: map[common.Hash]bool{}, unsettled: map[pair]bool{}}, nil
}

// Wake makes Run look at the store now rather than at its next poll (a
// timed withdrawal was seen). It never blocks.
func (c *Claimer) Wake() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Outcomes are the label values the claimer reports to its observer's
// BatchTransaction: every kind, and every result.
func (c *Claimer) Outcomes() (kinds, results []string) {
	return []string{KindClaim, KindSettle}, []string{ResultOK, ResultRefused, ResultError, ResultNoop}
}

// Run claims every Poll, and when woken, until ctx ends; each pass runs
// only when Turn says it is this replica's.
func (c *Claimer) Run(ctx context.Context) {
	payment.Periodic(ctx, c.cfg.Poll, c.wake, c.cfg.Turn, func(ctx context.Context) error {
		_, err := c.Once(ctx)
		return err
	}, c.logger, "claimer")
}

// ClaimReport is what one pass saw and did.
type ClaimReport struct {
	// Unclaimed is the value charged and not claimed on the channels the
	// claimer may claim, before the pass, over Channels of them.
	Unclaimed *big.Int
	Channels  int
	// Due says why the pass claimed: "withdrawal", "threshold" or
	// "period"; empty when it did not.
	Due string
	// Claimed is the channels claimed and Amount what their claimed totals
	// rose by (on chain, when the claimer has a chain reader); Txs the
	// claim transactions.
	Claimed int
	Amount  *big.Int
	Txs     []common.Hash
	// Refused is the channels the escrow refused, isolated from their
	// batches, and those a landed claim left short of what was claimed on
	// chain: each is left out until charged again or Retry passes.
	Refused []common.Hash
	// Foreign is the channels found claimed on chain beyond what the store
	// claimed (stopped by this pass, EvidenceClaimedElsewhere).
	Foreign []common.Hash
	// Settled is the settle transactions.
	Settled []common.Hash
}

// row is one channel to claim.
type row struct {
	ch    Channel
	claim Claim
	delta *big.Int // what the claim adds to the channel's claimed total
}

// Once runs one pass: it claims if a trigger is due, then settles what it
// (or an earlier pass whose settle failed) claimed. It does not ask Turn.
// The facilitator being unreachable ends the pass with an error; rows the
// escrow refuses do not.
//
// What was claimed and not settled is known only to this memory and the
// chain, so the first pass (after every restart) settles every receiver
// and token that the store shows ours claimed for: the facilitator
// answers nothing_to_settle, taken as done, where the escrow holds nothing
// to sweep (Local.Settle).
func (c *Claimer) Once(ctx context.Context) (ClaimReport, error) {
	now := c.cfg.Now()
	rep := ClaimReport{Unclaimed: new(big.Int), Amount: new(big.Int)}
	chans, err := c.store.Channels(ctx)
	if err != nil {
		return rep, fmt.Errorf("claimer: %w", err)
	}
	if !c.started {
		c.started = true
		for _, ch := range chans {
			if ch.Config.ReceiverAuthorizer == c.authorizer && orZero(ch.TotalClaimed).Sign() > 0 {
				c.unsettled[pair{ch.Config.Receiver, ch.Config.Token}] = true
			}
		}
	}
	rows := c.rows(ctx, chans, now)
	for _, r := range rows {
		rep.Unclaimed.Add(rep.Unclaimed, r.delta)
	}
	rep.Channels = len(rows)
	rep.Due = c.due(rows, rep.Unclaimed, now)
	var errs []error
	if rep.Due != "" {
		// Channels in a withdrawal first, then the oldest: if a batch
		// fails midway, the most urgent went first.
		slices.SortStableFunc(rows, func(a, b row) int {
			if wa, wb := a.ch.WithdrawRequestedAt != 0, b.ch.WithdrawRequestedAt != 0; wa != wb {
				if wa {
					return -1
				}
				return 1
			}
			return a.ch.UnclaimedSince.Compare(b.ch.UnclaimedSince)
		})
		for chunk := range slices.Chunk(rows, c.cfg.MaxRows) {
			if err := c.claim(ctx, chunk, now, &rep); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	if err := c.settle(ctx, &rep); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// rows are the channels with value to claim that this claimer may claim.
func (c *Claimer) rows(ctx context.Context, chans []Channel, now time.Time) []row {
	var out []row
	for _, ch := range chans {
		claimed := orZero(ch.TotalClaimed)
		if ch.Charged == nil || ch.Charged.Cmp(claimed) <= 0 {
			continue
		}
		switch {
		case ch.Config.ReceiverAuthorizer != c.authorizer:
			if !c.foreign[ch.ID] {
				c.foreign[ch.ID] = true
				c.logger.WarnContext(ctx, "claimer: a channel names another receiver authorizer; not ours to claim",
					"channel", ch.ID, "receiverAuthorizer", ch.Config.ReceiverAuthorizer, "ours", c.authorizer)
			}
			continue
		case c.cfg.Escrow.ChannelID(ch.Config) != ch.ID:
			if !c.foreign[ch.ID] {
				c.foreign[ch.ID] = true
				c.logger.WarnContext(ctx, "claimer: a channel's config does not derive its id in this escrow; skipped", "channel", ch.ID)
			}
			continue
		case ch.SignedMax == nil || len(ch.Signature) == 0 || ch.Charged.Cmp(ch.SignedMax) > 0:
			c.logger.WarnContext(ctx, "claimer: a channel holds no voucher covering what it charged; skipped",
				"channel", ch.ID, "charged", ch.Charged, "signedMax", ch.SignedMax)
			continue
		}
		if q, ok := c.bad[ch.ID]; ok {
			if q.charged.Cmp(ch.Charged) == 0 && now.Before(q.until) {
				continue
			}
			delete(c.bad, ch.ID)
		}
		out = append(out, row{ch: ch, delta: new(big.Int).Sub(ch.Charged, claimed),
			claim: Claim{Config: ch.Config, MaxClaimable: ch.SignedMax, Signature: ch.Signature, TotalClaimed: ch.Charged}})
	}
	return out
}

// due says which trigger, if any, calls for a claim of rows.
func (c *Claimer) due(rows []row, unclaimed *big.Int, now time.Time) string {
	if len(rows) == 0 {
		return ""
	}
	for _, r := range rows {
		// The payer started a timed withdrawal: what is not claimed before
		// it is finalized is lost (§3.5).
		if r.ch.WithdrawRequestedAt != 0 {
			return "withdrawal"
		}
	}
	if c.cfg.Threshold != nil && unclaimed.Cmp(c.cfg.Threshold) >= 0 {
		return "threshold"
	}
	for _, r := range rows {
		// A channel written before the age was kept counts as old.
		if r.ch.UnclaimedSince.IsZero() || now.Sub(r.ch.UnclaimedSince) >= c.cfg.Period {
			return "period"
		}
	}
	return ""
}

// claim claims rows in one claimWithSignature. When its simulation fails
// (one bad row sinks the batch, T12), it halves the batch until the bad
// rows are alone, so that the good ones are still claimed. An error means
// the facilitator did not answer.
func (c *Claimer) claim(ctx context.Context, rows []row, now time.Time, rep *ClaimReport) error {
	out, err := c.send(ctx, rows, now)
	if err != nil {
		return err
	}
	switch {
	case out.Success:
		rep.Txs = append(rep.Txs, out.Tx)
		amount := c.landed(ctx, rows, now, rep)
		rep.Amount.Add(rep.Amount, amount)
		c.observe(KindClaim, ResultOK, amount)
		c.record(ctx, TxRecord{Kind: KindClaim, Tx: out.Tx, Amount: amount, Rows: len(rows), Result: ResultOK, At: now})
		return nil
	case out.Tx != (common.Hash{}):
		// Sent and reverted: the state changed between the simulation and
		// the block. The next pass simulates again, and isolates then.
		c.logger.WarnContext(ctx, "claimer: a claim transaction failed; retried at the next pass", "tx", out.Tx, "rows", len(rows),
			"reason", out.Reason, "message", out.Message)
		return nil
	case len(rows) == 1:
		r := rows[0]
		c.hold(r, now)
		rep.Refused = append(rep.Refused, r.ch.ID)
		c.logger.ErrorContext(ctx, "claimer: the escrow refuses a channel's claim; left out until it is charged again or the retry delay passes",
			"channel", r.ch.ID, "payer", r.ch.Config.Payer, "charged", r.ch.Charged, "claimed", orZero(r.ch.TotalClaimed),
			"signedMax", r.ch.SignedMax, "withdrawRequestedAt", r.ch.WithdrawRequestedAt, "reason", out.Reason, "message", out.Message,
			"retry", c.cfg.Retry)
		return nil
	}
	half := len(rows) / 2
	if err := c.claim(ctx, rows[:half], now, rep); err != nil {
		return err
	}
	return c.claim(ctx, rows[half:], now, rep)
}

// send signs and sends one claim; a refusal is counted and recorded here,
// a landed claim by claim once its effect is known.
func (c *Claimer) send(ctx context.Context, rows []row, now time.Time) (Outcome, error) {
	entries := make([]ClaimEntry, len(rows))
	claims := make([]Claim, len(rows))
	for i, r := range rows {
		entries[i] = ClaimEntry{ChannelID: r.ch.ID, MaxClaimableAmount: r.claim.MaxClaimable, TotalClaimed: r.claim.TotalClaimed}
		claims[i] = r.claim
	}
	sig, err := payment.SignDigest(c.cfg.Escrow.ClaimBatchDigest(entries), c.cfg.Authorizer)
	if err != nil {
		return Outcome{}, fmt.Errorf("claimer: sign the claim: %w", err)
	}
	if err := c.intend(ctx, rows); err != nil {
		return Outcome{}, err
	}
	out, err := c.f.Claim(ctx, claims, sig)
	if err != nil {
		c.observe(KindClaim, ResultError, nil)
		return Outcome{}, fmt.Errorf("claimer: claim %d rows: %w", len(rows), err)
	}
	if !out.Success {
		c.observe(KindClaim, ResultRefused, nil)
		c.record(ctx, TxRecord{Kind: KindClaim, Tx: out.Tx, Amount: new(big.Int), Rows: len(rows), Result: ResultRefused,
			Reason: out.Reason, Message: out.Message, At: now})
	}
	return out, nil
}

// intend records, before a claim of rows is sent, the total it claims on
// each channel (Channel.OwnClaimed): a claimed total the escrow shows
// above it is someone else's (markForeign), even if this process stops
// between the claim and its record.
func (c *Claimer) intend(ctx context.Context, rows []row) error {
	for _, r := range rows {
		if _, err := c.store.UpdateChannel(ctx, r.ch.ID, func(ch *Channel, found bool) (Change, error) {
			if !found || orZero(ch.OwnClaimed).Cmp(r.claim.TotalClaimed) >= 0 {
				return Keep, nil
			}
			ch.claiming(r.claim.TotalClaimed)
			return Save, nil
		}); err != nil {
			return fmt.Errorf("claimer: record the claim of channel %s before sending it: %w", r.ch.ID.Hex(), err)
		}
	}
	return nil
}

// landed takes in a claim of rows that the facilitator reports landed,
// and returns what it raised the channels' claimed totals by.
//
// A claim counts only as far as the escrow shows it (issue 20, item 8: a
// claim recorded ok whose transaction moved nothing). With a chain
// reader, each channel's claimed total is read after the claim and
// mirrored; what the claim did is that total less the mirror before it.
// A total short of what was claimed is logged at ERROR and refused like a
// row the escrow refuses; a total beyond what the store charged is a
// foreign claim (see mirror). Without a reader, the facilitator's word is
// taken: every row reached what it claimed.
func (c *Claimer) landed(ctx context.Context, rows []row, now time.Time, rep *ClaimReport) *big.Int {
	amount := new(big.Int)
	for _, r := range rows {
		before := orZero(r.ch.TotalClaimed)
		total := r.claim.TotalClaimed
		if c.cfg.Chain != nil {
			st, err := c.cfg.Chain.ChannelState(ctx, r.ch.ID)
			if err != nil || st.TotalClaimed == nil {
				// Whether the row landed is unknown. The escrow watcher
				// mirrors the claim from its Claimed event; the row waits
				// as a refused one does, so that it is not sent again at
				// every poll.
				c.hold(r, now)
				c.logger.WarnContext(ctx, "claimer: reading a claimed channel from the escrow failed; the escrow watcher mirrors the claim from its event",
					"channel", r.ch.ID, "err", err, "retry", c.cfg.Retry)
				continue
			}
			total = st.TotalClaimed
			if total.Cmp(r.claim.TotalClaimed) < 0 {
				c.hold(r, now)
				rep.Refused = append(rep.Refused, r.ch.ID)
				c.logger.ErrorContext(ctx, "claimer: the facilitator reports a claim landed, but the escrow does not show the channel claimed; left out until it is charged again or the retry delay passes",
					"channel", r.ch.ID, "payer", r.ch.Config.Payer, "claimed", r.claim.TotalClaimed, "onChain", total, "before", before,
					"retry", c.cfg.Retry)
			}
		}
		if total.Cmp(r.claim.TotalClaimed) >= 0 {
			rep.Claimed++
		}
		if total.Cmp(before) > 0 {
			amount.Add(amount, new(big.Int).Sub(total, before))
			c.unsettled[pair{r.ch.Config.Receiver, r.ch.Config.Token}] = true
		}
		// What the pass read as charged is claimed: the rest was charged
		// since it started. A row left short keeps the age it had.
		since := time.Time{}
		if total.Cmp(r.claim.TotalClaimed) >= 0 {
			since = now
		}
		if c.mirror(ctx, r.ch.ID, total, since, now) {
			rep.Foreign = append(rep.Foreign, r.ch.ID)
		}
	}
	return amount
}

// hold leaves r out of claims until it is charged again or Retry passes.
func (c *Claimer) hold(r row, now time.Time) {
	c.bad[r.ch.ID] = quarantine{charged: new(big.Int).Set(r.ch.Charged), until: now.Add(c.cfg.Retry)}
}

// mirror raises channel id's claimed total to total, as raiseClaimed
// does (charged and the reservation are the server's), and stops the
// channel as claimed by a stranger when total exceeds what this store
// claimed (markForeign); it reports whether it did.
func (c *Claimer) mirror(ctx context.Context, id common.Hash, total *big.Int, since, now time.Time) bool {
	foreign := false
	ch, err := c.store.UpdateChannel(ctx, id, func(ch *Channel, found bool) (Change, error) {
		foreign = false
		if !found {
			return Keep, nil
		}
		change := Keep
		if raiseClaimed(ch, total, since) {
			change = Save
		}
		if markForeign(ch, total, now) {
			foreign, change = true, Save
		}
		return change, nil
	})
	if err != nil {
		// The claim stands on chain; the next pass sends the row again,
		// a no-op there, and mirrors it then (or the watcher does).
		c.logger.WarnContext(ctx, "claimer: recording a claimed total failed", "channel", id, "err", err)
		return false
	}
	if foreign {
		c.logger.ErrorContext(ctx, "claimer: the escrow shows a channel claimed beyond what this store claimed (another server claims with this receiver authorizer, or the store lost records); the channel is no longer served",
			"channel", id, "onChain", total, "ownClaimed", orZero(ch.OwnClaimed), "charged", orZero(ch.Charged), "payer", ch.Config.Payer)
		if c.cfg.Observer != nil {
			c.cfg.Observer.BatchChannelStopped(EvidenceClaimedElsewhere)
		}
	}
	return foreign
}

// raiseClaimed raises c's mirrored claimed total to total, never lowering
// it, and restarts its unclaimed age: none once everything charged is
// claimed, else since when the caller knows that everything charged
// before since is claimed (since zero: the age of what is left is not
// known and is kept). It reports whether c changed.
func raiseClaimed(c *Channel, total *big.Int, since time.Time) bool {
	changed := false
	if c.TotalClaimed == nil || c.TotalClaimed.Cmp(total) < 0 {
		c.TotalClaimed, changed = new(big.Int).Set(total), true
	}
	switch {
	case orZero(c.Charged).Cmp(c.TotalClaimed) <= 0:
		if !c.UnclaimedSince.IsZero() {
			c.UnclaimedSince, changed = time.Time{}, true
		}
	case !since.IsZero() && c.UnclaimedSince.Before(since):
		c.UnclaimedSince, changed = since, true
	}
	return changed
}

// markForeign stops channel c (opened by this store) at now, once, when
// the escrow's claimed total exceeds what this store claimed: every claim
// of this store records its total before it is sent (OwnClaimed), so
// another claimer holds vouchers of it (two stores serving one channel,
// or a store that lost records). It reports whether it stopped it.
func markForeign(c *Channel, total *big.Int, now time.Time) bool {
	if !c.Opened || total.Cmp(orZero(c.OwnClaimed)) <= 0 {
		return false
	}
	return c.stop(EvidenceClaimedElsewhere, fmt.Sprintf("the escrow shows %s claimed; this server claimed %s (charged %s)",
		total, orZero(c.OwnClaimed), orZero(c.Charged)), now)
}

// settle sweeps each receiver and token claimed for and not swept yet.
func (c *Claimer) settle(ctx context.Context, rep *ClaimReport) error {
	pairs := make([]pair, 0, len(c.unsettled))
	for p := range c.unsettled {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if n := a.receiver.Cmp(b.receiver); n != 0 {
			return n
		}
		return a.token.Cmp(b.token)
	})
	var errs []error
	for _, p := range pairs {
		out, err := c.f.Settle(ctx, p.receiver, p.token)
		if err != nil {
			c.observe(KindSettle, ResultError, nil)
			errs = append(errs, fmt.Errorf("claimer: settle %s in %s: %w", p.receiver.Hex(), p.token.Hex(), err))
			continue
		}
		rec := TxRecord{Kind: KindSettle, Tx: out.Tx, Receiver: p.receiver, Token: p.token, Amount: orZero(out.Amount),
			Result: ResultOK, At: c.cfg.Now()}
		switch {
		case out.Success:
			delete(c.unsettled, p)
			rep.Settled = append(rep.Settled, out.Tx)
			c.record(ctx, rec)
		case out.Reason == reasonNothingToSettle:
			delete(c.unsettled, p) // swept already, by us or anyone (settle is open to all)
			rec.Result = ResultNoop
		default:
			rec.Amount, rec.Result, rec.Reason, rec.Message = new(big.Int), ResultRefused, out.Reason, out.Message
			c.logger.WarnContext(ctx, "claimer: the facilitator refused a settle; retried at the next pass",
				"receiver", p.receiver, "token", p.token, "reason", out.Reason, "message", out.Message)
			c.record(ctx, rec)
		}
		c.observe(KindSettle, rec.Result, rec.Amount)
	}
	return errors.Join(errs...)
}

func (c *Claimer) record(ctx context.Context, r TxRecord) {
	if err := c.store.RecordBatchTx(ctx, r); err != nil {
		c.logger.WarnContext(ctx, "claimer: recording a transaction failed", "kind", r.Kind, "tx", r.Tx, "err", err)
	}
}

func (c *Claimer) observe(kind, result string, amount *big.Int) {
	if c.cfg.Observer == nil {
		return
	}
	usd := 0.0
	if result == ResultOK && amount != nil {
		usd = payment.USD(amount, c.cfg.Decimals)
	}
	c.cfg.Observer.BatchTransaction(kind, result, usd)
}
