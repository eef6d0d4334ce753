// Package trading reads what a buyer of a token faces now, from the
// token's own transfer code and its storage at one block: the buy, sell
// and transfer tax, whether trading is open and transfers are paused, the
// largest buy, sale and wallet, and how long a buyer must wait to sell.
// A buy, a sale and a transfer are concrete calls of transfer and
// transferFrom that the bytecode analysis's path explorer follows with
// the token's storage words as known values (bytecode.Effects.Evaluate),
// the words fetched from the chain in a few batches; no transaction is
// executed (docs/rules.md, "Trading now"). What the probes found is
// judged by service/rugcheck.
package trading

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/tollgate/tollgate/service/bytecode"
)

// Storage reads storage words of a contract at a block; *chain.Client
// provides it.
type Storage interface {
	Storage(ctx context.Context, addr common.Address, block uint64, slots []common.Hash) ([]common.Hash, error)
}

// Probe choices (docs/rules.md, "Trading now").
const (
	// PositionShare is a buyer's position, as a share of the supply: the
	// amount the probes buy, sell and move.
	PositionShare = 1.0 / 1000
	// maxRounds bounds the storage reads: each round fetches the words the
	// probes lacked in one batch.
	maxRounds = 3
	// blockTime is the time between Base blocks: a sale is read one block
	// after the buy.
	blockTime = 2
	// maxWait is the longest wait after a buy the probes look for before
	// a sale passes: longer is a lock.
	maxWait = 10 * 365 * 24 * 3600
)

// The probes' own addresses: fresh accounts no list names (a buyer, the
// recipient of a transfer, and a router when none is given).
var (
	Buyer     = probeAddress("tollgate probe: buyer")
	Recipient = probeAddress("tollgate probe: recipient")
	Router    = probeAddress("tollgate probe: router")
)

func probeAddress(s string) common.Address {
	return common.BytesToAddress(crypto.Keccak256([]byte(s))[12:])
}

// Token is the token the probes read.
type Token struct {
	Address common.Address
	// Block and Time are the block the storage is read at.
	Block, Time uint64
	Supply      *big.Int
	// Pool is where a buyer trades it, nil when no followed pool is
	// known: then only a transfer is read.
	Pool *Pool
	// Router calls transferFrom on a sale (zero: Router).
	Router common.Address
	// Also are slots the caller needs read at Block too: they ride in the
	// first batch, and come back in State.Slots.
	Also []common.Hash
}

// Pool is the pool the buy and the sale are read against.
type Pool struct {
	// ID names it in the answer: an address, or a V4 pool id.
	ID    string
	Venue string
	// Holder holds the pool's tokens and sends them on a buy (the pool,
	// or the V4 PoolManager); a sale sends the tokens to it.
	Holder common.Address
}

// Probe is what one concrete call did.
type Probe struct {
	// Call names it: "buy", "sale", "transfer".
	Call   string
	Status bytecode.Status
	// Amount is the amount the call asked to move (token units); Debit
	// and Credit what it took from the sender and gave the recipient, in
	// the balance mapping's units (a reflection's own), nil when not read.
	Amount, Debit, Credit *big.Int
	// Decider is why it reverted.
	Decider *bytecode.Decider
	// Wait is the time after the buy the call was read at, in seconds.
	Wait uint64
	// Assumes: it passes if what it reads outside the token's storage
	// lets it (the calls it makes succeed, an ether balance suffices).
	Assumes bool
}

// Limit is a largest amount a probe found.
type Limit struct {
	// Known: the probe could tell; Bound: it found a limit, Amount (the
	// largest amount that passes) and Share of the supply; otherwise
	// none up to Probed (the share of the supply it tried).
	Known  bool
	Bound  bool
	Amount *big.Int
	Share  float64
	Probed float64
	// Decider is the condition of the first amount refused.
	Decider *bytecode.Decider
}

// State is what a buyer faces now.
type State struct {
	Pool *Pool
	// Evaluable: the token's code has transfer(address,uint256) to
	// follow; otherwise nothing below is known.
	Evaluable bool
	// Buy, Sale and Transfer are the probes of a buyer's position: bought
	// from the pool, sold back to it one block later (or after Cooldown),
	// and moved to a fresh account.
	Buy, Sale, Transfer *Probe
	// Taxes in percent of the amount; nil when not read.
	BuyTax, SellTax, TransferTax *float64
	// TradingOpen: a buy from the pool passes; nil when not read.
	TradingOpen *bool
	// TransfersPaused: a transfer between two holders reverts on a
	// switch; nil when not read.
	TransfersPaused            *bool
	MaxBuy, MaxSale, MaxWallet Limit
	// Cooldown is the wait after a buy before a sale passes, in
	// seconds: nil when not read; Locked when none up to maxWait does.
	Cooldown *uint64
	Locked   bool
	// Unread says what could not be read, and why.
	Unread []string
	// Slots are the storage words read, for evidence.
	Slots map[[32]byte]uint256.Int
	// Rounds is the number of storage batches read.
	Rounds int
}

// Read reads what a buyer of tok faces, from the effects of its code (the
// implementation's behind a proxy) and its storage at tok.Block.
func Read(ctx context.Context, st Storage, e bytecode.Effects, tok Token) (State, error) {
	r := &reader{e: e, tok: tok, words: map[[32]byte]uint256.Int{}}
	if tok.Router == (common.Address{}) {
		r.tok.Router = Router
	}
	if !e.Evaluable(selTransfer) {
		s := State{Pool: tok.Pool, Unread: []string{"the code has no transfer(address,uint256) to follow: nothing is read"}}
		if len(tok.Also) > 0 {
			words, err := st.Storage(ctx, tok.Address, tok.Block, tok.Also)
			if err != nil {
				return State{}, fmt.Errorf("trading: storage: %w", err)
			}
			s.Slots, s.Rounds = map[[32]byte]uint256.Int{}, 1
			for i, a := range tok.Also {
				var v uint256.Int
				v.SetBytes32(words[i][:])
				s.Slots[a] = v
			}
		}
		return s, nil
	}
	var s State
	for round := 0; ; round++ {
		r.missing = map[[32]byte]bool{}
		s = r.probe()
		if round == 0 {
			for _, a := range tok.Also {
				if _, read := r.words[a]; !read {
					r.missing[a] = true
				}
			}
		}
		if len(r.missing) == 0 || round == maxRounds {
			break
		}
		slots := make([]common.Hash, 0, len(r.missing))
		for m := range r.missing {
			slots = append(slots, m)
		}
		slices.SortFunc(slots, func(a, b common.Hash) int { return a.Cmp(b) })
		words, err := st.Storage(ctx, tok.Address, tok.Block, slots)
		if err != nil {
			return State{}, fmt.Errorf("trading: storage: %w", err)
		}
		for i, m := range slots {
			var v uint256.Int
			v.SetBytes32(words[i][:])
			r.words[m] = v
		}
		r.rounds++
	}
	s.Slots, s.Rounds = r.words, r.rounds
	return s, nil
}

var (
	selTransfer     = bytecode.Selector{0xa9, 0x05, 0x9c, 0xbb}
	selTransferFrom = bytecode.Selector{0x23, 0xb8, 0x72, 0xdd}
	selApprove      = bytecode.Selector{0x09, 0x5e, 0xa7, 0xb3}
)

// reader runs the probes over the words read so far.
type reader struct {
	e       bytecode.Effects
	tok     Token
	words   map[[32]byte]uint256.Int
	missing map[[32]byte]bool
	rounds  int
}

// overlay is storage as a probe sees it: the chain's words read so far,
// under the words earlier probes left (a buy's) or set (a holding).
type overlay struct {
	r   *reader
	top map[[32]byte]uint256.Int
}

func (o overlay) Load(slot [32]byte) (uint256.Int, bool) {
	if v, ok := o.top[slot]; ok {
		return v, true
	}
	v, ok := o.r.words[slot]
	if !ok {
		o.r.missing[slot] = true
	}
	return v, ok
}

func (o overlay) with(ws []bytecode.SlotWrite) overlay {
	top := make(map[[32]byte]uint256.Int, len(o.top)+len(ws))
	for k, v := range o.top {
		top[k] = v
	}
	for _, w := range ws {
		top[w.Slot] = w.Value
	}
	return overlay{o.r, top}
}

func addrWord(a common.Address) uint256.Int {
	var v uint256.Int
	v.SetBytes20(a[:])
	return v
}

// call evaluates one call and records the slots it lacked.
func (r *reader) call(sel bytecode.Selector, caller, origin common.Address, args []uint256.Int, wait uint64, st overlay) bytecode.Run {
	run := r.e.Evaluate(bytecode.Call{Selector: sel, Caller: caller, Origin: origin, Self: r.tok.Address, Args: args,
		Time: r.tok.Time + wait, Number: r.tok.Block + max(1, wait/blockTime)}, st)
	for _, m := range run.Missing {
		r.missing[m] = true
	}
	return run
}

// lacking: this round's probes asked for words not read yet, so the
// round is read again: the searches (limits, a cooldown) wait for it.
func (r *reader) lacking() bool { return len(r.missing) > 0 }

// element is the slot of m[key] in a mapping at base.
func element(key common.Address, base [32]byte) [32]byte {
	var buf [64]byte
	copy(buf[12:32], key[:])
	copy(buf[32:], base[:])
	return [32]byte(crypto.Keccak256(buf[:]))
}

// credit is what a passing call moved from `from` to `to`, by the first
// balance mapping both entries of which it wrote: (debit, credit), in
// the mapping's units; nil when it wrote none.
func (r *reader) credit(run bytecode.Run, st overlay, from, to common.Address) (debit, credit *big.Int) {
	for _, base := range r.e.Layout.Balances {
		fs, ts := element(from, base), element(to, base)
		var nf, nt *uint256.Int
		for _, w := range run.Writes {
			switch w.Slot {
			case fs:
				nf = &w.Value
			case ts:
				nt = &w.Value
			}
		}
		if nf == nil || nt == nil {
			continue
		}
		of, _ := st.Load(fs)
		ot, _ := st.Load(ts)
		return new(big.Int).Sub(of.ToBig(), nf.ToBig()), new(big.Int).Sub(nt.ToBig(), ot.ToBig())
	}
	return nil, nil
}

// tax is the share of the amount a call kept back, in percent.
func tax(debit, credit *big.Int) *float64 {
	if debit == nil || debit.Sign() <= 0 {
		return nil
	}
	kept, _ := new(big.Rat).SetFrac(new(big.Int).Sub(debit, credit), debit).Float64()
	pct := math.Round(kept*1e8) / 1e6 // percent, to a millionth of a point
	return &pct
}

// probe runs every probe over the words read so far.
func (r *reader) probe() State {
	s := State{Pool: r.tok.Pool, Evaluable: true}
	base := overlay{r: r}
	supply := r.tok.Supply
	position := new(big.Int).Div(supply, big.NewInt(int64(1/PositionShare)))
	if position.Sign() == 0 {
		position = big.NewInt(1)
	}
	base = base.with(r.approval())
	holding := base // the buyer's storage after its buy
	if p := r.tok.Pool; p != nil {
		s.Buy, holding = r.buy(p, position, base)
		s.TradingOpen = opened(s.Buy)
		if s.Buy.Status == bytecode.Passes {
			s.BuyTax = tax(s.Buy.Debit, s.Buy.Credit)
			if t := s.BuyTax; t != nil && *t > 0 && *t < 100 {
				// The buyer holds what it received, in token units.
				kept := new(big.Rat).SetFrac(s.Buy.Credit, s.Buy.Debit)
				kept.Mul(kept, new(big.Rat).SetInt(position))
				position = new(big.Int).Quo(kept.Num(), kept.Denom())
			}
		}
		s.MaxBuy = r.limit(func(a *big.Int) bytecode.Run {
			return r.call(selTransfer, p.Holder, Buyer, []uint256.Int{addrWord(Buyer), u256(a)}, 0, base)
		}, position, supply)
	}
	if s.Buy == nil || s.Buy.Status != bytecode.Passes {
		// No buy to carry: the buyer is given its position as the pool
		// holds its tokens, in every balance mapping.
		holding = r.holding(base, position)
	}
	if p := r.tok.Pool; p != nil {
		s.Sale = r.sale(p, position, holding)
		if s.Sale.Status == bytecode.Passes {
			s.SellTax = tax(s.Sale.Debit, s.Sale.Credit)
			s.Cooldown = &s.Sale.Wait
		} else if s.Sale.Status == bytecode.Reverts && s.Sale.Wait == maxWait {
			s.Locked = true
		}
		rich := r.holding(holding, supply)
		s.MaxSale = r.limit(func(a *big.Int) bytecode.Run {
			return r.call(selTransferFrom, r.tok.Router, Buyer, []uint256.Int{addrWord(Buyer), addrWord(p.Holder), u256(a)}, max(s.Sale.Wait, blockTime), rich)
		}, position, supply)
	}
	s.Transfer = r.transfer(position, holding, s.Cooldown)
	if s.Transfer.Status == bytecode.Passes {
		s.TransferTax = tax(s.Transfer.Debit, s.Transfer.Credit)
	}
	if s.Transfer.Status != bytecode.Unknown {
		paused := s.Transfer.Status == bytecode.Reverts && s.Transfer.Decider != nil && s.Transfer.Decider.Kind == bytecode.GateFlag
		s.TransfersPaused = &paused
	}
	s.MaxWallet = r.wallet(base, position, supply, s.MaxBuy)
	s.Unread = unread(s)
	return s
}

func u256(a *big.Int) uint256.Int {
	v, _ := uint256.FromBig(a)
	return *v
}

// opened: a buy passes (trading is open), or reverts on a switch (it is
// closed); nil otherwise.
func opened(p *Probe) *bool {
	var open bool
	switch {
	case p.Status == bytecode.Passes:
		open = true
	case p.Status == bytecode.Reverts && p.Decider != nil && p.Decider.Kind == bytecode.GateFlag && !p.Decider.Panic:
	default:
		return nil
	}
	return &open
}

// buy reads the pool sending amount to the buyer (a V2 pair's swap, a V3
// pool's, the V4 PoolManager's take: transfer called by the holder), and
// the buyer's storage after it.
func (r *reader) buy(p *Pool, amount *big.Int, st overlay) (*Probe, overlay) {
	run := r.call(selTransfer, p.Holder, Buyer, []uint256.Int{addrWord(Buyer), u256(amount)}, 0, st)
	pr := &Probe{Call: "buy", Status: run.Status, Amount: amount, Decider: run.Decider, Assumes: run.Assumes}
	if run.Status != bytecode.Passes {
		return pr, st
	}
	pr.Debit, pr.Credit = r.credit(run, st, p.Holder, Buyer)
	return pr, st.with(run.Writes)
}

// approval is the buyer's allowance to the router, unlimited: the
// mapping of mappings approve(address,uint256) writes, at the buyer and
// the router (solc's layout: allowance[owner][spender]).
func (r *reader) approval() []bytecode.SlotWrite {
	for _, f := range r.e.Functions {
		if f.Selector != selApprove || f.Fallback {
			continue
		}
		for _, w := range f.Writes {
			if w.Target.Kind == bytecode.TargetMapping && w.Target.Nested {
				var all uint256.Int
				all.SetAllOne()
				return []bytecode.SlotWrite{{Slot: element(r.tok.Router, element(Buyer, w.Target.Slot)), Value: all}}
			}
		}
	}
	return nil
}

// holding is st with the buyer holding amount: with one balance mapping,
// its entry set to amount; a reflection token's entries (not in token
// units) mirror the pool's (or the token's own) holding, at least the
// position in any token of fair supply.
func (r *reader) holding(st overlay, amount *big.Int) overlay {
	bs := r.e.Layout.Balances
	if len(bs) == 1 {
		return st.with([]bytecode.SlotWrite{{Slot: element(Buyer, bs[0]), Value: u256(amount)}})
	}
	model := r.tok.Address
	if r.tok.Pool != nil {
		model = r.tok.Pool.Holder
	}
	var ws []bytecode.SlotWrite
	for _, b := range bs {
		v, ok := st.Load(element(model, b))
		if !ok {
			return st
		}
		ws = append(ws, bytecode.SlotWrite{Slot: element(Buyer, b), Value: v})
	}
	return st.with(ws)
}

func slotWrites(m map[[32]byte]uint256.Int) []bytecode.SlotWrite {
	out := make([]bytecode.SlotWrite, 0, len(m))
	for k, v := range m {
		out = append(out, bytecode.SlotWrite{Slot: k, Value: v})
	}
	return out
}

// sale reads the buyer selling amount to the pool through a router
// (transferFrom by the router, as every DEX router and aggregator pays a
// pool), one block after its buy; when that reverts on a wait, the
// shortest wait after which it passes.
func (r *reader) sale(p *Pool, amount *big.Int, st overlay) *Probe {
	at := func(wait uint64) bytecode.Run {
		return r.call(selTransferFrom, r.tok.Router, Buyer, []uint256.Int{addrWord(Buyer), addrWord(p.Holder), u256(amount)}, wait, st)
	}
	wait := uint64(blockTime)
	run := at(wait)
	waited := false
	if run.Status == bytecode.Reverts && run.Decider != nil && run.Decider.Kind == bytecode.GateCooldown && !r.lacking() {
		// Doubling the wait to the first that passes, then halving the
		// gap to the second: a short cooldown costs a few calls.
		lo, hi := wait, 2*wait // at(lo) reverts, at(hi) passes
		for ; hi < maxWait && at(hi).Status != bytecode.Passes; lo, hi = hi, 2*hi {
		}
		if hi >= maxWait {
			if at(maxWait).Status != bytecode.Passes {
				return &Probe{Call: "sale", Status: run.Status, Amount: amount, Decider: run.Decider, Wait: maxWait}
			}
			hi = maxWait
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if at(mid).Status == bytecode.Passes {
				hi = mid
			} else {
				lo = mid
			}
		}
		wait, run, waited = hi, at(hi), true
	}
	pr := &Probe{Call: "sale", Status: run.Status, Amount: amount, Decider: run.Decider, Wait: wait, Assumes: run.Assumes}
	if run.Status == bytecode.Passes {
		if !waited {
			pr.Wait = 0 // it passes in the next block
		}
		pr.Debit, pr.Credit = r.credit(run, st, Buyer, p.Holder)
	}
	return pr
}

// transfer reads the buyer moving half its position to a fresh account,
// after any wait a sale needs.
func (r *reader) transfer(position *big.Int, st overlay, wait *uint64) *Probe {
	w := uint64(blockTime)
	if wait != nil {
		w = max(w, *wait)
	}
	amount := new(big.Int).Rsh(position, 1)
	if amount.Sign() == 0 {
		amount = position
	}
	run := r.call(selTransfer, Buyer, Buyer, []uint256.Int{addrWord(Recipient), u256(amount)}, w, st)
	pr := &Probe{Call: "transfer", Status: run.Status, Amount: amount, Decider: run.Decider, Wait: w, Assumes: run.Assumes}
	if run.Status == bytecode.Passes {
		pr.Debit, pr.Credit = r.credit(run, st, Buyer, Recipient)
	}
	return pr
}

// limit finds the largest amount at which do passes, from `from` (which
// should pass) doubling up to the supply, then halving the gap: a limit
// when the first amount refused is refused on a limit (not the sender's
// balance running out).
func (r *reader) limit(do func(*big.Int) bytecode.Run, from, supply *big.Int) Limit {
	if r.lacking() {
		return Limit{} // read again once the words are in
	}
	share := func(a *big.Int) float64 {
		f, _ := new(big.Rat).SetFrac(a, supply).Float64()
		return f
	}
	if do(from).Status != bytecode.Passes {
		// Below the position: the limit is somewhere under it.
		lo, hi := big.NewInt(0), new(big.Int).Set(from)
		return r.narrow(do, lo, hi, share)
	}
	lo := new(big.Int).Set(from)
	for {
		hi := new(big.Int).Lsh(lo, 1)
		if hi.Cmp(supply) > 0 {
			hi.Set(supply)
		}
		if hi.Cmp(lo) <= 0 {
			return Limit{Known: true, Probed: share(lo)}
		}
		run := do(hi)
		switch run.Status {
		case bytecode.Passes:
			lo = hi
			continue
		case bytecode.Unknown:
			return Limit{Probed: share(lo)}
		}
		if !limiting(run.Decider, r.e.Layout.Balances) {
			return Limit{Known: true, Probed: share(lo)} // the sender's balance ran out, or a panic
		}
		return r.narrow(do, lo, hi, share)
	}
}

// narrow halves the gap between lo (passes, or zero) and hi (refused) to
// the largest amount that passes.
func (r *reader) narrow(do func(*big.Int) bytecode.Run, lo, hi *big.Int, share func(*big.Int) float64) Limit {
	refused := do(hi)
	if refused.Status != bytecode.Reverts || !limiting(refused.Decider, r.e.Layout.Balances) {
		return Limit{} // refused for another reason (a switch, a list): no limit can be read
	}
	// The limit is most often the very word the refusal read: tried
	// first, it is exact in two calls.
	one := big.NewInt(1)
	for _, rd := range refused.Decider.Reads {
		v := field(rd.Value, rd.Offset).ToBig()
		if rd.Known && v.Cmp(lo) >= 0 && v.Cmp(hi) < 0 && do(v).Status == bytecode.Passes && do(new(big.Int).Add(v, one)).Status == bytecode.Reverts {
			return Limit{Known: true, Bound: true, Amount: v, Share: share(v), Probed: share(hi), Decider: refused.Decider}
		}
	}
	// Otherwise halving the gap, to a millionth of the amount.
	step := new(big.Int).Div(hi, big.NewInt(precision))
	if step.Sign() == 0 {
		step = one
	}
	for new(big.Int).Sub(hi, lo).Cmp(step) > 0 {
		mid := new(big.Int).Add(lo, hi)
		mid.Rsh(mid, 1)
		switch do(mid).Status {
		case bytecode.Passes:
			lo = mid
		case bytecode.Reverts:
			hi = mid
		default:
			return Limit{Probed: share(lo)}
		}
	}
	return Limit{Known: true, Bound: true, Amount: lo, Share: share(lo), Probed: share(hi), Decider: refused.Decider}
}

// precision is how closely a limit found by halving is read: to a
// millionth of it.
const precision = 1_000_000

// limiting: a revert decided by a limit on the amount, not by the
// sender's balance (a read of the balance mappings only) nor a panic.
func limiting(d *bytecode.Decider, balances [][32]byte) bool {
	if d == nil || d.Panic || d.Kind != bytecode.GateLimit {
		return false
	}
	for _, rd := range d.Reads {
		switch {
		case rd.Target.Kind == bytecode.TargetMapping && rd.Target.Nested:
			// an allowance
		case rd.Target.Kind != bytecode.TargetMapping || !slices.Contains(balances, rd.Target.Slot):
			return true
		}
	}
	return false
}

// wallet finds the largest balance a buyer may hold: a buy of one unit
// of the position by a buyer already holding an amount, for a token with
// one balance mapping (a reflection's balances are not in token units).
func (r *reader) wallet(st overlay, position, supply *big.Int, maxBuy Limit) Limit {
	p := r.tok.Pool
	if p == nil || len(r.e.Layout.Balances) != 1 {
		return Limit{}
	}
	one := new(big.Int).Div(position, big.NewInt(1000))
	if maxBuy.Bound && maxBuy.Amount.Cmp(one) < 0 {
		one = maxBuy.Amount
	}
	if one.Sign() == 0 {
		one = big.NewInt(1)
	}
	b := r.e.Layout.Balances[0]
	return r.limit(func(held *big.Int) bytecode.Run {
		top := st.with([]bytecode.SlotWrite{{Slot: element(Buyer, b), Value: u256(held)}})
		return r.call(selTransfer, p.Holder, Buyer, []uint256.Int{addrWord(Buyer), u256(one)}, 0, top)
	}, position, supply)
}

// unread lists what the probes could not read, and why.
func unread(s State) []string {
	var out []string
	if s.Pool == nil {
		out = append(out, "no followed pool of the token: no buy or sale was read")
	}
	for _, p := range []*Probe{s.Buy, s.Sale, s.Transfer} {
		switch {
		case p == nil:
		case p.Status == bytecode.Unknown:
			out = append(out, "the "+p.Call+" depends on what the analysis cannot know now (a call's result, a code size, a word past the reads)")
		case p.Assumes:
			out = append(out, "the "+p.Call+" is read as passing the checks it makes outside the token's storage (the calls it makes succeed, an ether balance suffices); a path where they fail reverts")
		}
	}
	return out
}

// How says how a probe's call was read, for evidence.
func (p *Probe) How(s State) string {
	holder := "the pool"
	if s.Pool != nil {
		holder = "the pool's holder " + s.Pool.Holder.Hex()
	}
	switch p.Call {
	case "buy":
		return fmt.Sprintf("transfer(buyer, %s) called by %s", p.Amount, holder)
	case "sale":
		return fmt.Sprintf("transferFrom(buyer, %s, %s) called by a router, %d s after the buy", strings.TrimPrefix(holder, "the pool's holder "), p.Amount, max(p.Wait, blockTime))
	}
	return fmt.Sprintf("transfer(a fresh account, %s) called by the buyer, %d s after the buy", p.Amount, p.Wait)
}

// Reason says why a probe's call reverted: the deciding condition and the
// storage it read now.
func (p *Probe) Reason() string {
	d := p.Decider
	if p.Status != bytecode.Reverts || d == nil {
		return ""
	}
	what := map[bytecode.GateKind]string{
		bytecode.GateList:     "an entry of a list keyed by an address",
		bytecode.GateFlag:     "a switch",
		bytecode.GateLimit:    "a limit on the amount or a balance",
		bytecode.GateCooldown: "the time",
	}[d.Kind]
	if what == "" {
		what = "a condition"
	}
	if d.Panic {
		what = "an arithmetic check (a Panic)"
	}
	var reads []string
	for _, r := range d.Reads {
		v := "not read"
		if r.Known {
			v = field(r.Value, r.Offset).Dec()
			if r.Value.BitLen() > 64 {
				v = "0x" + field(r.Value, r.Offset).Hex()[2:]
			}
		}
		reads = append(reads, fmt.Sprintf("%s = %s", TargetText(r.Target, r.Slot), v))
	}
	out := fmt.Sprintf("reverts at pc %d on %s", d.PC, what)
	if len(reads) > 0 {
		out += ", reading " + strings.Join(reads, ", ")
	}
	return out
}

// field is the word shifted down to a packed field's offset.
func field(w uint256.Int, offset uint) *uint256.Int {
	return new(uint256.Int).Rsh(&w, offset)
}

// TargetText names storage for evidence: the target's own words, and for
// a mapping's element its slot.
func TargetText(t bytecode.Target, slot [32]byte) string {
	switch t.Kind {
	case bytecode.TargetMapping:
		return fmt.Sprintf("the element 0x%x of %s", slot[:], t)
	case bytecode.TargetComputed:
		return fmt.Sprintf("slot 0x%x (computed)", slot[:])
	}
	return t.String()
}
