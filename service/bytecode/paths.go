package bytecode

import (
	"github.com/holiman/uint256"
)

// The path explorer of the effects analysis: one call of the contract,
// with a given selector and symbolic arguments, followed down every path
// its branches allow (both sides of a JUMPI whose condition is not
// decided by constants or by a condition the path already took), with
// memory at constant offsets and the path's own storage writes tracked.
// No transaction is simulated: storage the path did not write is a
// symbol, SLOAD(slot).

// Work bounds of one exploration: past them it stops and is incomplete.
const (
	maxPathEnds   = 20_000  // completed, reverted or cut paths
	maxPathSteps  = 250_000 // instructions over all paths of one call
	loopBound     = 2       // forks at one JUMPI on one path
	maxSha3Words  = 8
	maxReturnWord = 4
	// maxCodeSteps bounds the whole analysis of one code: past it, the
	// functions left are not followed (incomplete).
	maxCodeSteps = 2_000_000
)

// pathEnd is a finished path: how it ended and what it did.
type pathEnd struct {
	ok           bool // STOP, RETURN or SELFDESTRUCT; false: REVERT, INVALID
	selfdestruct bool
	// panic: a failed assertion or arithmetic check (INVALID, or a
	// REVERT of 0x24 bytes at 0: Panic(uint256) since solc 0.8).
	panic bool
	// closed: a revert whose conds hold its deciding condition; what came
	// before it is left out.
	closed bool
	ret    []*term // RETURN's words, when at constant offsets
	conds  []cond
	writes []write
	calls  []callSite
	// decider is, for a concrete call, the last condition its inputs
	// decided that is no exemption, taken after conds[:deciderAt].
	decider   *cond
	deciderAt int
}

// cond is a branch a path took: base (stripped of ISZEROs and masks)
// was truth.
type cond struct {
	base  *term
	truth bool
	pc    int
	// frame hashes the call context the branch was taken in (the stack's
	// height and the return addresses on it): a loop turns in one
	// frame, a shared internal function is entered from many.
	frame uint64
	// raw is the JUMPI's condition as it was, masks kept (a packed
	// switch's bit is not its whole word), and jumped whether it was
	// non-zero: what a concrete call is evaluated on (evaluate.go).
	raw    *term
	jumped bool
	// decided: a concrete call's inputs and storage decided it (only a
	// path's decider is one).
	decided bool
}

type write struct {
	slot, val *term
	pc        int
}

// callSite is a CALL, STATICCALL, DELEGATECALL or CALLCODE on a path.
type callSite struct {
	op            byte
	target, value *term
	pc            int
}

type memWord struct {
	off uint64
	val *term
}

type pathState struct {
	pc     int
	stack  []*term
	mem    []memWord
	writes []write
	conds  []cond
	calls  []callSite
	end    *pathEnd // how the path ended, once pc is −1
	// decider and deciderAt: for a concrete call, the last condition its
	// inputs decided that is no exemption, and how many conditions the
	// path held then. Decided conditions are not kept in conds: a
	// concrete call takes hundreds, and only the last one is read.
	decider   *cond
	deciderAt int
}

func (s *pathState) fork() *pathState {
	return &pathState{pc: s.pc, stack: append([]*term(nil), s.stack...), mem: append([]memWord(nil), s.mem...),
		writes: append([]write(nil), s.writes...), conds: append([]cond(nil), s.conds...), calls: append([]callSite(nil), s.calls...),
		decider: s.decider, deciderAt: s.deciderAt}
}

// explorer runs the paths of one call.
type explorer struct {
	code     []byte
	end      int // the code region: instructions at or past it are not run
	dests    []bool
	joins    []bool
	consts   []*term      // the PUSH at each pc, made once for every path
	selector *uint256.Int // calldataload(0), the selector in its top bytes
	cdsize   uint64
	steps    int
	ends     []pathEnd
	memo     map[uint64][]memoEntry
	arrivals map[int]uint8 // join points reached, for the memo
	frames   []*memoFrame
	// incomplete: a bound was reached, or a jump went somewhere the
	// analysis cannot follow (a computed target).
	incomplete bool
	// full keeps every condition and write of every path (the paths a
	// concrete call is evaluated on, evaluate.go); otherwise outcomes keep
	// only what the summaries read (rebase).
	full bool
	// widen forgets, at a join point reached more than widenAfter times,
	// the values on the stack and in memory other than return addresses:
	// the paths of pure computation (a square root's branches, a binary
	// search) then meet in one state. A second try for a function whose
	// exact exploration passed its bounds (AnalyzeEffects).
	widen  bool
	visits map[int]int
	// cutByJump: a path jumped to a computed target.
	cutByJump bool
	// maxSteps bounds the instructions run over all paths (maxPathSteps,
	// or maxCallSteps for a concrete call).
	maxSteps int
	// env, for a concrete call (evaluate.go), decides every branch whose
	// condition its inputs and storage words decide, and resolves a read
	// of a slot the path wrote by the slot's value, not its term.
	env *evaluator
}

// widenAfter is how many arrivals at one join point a widening explorer
// keeps exact.
const widenAfter = 4

// joinPoints marks the JUMPDESTs that paths can reach in more than one
// way (pushed as a jump target more than once, or pushed and fallen
// into): the only block starts where the memo can find an earlier path.
func joinPoints(code []byte, dests []bool) []bool {
	refs := make([]uint8, len(code))
	prev := byte(opJUMP)
	for pc := 0; pc < len(code); pc += 1 + pushSize(code[pc]) {
		op := code[pc]
		if op == opJUMPDEST && refs[pc] < 2 {
			switch prev {
			case opJUMP, opSTOP, opRETURN, opREVERT, opINVALID, opSELFDESTRUCT:
			default:
				refs[pc]++ // fallen into
			}
		}
		if n := pushSize(op); n > 0 && n <= 4 {
			v := 0
			for _, b := range code[pc+1 : min(pc+1+n, len(code))] {
				v = v<<8 | int(b)
			}
			if v < len(code) && dests[v] && refs[v] < 2 {
				refs[v]++
			}
		}
		prev = op
	}
	joins := make([]bool, len(code))
	for pc, n := range refs {
		joins[pc] = n >= 2
	}
	return joins
}

func newExplorer(code []byte, end int, dests []bool, sel Selector, cdsize uint64) *explorer {
	word := new(uint256.Int).Lsh(uint256.NewInt(uint64(sel[0])<<24|uint64(sel[1])<<16|uint64(sel[2])<<8|uint64(sel[3])), 224)
	return &explorer{code: code, end: end, dests: dests, selector: word, cdsize: cdsize, maxSteps: maxPathSteps}
}

// freshAt is the unknown value the instruction at pc makes (a call's
// result, GAS): the same term on every path, so that paths meeting again
// look alike to the memo.
func (x *explorer) freshAt(pc int) *term {
	return newTerm(tFresh, 0, uint256.NewInt(uint64(pc)))
}

// run explores every path from pc 0; x.ends are its distinct outcomes.
func (x *explorer) run() {
	x.memo, x.arrivals = map[uint64][]memoEntry{}, map[int]uint8{}
	for _, o := range dedupe(x.explore(&pathState{}, false)) {
		x.ends = append(x.ends, pathEnd{ok: o.ok, selfdestruct: o.selfdestruct, panic: o.panic, closed: o.closed, ret: o.ret,
			conds: o.conds.flat(), writes: o.writes.flat(), calls: o.calls.flat(), decider: o.decider, deciderAt: o.deciderAt})
	}
}

// outcome is how a path ends, relative to some point of it: what it did
// after that point, in persistent lists that outcomes found after a
// common point share.
type outcome struct {
	ok, selfdestruct, panic, closed bool
	ret                             []*term
	conds                           *chain[cond]
	writes                          *chain[write]
	calls                           *chain[callSite]
	decider                         *cond // a concrete call's (pathEnd)
	deciderAt                       int
}

// chain is a persistent list: items, then next's.
type chain[T any] struct {
	items []T
	next  *chain[T]
	hash  uint64
}

// link puts items before next; h hashes an item.
func link[T any](items []T, next *chain[T], h func(T) uint64) *chain[T] {
	if len(items) == 0 {
		return next
	}
	// Folded from the end: a sequence hashes the same however it is cut.
	c := &chain[T]{items: items, next: next, hash: next.sum()}
	for i := len(items) - 1; i >= 0; i-- {
		c.hash = mix(c.hash, h(items[i]))
	}
	return c
}

func (c *chain[T]) sum() uint64 {
	if c == nil {
		return 0
	}
	return c.hash
}

func (c *chain[T]) flat() []T {
	var out []T
	for ; c != nil; c = c.next {
		out = append(out, c.items...)
	}
	return out
}

func condHash(c cond) uint64 {
	if c.truth {
		return mix(c.base.hash, 1)
	}
	return c.base.hash
}

func writeHash(w write) uint64 { return mix(w.slot.hash, w.val.hash) }

func callHash(c callSite) uint64 { return mix(uint64(c.op), c.target.hash) }

// segment is what a path did since some point: the prefix an outcome
// found after that point is rebased on.
type segment struct {
	conds  []cond
	writes []write
	calls  []callSite
}

type mark struct{ conds, writes, calls int }

func (s *pathState) mark() mark { return mark{len(s.conds), len(s.writes), len(s.calls)} }

func (s *pathState) since(m mark) segment {
	return segment{s.conds[m.conds:len(s.conds):len(s.conds)], s.writes[m.writes:len(s.writes):len(s.writes)],
		s.calls[m.calls:len(s.calls):len(s.calls)]}
}

// explore runs s to the ends of its paths and returns their outcomes,
// relative to s as it is on entry (what the paths did after it). At each
// block start it asks the memo: a block reached again in the same state
// (stack, memory, storage written) under conditions that agree on every
// earlier condition its paths consulted has the same outcomes.
func (x *explorer) explore(s *pathState, skipMemo bool) []outcome {
	start := s.mark()
	var outs []outcome
	for {
		if x.steps >= x.maxSteps || len(outs) > maxPathEnds {
			x.incomplete = true
			return outs
		}
		taken, memo := x.step(s, skipMemo)
		skipMemo = false
		if taken != nil {
			seg := taken.since(start)
			sub := x.explore(taken, false)
			x.steps += len(sub) // rebasing outcomes is work too
			outs = x.rebase(outs, seg, sub)
		}
		switch {
		case memo && x.arrivals[s.pc] == 0:
			// The first path here: nothing to find in the memo, and most
			// block starts see only one.
			x.arrivals[s.pc]++
			skipMemo = true
		case memo:
			if x.widen {
				if x.visits[s.pc]++; x.visits[s.pc] > widenAfter {
					x.forgetValues(s)
				}
			}
			seg := s.since(start)
			sub := x.memoized(s)
			x.steps += len(sub)
			return x.rebase(outs, seg, sub)
		case s.pc < 0:
			if s.end != nil {
				e := s.end
				outs = x.rebase(outs, s.since(start), []outcome{{ok: e.ok, selfdestruct: e.selfdestruct, panic: e.panic, ret: e.ret,
					decider: s.decider, deciderAt: s.deciderAt}})
			}
			return outs
		}
	}
}

// forgetValues replaces every value on s's stack but a return address
// (a constant naming a JUMPDEST), every memory word and every value the
// path wrote to storage, by an unknown of its own place: paths reaching
// pc this way meet in one state.
func (x *explorer) forgetValues(s *pathState) {
	for i, t := range s.stack {
		if t.op == tConst && t.k.IsUint64() && t.k.Uint64() < uint64(len(x.dests)) && x.dests[t.k.Uint64()] {
			continue
		}
		s.stack[i] = newTerm(tWide, 0, uint256.NewInt(1<<40|uint64(s.pc)<<12|uint64(i)))
	}
	for i := range s.mem {
		s.mem[i].val = newTerm(tWide, 0, uint256.NewInt(1<<41|uint64(s.pc)<<12|uint64(i)))
	}
	// The values written, not where: a write's place is its effect.
	writes := make([]write, len(s.writes))
	for i, w := range s.writes {
		writes[i] = write{slot: w.slot, val: newTerm(tWide, 0, uint256.NewInt(1<<42|uint64(s.pc)<<12|uint64(i))), pc: w.pc}
	}
	s.writes = writes
}

// memoized explores s from a block start, or reuses what an earlier path
// found there.
func (x *explorer) memoized(s *pathState) []outcome {
	key := s.key()
	for _, e := range x.memo[key] {
		if s.agrees(e.consulted) {
			return e.outs
		}
	}
	fr := &memoFrame{base: len(s.conds)}
	x.frames = append(x.frames, fr)
	outs := dedupe(x.explore(s, true))
	x.frames = x.frames[:len(x.frames)-1]
	x.memo[key] = append(x.memo[key], memoEntry{consulted: fr.consulted, outs: outs})
	return outs
}

// memoFrame collects the conditions taken before a memo point (below
// base) that the paths after it consulted to decide a branch.
type memoFrame struct {
	base      int
	consulted []condRef
}

type condRef struct {
	hash  uint64
	truth bool
}

type memoEntry struct {
	consulted []condRef
	outs      []outcome
}

// agrees: s took every consulted condition the same way.
func (s *pathState) agrees(refs []condRef) bool {
	for _, r := range refs {
		found := false
		for _, c := range s.conds {
			if c.base.hash == r.hash {
				if c.truth != r.truth {
					return false
				}
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// key hashes what the rest of a path depends on besides its conditions:
// where it is, its stack, its memory and the storage it wrote.
func (s *pathState) key() uint64 {
	h := mix(uint64(s.pc), uint64(len(s.stack)))
	for _, t := range s.stack {
		h = mix(h, t.hash)
	}
	for _, m := range s.mem {
		h = mix(mix(h, m.off), m.val.hash)
	}
	for _, w := range s.writes {
		// Computed storage (the words of a string or an array a copy loop
		// writes) is left out: reading it back decides no power.
		if w.slot.op == tConst || w.slot.op == tSha3 && len(w.slot.args) == 2 {
			h = mix(mix(h, w.slot.hash), w.val.hash)
		}
	}
	return h
}

// rebase prefixes the outcomes found after a point with what the path
// did before it (seg), kept to what the analysis reads, and adds them to
// outs; a full explorer keeps everything but computed storage. Otherwise: for a path that succeeds, its caller checks and the bounds on its
// arguments (okRelevant), every write to a fixed slot or a mapping, every
// call; for a revert, the conditions from the last one that is no
// exemption on (gatesOf reads no further: the outcome is closed); for a
// panic, nothing.
func (x *explorer) rebase(outs []outcome, seg segment, sub []outcome) []outcome {
	if x.full {
		for _, o := range sub {
			n := o
			n.closed = false
			n.conds = link(seg.conds, o.conds, condHash)
			n.writes = link(keptWrites(seg.writes), o.writes, writeHash)
			n.calls = link(seg.calls, o.calls, callHash)
			outs = append(outs, n)
		}
		return outs
	}
	var okConds []cond
	var okWrites []write
	okDone := false
	lastDecider := -2 // not computed
	for _, o := range sub {
		n := o
		switch {
		case o.panic:
			n.conds, n.writes, n.calls, n.closed = nil, nil, nil, true
		case o.ok:
			if !okDone {
				for _, c := range seg.conds {
					if okRelevant(c.base) {
						okConds = append(okConds, c)
					}
				}
				okWrites, okDone = keptWrites(seg.writes), true
			}
			n.conds = link(okConds, o.conds, condHash)
			n.writes = link(okWrites, o.writes, writeHash)
			n.calls = link(seg.calls, o.calls, callHash)
		case !o.closed:
			// Only exemptions after the point: the deciding condition, if
			// any, is in the segment.
			if lastDecider == -2 {
				lastDecider = -1
				for j := len(seg.conds) - 1; j >= 0; j-- {
					if !exemption(seg.conds[j].base) {
						lastDecider = j
						break
					}
				}
			}
			n.writes, n.calls = nil, nil
			if lastDecider >= 0 {
				n.conds, n.closed = link(seg.conds[lastDecider:], o.conds, condHash), true
			} else {
				n.conds = link(seg.conds, o.conds, condHash)
			}
		}
		outs = append(outs, n)
	}
	return outs
}

// keptWrites are the writes a summary reads: to fixed slots and mapping
// elements, not to computed storage (the words of a string or an array,
// which a copy loop writes in as many ways as it runs).
func keptWrites(ws []write) []write {
	out := make([]write, 0, len(ws))
	for _, w := range ws {
		if target(w.slot).Kind != TargetComputed {
			out = append(out, w)
		}
	}
	return out
}

// okRelevant: a condition a successful path's summary reads: a caller
// check, or an argument compared with a small constant or a stored value
// (a ceiling or a floor on what it writes). The ABI decoder's own checks
// compare with 2^64 − 1 and the calldata size, string copies with word
// lengths: none of them bounds an argument.
func okRelevant(t *term) bool {
	if t.has&hasCaller != 0 {
		return true
	}
	if t.op != tOp || (t.code != 0x10 && t.code != 0x11) {
		return false
	}
	for i := range 2 {
		x, other := t.args[i], t.args[1-i]
		x, _ = strip(x)
		if x.op != tCalldata && !(x.op == tOp && x.code == 0x01 && x.args[0].op == tCalldata && x.args[1].op == tCalldata) {
			continue
		}
		if other.op == tConst {
			return other.k.IsUint64() && other.k.Uint64() < 1<<32 && other.k.Uint64() != calldataSize
		}
		return other.has&hasSload != 0 && other.has&hasCalldata == 0
	}
	return false
}

// dedupe drops outcomes identical to an earlier one.
func dedupe(outs []outcome) []outcome {
	seen := make(map[uint64]bool, len(outs))
	kept := outs[:0]
	for _, o := range outs {
		h := o.signature()
		if !seen[h] {
			seen[h] = true
			kept = append(kept, o)
		}
	}
	return kept
}

func (o outcome) signature() uint64 {
	flags := uint64(0)
	for i, b := range []bool{o.ok, o.panic, o.selfdestruct, o.closed} {
		if b {
			flags |= 1 << i
		}
	}
	h := mix(mix(mix(flags, o.conds.sum()), o.writes.sum()), o.calls.sum())
	for _, r := range o.ret {
		h = mix(h, r.hash)
	}
	return h
}

func (x *explorer) finish(s *pathState, e pathEnd) {
	s.end = &e
	s.pc = -1
}

func (x *explorer) cut(s *pathState) {
	x.incomplete = true
	s.pc = -1
}

func (s *pathState) pop() *term {
	t := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	return t
}

func (s *pathState) push(t *term) { s.stack = append(s.stack, t) }

// step runs s until it ends (pc −1), forks (the other branch's state is
// returned) or reaches a block start (memo, unless skipMemo and it is
// the first instruction).
func (x *explorer) step(s *pathState, skipMemo bool) (taken *pathState, memo bool) {
	for first := true; ; first = false {
		if s.pc >= 0 && s.pc < x.end && x.joins[s.pc] && !(first && skipMemo) {
			return nil, true
		}
		if s.pc < 0 || s.pc >= x.end {
			x.finish(s, pathEnd{ok: true}) // running off the code is STOP
			return nil, false
		}
		x.steps++
		if x.steps >= x.maxSteps {
			x.cut(s)
			return nil, false
		}
		op := x.code[s.pc]
		pops, pushes, defined := pathEffect(op)
		if n := pushSize(op); n > 0 || op == opPUSH0 {
			t := x.consts[s.pc]
			if t == nil {
				var w [32]byte
				lo := s.pc + 1
				hi := min(lo+n, len(x.code))
				copy(w[32-n:], x.code[lo:hi])
				t = constTerm(new(uint256.Int).SetBytes32(w[:]))
				x.consts[s.pc] = t
			}
			s.push(t)
			s.pc += 1 + n
			continue
		}
		switch {
		case op >= opDUP1 && op <= opDUP16:
			d := int(op-opDUP1) + 1
			if len(s.stack) < d {
				x.finish(s, pathEnd{})
				return nil, false
			}
			s.push(s.stack[len(s.stack)-d])
			s.pc++
			continue
		case op >= opSWAP1 && op <= opSWAP16:
			d := int(op-opSWAP1) + 1
			if len(s.stack) <= d {
				x.finish(s, pathEnd{})
				return nil, false
			}
			top := len(s.stack) - 1
			s.stack[top], s.stack[top-d] = s.stack[top-d], s.stack[top]
			s.pc++
			continue
		}
		if !defined || len(s.stack) < pops {
			x.finish(s, pathEnd{panic: op == opINVALID}) // an undefined opcode or a stack underflow halts
			return nil, false
		}
		args := make([]*term, pops)
		for i := range args {
			args[i] = s.pop()
		}
		switch op {
		case opSTOP:
			x.finish(s, pathEnd{ok: true})
			return nil, false
		case opRETURN:
			x.finish(s, pathEnd{ok: true, ret: x.readWords(s, args[0], args[1], maxReturnWord)})
			return nil, false
		case opREVERT:
			x.finish(s, pathEnd{panic: args[0].isConstU64(0) && args[1].isConstU64(0x24)})
			return nil, false
		case opSELFDESTRUCT:
			x.finish(s, pathEnd{ok: true, selfdestruct: true})
			return nil, false
		case opJUMP:
			if !x.jumpTo(s, args[0]) {
				return nil, false
			}
			continue
		case opJUMPI:
			return x.branch(s, args[0], args[1]), false
		}
		if pushes == 1 {
			s.push(x.value(s, op, args))
		} else {
			x.sideEffect(s, op, args)
		}
		s.pc++
	}
}

// pathEffect is effect with the control-flow opcodes flow.go models one
// by one.
func pathEffect(op byte) (pop, push int, ok bool) {
	switch op {
	case opSTOP:
		return 0, 0, true
	case opJUMP, opSELFDESTRUCT:
		return 1, 0, true
	case opJUMPI, opRETURN, opREVERT:
		return 2, 0, true
	}
	return effect(op)
}

// jumpTo moves s to a constant JUMPDEST; anything else ends the path (a
// constant that is no JUMPDEST fails as the EVM does; a computed target
// is beyond the analysis, which makes it incomplete).
func (x *explorer) jumpTo(s *pathState, target *term) bool {
	if target.op != tConst {
		x.cutByJump = true
		x.cut(s)
		return false
	}
	if !target.k.IsUint64() || target.k.Uint64() >= uint64(len(x.dests)) || !x.dests[target.k.Uint64()] {
		x.finish(s, pathEnd{})
		return false
	}
	s.pc = int(target.k.Uint64())
	return true
}

// branch takes a JUMPI: one way when the condition is a constant or a
// condition the path already took, both ways otherwise (the returned
// state jumps).
func (x *explorer) branch(s *pathState, target, condition *term) *pathState {
	pc := s.pc
	if condition.op == tConst {
		if condition.k.IsZero() {
			s.pc++
			return nil
		}
		x.jumpTo(s, target)
		return nil
	}
	base, neg := strip(condition)
	frame := x.frameOf(s)
	if x.env != nil {
		if v, ok := x.env.eval(condition); ok {
			jump := !v.IsZero()
			if !exemption(base) {
				s.decider = &cond{base: base, truth: jump != neg, pc: pc, frame: frame, raw: condition, jumped: jump, decided: true}
				s.deciderAt = len(s.conds)
			}
			if jump {
				x.jumpTo(s, target)
			} else {
				s.pc++
			}
			return nil
		}
	}
	visits := 0
	for i, c := range s.conds {
		// A condition on a forgotten value is asked anew: the same place
		// reached again holds another value (a loop's counter).
		if c.base.hash == base.hash && base.has&hasWide == 0 {
			for _, fr := range x.frames {
				if fr.base > i {
					fr.consulted = append(fr.consulted, condRef{c.base.hash, c.truth})
				}
			}
			if c.truth != neg { // condition true: jump
				x.jumpTo(s, target)
			} else {
				s.pc++
			}
			return nil
		}
		if c.pc == pc && c.frame == frame {
			visits++
		}
	}
	if visits >= loopBound {
		s.pc = -1 // the loop's earlier exits carry on past it
		return nil
	}

	taken := s.fork()
	taken.conds = append(taken.conds, cond{base: base, truth: !neg, pc: pc, frame: frame, raw: condition, jumped: true})
	s.conds = append(s.conds, cond{base: base, truth: neg, pc: pc, frame: frame, raw: condition})
	s.pc++
	if !x.jumpTo(taken, target) {
		return nil
	}
	return taken
}

// frameOf hashes the call context of s: its stack height and the
// constants on it that are JUMPDESTs (return addresses).
func (x *explorer) frameOf(s *pathState) uint64 {
	h := uint64(len(s.stack))
	for _, t := range s.stack {
		if t.op == tConst && t.k.IsUint64() && t.k.Uint64() < uint64(len(x.dests)) && x.dests[t.k.Uint64()] {
			h = mix(h, t.k.Uint64())
		}
	}
	return h
}

// value computes an opcode that pushes one word.
func (x *explorer) value(s *pathState, op byte, args []*term) *term {
	switch op {
	case 0x30:
		return newTerm(tSelf, 0, nil)
	case 0x32:
		return newTerm(tOrigin, 0, nil)
	case 0x33:
		return newTerm(tCaller, 0, nil)
	case 0x34:
		return newTerm(tValue, 0, nil)
	case 0x42:
		return newTerm(tTime, 0, nil)
	case 0x43:
		return newTerm(tNumber, 0, nil)
	case 0x36: // CALLDATASIZE
		return constU64(x.cdsize)
	case 0x38: // CODESIZE
		return constU64(uint64(len(x.code)))
	case opCALLDATALOAD:
		if args[0].isConstU64(0) {
			return constTerm(x.selector)
		}
		if args[0].op == tConst && args[0].k.IsUint64() {
			return newTerm(tCalldata, 0, &args[0].k)
		}
		return newTerm(tOp, op, nil, args...)
	case opMLOAD:
		if off, ok := constOffset(args[0]); ok {
			for i := len(s.mem) - 1; i >= 0; i-- {
				if s.mem[i].off == off {
					return s.mem[i].val
				}
			}
			return newTerm(tOp, opMLOAD, nil, args[0])
		}
		return x.freshAt(s.pc)
	case opSLOAD:
		if x.env != nil {
			if slot, ok := x.env.eval(args[0]); ok {
				for i := len(s.writes) - 1; i >= 0; i-- {
					if w, ok := x.env.eval(s.writes[i].slot); ok && w.Eq(&slot) {
						return s.writes[i].val
					}
				}
				return newTerm(tSload, 0, nil, args[0])
			}
		}
		for i := len(s.writes) - 1; i >= 0; i-- {
			if s.writes[i].slot.hash == args[0].hash {
				return s.writes[i].val
			}
		}
		return newTerm(tSload, 0, nil, args[0])
	case 0x20: // KECCAK256
		if words := x.readWords(s, args[0], args[1], maxSha3Words); words != nil {
			return sha3(words)
		}
		return x.freshAt(s.pc)
	case 0xf1, 0xf2, 0xf4, 0xfa: // CALL, CALLCODE, DELEGATECALL, STATICCALL
		c := callSite{op: op, target: args[1], pc: s.pc}
		retOff, retLen := args[4], args[5]
		if op == 0xf1 || op == 0xf2 {
			c.value, retOff, retLen = args[2], args[5], args[6]
		}
		s.calls = append(s.calls, c)
		x.clobber(s, retOff, retLen)
		return x.freshAt(s.pc)
	case 0x31, 0x3b, 0x3f, 0x47: // BALANCE, EXTCODESIZE, EXTCODEHASH, SELFBALANCE
		return newTerm(tOp, op, nil, args...)
	case 0x58: // PC
		return constU64(uint64(s.pc))
	}
	if op <= 0x1d || op == 0x0a || op == 0x0b {
		return apply(op, args...)
	}
	return x.freshAt(s.pc) // GAS, RETURNDATASIZE, CREATE, the block's other fields, TLOAD, ...
}

// sideEffect runs an opcode that pushes nothing.
func (x *explorer) sideEffect(s *pathState, op byte, args []*term) {
	switch op {
	case 0x52: // MSTORE
		off, ok := constOffset(args[0])
		if !ok {
			x.clobber(s, args[0], constU64(32))
			return
		}
		x.forget(s, off, 32)
		s.mem = append(s.mem, memWord{off: off, val: args[1]})
	case 0x53: // MSTORE8
		x.clobber(s, args[0], constU64(1))
	case 0x55: // SSTORE
		s.writes = append(s.writes, write{slot: args[0], val: args[1], pc: s.pc})
	case 0x37, 0x39, 0x3e, 0x5e: // CALLDATACOPY, CODECOPY, RETURNDATACOPY, MCOPY
		x.clobber(s, args[0], args[2])
	case 0x3c: // EXTCODECOPY
		x.clobber(s, args[1], args[3])
	}
}

func constOffset(t *term) (uint64, bool) {
	if t.op == tConst && t.k.IsUint64() && t.k.Uint64() < 1<<32 {
		return t.k.Uint64(), true
	}
	return 0, false
}

// forget drops the words overlapping [off, off+n).
func (x *explorer) forget(s *pathState, off, n uint64) {
	kept := s.mem[:0] // the state owns its memory (fork copies it)
	for _, w := range s.mem {
		if w.off+32 <= off || w.off >= off+n {
			kept = append(kept, w)
		}
	}
	s.mem = kept
}

// clobber forgets what a write of n bytes at off may overwrite: that
// range when both are constants; else everything past solc's reserved
// area (scratch space, free memory pointer, zero slot: below 0x80),
// which solc never writes at a computed offset.
func (x *explorer) clobber(s *pathState, off, n *term) {
	o, ok1 := constOffset(off)
	l, ok2 := constOffset(n)
	if ok1 && ok2 {
		x.forget(s, o, l)
		return
	}
	x.forget(s, 0x80, 1<<40)
}

// readWords reads n bytes at off as 32-byte words, when both are
// constants, n a multiple of 32 of at most limit words; a word never
// written reads as MLOAD(offset).
func (x *explorer) readWords(s *pathState, off, n *term, limit int) []*term {
	o, ok1 := constOffset(off)
	l, ok2 := constOffset(n)
	if !ok1 || !ok2 || l%32 != 0 || l/32 > uint64(limit) {
		return nil
	}
	words := make([]*term, l/32)
	for i := range words {
		at := o + 32*uint64(i)
		words[i] = nil
		for j := len(s.mem) - 1; j >= 0; j-- {
			if s.mem[j].off == at {
				words[i] = s.mem[j].val
				break
			}
		}
		if words[i] == nil {
			words[i] = newTerm(tOp, opMLOAD, nil, constU64(at))
		}
	}
	return words
}
