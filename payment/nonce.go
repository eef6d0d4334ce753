package payment

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/singleflight"
)

// sender is the nonce manager of the facilitator's gas key: it sends
// calls from the key with many transactions in flight at once (in one
// block, when the chain seals several per block) and sees each one mined.
//
// A nonce, once a signed call was sent on it, belongs to that call until
// one of the call's versions is mined: a transaction the node lost is
// rebroadcast as it was signed, one stuck in the pool is replaced on the
// same nonce with fees raised past the pool's replacement rule
// (go-ethereum's legacypool wants +10 % on both tip and fee cap; we add
// 12.5 %), and a gap below the key's pending nonce is filled, so that no
// lost send stalls the ones after it. The lock covers only what must be
// serial: nonce assignment, signing and the send.
//
// One poller goroutine runs while transactions are in flight: at each new
// head it reads the receipts of the new blocks (eth_getBlockReceipts, one
// call per block whatever the number in flight) and wakes the waiters; its
// head also keeps the fee cache fresh. It stops when nothing is in flight,
// so a sender needs no Close.
type sender struct {
	chain   Chain
	key     *ecdsa.PrivateKey
	from    common.Address
	chainID *big.Int
	signer  types.Signer

	// poll is how often the head is read while transactions are in
	// flight; probeAfter and replaceAfter count the blocks a transaction
	// may be missing from before it is rebroadcast (harmless if the node
	// has it), and, if the pool still holds it unmined, replaced with
	// higher fees; probeEvery rebroadcasts on a chain that seals no block
	// (a devnet seals only what its pool holds); giveUpAfter bounds how
	// long a nonce is watched.
	poll                     time.Duration
	probeAfter, replaceAfter uint64
	probeEvery, giveUpAfter  time.Duration

	sendMu sync.Mutex  // nonce assignment, signing and the send
	next   uint64      // the key's next nonce, guarded by sendMu
	known  bool        // next is trusted: false at first use and after a doubtful send
	doubt  atomic.Bool // set by the poller to make the next send read the nonce again

	mu       sync.Mutex // guards what follows; never held across I/O
	flights  map[uint64]*flight
	byHash   map[common.Hash]*flight
	watching bool   // the poller runs
	scanned  uint64 // the last block whose receipts the poller read
	head     *types.Header
	headAt   time.Time // when head was read
	tip      *big.Int
	tipAt    uint64 // the head number tip was suggested at

	fetch singleflight.Group // one head or tip request at a time
}

// call is one contract call the gas key sends.
type call struct {
	to   common.Address
	data []byte
	gas  uint64
}

// flight is one nonce of the gas key in flight and the call it belongs to:
// every version signed for it (the first, then replacements), until one
// is mined.
type flight struct {
	call     call
	nonce    uint64
	txs      []*types.Transaction // latest last
	after    uint64               // head number when the latest version entered the pool: it is mined in a later block
	probed   uint64               // head number of the last rebroadcast: once a block at most
	touched  time.Time            // the last send or rebroadcast
	probe    bool                 // rebroadcast at the next poll: the last send's outcome is unknown
	accepted bool                 // the node took a version (or said it has one)
	sendErr  error                // the last send's error while not accepted
	consumed uint64               // head number when the node said "nonce too low" with no receipt of ours
	born     time.Time

	done chan struct{} // closed once mined (rcpt), moved (next), released or abandoned
	rcpt *types.Receipt
	next *flight // the call moved to another nonce (ours was taken by a foreign transaction)
}

func (f *flight) latest() *types.Transaction { return f.txs[len(f.txs)-1] }

const (
	pollInterval = 100 * time.Millisecond
	// headMaxAge is how long a head read for fees is reused when the
	// poller is not refreshing it.
	headMaxAge = time.Second
	// maxVersions bounds the replacements of one nonce; past it the
	// latest version is only rebroadcast.
	maxVersions = 8
	// maxFill bounds the gap nonces filled per poll.
	maxFill = 16
	// sendAttempts bounds the re-reads of the nonce for one send.
	sendAttempts = 3
	noopGas      = 21_000
)

func newSender(chain Chain, key *ecdsa.PrivateKey, chainID *big.Int) *sender {
	return &sender{
		chain: chain, key: key, from: crypto.PubkeyToAddress(key.PublicKey), chainID: chainID,
		signer: types.LatestSignerForChainID(chainID),
		poll:   pollInterval, probeAfter: 2, replaceAfter: 4, probeEvery: 5 * time.Second, giveUpAfter: 10 * time.Minute,
		flights: map[uint64]*flight{}, byHash: map[common.Hash]*flight{},
	}
}

// fees are EIP-1559 fee parameters for the next block.
type fees struct{ tip, feeCap *big.Int }

// fees returns the fees for a new transaction and the head they were read
// at: the tip is suggested once per head block, and the fee cap leaves
// room for the base fee to double.
func (s *sender) fees(ctx context.Context) (fees, *types.Header, error) {
	// The requests are shared by concurrent callers: one caller's
	// cancellation must not fail the others.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.mu.Lock()
	head, fresh := s.head, time.Since(s.headAt) < headMaxAge
	s.mu.Unlock()
	if head == nil || !fresh {
		v, err, _ := s.fetch.Do("head", func() (any, error) {
			h, err := s.chain.HeaderByNumber(ctx, nil)
			if err == nil {
				s.setHead(h)
			}
			return h, err
		})
		if err != nil {
			return fees{}, nil, err
		}
		head = v.(*types.Header)
	}
	if head.BaseFee == nil {
		return fees{}, nil, errors.New("the chain has no base fee (EIP-1559)")
	}
	s.mu.Lock()
	tip := s.tip
	if s.tipAt != head.Number.Uint64() {
		tip = nil
	}
	s.mu.Unlock()
	if tip == nil {
		v, err, _ := s.fetch.Do("tip", func() (any, error) {
			t, err := s.chain.SuggestGasTipCap(ctx)
			if err == nil {
				s.mu.Lock()
				s.tip, s.tipAt = t, head.Number.Uint64()
				s.mu.Unlock()
			}
			return t, err
		})
		if err != nil {
			return fees{}, nil, err
		}
		tip = v.(*big.Int)
	}
	feeCap := new(big.Int).Add(new(big.Int).Mul(head.BaseFee, big.NewInt(2)), tip)
	return fees{tip: tip, feeCap: feeCap}, head, nil
}

// setHead keeps the newest head seen.
func (s *sender) setHead(h *types.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head == nil || h.Number.Cmp(s.head.Number) >= 0 {
		s.head, s.headAt = h, time.Now()
	}
}

// submit sends c on the key's next nonce and returns its flight. An error
// means nothing is in flight for c.
func (s *sender) submit(ctx context.Context, c call) (*flight, error) {
	fee, head, err := s.fees(ctx)
	if err != nil {
		return nil, err
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if s.doubt.Swap(false) {
			s.known = false
		}
		if !s.known {
			// First use (the key may have sent before a restart) or a
			// doubtful counter: the node's pending nonce, but never one of
			// ours still in flight, which the poller rebroadcasts.
			n, err := s.chain.PendingNonceAt(ctx, s.from)
			if err != nil {
				return nil, err
			}
			s.next, s.known = max(n, s.nextUntracked()), true
		}
		tx, err := s.sign(c, s.next, fee.tip, fee.feeCap)
		if err != nil {
			return nil, err
		}
		f := &flight{call: c, nonce: s.next, born: time.Now(), done: make(chan struct{})}
		s.track(f, tx, head.Number.Uint64()) // before the send: its block may be read at once
		err = s.chain.SendTransaction(ctx, tx)
		switch o := outcomeOf(err); o {
		case sendAccepted, sendKnown:
			s.mu.Lock()
			f.accepted = true
			s.mu.Unlock()
			s.next++
			return f, nil
		case sendUnknown:
			// It may have reached the node: the nonce is the call's, and
			// the poller asks again at once.
			s.mu.Lock()
			f.probe, f.sendErr = true, err
			s.mu.Unlock()
			s.next++
			return f, nil
		default:
			// Refused: nothing is at this nonce on our account. "nonce too
			// low" or "replacement transaction underpriced" mean the
			// counter is behind the node (another sender of the key, or a
			// transaction that landed unseen): read it again.
			s.untrack(f)
			s.known = false
			if (o != sendNonceTooLow && o != sendOccupied) || attempt == sendAttempts {
				return nil, fmt.Errorf("send transaction (nonce %d): %w", f.nonce, err)
			}
		}
	}
}

// nextUntracked is the nonce after the highest in flight (0 if none).
func (s *sender) nextUntracked() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for nonce := range s.flights {
		n = max(n, nonce+1)
	}
	return n
}

func (s *sender) sign(c call, nonce uint64, tip, feeCap *big.Int) (*types.Transaction, error) {
	to := c.to
	return types.SignNewTx(s.key, s.signer, &types.DynamicFeeTx{
		ChainID: s.chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: c.gas, To: &to, Data: c.data,
	})
}

// track records tx as the latest version of f, sent when the head was
// head, and starts the poller if it is not running.
func (s *sender) track(f *flight, tx *types.Transaction, head uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.txs = append(f.txs, tx)
	f.after, f.touched = head, time.Now()
	s.flights[f.nonce] = f
	s.byHash[tx.Hash()] = f
	if !s.watching {
		s.watching, s.scanned = true, head
		go s.watch()
	}
}

// untrack forgets f's latest version, and f itself if it has no other.
func (s *sender) untrack(f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := f.latest()
	delete(s.byHash, tx.Hash())
	f.txs = f.txs[:len(f.txs)-1]
	if len(f.txs) == 0 && s.flights[f.nonce] == f {
		delete(s.flights, f.nonce)
	}
}

// forget drops f from the books; s.mu must be held.
func (s *sender) forget(f *flight) {
	if s.flights[f.nonce] == f {
		delete(s.flights, f.nonce)
	}
	for _, tx := range f.txs {
		delete(s.byHash, tx.Hash())
	}
}

// landing is what a waiter learns of its flight.
type landing struct {
	rcpt     *types.Receipt // nil: not mined yet
	tx       common.Hash    // the version mined, else the latest sent
	gas      uint64         // its gas limit
	accepted bool           // the node took a version
	sendErr  error          // why not, while not accepted
}

// wait returns once one of f's versions is mined, or when timeout or ctx
// ends first.
func (s *sender) wait(ctx context.Context, f *flight, timeout time.Duration) landing {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-f.done:
			s.mu.Lock()
			next, rcpt := f.next, f.rcpt
			s.mu.Unlock()
			if next != nil {
				f = next
				continue
			}
			if rcpt != nil {
				return landing{rcpt: rcpt, tx: rcpt.TxHash, gas: f.call.gas, accepted: true}
			}
		case <-timer.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return landing{tx: f.latest().Hash(), gas: f.call.gas, accepted: f.accepted, sendErr: f.sendErr}
	}
}

// watch polls the head while transactions are in flight.
func (s *sender) watch() {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for range t.C {
		if !s.tick() {
			return
		}
	}
}

// tick reads the head, settles the flights mined since the last tick,
// heals the ones overdue, and reports whether any is left.
func (s *sender) tick() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if head, err := s.chain.HeaderByNumber(ctx, nil); err == nil {
		s.setHead(head)
		s.scan(ctx, head.Number.Uint64())
		s.heal(ctx, head.Number.Uint64())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flights {
		if time.Since(f.born) > s.giveUpAfter {
			// Unreachable node or a nonce we cannot get mined: stop
			// watching, and let the next send read the nonce again.
			s.forget(f)
			close(f.done)
			s.doubt.Store(true)
		}
	}
	if len(s.flights) == 0 {
		s.watching = false
		return false
	}
	return true
}

// scan reads the receipts of the blocks after the last scanned, up to
// head, and resolves the flights they hold.
func (s *sender) scan(ctx context.Context, head uint64) {
	for {
		s.mu.Lock()
		b, inFlight := s.scanned+1, len(s.flights)
		s.mu.Unlock()
		if b > head || inFlight == 0 {
			return
		}
		rcpts, err := s.chain.BlockReceipts(ctx, rpc.BlockNumberOrHashWithNumber(rpc.BlockNumber(b)))
		if err != nil {
			return // the next tick tries again
		}
		s.mu.Lock()
		for _, r := range rcpts {
			if f := s.byHash[r.TxHash]; f != nil {
				s.resolve(f, r)
			}
		}
		s.scanned = b
		s.mu.Unlock()
	}
}

// resolve ends f with its receipt; s.mu must be held.
func (s *sender) resolve(f *flight, r *types.Receipt) {
	s.forget(f)
	f.rcpt = r
	close(f.done)
}

// heal acts on the flights missing from the chain for probeAfter blocks,
// lowest nonce first: rebroadcast what the node lost, fill a gap below,
// replace what stays pending.
func (s *sender) heal(ctx context.Context, head uint64) {
	s.mu.Lock()
	var due []*flight
	for _, f := range s.flights {
		if f.probe || head >= f.after+s.probeAfter && head > f.probed || time.Since(f.touched) >= s.probeEvery {
			due = append(due, f)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(due, func(a, b *flight) int { return cmp.Compare(a.nonce, b.nonce) })
	var pending *uint64 // the node's pending nonce, read at most once
	acted := false      // a lower nonce was just re-sent: the higher ones may only be waiting for it
	for _, f := range due {
		s.mu.Lock()
		tx, resolved := f.latest(), s.flights[f.nonce] != f
		f.probe, f.probed, f.touched = false, head, time.Now()
		s.mu.Unlock()
		if resolved {
			continue
		}
		err := s.chain.SendTransaction(ctx, tx)
		switch outcomeOf(err) {
		case sendAccepted: // the node had lost it, or never got it: it is back now
			s.sent(f, head, true)
			acted = true
		case sendKnown, sendOccupied: // the pool holds it (or another version) unmined
			s.sent(f, head, false)
			if acted {
				continue
			}
			if pending == nil {
				n, err := s.chain.PendingNonceAt(ctx, s.from)
				if err != nil {
					return
				}
				pending = &n
			}
			if *pending < f.nonce {
				s.fill(ctx, *pending, f.nonce, head)
				acted = true
				continue
			}
			s.mu.Lock()
			stuck := head >= f.after+s.replaceAfter
			s.mu.Unlock()
			if stuck {
				s.replace(ctx, f, head)
			}
		case sendNonceTooLow:
			s.consumed(ctx, f, head)
		case sendRefused:
			s.mu.Lock()
			f.sendErr = err
			if !f.accepted && len(f.txs) == 1 {
				// A first send of unknown outcome, now refused outright: it
				// never reached the pool, so the nonce is free again (the
				// next send reads it, or a gap fill takes it).
				s.forget(f)
				close(f.done)
				s.doubt.Store(true)
			}
			s.mu.Unlock()
		default:
			s.mu.Lock()
			f.sendErr = err
			s.mu.Unlock()
		}
	}
}

// sent notes that the node has f's latest version, which entered the pool
// at head if fresh (a rebroadcast the node had lost, or a first send whose
// outcome was unknown); one the pool already held keeps its age, so a
// stuck version is still replaced in time.
func (s *sender) sent(f *flight, head uint64, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fresh || !f.accepted {
		f.after = head
	}
	f.accepted, f.sendErr = true, nil
}

// fill fills the gap [from, to) below an in-flight nonce: a nonce we
// track is rebroadcast, any other (a send lost before a restart) gets a
// zero-value transfer to ourselves.
func (s *sender) fill(ctx context.Context, from, to, head uint64) {
	fee, _, err := s.fees(ctx)
	if err != nil {
		return
	}
	for n := from; n < to && n < from+maxFill; n++ {
		s.mu.Lock()
		f := s.flights[n]
		s.mu.Unlock()
		if f != nil {
			s.mu.Lock()
			tx := f.latest()
			s.mu.Unlock()
			if outcomeOf(s.chain.SendTransaction(ctx, tx)) == sendAccepted {
				s.sent(f, head, true)
			}
			continue
		}
		c := call{to: s.from, gas: noopGas}
		tx, err := s.sign(c, n, fee.tip, fee.feeCap)
		if err != nil {
			return
		}
		f = &flight{call: c, nonce: n, born: time.Now(), done: make(chan struct{})}
		s.track(f, tx, head)
		switch outcomeOf(s.chain.SendTransaction(ctx, tx)) {
		case sendAccepted, sendKnown:
			s.sent(f, head, true)
		case sendUnknown:
		default:
			s.untrack(f)
		}
	}
}

// replace signs f's call again on its nonce with fees raised by 12.5 %
// (at least the current suggestion) and sends it. The pool evicts the old
// version; a copy mined elsewhere is still recognised by its hash.
func (s *sender) replace(ctx context.Context, f *flight, head uint64) {
	s.mu.Lock()
	old, versions := f.latest(), len(f.txs)
	s.mu.Unlock()
	if versions >= maxVersions {
		return
	}
	fee, _, err := s.fees(ctx)
	if err != nil {
		return
	}
	tip := bigMax(bump(old.GasTipCap()), fee.tip)
	feeCap := bigMax(bump(old.GasFeeCap()), fee.feeCap, tip)
	for range sendAttempts {
		tx, err := s.sign(f.call, f.nonce, tip, feeCap)
		if err != nil {
			return
		}
		s.track(f, tx, head)
		switch outcomeOf(s.chain.SendTransaction(ctx, tx)) {
		case sendAccepted, sendKnown:
			s.sent(f, head, true)
			return
		case sendUnknown:
			return // a version maybe sent: keep it, the next tick probes
		case sendOccupied:
			// A pricier transaction holds the nonce (not one we sent):
			// raise again from what was refused.
			s.untrack(f)
			tip, feeCap = bump(tip), bump(feeCap)
		default:
			s.untrack(f)
			return
		}
	}
}

// consumed handles a node saying f's nonce is used: normally one of f's
// versions was mined and the next scan finds it; if no receipt of ours
// shows up within replaceAfter blocks, another transaction of the key
// took the nonce, and f's call is sent again on a new one.
func (s *sender) consumed(ctx context.Context, f *flight, head uint64) {
	s.mu.Lock()
	txs := slices.Clone(f.txs)
	s.mu.Unlock()
	for _, tx := range txs {
		if r, err := s.chain.TransactionReceipt(ctx, tx.Hash()); err == nil {
			s.mu.Lock()
			if s.flights[f.nonce] == f {
				s.resolve(f, r)
			}
			s.mu.Unlock()
			return
		}
	}
	s.mu.Lock()
	if f.consumed == 0 {
		f.consumed = head
	}
	lost := head >= f.consumed+s.replaceAfter
	s.mu.Unlock()
	if !lost {
		return
	}
	next, err := s.submit(ctx, f.call)
	if err != nil {
		return // tried again at the next tick
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget(f)
	f.next = next
	close(f.done)
}

// bump raises a fee by 12.5 % and a wei, above go-ethereum's 10 %
// replacement threshold whatever the rounding.
func bump(x *big.Int) *big.Int {
	y := new(big.Int).Mul(x, big.NewInt(9))
	y.Quo(y, big.NewInt(8))
	return y.Add(y, big.NewInt(1))
}

func bigMax(xs ...*big.Int) *big.Int {
	m := xs[0]
	for _, x := range xs[1:] {
		if x.Cmp(m) > 0 {
			m = x
		}
	}
	return m
}

// sendOutcome is what a node's answer to eth_sendRawTransaction says
// about the transaction.
type sendOutcome int

const (
	sendAccepted    sendOutcome = iota // in the pool now
	sendKnown                          // "already known": it was in the pool already
	sendNonceTooLow                    // the nonce is used on chain
	sendOccupied                       // another transaction holds the nonce in the pool
	sendRefused                        // any other answer of the node: not in the pool
	sendUnknown                        // no answer (transport, timeout): it may be in the pool
)

func outcomeOf(err error) sendOutcome {
	if err == nil {
		return sendAccepted
	}
	msg := strings.ToLower(err.Error())
	var rpcErr rpc.Error
	switch {
	case strings.Contains(msg, "already known"), strings.Contains(msg, "known transaction"):
		return sendKnown
	case strings.Contains(msg, "nonce too low"):
		return sendNonceTooLow
	case strings.Contains(msg, "replacement transaction underpriced"):
		return sendOccupied
	case errors.As(err, &rpcErr):
		return sendRefused
	case errors.Is(err, ethereum.NotFound):
		return sendRefused
	}
	return sendUnknown
}
