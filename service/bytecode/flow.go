package bytecode

import (
	"bytes"
	"cmp"
	"math/bits"
	"slices"
)

// maxContexts bounds the contexts (frame, entry stack height and return
// addresses) a block is analysed in before it is analysed with an unknown
// stack (see the package documentation). Solc's output stays below a few
// dozen: callees are analysed once per frame, not once per caller.
const maxContexts = 1024

// stepsPerByte bounds the analysis steps (an instruction analysed, or
// eight stack values copied into a context) per byte of code; past it
// every block is analysed once more with an unknown stack.
const stepsPerByte = 8

// maxStack is the EVM's stack limit: deeper pushes fail.
const maxStack = 1024

// Opcodes the analysis models. Everything else is generic: it pops and
// pushes by its stack effect (effect).
const (
	opSTOP         = 0x00
	opSUB          = 0x03
	opDIV          = 0x04
	opEQ           = 0x14
	opAND          = 0x16
	opXOR          = 0x18
	opSHL          = 0x1b
	opSHR          = 0x1c
	opADDRESS      = 0x30
	opCALLDATALOAD = 0x35
	opMLOAD        = 0x51
	opSLOAD        = 0x54
	opJUMP         = 0x56
	opJUMPI        = 0x57
	opJUMPDEST     = 0x5b
	opPUSH0        = 0x5f
	opPUSH32       = 0x7f
	opDUP1         = 0x80
	opDUP2         = 0x81
	opDUP16        = 0x8f
	opSWAP1        = 0x90
	opSWAP16       = 0x9f
	opLOG0         = 0xa0
	opLOG4         = 0xa4
	opRETURN       = 0xf3
	opDELEGATECALL = 0xf4
	opREVERT       = 0xfd
	opINVALID      = 0xfe
	opSELFDESTRUCT = 0xff
)

// pushSize is the number of data bytes of a PUSH (0 for PUSH0 and any
// other opcode).
func pushSize(op byte) int {
	if op > opPUSH0 && op <= opPUSH32 {
		return int(op - opPUSH0)
	}
	return 0
}

// effect is the stack effect of the opcodes not modelled one by one
// (Cancun, plus Osaka's CLZ); ok is false for an undefined opcode, which
// halts execution like INVALID.
func effect(op byte) (pop, push int, ok bool) {
	switch op {
	case 0x30, 0x32, 0x33, 0x34, 0x36, 0x38, 0x3a, 0x3d, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x4a, 0x58, 0x59, 0x5a:
		return 0, 1, true // ADDRESS ... BLOBBASEFEE, PC, MSIZE, GAS
	case 0x15, 0x19, 0x1e, 0x31, 0x35, 0x3b, 0x3f, 0x40, 0x49, 0x51, 0x54, 0x5c:
		return 1, 1, true // ISZERO, NOT, CLZ, BALANCE, CALLDATALOAD, EXTCODESIZE, EXTCODEHASH, BLOCKHASH, BLOBHASH, MLOAD, SLOAD, TLOAD
	case 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0a, 0x0b, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16, 0x17, 0x18, 0x1a, 0x1b, 0x1c, 0x1d, 0x20:
		return 2, 1, true // arithmetic, comparison, bitwise, shifts, KECCAK256
	case 0x08, 0x09, 0xf0:
		return 3, 1, true // ADDMOD, MULMOD, CREATE
	case 0x50:
		return 1, 0, true // POP
	case 0x52, 0x53, 0x55, 0x5d:
		return 2, 0, true // MSTORE, MSTORE8, SSTORE, TSTORE
	case 0x37, 0x39, 0x3e, 0x5e:
		return 3, 0, true // CALLDATACOPY, CODECOPY, RETURNDATACOPY, MCOPY
	case 0x3c:
		return 4, 0, true // EXTCODECOPY
	case 0xf5:
		return 4, 1, true // CREATE2
	case 0xf4, 0xfa:
		return 6, 1, true // DELEGATECALL, STATICCALL
	case 0xf1, 0xf2:
		return 7, 1, true // CALL, CALLCODE
	case opJUMPDEST:
		return 0, 0, true
	}
	if op >= opLOG0 && op <= opLOG4 {
		return int(op-opLOG0) + 2, 0, true
	}
	return 0, 0, false
}

// kind is what the analysis knows about a stack value.
type kind uint8

const (
	kOther        kind = iota // a value of known origin that is not followed (arithmetic, environment, calls)
	kOpaque                   // anything, the selector included: a slot of an unknown stack, memory word 0
	kConst                    // a PUSH constant; pc is the PUSH
	kConstExpr                // computed from constants only; value not tracked
	kMaskedConst              // a constant ANDed with a mask: an address, not a jump target; pc is the PUSH
	kCalldata0                // calldataload(0): the selector in the top 4 bytes, then argument bytes
	kCalldata                 // calldataload at another offset: an argument
	kSelector                 // the selector, right-aligned
	kSelectorHigh             // the selector, left-aligned, low 28 bytes zero
	kSload                    // SLOAD of a constant slot; pc is the slot's PUSH
	kSelf                     // ADDRESS
	kRet                      // the return address of the frame being analysed (see frame)
)

// value is an abstract stack value. pc is zero unless the kind says
// otherwise, so equal values compare and hash equal.
type value struct {
	kind kind
	keep keep // for kConst: whether the constant matters past its block
	pc   int32
}

// keep says why a constant matters to later blocks.
type keep uint8

const (
	keepNot  keep = iota // a small constant: forgotten at the block's end
	keepDest             // a JUMPDEST: a return address or a jump target
	keepWide             // 20 bytes or more: an address or a storage slot
)

// state is a block's entry state in one context (see enter): the join of
// every stack it was entered with in that context.
type state struct {
	pc, off, n int32 // entry pc; stack in analysis.arena
	frame      int32
	bottomless bool
	queued     bool
}

// frame is a callee analysed once for all its callers: a jump to a
// constant target while a return address (a constant naming a JUMPDEST) is
// on the stack enters the target in a frame whose stack is that return
// address, as the placeholder kRet, and the values above it; what is below
// belongs to the caller and stays out of the callee's contexts. A jump to
// kRet returns: the caller goes on at its return address with its stack
// below and the values returned (kRet in them read as the return address).
// A callee that reads below its return address is inlined: entered again
// in each caller's frame with the caller's whole stack. Frame 0 is the
// code entered at pc 0.
type frame struct {
	callers []caller
	returns []span // stacks at the jumps to kRet
	inlined bool
	entry   int32
}

// caller is one call into a frame.
type caller struct {
	frame      int32 // the caller's frame
	below      span  // the caller's stack below the return address
	ret        value // the return address
	above      span  // the values above it, for inlining
	bottomless bool
}

// span is a stack kept in analysis.arena.
type span struct{ off, n int32 }

// pending is the stack at an unresolved jump, fed to every JUMPDEST below
// fed so far.
type pending struct {
	off, n     int32
	frame      int32
	bottomless bool
	fed        int
}

// analysis is the state of one Analyze call.
type analysis struct {
	code    []byte
	bodyLen int      // code without the metadata trailer
	dests   []uint64 // bitset of valid JUMPDESTs

	index    map[uint64]int32 // context (enter) -> states
	contexts map[int32]uint16 // entry pc -> its contexts
	states   []state
	work     []int32 // states to analyse
	arena    []value // states' stacks and pending jumps' stacks
	steps    int     // instructions analysed
	budget   int     // past it, every block is entered with an unknown stack

	stack      []value // the block being analysed
	scratch    []value // a callee's entry stack being built
	rebuilt    []value // a caller's stack being rebuilt
	bottomless bool    // popping below the stack gives kOpaque instead of failing
	frame      int32   // the block's frame

	frames     []frame
	frameIndex map[uint64]int32
	seen       map[uint64]bool // calls and returns of frames, by hash

	pend       []pending
	pendSeen   map[uint64]bool
	unresolved []int32

	selectors    []Selector
	forwarders   []Forwarder
	delegate     bool
	selfdestruct bool
	end          int  // one past the last reachable instruction
	endInvalid   bool // that instruction is INVALID
}

func newAnalysis(code []byte, bodyLen int) *analysis {
	// Initial sizes for solc output: about one state per 16 bytes of code
	// and eight stack values per state; most code needs no more.
	a := &analysis{
		code:       code,
		bodyLen:    bodyLen,
		dests:      make([]uint64, (len(code)+63)/64),
		index:      make(map[uint64]int32, len(code)/16),
		contexts:   make(map[int32]uint16, len(code)/16),
		states:     make([]state, 0, len(code)/16),
		budget:     stepsPerByte*len(code) + 4096,
		stack:      make([]value, 0, 64),
		frameIndex: map[uint64]int32{},
		seen:       map[uint64]bool{},
		arena:      make([]value, 0, len(code)/2),
	}
	for pc := 0; pc < len(code); pc += 1 + pushSize(code[pc]) {
		if code[pc] == opJUMPDEST {
			a.dests[pc/64] |= 1 << (pc % 64)
		}
	}
	return a
}

func (a *analysis) isDest(pc uint64) bool {
	return pc < uint64(len(a.code)) && a.dests[pc/64]&(1<<(pc%64)) != 0
}

// run analyses every block reachable from pc 0, then feeds unresolved
// jumps every JUMPDEST before the data boundary, until nothing changes.
func (a *analysis) run() {
	a.frames = append(a.frames, frame{}) // frame 0: from pc 0
	a.enter(0, nil, false, 0)
	for {
		for len(a.work) > 0 {
			i := a.work[len(a.work)-1]
			a.work = a.work[:len(a.work)-1]
			a.block(i)
		}
		if !a.feed() {
			return
		}
	}
}

func hashStack(s []value, bottomless bool) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	if bottomless {
		h = (h ^ 0x9e3779b97f4a7c15) * prime
	}
	for _, v := range s {
		h = (h ^ (uint64(v.kind)<<32 | uint64(uint32(v.pc)))) * prime
		h ^= h >> 29
	}
	return h
}

// enter joins stack into the block at pc's state for this context and
// queues the block if the state changed. A context is the frame, the stack height
// and the return addresses on the stack (the constants naming JUMPDESTs,
// by position); other values of one context are joined. Past maxContexts
// for the block, or past the step budget, the block is entered with an
// unknown stack, which covers every later entry.
func (a *analysis) enter(pc int32, stack []value, bottomless bool, frame int32) {
	const prime = 1099511628211
	a.steps += 1 + len(stack)/8 // copying and hashing deep stacks is work too
	h := (uint64(14695981039346656037) ^ uint64(uint32(pc))) * prime
	h = (h ^ uint64(uint32(frame))<<20) * prime
	h = (h ^ uint64(len(stack))<<1) * prime
	if bottomless {
		h = (h ^ 1) * prime
	}
	// Normalise into the arena's spare room: kept if this is a new state.
	off := len(a.arena)
	a.arena = append(a.arena, stack...)
	norm := a.arena[off:]
	for i, v := range norm {
		switch {
		case v.kind != kConst && v.kind != kConstExpr:
		case v.keep == keepDest:
			h = (h ^ (uint64(i)<<32 | uint64(uint32(v.pc)))) * prime
			h ^= h >> 29
		case v.keep == keepNot || v.kind == kConstExpr:
			norm[i] = value{}
		}
	}
	i, ok := a.index[h]
	if !ok && (a.contexts[pc] >= maxContexts || a.steps > a.budget) {
		// The unknown-stack context, in frame 0: no return to a caller's
		// frame is known from it.
		a.arena, norm, bottomless, frame = a.arena[:off], nil, true, 0
		h = uint64(uint32(pc)) | 1<<63
		i, ok = a.index[h]
	}
	if !ok {
		a.contexts[pc]++
		i = int32(len(a.states))
		a.index[h] = i
		a.states = append(a.states, state{pc: pc, off: int32(off), n: int32(len(norm)), frame: frame, bottomless: bottomless, queued: true})
		a.work = append(a.work, i)
		return
	}
	a.arena = a.arena[:off]
	st := &a.states[i]
	old := a.arena[st.off : st.off+st.n]
	changed := false
	for j, v := range norm {
		if old[j] != v {
			if w := join(old[j], v); w != old[j] {
				old[j], changed = w, true
			}
		}
	}
	if changed && !st.queued {
		st.queued = true
		a.work = append(a.work, i)
	}
}

// join is the least value covering x and y: one that may be the selector
// joined with another is opaque, anything else kOther.
func join(x, y value) value {
	switch {
	case x == y:
		return x
	case x.kind == kOpaque || y.kind == kOpaque || selectorish(x) || selectorish(y):
		return value{kind: kOpaque}
	}
	return value{}
}

func selectorish(v value) bool {
	return v.kind == kSelector || v.kind == kCalldata0 || v.kind == kSelectorHigh
}

// need makes the stack at least n deep, with opaque values below an
// unknown stack; false is a stack underflow, which halts execution.
func (a *analysis) need(n int) bool {
	short := n - len(a.stack)
	if short <= 0 {
		return true
	}
	if !a.bottomless {
		if a.frame != 0 {
			a.inline(a.frame) // the callee reads its caller's stack
		}
		return false
	}
	a.stack = slices.Insert(a.stack, 0, make([]value, short)...)
	for i := range short {
		a.stack[i] = value{kind: kOpaque}
	}
	return true
}

func (a *analysis) pop() value {
	v := a.stack[len(a.stack)-1]
	a.stack = a.stack[:len(a.stack)-1]
	return v
}

// block analyses the block of state i from its entry to its end.
func (a *analysis) block(i int32) {
	st := &a.states[i]
	st.queued = false

	a.stack = append(a.stack[:0], a.arena[st.off:st.off+st.n]...)
	a.bottomless = st.bottomless
	a.frame = st.frame
	start := int(st.pc)
	var prev1, prev2 byte = opSTOP, opSTOP // the two previous opcodes in this block
	for pc := start; ; {
		if pc >= len(a.code) {
			return // running off the end is STOP
		}
		op := a.code[pc]
		if op == opJUMPDEST && pc != start {
			a.enter(int32(pc), a.stack, a.bottomless, a.frame)
			return
		}
		next := min(pc+1+pushSize(op), len(a.code))
		a.steps++
		if next > a.end {
			a.end, a.endInvalid = next, op == opINVALID
		}
		switch {
		case op >= opPUSH0 && op <= opPUSH32:
			v := value{kind: kConst, pc: int32(pc)}
			if _, ok := a.dest(v); ok {
				v.keep = keepDest
			} else if pushSize(op) >= 20 {
				v.keep = keepWide
			}
			a.stack = append(a.stack, v)
		case op >= opDUP1 && op <= opDUP16:
			n := int(op-opDUP1) + 1
			if !a.need(n) {
				return
			}
			a.stack = append(a.stack, a.stack[len(a.stack)-n])
		case op >= opSWAP1 && op <= opSWAP16:
			n := int(op-opSWAP1) + 1
			if !a.need(n + 1) {
				return
			}
			top := len(a.stack) - 1
			a.stack[top], a.stack[top-n] = a.stack[top-n], a.stack[top]
		case op == opJUMP:
			if !a.need(1) {
				return
			}
			a.jump(pc, a.pop())
			return
		case op == opJUMPI:
			if !a.need(2) {
				return
			}
			t := a.pop()
			a.pop() // the condition: both ways are taken
			a.enter(int32(next), a.stack, a.bottomless, a.frame)
			a.jump(pc, t)
			return
		case op == opSTOP || op == opRETURN || op == opREVERT || op == opINVALID:
			return
		case op == opSELFDESTRUCT:
			a.selfdestruct = true
			return
		default:
			pops, pushes, ok := effect(op)
			if !ok || !a.need(pops) {
				return // an undefined opcode or a stack underflow halts
			}
			a.apply(pc, op, pops, pushes, prev1, prev2)
		}
		if len(a.stack) > maxStack {
			return
		}
		prev2, prev1 = prev1, op
		pc = next
	}
}

// apply runs a non-control opcode whose operands are on the stack.
func (a *analysis) apply(pc int, op byte, pops, pushes int, prev1, prev2 byte) {
	args := a.stack[len(a.stack)-pops:] // args[pops-1] is the top (the first operand)
	var r value
	switch op {
	case opEQ, opXOR, opSUB:
		a.compare(args[1], args[0], prev1, prev2)
		r = combine(args)
	case opSHR, opSHL:
		shift, v := args[1], args[0]
		switch {
		case op == opSHR && (v.kind == kCalldata0 || v.kind == kSelectorHigh) && a.constIs(shift, 224):
			r = value{kind: kSelector}
		case op == opSHL && v.kind == kSelector && a.constIs(shift, 224):
			r = value{kind: kSelectorHigh}
		default:
			r = combine(args)
		}
	case opDIV:
		if args[1].kind == kCalldata0 && a.isPow224(args[0]) {
			r = value{kind: kSelector}
		} else {
			r = combine(args)
		}
	case opAND:
		r = a.and(args[1], args[0])
	case opCALLDATALOAD:
		switch off := args[0]; {
		case a.constIs(off, 0):
			r = value{kind: kCalldata0}
		case off.kind == kOpaque:
			r = value{kind: kOpaque}
		default:
			r = value{kind: kCalldata}
		}
	case opMLOAD:
		if a.constIs(args[0], 0) || args[0].kind == kOpaque {
			r = value{kind: kOpaque} // old Vyper kept the selector in memory word 0
		}
	case opSLOAD:
		if args[0].kind == kConst {
			r = value{kind: kSload, pc: args[0].pc}
		}
	case opADDRESS:
		r = value{kind: kSelf}
	case opDELEGATECALL:
		a.delegate = true
		a.forward(pc, args[4])
	default:
		r = combine(args)
	}
	a.stack = a.stack[:len(a.stack)-pops]
	for range pushes {
		a.stack = append(a.stack, r)
	}
}

// combine is the kind of an unmodelled operation's result.
func combine(args []value) value {
	if len(args) == 0 {
		return value{}
	}
	constant := true
	for _, v := range args {
		switch v.kind {
		case kOpaque:
			return value{kind: kOpaque}
		case kConst, kConstExpr:
		default:
			constant = false
		}
	}
	if constant {
		return value{kind: kConstExpr}
	}
	return value{}
}

// and models AND as used for masking: an address read from a slot or
// pushed as an immutable keeps its origin; the selector keeps being the
// selector under a 0xffffffff mask; calldataload(0) masked to its top four
// bytes is the left-aligned selector.
func (a *analysis) and(x, y value) value {
	for _, p := range [2][2]value{{x, y}, {y, x}} {
		v, m := p[0], p[1]
		switch v.kind {
		case kSload, kSelf, kMaskedConst, kCalldata:
			return v
		case kSelector:
			if m.kind == kConst {
				if w := a.word(m.pc); bytes.Equal(w[28:], []byte{0xff, 0xff, 0xff, 0xff}) {
					return v
				}
			}
		case kCalldata0:
			if m.kind == kConst {
				if w := a.word(m.pc); bytes.Equal(w[:4], []byte{0xff, 0xff, 0xff, 0xff}) && isZero(w[4:]) {
					return value{kind: kSelectorHigh}
				}
			}
		}
	}
	switch {
	case x.kind == kConst && y.kind == kConst && a.isOnes(y) && pushSize(a.code[x.pc]) <= pushSize(a.code[y.pc]):
		return x // solc < 0.6 masks jump targets: PUSH4 0xffffffff PUSH2 tag AND JUMP
	case y.kind == kConst && x.kind == kConst && a.isOnes(x) && pushSize(a.code[y.pc]) <= pushSize(a.code[x.pc]):
		return y
	case x.kind == kConst && (y.kind == kConstExpr || y.kind == kConst && a.isOnes(y)):
		return value{kind: kMaskedConst, pc: x.pc}
	case y.kind == kConst && (x.kind == kConstExpr || x.kind == kConst):
		return value{kind: kMaskedConst, pc: y.pc}
	}
	return combine([]value{x, y})
}

// compare records a selector compared by EQ, XOR or SUB.
func (a *analysis) compare(x, y value, prev1, prev2 byte) {
	c, v := x, y
	if c.kind != kConst {
		c, v = y, x
	}
	if c.kind != kConst {
		return
	}
	w := a.word(c.pc)
	switch v.kind {
	case kSelector:
		if isZero(w[:28]) {
			a.selectors = append(a.selectors, Selector(w[28:]))
		}
	case kCalldata0, kSelectorHigh:
		if isZero(w[4:]) && !isZero(w[:4]) {
			a.selectors = append(a.selectors, Selector(w[:4]))
		}
	case kOpaque:
		// The linear scan's shapes, kept where the analysis lost track of
		// the value: DUP1 PUSHn sel OP, PUSHn sel DUP2 OP.
		n := pushSize(a.code[c.pc])
		isPush := func(op byte) bool { return pushSize(op) == n }
		if n >= 2 && n <= 4 && (prev2 == opDUP1 && isPush(prev1) || isPush(prev2) && prev1 == opDUP2) && len(a.code) >= int(c.pc)+1+n {
			a.selectors = append(a.selectors, Selector(w[28:]))
		}
	}
}

// forward records a DELEGATECALL at pc calling the address addr.
func (a *analysis) forward(pc int, addr value) {
	f := Forwarder{PC: pc}
	switch addr.kind {
	case kSload:
		f.Origin, f.Slot = OriginSlot, a.word(addr.pc)
	case kConst, kMaskedConst:
		w := a.word(addr.pc)
		f.Origin, f.Address = OriginConstant, [20]byte(w[12:])
	case kSelf:
		f.Origin = OriginSelf
	case kCalldata, kCalldata0:
		f.Origin = OriginCalldata
	}
	a.forwarders = append(a.forwarders, f)
}

// jump follows a JUMP or JUMPI at pc to target with the current stack.
func (a *analysis) jump(pc int, target value) {
	switch target.kind {
	case kConst:
		if d, ok := a.dest(target); ok {
			a.call(d)
		}
		return // not a JUMPDEST: execution fails
	case kRet:
		a.ret()
		return
	}
	a.unresolved = append(a.unresolved, int32(pc))
	if a.steps > a.budget {
		a.stack, a.bottomless, a.frame = a.stack[:0], true, 0 // one unknown stack for all
	}
	h := hashStack(a.stack, a.bottomless) ^ uint64(uint32(a.frame))<<40
	if a.pendSeen == nil {
		a.pendSeen = map[uint64]bool{}
	}
	if a.pendSeen[h] {
		return
	}
	a.pendSeen[h] = true
	off := int32(len(a.arena))
	a.arena = append(a.arena, a.stack...)
	a.pend = append(a.pend, pending{off: off, n: int32(len(a.stack)), frame: a.frame, bottomless: a.bottomless})
}

// call jumps to the JUMPDEST d with the current stack: into a callee
// frame when a return address is on the stack, else within the frame.
func (a *analysis) call(d int32) {
	r := -1
	for i := len(a.stack) - 1; i >= 0; i-- {
		if v := a.stack[i]; v.kind == kConst && v.keep == keepDest {
			r = i
			break
		}
	}
	if r >= 0 && slices.Contains(a.stack[r+1:], value{kind: kRet}) {
		r = -1 // this frame's own return address above: one placeholder per frame
	}
	if r < 0 || a.steps > a.budget {
		a.enter(d, a.stack, a.bottomless, a.frame)
		return
	}
	// The callee's entry stack: kRet, then the values above the return
	// address, normalised as enter does.
	const prime = 1099511628211
	callee := append(a.scratch[:0], value{kind: kRet})
	for _, v := range a.stack[r+1:] {
		if v.kind == kConst && v.keep == keepNot || v.kind == kConstExpr {
			v = value{}
		}
		callee = append(callee, v)
	}
	a.scratch = callee
	k := hashStack(callee, false) ^ uint64(uint32(d))*prime
	f, ok := a.frameIndex[k]
	if !ok {
		f = int32(len(a.frames))
		a.frames = append(a.frames, frame{entry: d})
		a.frameIndex[k] = f
	}
	if a.frames[f].inlined {
		a.enter(d, a.stack, a.bottomless, a.frame)
		return
	}
	ch := (hashStack(a.stack[:r+1], a.bottomless)^uint64(uint32(a.frame))<<40)*prime ^ uint64(uint32(f))
	if fr := &a.frames[f]; !a.seen[ch] {
		a.seen[ch] = true
		c := caller{frame: a.frame, ret: a.stack[r], bottomless: a.bottomless}
		c.below = a.keep(a.stack[:r])
		c.above = a.keep(a.stack[r+1:])
		fr.callers = append(fr.callers, c)
		for i := range len(fr.returns) {
			a.resume(c, a.frames[f].returns[i])
		}
	}
	a.enter(d, callee, false, f)
}

// ret returns from the current frame with the current stack.
func (a *analysis) ret() {
	f := a.frame
	rvs := a.scratch[:0]
	for _, v := range a.stack {
		if v.kind == kConst && v.keep == keepNot || v.kind == kConstExpr {
			v = value{}
		}
		rvs = append(rvs, v)
	}
	a.scratch = rvs
	const prime = 1099511628211
	h := (hashStack(rvs, a.bottomless)^0x5bd1e995)*prime ^ uint64(uint32(f))<<32
	fr := &a.frames[f]
	if a.seen[h] {
		return
	}
	a.seen[h] = true
	rv := a.keep(rvs)
	fr.returns = append(fr.returns, rv)
	for i := range len(a.frames[f].callers) {
		a.resume(a.frames[f].callers[i], rv)
	}
}

// resume goes on at c's return address with the values rv returned.
func (a *analysis) resume(c caller, rv span) {
	d, ok := a.dest(c.ret)
	if !ok {
		return
	}
	s := append(a.rebuilt[:0], a.arena[c.below.off:c.below.off+c.below.n]...)
	for _, v := range a.arena[rv.off : rv.off+rv.n] {
		if v.kind == kRet {
			v = c.ret
		}
		s = append(s, v)
	}
	a.rebuilt = s
	a.enter(d, s, c.bottomless, c.frame)
}

// inline enters frame f's entry in each caller's frame with the caller's
// whole stack, for good: f reads below its return address.
func (a *analysis) inline(f int32) {
	if a.frames[f].inlined {
		return
	}
	a.frames[f].inlined = true
	for i := range len(a.frames[f].callers) {
		c := a.frames[f].callers[i]
		s := append(a.rebuilt[:0], a.arena[c.below.off:c.below.off+c.below.n]...)
		s = append(s, c.ret)
		s = append(s, a.arena[c.above.off:c.above.off+c.above.n]...)
		a.rebuilt = s
		a.enter(a.frames[f].entry, s, c.bottomless, c.frame)
	}
}

// keep copies s into the arena.
func (a *analysis) keep(s []value) span {
	off := int32(len(a.arena))
	a.arena = append(a.arena, s...)
	return span{off: off, n: int32(len(s))}
}

// feed enters every JUMPDEST below the data boundary from each unresolved
// jump that has not been fed up to it yet; false when there was none.
func (a *analysis) feed() bool {
	if len(a.pend) == 0 {
		return false
	}
	b := a.boundary()
	fed := false
	for i := range a.pend {
		p := &a.pend[i]
		if p.fed >= b {
			continue
		}
		for w := p.fed / 64; w*64 < b; w++ {
			for bitset := a.dests[w]; bitset != 0; bitset &= bitset - 1 {
				if d := w*64 + bits.TrailingZeros64(bitset); d >= p.fed && d < b {
					a.enter(int32(d), a.arena[p.off:p.off+p.n], p.bottomless, p.frame)
				}
			}
		}
		p.fed, fed = b, true
	}
	return fed
}

// boundary is the data boundary: the first INVALID at or after the end of
// the reachable code, else the end of the code without its metadata.
func (a *analysis) boundary() int {
	if a.endInvalid {
		return min(a.end-1, a.bodyLen)
	}
	for pc := a.end; pc < a.bodyLen; pc += 1 + pushSize(a.code[pc]) {
		if a.code[pc] == opINVALID {
			return pc
		}
	}
	return a.bodyLen
}

// word is the 32-byte value pushed at pc; PUSH data cut off by the end of
// the code reads as zero bytes, as in the EVM.
func (a *analysis) word(pc int32) [32]byte {
	var w [32]byte
	n := pushSize(a.code[pc])
	copy(w[32-n:], a.code[min(int(pc)+1, len(a.code)):min(int(pc)+1+n, len(a.code))])
	return w
}

// dest is the JUMPDEST a constant names, if it names one.
func (a *analysis) dest(v value) (int32, bool) {
	if v.kind != kConst {
		return 0, false
	}
	var d uint64
	for i := range pushSize(a.code[v.pc]) {
		var b byte
		if p := int(v.pc) + 1 + i; p < len(a.code) {
			b = a.code[p]
		}
		d = d<<8 | uint64(b)
		if d >= uint64(len(a.code)) {
			return 0, false // and stays so: more bytes only make it larger
		}
	}
	return int32(d), a.isDest(d)
}

// small is a constant's value if it fits in 64 bits.
func (a *analysis) small(v value) (uint64, bool) {
	w := a.word(v.pc)
	if !isZero(w[:24]) {
		return 0, false
	}
	var u uint64
	for _, b := range w[24:] {
		u = u<<8 | uint64(b)
	}
	return u, true
}

func (a *analysis) constIs(v value, want uint64) bool {
	if v.kind != kConst {
		return false
	}
	u, ok := a.small(v)
	return ok && u == want
}

// isPow224 reports the constant 2**224 (old solc's DIV-based shift).
func (a *analysis) isPow224(v value) bool {
	if v.kind != kConst {
		return false
	}
	w := a.word(v.pc)
	return w[3] == 1 && isZero(w[:3]) && isZero(w[4:])
}

// isOnes reports a constant made of 0xff bytes only (a mask).
func (a *analysis) isOnes(v value) bool {
	n := pushSize(a.code[v.pc])
	w := a.word(v.pc)
	return n > 0 && bytes.Count(w[32-n:], []byte{0xff}) == n
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// report fills s with the findings, sorted and unique.
func (a *analysis) report(s *Scan) {
	slices.SortFunc(a.selectors, func(x, y Selector) int { return bytes.Compare(x[:], y[:]) })
	s.Selectors = slices.Clip(slices.Compact(a.selectors))
	slices.SortFunc(a.forwarders, func(x, y Forwarder) int {
		return cmp.Or(cmp.Compare(x.PC, y.PC), cmp.Compare(x.Origin, y.Origin),
			bytes.Compare(x.Slot[:], y.Slot[:]), bytes.Compare(x.Address[:], y.Address[:]))
	})
	s.Forwarders = slices.Clip(slices.Compact(a.forwarders))
	slices.Sort(a.unresolved)
	s.Unresolved = len(slices.Compact(a.unresolved))
	s.DelegateCall, s.SelfDestruct = a.delegate, a.selfdestruct
	s.CodeEnd = a.end
}
