package bytecode

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/holiman/uint256"
)

// Effects is what a token's functions do, read from its code by following
// each function's paths symbolically (package documentation, "Effects"):
// who may call each one, what it writes, and what transfer and
// transferFrom read on a path that reverts or use to deduct a fee.
type Effects struct {
	Functions []Function
	Layout    Layout
	// Gates are the storage transfer or transferFrom reads in the
	// condition that sends a path to a revert (Error or a custom error,
	// not an arithmetic Panic): a flag, a mapping keyed by an address, a
	// limit compared with the amount, a cooldown compared with the time.
	Gates []Gate
	// Fees are the storage transfer reads to compute the amount it
	// credits (a fee or tax: multiplied or divided into the amount).
	Fees []Fee
	// Hooks are the external contracts transfer calls, by where their
	// address comes from.
	Hooks []Hook
	// Forwards are the DELEGATECALLs on paths that succeed, by site and
	// where the called address comes from on that path: what the flow
	// scan's Forwarders cannot tell for an address passed through
	// internal functions (OpenZeppelin's upgradeToAndCall).
	Forwards []Forwarder
	// Complete: every function was followed to the end of every path
	// within the analysis's bounds, with no computed jump.
	Complete bool

	// gateConds are the deciding conditions behind each gate (taken the
	// way that reverts); writeVals the values each write stores.
	gateConds map[Gate][]cond
	writeVals map[writeKey][]*term
	// prog is the code, for Evaluate to follow concrete calls through.
	prog *program
}

type writeKey struct {
	sel      Selector
	fallback bool
	target   Target
	change   Change
}

// Function is one externally callable function: a selector of the
// dispatcher, or the fallback.
type Function struct {
	Selector Selector
	Fallback bool
	// Writes are its storage writes on paths that succeed, one per target
	// and change.
	Writes []Write
	// DelegateCalls and SelfDestruct: on a path that succeeds, with the
	// guards of those paths.
	DelegateCalls []Guarded
	SelfDestruct  *Guarded
	// Mints: paths that credit a balance or the supply and debit none.
	// Seizes: paths that debit or set a balance not the caller's (nor
	// the contract's) and spend no allowance. Nil: none.
	Mints, Seizes *Guarded
	// Complete: followed to the end of every path.
	Complete bool
}

// Guarded says who can reach an effect: Open when some path reaching it
// checks no caller; Guards, every caller check on the paths that reach it
// (a path with several checks lists each).
type Guarded struct {
	Open   bool
	Guards []Guard
}

// GuardKind is how a path checks its caller.
type GuardKind uint8

// Guard kinds.
const (
	// GuardSlot: the caller equals the address in a storage slot (an
	// owner, a hidden second owner, a dev wallet).
	GuardSlot GuardKind = iota + 1
	// GuardConstant: the caller equals an address in the code (a
	// constant, or an immutable, which is a constant once deployed).
	GuardConstant
	// GuardMapping: a mapping keyed by the caller (or, for a role, by the
	// caller inside a role's mapping) is set: an allow-list or a role.
	GuardMapping
)

// Guard is one caller check.
type Guard struct {
	Kind GuardKind
	// Slot: GuardSlot's slot, or GuardMapping's base slot (the outer
	// mapping's, for a role).
	Slot [32]byte
	// Offset is the bit offset of an address packed in its slot.
	Offset uint
	// Address is GuardConstant's address.
	Address [20]byte
	// Origin: tx.origin is compared, not the caller.
	Origin bool
}

// TargetKind is the kind of storage a write or read touches.
type TargetKind uint8

// Target kinds.
const (
	// TargetSlot: a fixed slot (a variable, or a packed field of one).
	TargetSlot TargetKind = iota + 1
	// TargetMapping: an element of a mapping at a fixed base slot.
	TargetMapping
	// TargetComputed: anything else (arrays, nested structures).
	TargetComputed
)

// KeyKind is whose element of a mapping is touched.
type KeyKind uint8

// Key kinds.
const (
	KeyOther  KeyKind = iota // computed, or read from storage
	KeyCaller                // msg.sender
	KeyArg                   // an argument of the call
	KeySelf                  // the contract itself
	KeyConst                 // a constant
	KeyOrigin                // tx.origin
)

// Target is storage a function touches.
type Target struct {
	Kind TargetKind
	// Slot is a TargetSlot's slot, or a TargetMapping's base slot (for a
	// nested mapping, the innermost fixed one).
	Slot [32]byte
	// Offset is a packed field's bit offset; Packed, for a write, that
	// the write keeps the slot's other bits (it writes that field only).
	Offset uint
	Packed bool
	Key    KeyKind
	// Nested: a mapping of mappings (allowances, roles).
	Nested bool
}

// String names t for evidence: "slot 0x3 (bits from 160)", "a mapping at
// slot 0x0".
func (t Target) String() string {
	slot := SlotText(t.Slot)
	switch t.Kind {
	case TargetSlot:
		if t.Offset > 0 {
			return fmt.Sprintf("slot %s (bits from %d)", slot, t.Offset)
		}
		return "slot " + slot
	case TargetMapping:
		if t.Nested {
			return "a mapping of mappings at slot " + slot
		}
		return "a mapping at slot " + slot
	}
	return "computed storage"
}

// SlotText writes a slot number short: 0x0, 0x3, 0x360894….
func SlotText(s [32]byte) string {
	if s == ([32]byte{}) {
		return "0x0"
	}
	return "0x" + strings.TrimLeft(fmt.Sprintf("%x", s[:]), "0")
}

// Change is how a write changes its target.
type Change uint8

// Changes.
const (
	ChangeSet      Change = iota + 1 // set to a value
	ChangeIncrease                   // the old value plus something
	ChangeDecrease                   // the old value minus something
)

// Write is a storage write of a function.
type Write struct {
	Target Target
	Change Change
	Guarded
	// Ceiling: on every path making the write, the argument it writes is
	// checked to be at most a constant; Bound is the largest such
	// constant. Floor: on every such path it is checked to be at least a
	// positive constant or a stored value (a share of the supply).
	Ceiling bool
	Bound   uint256.Int
	Floor   bool
}

// GateKind is what a gate does to a transfer.
type GateKind uint8

// Gate kinds.
const (
	// GateList: a mapping keyed by an address (a blacklist, an
	// allow-list).
	GateList GateKind = iota + 1
	// GateFlag: a value not compared with the amount or the time (a
	// trading switch, a pause).
	GateFlag
	// GateLimit: a value compared with the amount or a balance (a
	// maximum transaction or wallet).
	GateLimit
	// GateCooldown: a value compared with the block's time or number.
	GateCooldown
)

// Gate is storage a transfer reads on a path that reverts.
type Gate struct {
	Target   Target
	Kind     GateKind
	Selector Selector // transfer or transferFrom
}

// Fee is a stored rate transfer scales an amount by.
type Fee struct {
	Target Target
	// Divisor is the constant the scaled amount is divided by (100 for a
	// percentage, 10,000 for basis points); zero when none was seen.
	Divisor uint256.Int
}

// Hook is an external contract transfer calls.
type Hook struct {
	// Target is the slot its address is read from (Kind TargetSlot), or
	// zero when the address is a constant (Address).
	Target  Target
	Address [20]byte
}

// Layout is the token's own storage layout, as its views read it.
type Layout struct {
	// Balances are the base slots of the mappings balanceOf(address)
	// reads at the address asked (two for a reflection token).
	Balances [][32]byte
	// TotalSupply is the slot totalSupply() returns; TotalSupplyKnown is
	// false when it returns a constant or something else.
	TotalSupply      [32]byte
	TotalSupplyKnown bool
	// Owner is the field owner() returns (Kind TargetSlot), zero when it
	// returns something else (a constant, nothing).
	Owner Target
	// Getters are the fields some function returns whole, on every path
	// that succeeds (owner(), pauser(), a public variable): stored
	// addresses anyone can read by name.
	Getters []Target
	// BalanceBits is the mask balanceOf applies to a balance entry (a
	// token packing a flag beside the balance, as FiatToken v2.2 packs
	// its blacklist bit); all ones when it applies none.
	BalanceBits uint256.Int
}

// Well-known selectors the analysis reads the layout and transfers from.
var (
	selBalanceOf    = Selector{0x70, 0xa0, 0x82, 0x31}
	selTotalSupply  = Selector{0x18, 0x16, 0x0d, 0xdd}
	selTransfer     = Selector{0xa9, 0x05, 0x9c, 0xbb}
	selTransferFrom = Selector{0x23, 0xb8, 0x72, 0xdd}
	selOwner        = Selector{0x8d, 0xa5, 0xcb, 0x5b}
)

// calldataSize is the CALLDATASIZE a function is followed with: room for
// any fixed arguments, so the ABI decoder's length checks pass.
const calldataSize = 4 + 32*64

// AnalyzeEffects follows every function of code (the selectors of s, the
// scan of the same code, and the fallback) and reports their effects.
func AnalyzeEffects(code []byte, s Scan) Effects {
	body, _ := StripMetadata(code)
	dests := make([]bool, len(code))
	for pc := 0; pc < len(code); pc += 1 + pushSize(code[pc]) {
		dests[pc] = code[pc] == opJUMPDEST
	}
	end := max(s.CodeEnd, len(body))
	e := Effects{Complete: true, gateConds: map[Gate][]cond{}, writeVals: map[writeKey][]*term{}}
	joins, consts := joinPoints(code, dests), make([]*term, len(code))
	spent := 0
	explore := func(sel Selector) *explorer {
		x := newExplorer(code, end, dests, sel, calldataSize)
		x.joins, x.consts = joins, consts
		if spent >= maxCodeSteps {
			x.incomplete = true // the code's budget is spent
			return x
		}
		x.run()
		spent += x.steps
		if x.incomplete && !x.cutByJump && spent < maxCodeSteps {
			// Past its bounds: once more, widening the values of paths
			// that keep meeting (pure computation), which over-approximates
			// its paths and can only add effects.
			w := newExplorer(code, end, dests, sel, calldataSize)
			w.joins, w.consts, w.widen, w.visits = joins, consts, true, map[int]int{}
			w.run()
			spent += w.steps
			if !w.incomplete {
				return w
			}
		}
		return x
	}
	xs := map[Selector]*explorer{}
	for _, sel := range s.Selectors {
		xs[sel] = explore(sel)
	}
	if x := xs[selBalanceOf]; x != nil {
		e.Layout.Balances = balanceSlots(x)
	}
	if x := xs[selTotalSupply]; x != nil {
		e.Layout.TotalSupply, e.Layout.TotalSupplyKnown = supplySlot(x)
	}
	if x := xs[selOwner]; x != nil {
		if slot, offset, ok := returnedField(x); ok {
			e.Layout.Owner = Target{Kind: TargetSlot, Slot: slot, Offset: offset}
		}
	}
	for _, sel := range s.Selectors {
		if slot, offset, ok := returnedField(xs[sel]); ok {
			if g := (Target{Kind: TargetSlot, Slot: slot, Offset: offset}); !slices.Contains(e.Layout.Getters, g) {
				e.Layout.Getters = append(e.Layout.Getters, g)
			}
		}
	}
	e.Layout.BalanceBits.SetAllOne()
	if x := xs[selBalanceOf]; x != nil {
		e.Layout.BalanceBits = balanceBits(x)
	}
	fallback := Selector{0xff, 0xff, 0xff, 0xff}
	for s.Has(fallback) {
		fallback[3]--
	}
	for _, sel := range s.Selectors {
		e.Functions = append(e.Functions, e.summarize(sel, false, xs[sel]))
	}
	e.Functions = append(e.Functions, e.summarize(fallback, true, explore(fallback)))
	for _, f := range e.Functions {
		e.Complete = e.Complete && f.Complete
	}
	for _, sel := range []Selector{selTransfer, selTransferFrom} {
		if x := xs[sel]; x != nil {
			e.readTransfer(sel, x)
			if len(x.ends) <= maxWholeEnds && !x.incomplete && !x.widen {
				w := newExplorer(code, end, dests, sel, calldataSize)
				w.joins, w.consts, w.full = joins, consts, true
				w.run()
				if !w.incomplete {
					e.readAlternatives(sel, w)
				}
			}
		}
	}
	e.prog = &program{code: code, end: end, dests: dests, noJoins: make([]bool, len(code)), selectors: s.Selectors}
	return e
}

// summarize turns one function's paths into its effects.
func (e *Effects) summarize(sel Selector, fallback bool, x *explorer) Function {
	f := Function{Selector: sel, Fallback: fallback, Complete: !x.incomplete}
	type key struct {
		t Target
		c Change
	}
	writes := map[key]*Write{}
	var order []key
	var delegate Guarded
	for _, end := range x.ends {
		if !end.ok {
			continue
		}
		guards := pathGuards(end.conds)
		mint, seize := e.supplyEffects(end)
		if mint {
			f.Mints = addGuards(f.Mints, guards)
		}
		if seize {
			f.Seizes = addGuards(f.Seizes, guards)
		}
		for _, w := range end.writes {
			t := target(w.slot)
			t.Offset, t.Packed = packedField(w)
			k := key{t, change(w)}
			wr := writes[k]
			if wr == nil {
				wr = &Write{Target: k.t, Change: k.c, Ceiling: true, Floor: true}
				writes[k] = wr
				order = append(order, k)
			}
			wr.add(guards)
			wk := writeKey{sel, fallback, k.t, k.c}
			if !slices.ContainsFunc(e.writeVals[wk], func(v *term) bool { return v.hash == w.val.hash }) {
				e.writeVals[wk] = append(e.writeVals[wk], w.val)
			}
			bound, capped, floor := bounds(w.val, end.conds)
			if capped && bound.Gt(&wr.Bound) {
				wr.Bound = bound
			}
			wr.Ceiling = wr.Ceiling && capped
			wr.Floor = wr.Floor && floor
		}
		for _, c := range end.calls {
			if c.op == opDELEGATECALL {
				delegate.add(guards)
				if fw := forwarderOf(c); !slices.Contains(e.Forwards, fw) {
					e.Forwards = append(e.Forwards, fw)
				}
			}
		}
		if end.selfdestruct {
			f.SelfDestruct = addGuards(f.SelfDestruct, guards)
		}
	}
	for _, k := range order {
		f.Writes = append(f.Writes, *writes[k])
	}
	if delegate.Open || len(delegate.Guards) > 0 {
		f.DelegateCalls = []Guarded{delegate}
	}
	return f
}

// forwarderOf classifies a DELEGATECALL's target as the path found it.
func forwarderOf(c callSite) Forwarder {
	fw := Forwarder{PC: c.pc}
	t, _ := strip(c.target)
	switch {
	case t.op == tConst:
		fw.Origin, fw.Address = OriginConstant, t.k.Bytes20()
	case t.op == tSelf:
		fw.Origin = OriginSelf
	case t.has&hasCalldata != 0 && t.has&hasSload == 0:
		fw.Origin = OriginCalldata
	default:
		if f, ok := asField(t); ok && f.slot.op == tConst && f.offset == 0 {
			fw.Origin, fw.Slot = OriginSlot, f.slot.k.Bytes32()
		}
	}
	return fw
}

func addGuards(g *Guarded, guards []Guard) *Guarded {
	if g == nil {
		g = &Guarded{}
	}
	g.add(guards)
	return g
}

// flagOnly: w sets or clears only bits of a balance entry outside those
// balanceOf reads (OR with, or AND with, a constant that leaves them).
func (e *Effects) flagOnly(w write) bool {
	bits := &e.Layout.BalanceBits
	if new(uint256.Int).Not(bits).IsZero() {
		return false
	}
	v := w.val
	if v.op != tOp || len(v.args) != 2 || (v.code != 0x17 && v.code != opAND) {
		return false
	}
	for i, a := range v.args {
		if a.op != tConst || !isOld(v.args[1-i], w.slot) {
			continue
		}
		if v.code == 0x17 { // OR: sets no balance bit
			return new(uint256.Int).And(&a.k, bits).IsZero()
		}
		// AND: keeps every balance bit
		return new(uint256.Int).Or(&a.k, new(uint256.Int).Not(bits)).Eq(new(uint256.Int).SetAllOne())
	}
	return false
}

// supplyEffects reads a path that succeeds for a mint (a balance or the
// total supply credited or set while no balance is debited: tokens from
// nowhere) and a seizure (a balance other than the caller's or the
// contract's debited or set without an allowance being spent). A
// reflection token's move of an account between its two balance
// mappings is neither.
func (e *Effects) supplyEffects(end pathEnd) (mint, seize bool) {
	var credit, debit, allowance bool
	// A reflection token (two balance mappings) moves an account between
	// them when it excludes it from rewards or includes it again: the path
	// also writes the account's entry of a list (_isExcluded[account]).
	// Its balance, as balanceOf reads it, does not change.
	moved := map[uint64]bool{}
	if len(e.Layout.Balances) > 1 {
		for _, w := range end.writes {
			if t := target(w.slot); t.Kind == TargetMapping && !t.Nested && !slices.Contains(e.Layout.Balances, t.Slot) {
				key, _, _ := mapping(w.slot)
				k, _ := strip(key)
				moved[k.hash] = true
			}
		}
	}
	for _, w := range end.writes {
		t := target(w.slot)
		if t.Kind == TargetMapping && slices.Contains(e.Layout.Balances, t.Slot) && e.flagOnly(w) {
			continue // a flag beside the balance, the balance kept
		}
		if t.Kind == TargetMapping && len(moved) > 0 {
			if key, _, ok := mapping(w.slot); ok {
				if k, _ := strip(key); moved[k.hash] && slices.Contains(e.Layout.Balances, t.Slot) {
					continue
				}
			}
		}
		switch {
		case t.Kind == TargetMapping && t.Nested:
			allowance = true
		case t.Kind == TargetMapping && slices.Contains(e.Layout.Balances, t.Slot):
			switch change(w) {
			case ChangeIncrease:
				credit = true
			case ChangeDecrease:
				debit = true
				seize = seize || (t.Key != KeyCaller && t.Key != KeySelf)
			default:
				credit = true
				seize = seize || (t.Key != KeyCaller && t.Key != KeySelf)
			}
		case t.Kind == TargetSlot && e.Layout.TotalSupplyKnown && t.Slot == e.Layout.TotalSupply && change(w) != ChangeDecrease:
			credit = true
		}
	}
	return credit && !debit, seize && !allowance
}

func (g *Guarded) add(guards []Guard) {
	if len(guards) == 0 {
		g.Open = true
	}
	for _, gd := range guards {
		if !slices.Contains(g.Guards, gd) {
			g.Guards = append(g.Guards, gd)
		}
	}
}

// pathGuards are the caller checks a path passed: the caller (or
// tx.origin) equal to a slot's address or a constant, or a mapping keyed
// by the caller found set.
func pathGuards(conds []cond) []Guard {
	var out []Guard
	for _, c := range conds {
		var g Guard
		var ok bool
		switch {
		case c.truth && c.base.op == tOp && c.base.code == opEQ:
			g, ok = callerEquals(c.base.args[0], c.base.args[1])
		case !c.truth && c.base.op == tOp && (c.base.code == opSUB || c.base.code == opXOR):
			g, ok = callerEquals(c.base.args[0], c.base.args[1])
		case c.truth:
			g, ok = callerListed(c.base)
		}
		if ok && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// callerEquals reads a == b as a caller check.
func callerEquals(a, b *term) (Guard, bool) {
	a, _ = strip(a)
	b, _ = strip(b)
	if b.op == tCaller || b.op == tOrigin {
		a, b = b, a
	}
	if a.op != tCaller && a.op != tOrigin {
		return Guard{}, false
	}
	g := Guard{Origin: a.op == tOrigin}
	if b.op == tConst {
		g.Kind = GuardConstant
		w := b.k.Bytes20()
		g.Address = w
		return g, true
	}
	if f, ok := asField(b); ok && f.slot.op == tConst {
		g.Kind, g.Slot, g.Offset = GuardSlot, f.slot.k.Bytes32(), f.offset
		return g, true
	}
	return Guard{}, false
}

// callerListed reads a condition as a mapping keyed by the caller found
// set: m[caller], or roles[role][caller] (OpenZeppelin's AccessControl
// keeps members in a struct under the role: the member mapping's base is
// the role's slot, hashed).
func callerListed(t *term) (Guard, bool) {
	if t.op == tOp && (t.code == 0x11 || t.code == 0x10) { // GT(x, 0), LT(0, x)
		x, zero := t.args[0], t.args[1]
		if t.code == 0x10 {
			x, zero = zero, x
		}
		if !zero.isConstU64(0) {
			return Guard{}, false
		}
		t, _ = strip(x)
	}
	f, ok := asField(t)
	if !ok {
		return Guard{}, false
	}
	key, base, ok := mapping(f.slot)
	if !ok {
		return Guard{}, false
	}
	if k, _ := strip(key); k.op != tCaller && k.op != tOrigin {
		return Guard{}, false
	}
	g := Guard{Kind: GuardMapping, Origin: key.op == tOrigin}
	for base.op != tConst {
		// roles[role].members[caller]: the base is keccak(role, slot)
		// (plus a member offset, 0 in OpenZeppelin's layout).
		_, inner, ok := mapping(base)
		if !ok {
			return Guard{}, false
		}
		base = inner
	}
	g.Slot = base.k.Bytes32()
	return g, true
}

// target classifies a written or read slot.
func target(slot *term) Target {
	if slot.op == tConst {
		return Target{Kind: TargetSlot, Slot: slot.k.Bytes32()}
	}
	key, base, ok := mapping(slot)
	if !ok {
		return Target{Kind: TargetComputed}
	}
	t := Target{Kind: TargetMapping, Key: keyKind(key)}
	for base.op != tConst {
		_, inner, ok := mapping(base)
		if !ok {
			return Target{Kind: TargetComputed}
		}
		base, t.Nested = inner, true
	}
	t.Slot = base.k.Bytes32()
	return t
}

func keyKind(key *term) KeyKind {
	k, _ := strip(key)
	switch k.op {
	case tCaller:
		return KeyCaller
	case tOrigin:
		return KeyOrigin
	case tSelf:
		return KeySelf
	case tConst:
		return KeyConst
	}
	if contains(k, func(t *term) bool { return t.op == tCalldata || t.op == tOp && t.code == opCALLDATALOAD }) &&
		!contains(k, func(t *term) bool { return t.op == tSload }) {
		return KeyArg
	}
	return KeyOther
}

// change reads how a write changes its slot: old + x, old − x, or a new
// value (a packed field's write keeps the other bits: OR(AND(old, mask),
// value), judged on value).
func change(w write) Change {
	v := w.val
	if v.op == tOp && v.code == 0x17 && len(v.args) == 2 { // OR: a packed field
		for i, a := range v.args {
			if a.op == tOp && a.code == opAND && (isOld(a.args[0], w.slot) || isOld(a.args[1], w.slot)) {
				v = v.args[1-i]
			}
		}
	}
	v, _ = strip(v)
	if v.op == tOp && len(v.args) == 2 {
		switch {
		case v.code == 0x01 && (isOld(v.args[0], w.slot) || isOld(v.args[1], w.slot)):
			return ChangeIncrease
		case v.code == opSUB && isOld(v.args[0], w.slot):
			return ChangeDecrease
		}
	}
	return ChangeSet
}

// packedField reads a write that keeps the slot's other bits,
// OR(AND(old, keep), value), or AND(old, keep) when the value is zero:
// the field written starts at keep's lowest cleared bit.
func packedField(w write) (offset uint, packed bool) {
	v := w.val
	parts := []*term{v} // AND(old, keep) alone: the field set to zero
	if v.op == tOp && v.code == 0x17 && len(v.args) == 2 {
		parts = v.args
	}
	for _, a := range parts {
		if a.op != tOp || a.code != opAND {
			continue
		}
		for i, m := range a.args {
			if m.op == tConst && isOld(a.args[1-i], w.slot) {
				ones := new(uint256.Int).Not(&m.k) // the bits written
				if ones.IsZero() {
					return 0, false
				}
				n := uint(0)
				for new(uint256.Int).Rsh(ones, n).Uint64()&1 == 0 {
					n++
				}
				return n, true
			}
		}
	}
	return 0, false
}

// Covers: a write to t may change what u reads (the same slot, and the
// same field unless t is a whole-word write).
func (t Target) Covers(u Target) bool {
	return t.Kind == u.Kind && t.Slot == u.Slot && t.Nested == u.Nested && (!t.Packed || t.Offset == u.Offset)
}

func isOld(t, slot *term) bool {
	t, _ = strip(t)
	return t.op == tSload && t.args[0].hash == slot.hash
}

// bounds reads the limits a path put on what it writes: a condition it
// passed comparing the written argument (or a sum of arguments) with a
// constant below 2^32 from above (require(fee <= 25): a ceiling, the
// constant), or from below with a positive constant or a stored value
// (require(max >= totalSupply / 1000): a floor).
func bounds(val *term, conds []cond) (ceil uint256.Int, hasCeil, floor bool) {
	v, _ := strip(val)
	args := map[uint64]bool{}
	visit(v, func(t *term) {
		if t.op == tCalldata {
			args[t.hash] = true
		}
	})
	if len(args) == 0 {
		return ceil, false, false
	}
	isArg := func(t *term) bool {
		t, _ = strip(t)
		return t.hash == v.hash || args[t.hash] || t.op == tOp && t.code == 0x01 && args[t.args[0].hash] && args[t.args[1].hash]
	}
	for _, c := range conds {
		b := c.base
		if b.op != tOp || (b.code != 0x10 && b.code != 0x11) {
			continue
		}
		// Taken as written: lo < hi (strictly or not).
		lo, hi := b.args[0], b.args[1]   // LT true: a < b
		if (b.code == 0x11) == c.truth { // GT true: a > b; LT false: a >= b
			lo, hi = hi, lo
		}
		switch {
		case isArg(lo) && hi.op == tConst && hi.k.IsUint64() && hi.k.Uint64() < 1<<32:
			if !hasCeil || hi.k.Gt(&ceil) {
				ceil, hasCeil = hi.k, true
			}
		case isArg(hi) && (lo.op == tConst && !lo.k.IsZero() || lo.op != tConst && lo.has&hasSload != 0 && lo.has&hasCalldata == 0):
			floor = true
		}
	}
	return ceil, hasCeil, floor
}

// balanceSlots: the mapping bases balanceOf returns an element of, keyed
// by its argument, on its paths that succeed.
func balanceSlots(x *explorer) [][32]byte {
	var out [][32]byte
	for _, end := range x.ends {
		if !end.ok || len(end.ret) == 0 {
			continue
		}
		visit(end.ret[0], func(t *term) {
			if t.op != tSload {
				return
			}
			if tg := target(t.args[0]); tg.Kind == TargetMapping && !tg.Nested && tg.Key == KeyArg && !slices.Contains(out, tg.Slot) {
				out = append(out, tg.Slot)
			}
		})
	}
	slices.SortFunc(out, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// balanceBits: the low-bits mask every path of balanceOf that succeeds
// applies to what it returns, all ones when one applies none.
func balanceBits(x *explorer) uint256.Int {
	var bits uint256.Int
	found := false
	for _, end := range x.ends {
		if !end.ok || len(end.ret) == 0 {
			continue
		}
		r := end.ret[0]
		var m uint256.Int
		m.SetAllOne()
		if r.op == tOp && r.code == opAND && len(r.args) == 2 {
			for _, a := range r.args {
				if a.op == tConst && lowMask(&a.k) {
					m = a.k
				}
			}
		}
		if found && !m.Eq(&bits) {
			bits.SetAllOne()
			return bits
		}
		bits, found = m, true
	}
	if !found {
		bits.SetAllOne()
	}
	return bits
}

// supplySlot: the slot totalSupply returns, when every path that
// succeeds returns that one slot.
func supplySlot(x *explorer) ([32]byte, bool) {
	slot, _, ok := returnedField(x)
	return slot, ok
}

// returnedField: the storage field every path that succeeds returns.
func returnedField(x *explorer) (slot [32]byte, offset uint, found bool) {
	for _, end := range x.ends {
		if !end.ok || len(end.ret) == 0 {
			continue
		}
		f, ok := asField(end.ret[0])
		if !ok || f.slot.op != tConst || (found && (f.slot.k.Bytes32() != slot || f.offset != offset)) {
			return [32]byte{}, 0, false
		}
		slot, offset, found = f.slot.k.Bytes32(), f.offset, true
	}
	return slot, offset, found
}

// readTransfer collects the gates, fees and hooks of transfer or
// transferFrom.
func (e *Effects) readTransfer(sel Selector, x *explorer) {
	balances := e.balanceOrAllowance
	for _, end := range x.ends {
		if end.ok {
			e.readCredits(end, balances)
			e.readHooks(end)
			continue
		}
		if end.panic {
			continue
		}
		for _, g := range gatesOf(end.conds, sel, balances) {
			e.addGate(g)
		}
	}
	e.sortGates()
}

// maxWholeEnds bounds the transfer functions whose paths are followed
// whole once more for the alternatives of their deciding conditions.
const maxWholeEnds = 2_000

// readAlternatives adds the gates gatesOf cannot see: the alternatives of
// a revert's deciding condition. In require(open || team[from]) a closed
// switch reverts only for a sender not on the team, so the deciding
// condition is the list, and the switch is its alternative: a condition
// of the reverting path right before the deciding one (exemptions and
// other alternatives between) whose other way, after the same conditions
// before it, leads a path to succeed without asking the deciding
// condition at all (a condition whose other way succeeds only by passing
// the deciding one, as a switch before a balance check, is none).
// w followed transfer or transferFrom keeping every condition of every
// path.
func (e *Effects) readAlternatives(sel Selector, w *explorer) {
	balances := e.balanceOrAllowance
	type turn struct {
		prefix, base uint64
		truth        bool
	}
	// The conditions each successful path asks after each turn it takes.
	after := map[turn][]map[uint64]bool{}
	for _, end := range w.ends {
		if !end.ok {
			continue
		}
		h := uint64(0)
		for i, c := range end.conds {
			rest := map[uint64]bool{}
			for _, r := range end.conds[i+1:] {
				rest[r.base.hash] = true
			}
			k := turn{h, c.base.hash, c.truth}
			after[k] = append(after[k], rest)
			h = mix(h, condHash(c))
		}
	}
	for _, end := range w.ends {
		if end.ok || end.panic {
			continue
		}
		decider := -1
		for i := len(end.conds) - 1; i >= 0; i-- {
			if !exemption(end.conds[i].base) {
				decider = i
				break
			}
		}
		if decider < 1 {
			continue
		}
		d := end.conds[decider].base.hash
		prefixes := make([]uint64, decider+1)
		for i, c := range end.conds[:decider] {
			prefixes[i+1] = mix(prefixes[i], condHash(c))
		}
		// Back from the deciding condition, through the exemptions and the
		// alternatives right before it (a || b || c), no further.
		for j := decider - 1; j >= 0; j-- {
			c := end.conds[j]
			if exemption(c.base) {
				continue
			}
			if !slices.ContainsFunc(after[turn{prefixes[j], c.base.hash, !c.truth}], func(rest map[uint64]bool) bool { return !rest[d] }) {
				break
			}
			for _, g := range gatesOf([]cond{c}, sel, balances) {
				e.addGate(g)
			}
		}
	}
	e.sortGates()
}

// balanceOrAllowance: t is an entry of a balance mapping or of a mapping
// of mappings (allowances): storage a transfer moves, not a gate.
func (e *Effects) balanceOrAllowance(t Target) bool {
	return t.Kind == TargetMapping && (t.Nested || slices.Contains(e.Layout.Balances, t.Slot))
}

// addGate records a gate and the condition that decided it.
func (e *Effects) addGate(g gateCond) {
	if !slices.Contains(e.Gates, g.Gate) {
		e.Gates = append(e.Gates, g.Gate)
	}
	if !slices.ContainsFunc(e.gateConds[g.Gate], func(c cond) bool { return c.base.hash == g.cond.base.hash && c.truth == g.cond.truth }) {
		e.gateConds[g.Gate] = append(e.gateConds[g.Gate], g.cond)
	}
}

func (e *Effects) sortGates() {
	slices.SortFunc(e.Gates, func(a, b Gate) int {
		return cmp.Or(bytes.Compare(a.Target.Slot[:], b.Target.Slot[:]), cmp.Compare(a.Kind, b.Kind), bytes.Compare(a.Selector[:], b.Selector[:]))
	})
}

// gatesOf reads the storage that decided a reverting path: its last
// condition, or, when that compared an address with an address in storage
// (an exemption: from == owner), the condition before it.
func gatesOf(conds []cond, sel Selector, skip func(Target) bool) []gateCond {
	for i := len(conds) - 1; i >= 0; i-- {
		c := conds[i]
		if exemption(c.base) {
			continue
		}
		var out []gateCond
		kind := gateKind(c.base)
		for _, r := range directReads(c.base) {
			t := target(r.slot)
			t.Offset = r.offset
			if t.Kind == TargetComputed || skip(t) {
				continue
			}
			k := kind
			if t.Kind == TargetMapping && k == GateFlag {
				k = GateList
			}
			out = append(out, gateCond{Gate{Target: t, Kind: k, Selector: sel}, c})
		}
		return out
	}
	return nil
}

// gateCond is a gate with the condition that decided its revert.
type gateCond struct {
	Gate
	cond cond
}

// Closes reports whether function f's write w can close gate g: make
// transfer revert where it did not. A value the caller passes can; a
// constant can when the gate's condition, with the constant in place of
// what it reads, takes the reverting way (pause() sets paused, but
// enableTrading() only opens a switch), and for a limit or a wait when the
// constant is small enough to bite (removeLimits() sets the maximum); a
// stored value (the supply) cannot set a limit low and is taken to be
// able to close anything else.
func (e Effects) Closes(g Gate, f Function, w Write) bool {
	limit := g.Kind == GateLimit || g.Kind == GateCooldown
	for _, val := range e.writeVals[writeKey{f.Selector, f.Fallback, w.Target, w.Change}] {
		v := fieldValue(val, w.Target)
		switch {
		case v.has&hasCalldata != 0:
			return true
		case v.op != tConst:
			if !limit {
				return true
			}
		case limit:
			if v.k.IsUint64() && v.k.Uint64() < 1<<32 {
				return true
			}
		default:
			for _, c := range e.gateConds[g] {
				r := replaceField(c.base, g.Target, v)
				if r.op != tConst || r.k.IsZero() != c.truth {
					return true // undecided, or it takes the reverting way
				}
			}
		}
	}
	return false
}

// fieldValue is what a write stores in its target's field: the value
// itself, or for a packed field the part OR-ed into the kept bits,
// shifted down.
func fieldValue(val *term, t Target) *term {
	if !t.Packed {
		v, _ := strip(val)
		return v
	}
	var x *term = constU64(0) // AND(old, keep) alone: the field cleared
	if val.op == tOp && val.code == 0x17 && len(val.args) == 2 {
		x = val.args[0]
		if x.op == tOp && x.code == opAND {
			x = val.args[1]
		}
	}
	shift := constU64(uint64(t.Offset))
	if x.op == tOp && x.code == opSHL && x.args[0].isConstU64(uint64(t.Offset)) {
		x = x.args[1]
	} else {
		x = apply(opSHR, shift, x)
	}
	v, _ := strip(x)
	return v
}

// replaceField puts v in place of every read of t's field in c, and folds.
func replaceField(c *term, t Target, v *term) *term {
	done := map[*term]*term{}
	var walk func(*term) *term
	walk = func(c *term) *term {
		if r, ok := done[c]; ok {
			return r
		}
		r := c
		if f, ok := asField(c); ok && target(f.slot).Kind == t.Kind && target(f.slot).Slot == t.Slot && f.offset == t.Offset {
			r = v
		} else if c.op == tOp {
			args := make([]*term, len(c.args))
			changed := false
			for i, a := range c.args {
				args[i] = walk(a)
				changed = changed || args[i] != a
			}
			if changed {
				r = apply(c.code, args...)
			}
		}
		done[c] = r
		return r
	}
	return walk(c)
}

// exemption: an address of the call (the caller, tx.origin, an
// argument, the contract) compared for equality with a stored or
// constant address (from == owner, to == pair).
func exemption(t *term) bool {
	if t.op != tOp || (t.code != opEQ && t.code != opSUB && t.code != opXOR) {
		return false
	}
	a, _ := strip(t.args[0])
	b, _ := strip(t.args[1])
	input := func(x *term) bool {
		return x.op == tCaller || x.op == tOrigin || x.op == tCalldata || x.op == tSelf
	}
	stored := func(x *term) bool {
		_, isField := asField(x)
		return isField || x.op == tConst
	}
	return input(a) && stored(b) || input(b) && stored(a)
}

// gateKind: compared with the time, a cooldown; with the amount or a
// balance (arguments), a limit; otherwise a flag or a list.
func gateKind(t *term) GateKind {
	switch {
	case t.has&hasTime != 0:
		return GateCooldown
	case t.op == tOp && (t.code == 0x10 || t.code == 0x11 || t.code == 0x12 || t.code == 0x13) && t.has&hasCalldata != 0:
		return GateLimit
	}
	return GateFlag
}

// directReads are the storage fields a condition reads outside
// arithmetic that scales (MUL, DIV, MOD, EXP): what the condition tests,
// not what it computes a fee or an overflow check from.
func directReads(t *term) []field {
	var out []field
	walk(t, func(t *term) bool {
		if f, ok := asField(t); ok {
			out = append(out, f)
			return false
		}
		switch {
		case t.op != tOp:
			return false
		case t.code == 0x02, t.code == 0x04, t.code == 0x05, t.code == 0x06, t.code == 0x07, t.code == 0x0a:
			return false // scaling arithmetic
		}
		return true
	})
	return out
}

// readCredits collects the storage read into a credited amount's scaling:
// balances written with a value that multiplies or divides by a stored
// rate, with the constant divisor of the product when there is one.
func (e *Effects) readCredits(end pathEnd, balances func(Target) bool) {
	add := func(scaled *term, divisor *uint256.Int) {
		visit(scaled, func(r *term) {
			if r.op != tSload {
				return
			}
			tg := target(r.args[0])
			if tg.Kind == TargetComputed || balances(tg) {
				return
			}
			for i := range e.Fees {
				if e.Fees[i].Target == tg {
					if e.Fees[i].Divisor.IsZero() && divisor != nil {
						e.Fees[i].Divisor = *divisor
					}
					return
				}
			}
			f := Fee{Target: tg}
			if divisor != nil {
				f.Divisor = *divisor
			}
			e.Fees = append(e.Fees, f)
		})
	}
	for _, w := range end.writes {
		if t := target(w.slot); !balances(t) || t.Nested {
			continue
		}
		visit(w.val, func(t *term) {
			if t.op != tOp {
				return
			}
			if _, isField := asField(t); isField {
				return
			}
			switch {
			case t.code == opDIV && t.args[1].op == tConst:
				add(t.args[0], &t.args[1].k)
			case t.code == 0x02 || t.code == opDIV:
				add(t, nil)
			}
		})
	}
}

// readHooks collects the external contracts a successful transfer calls.
func (e *Effects) readHooks(end pathEnd) {
	for _, c := range end.calls {
		if c.op == opDELEGATECALL {
			continue
		}
		t, _ := strip(c.target)
		var h Hook
		switch {
		case t.op == tConst:
			h.Address = t.k.Bytes20()
		default:
			f, ok := asField(t)
			if !ok || f.slot.op != tConst {
				continue
			}
			h.Target = Target{Kind: TargetSlot, Slot: f.slot.k.Bytes32(), Offset: f.offset}
		}
		if !slices.Contains(e.Hooks, h) {
			e.Hooks = append(e.Hooks, h)
		}
	}
}
