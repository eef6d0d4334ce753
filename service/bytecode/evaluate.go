package bytecode

import (
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

// What a concrete call of transfer or transferFrom does, read from the
// paths the analysis kept whole for them (package documentation,
// "Concrete calls"): each path's conditions are evaluated with the call's
// inputs and the storage words the caller supplies, and the path whose
// conditions all hold is the one the call takes. No code is run: the
// paths are the analysis's, the words are the chain's.

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

// Evaluable reports whether the analysis kept sel's paths whole, every
// one of them, so that a concrete call of it can be evaluated.
func (e Effects) Evaluable(sel Selector) bool {
	p := e.calls[sel]
	return p != nil && p.complete
}

// keptPaths are the whole paths of one function.
type keptPaths struct {
	ends     []pathEnd
	complete bool
}

// Evaluate reads what call c does with storage st.
func (e Effects) Evaluate(c Call, st Storage) Run {
	kp := e.calls[c.Selector]
	if kp == nil {
		return Run{}
	}
	ev := &evaluator{call: c, st: st, memo: map[*term]word{}, missing: map[[32]byte]bool{}}
	ev.calldata = append(ev.calldata, c.Selector[:]...)
	for _, a := range c.Args {
		b := a.Bytes32()
		ev.calldata = append(ev.calldata, b[:]...)
	}
	var possible []*pathEnd
	for i := range kp.ends {
		p := &kp.ends[i]
		may, certain := ev.possible(p)
		if certain {
			return ev.result(p)
		}
		if may {
			possible = append(possible, p)
		}
	}
	run := Run{}
	if len(possible) > 0 {
		first := ev.result(possible[0])
		agree := true
		for _, p := range possible[1:] {
			r := ev.result(p)
			agree = agree && r.Status == first.Status && sameWrites(r.Writes, first.Writes)
			if r.Status != first.Status {
				first.Status = Unknown
			}
		}
		run = first
		if !agree {
			run.Writes = nil
		}
	}
	for s := range ev.missing {
		run.Missing = append(run.Missing, s)
	}
	if run.Status == Unknown {
		run.Writes, run.Decider = nil, nil
	}
	return run
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

// possible: no condition of p is known false; certain: every one is
// known true.
func (ev *evaluator) possible(p *pathEnd) (may, certain bool) {
	certain = true
	for _, c := range p.conds {
		v, ok := ev.eval(c.raw)
		if !ok {
			certain = false
			continue
		}
		if v.IsZero() == c.jumped {
			return false, false
		}
	}
	return true, certain
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
	for i := len(p.conds) - 1; i >= 0; i-- {
		c := p.conds[i]
		if exemption(c.base) {
			continue
		}
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
		break
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
