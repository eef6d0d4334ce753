package bytecode

import (
	"bytes"
	"slices"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

// What a concrete call of transfer or transferFrom does (package
// documentation, "Concrete calls"): the path explorer of the effects
// analysis follows the call with its inputs and the storage words the
// caller supplies as known values, so that the branches they decide go
// one way. Nothing is sent to a node: the code is the token's, the words
// the chain's.

// Call is one concrete call: its function, its inputs and the block it
// would run in.
type Call struct {
	Selector             Selector
	Caller, Origin, Self [20]byte
	// Args are the call's arguments, one ABI word each, in order.
	Args         []uint256.Int
	Time, Number uint64
}

// Storage answers the storage reads of an evaluation.
type Storage interface {
	// Load returns the word at slot, or false when it is not known.
	Load(slot [32]byte) (uint256.Int, bool)
}

// Status is what a call does.
type Status uint8

// Statuses.
const (
	// Unknown: a word the evaluation needed is missing (Run.Missing), an
	// input the analysis cannot know decides (a call's result, a code
	// size), or no analysed path covers the call.
	Unknown Status = iota
	// Passes: the call succeeds.
	Passes
	// Reverts: the call reverts (Run.Decider says why).
	Reverts
)

func (s Status) String() string { return [...]string{"unknown", "passes", "reverts"}[s] }

// Run is what a call does.
type Run struct {
	Status Status
	// Writes are, when it passes and every path it may take agrees, the
	// words it leaves in storage, the last write of each slot.
	Writes []SlotWrite
	// Decider is, when it reverts, the condition that sent it there.
	Decider *Decider
	// Missing are the slots whose words it needed and Storage lacked.
	Missing [][32]byte
	// Assumes: some path reverts only on what the token's storage does
	// not hold (an external call's result, an ether balance); the result
	// takes those to let it pass.
	Assumes bool
}

// SlotWrite is a word a call leaves in storage.
type SlotWrite struct {
	Slot  [32]byte
	Value uint256.Int
	// Target is the kind of storage written (a balance is a mapping).
	Target Target
}

// Decider is the condition of a revert: the last one the path took that
// is no exemption (gatesOf), what it compares, and the fields it read.
type Decider struct {
	Kind GateKind
	// Panic: an arithmetic check or assertion, not an Error.
	Panic bool
	PC    int
	Reads []SlotRead
}

// SlotRead is a storage field a condition read, with its word now.
type SlotRead struct {
	Target Target
	Slot   [32]byte
	Offset uint
	Value  uint256.Int
	Known  bool
}

// Evaluable reports whether the code has function sel, so that a
// concrete call of it can be followed.
func (e Effects) Evaluable(sel Selector) bool {
	return e.prog != nil && slices.Contains(e.prog.selectors, sel)
}

// maxCallSteps bounds one concrete call: with its storage read, a call
// is one path of a few thousand instructions (loops turning as often as
// the storage says); before, each word not read yet is a fork, and the
// bound ends the exploration once it has named enough of them (Missing)
// for the next read.
const maxCallSteps = 30_000

// program is what Evaluate needs of the code to follow a call.
type program struct {
	code      []byte
	end       int
	dests     []bool
	noJoins   []bool // all false, shared read-only by every call
	selectors []Selector
}

// Evaluate follows call c through the code with storage st: every branch
// whose condition the call's inputs and the storage words decide goes
// the one way it would; one they do not decide (a word st lacks, a call's
// result, a code size) is followed both ways. The call passes or reverts
// when every path it may take agrees; an external call's failure is not
// taken for the call's (Run.Assumes).
func (e Effects) Evaluate(c Call, st Storage) Run {
	if !e.Evaluable(c.Selector) {
		return Run{}
	}
	ev := &evaluator{call: c, st: st, memo: map[*term]word{}, missing: map[[32]byte]bool{}}
	ev.calldata = append(ev.calldata, c.Selector[:]...)
	for _, a := range c.Args {
		b := a.Bytes32()
		ev.calldata = append(ev.calldata, b[:]...)
	}
	p := e.prog
	follow := func(steps int) *explorer {
		x := newExplorer(p.code, p.end, p.dests, c.Selector, uint64(len(ev.calldata)))
		// No join points: a concrete call's paths are few, and the memo
		// would only cost.
		x.joins, x.consts, x.full, x.env, x.maxSteps = p.noJoins, make([]*term, len(p.code)), true, ev, steps
		x.run()
		return x
	}
	x := follow(maxCallSteps)
	if x.incomplete && len(ev.missing) == 0 {
		x = follow(maxPathSteps) // a long path with every word known: loops that turn many times
	}
	run := Run{}
	if !x.incomplete && len(x.ends) > 0 {
		run = ev.agree(x.ends)
	}
	for s := range ev.missing {
		run.Missing = append(run.Missing, s)
	}
	slices.SortFunc(run.Missing, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	if run.Status == Unknown {
		run.Writes, run.Decider = nil, nil
	}
	return run
}

// agree is what the paths a call may take say together: their status
// when they all agree (with the writes, when those agree too), else
// unknown; reverts decided by an external call's result are set aside
// when another path passes (Run.Assumes).
func (ev *evaluator) agree(ends []pathEnd) Run {
	results := make([]Run, len(ends))
	passes := false
	for i := range ends {
		results[i] = ev.result(&ends[i])
		passes = passes || results[i].Status == Passes
	}
	assumed := false
	if passes {
		kept := results[:0]
		for i, r := range results {
			if r.Status == Reverts && onCall(&ends[i]) {
				assumed = true
				continue
			}
			kept = append(kept, r)
		}
		results = kept
	}
	run := results[0]
	for _, r := range results[1:] {
		if r.Status != run.Status {
			return Run{}
		}
		if !sameWrites(r.Writes, run.Writes) {
			run.Writes = nil
		}
	}
	run.Assumes = assumed
	return run
}

// onCall: the path reverted on a condition no input decided that reads
// what the analysis cannot know of the world outside the token's storage:
// an external call's result, an account's ether balance or code size,
// memory a call wrote.
func onCall(p *pathEnd) bool {
	// Only a condition after the last one the inputs decided can have
	// decided the revert.
	for i := len(p.conds) - 1; i >= p.deciderAt; i-- {
		c := p.conds[i]
		if exemption(c.base) {
			continue
		}
		return contains(c.raw, func(t *term) bool {
			switch {
			case t.op == tFresh, t.op == tWide:
				return true
			case t.op != tOp:
				return false
			}
			switch t.code {
			case opMLOAD, 0x31, 0x3b, 0x3f, 0x47: // BALANCE, EXTCODESIZE, EXTCODEHASH, SELFBALANCE
				return true
			}
			return false
		})
	}
	return false
}

func sameWrites(a, b []SlotWrite) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Slot != b[i].Slot || !a[i].Value.Eq(&b[i].Value) {
			return false
		}
	}
	return true
}

type word struct {
	v  uint256.Int
	ok bool
}

type evaluator struct {
	call     Call
	calldata []byte
	st       Storage
	memo     map[*term]word
	missing  map[[32]byte]bool
}

// result is what path p does with the call's inputs.
func (ev *evaluator) result(p *pathEnd) Run {
	if p.ok {
		r := Run{Status: Passes}
		at := map[[32]byte]int{}
		for _, w := range p.writes {
			slot, ok := ev.eval(w.slot)
			if !ok {
				continue
			}
			v, ok := ev.eval(w.val)
			key := slot.Bytes32()
			if !ok {
				continue // a word it writes is not known: left out
			}
			sw := SlotWrite{Slot: key, Value: v, Target: target(w.slot)}
			if i, seen := at[key]; seen {
				r.Writes[i] = sw
				continue
			}
			at[key] = len(r.Writes)
			r.Writes = append(r.Writes, sw)
		}
		return r
	}
	d := &Decider{Panic: p.panic}
	// The last condition that is no exemption: taken undecided after the
	// last one the inputs decided, or that one.
	last := p.decider
	for i := len(p.conds) - 1; i >= p.deciderAt; i-- {
		if !exemption(p.conds[i].base) {
			last = &p.conds[i]
			break
		}
	}
	if c := last; c != nil {
		d.Kind, d.PC = gateKind(c.base), c.pc
		for _, f := range directReads(c.base) {
			r := SlotRead{Target: target(f.slot), Offset: f.offset}
			r.Target.Offset = f.offset
			if s, ok := ev.eval(f.slot); ok {
				r.Slot = s.Bytes32()
				r.Value, r.Known = ev.st.Load(r.Slot)
			}
			if r.Target.Kind == TargetMapping && d.Kind == GateFlag {
				d.Kind = GateList
			}
			d.Reads = append(d.Reads, r)
		}
	}
	return Run{Status: Reverts, Decider: d}
}

// eval is t's value for the call, when its inputs and storage are known.
func (ev *evaluator) eval(t *term) (uint256.Int, bool) {
	if w, ok := ev.memo[t]; ok {
		return w.v, w.ok
	}
	var v uint256.Int
	ok := true
	switch t.op {
	case tConst:
		v = t.k
	case tCaller:
		v.SetBytes20(ev.call.Caller[:])
	case tOrigin:
		v.SetBytes20(ev.call.Origin[:])
	case tSelf:
		v.SetBytes20(ev.call.Self[:])
	case tValue:
		// transfer and transferFrom are called with no ether
	case tTime:
		v.SetUint64(ev.call.Time)
	case tNumber:
		v.SetUint64(ev.call.Number)
	case tCalldata:
		v, ok = ev.calldataWord(&t.k)
	case tSload:
		var slot uint256.Int
		if slot, ok = ev.eval(t.args[0]); ok {
			key := slot.Bytes32()
			if v, ok = ev.st.Load(key); !ok {
				ev.missing[key] = true
			}
		}
	case tSha3:
		buf := make([]byte, 0, 32*len(t.args))
		for _, a := range t.args {
			w, known := ev.eval(a)
			if !known {
				ok = false
				break
			}
			b := w.Bytes32()
			buf = append(buf, b[:]...)
		}
		if ok {
			v.SetBytes(crypto.Keccak256(buf))
		}
	case tOp:
		v, ok = ev.op(t)
	default:
		ok = false // a call's result, the gas, …
	}
	ev.memo[t] = word{v, ok}
	return v, ok
}

// op evaluates an opcode term: folded when its arguments are known, or
// decided by one (a product with zero, a mask of zero).
func (ev *evaluator) op(t *term) (uint256.Int, bool) {
	if t.code == opCALLDATALOAD {
		off, ok := ev.eval(t.args[0])
		if !ok {
			return off, false
		}
		return ev.calldataWord(&off)
	}
	if t.code > 0x1d {
		return uint256.Int{}, false // MLOAD of memory not tracked, BALANCE, EXTCODESIZE, …
	}
	args := make([]*term, len(t.args))
	known := true
	for i, a := range t.args {
		v, ok := ev.eval(a)
		if !ok {
			known = false
			if (t.code == 0x02 || t.code == opAND) && len(t.args) == 2 {
				if o, ok := ev.eval(t.args[1-i]); ok && o.IsZero() {
					return uint256.Int{}, true
				}
			}
			continue
		}
		args[i] = constTerm(&v)
	}
	if !known {
		return uint256.Int{}, false
	}
	v, ok := fold(t.code, args)
	if !ok {
		return uint256.Int{}, false
	}
	return *v, true
}

// calldataWord is the 32 bytes of the call's data at off, zero past its
// end, as CALLDATALOAD reads them.
func (ev *evaluator) calldataWord(off *uint256.Int) (uint256.Int, bool) {
	var b [32]byte
	if off.IsUint64() && off.Uint64() < uint64(len(ev.calldata)) {
		copy(b[:], ev.calldata[off.Uint64():])
	}
	var v uint256.Int
	v.SetBytes32(b[:])
	return v, true
}
