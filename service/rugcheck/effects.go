package rugcheck

import (
	"bytes"
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/service/bytecode"
)

// Classes found only by effect.
const (
	// Seize: a function debits balances not its caller's without an
	// allowance (seize, burn-from).
	Seize Class = "seize"
	// Hook: transfer calls an external contract whose address a guarded
	// function sets (an "antibot" that can refuse any transfer).
	Hook Class = "hook"
)

// openers are the selectors of functions whose writes only open what
// transfer checks (enableTrading() switching trading on for good,
// removeLimits() lifting a limit) and that hold none of powers: a name
// that reveals a capability is cleared by them when the whole code was
// followed (RC-14).
func openers(e bytecode.Effects, powers []Power) []bytecode.Selector {
	if !e.Complete {
		return nil
	}
	var out []bytecode.Selector
	for _, f := range e.Functions {
		if f.Fallback || slices.ContainsFunc(powers, func(p Power) bool { return p.Selector == f.Selector }) {
			continue
		}
		opens := false
		for _, w := range f.Writes {
			for _, g := range e.Gates {
				if w.Target.Covers(g.Target) && privileged(&w.Guarded) && !e.Closes(g, f, w) {
					opens = true
				}
			}
		}
		if opens {
			out = append(out, f.Selector)
		}
	}
	return out
}

// Power is a privileged capability found by what a function does, not by
// its name (rule RC-14).
type Power struct {
	Class    Class
	Selector bytecode.Selector
	Fallback bool
	// Effect says what the function does, for the evidence.
	Effect string
	// Guards are the caller checks on the paths with the effect.
	Guards []bytecode.Guard
	// Capped: a fee whose every setter bounds it at or below MaxCappedFee
	// of the amount (Cap says the bound).
	Capped bool
	Cap    string
	// Floor: a limit whose every setter refuses values below a positive
	// constant or a share of the supply: it cannot freeze holders.
	Floor bool
}

// MaxCappedFee is the largest fee ceiling, as a fraction of the amount,
// that a fee setter may have for its tax to count as capped (WARN rather
// than a FAIL).
const MaxCappedFee = 0.25

// Powers derives the privileged capabilities from a token's effects: a
// function's effect counts when every path reaching it checks its caller
// (a guard); effects anyone can cause (transfer itself, a public mint
// paid in ETH) are no privilege.
//
//   - mint: paths that credit a balance or the supply and debit none;
//   - seize: paths that debit a balance not the caller's, spending no
//     allowance;
//   - blacklist, trading switch (pause for pause()/unpause()), limit:
//     writes to what transfer reads on a path that reverts (a mapping
//     keyed by an address; a flag; a value compared with the amount, a
//     balance or the time);
//   - fee: writes to a rate transfer scales the credited amount by;
//   - hook: writes to the address of a contract transfer calls;
//   - upgrade: writes to the slot a DELEGATECALL reads its code from.
func Powers(e bytecode.Effects) []Power {
	var out []Power
	add := func(p Power) {
		for i, q := range out {
			if q.Class == p.Class && q.Selector == p.Selector && q.Fallback == p.Fallback {
				for _, g := range p.Guards {
					if !slices.Contains(out[i].Guards, g) {
						out[i].Guards = append(out[i].Guards, g)
					}
				}
				out[i].Capped = out[i].Capped && p.Capped
				out[i].Floor = out[i].Floor && p.Floor
				return
			}
		}
		out = append(out, p)
	}
	for _, f := range e.Functions {
		if privileged(f.Mints) {
			add(Power{Class: Mint, Selector: f.Selector, Fallback: f.Fallback, Effect: "credits a balance or the total supply and debits no balance", Guards: f.Mints.Guards})
		}
		if privileged(f.Seizes) {
			add(Power{Class: Seize, Selector: f.Selector, Fallback: f.Fallback, Effect: "debits a balance not the caller's and spends no allowance", Guards: f.Seizes.Guards})
		}
	}
	writers := func(t bytecode.Target, each func(f bytecode.Function, w bytecode.Write)) {
		for _, f := range e.Functions {
			for _, w := range f.Writes {
				if w.Target.Covers(t) && privileged(&w.Guarded) {
					each(f, w)
				}
			}
		}
	}
	for _, g := range e.Gates {
		writers(g.Target, func(f bytecode.Function, w bytecode.Write) {
			if !e.Closes(g, f, w) {
				return // it only opens the gate (enableTrading(), removeLimits())
			}
			class := gateClass(g.Kind, f.Selector)
			p := Power{Class: class, Selector: f.Selector, Fallback: f.Fallback, Guards: w.Guards, Floor: class == Limit && w.Floor,
				Effect: fmt.Sprintf("writes %s, which %s reads on a path that reverts (%s)", g.Target.String(), selectorName(g.Selector), gateText[g.Kind])}
			if p.Floor {
				p.Effect += ", with a floor"
			}
			add(p)
		})
	}
	for _, fee := range e.Fees {
		writers(fee.Target, func(f bytecode.Function, w bytecode.Write) {
			p := Power{Class: Fee, Selector: f.Selector, Fallback: f.Fallback, Guards: w.Guards,
				Effect: fmt.Sprintf("writes %s, the rate transfer scales the credited amount by", fee.Target.String())}
			if w.Ceiling && !fee.Divisor.IsZero() {
				frac, _ := new(big.Rat).SetFrac(w.Bound.ToBig(), fee.Divisor.ToBig()).Float64()
				p.Capped = frac <= MaxCappedFee
				p.Cap = fmt.Sprintf("at most %s/%s", w.Bound.Dec(), fee.Divisor.Dec())
				p.Effect += ", " + p.Cap
			}
			add(p)
		})
	}
	for _, fw := range e.Forwards {
		if fw.Origin != bytecode.OriginSlot {
			continue
		}
		writers(bytecode.Target{Kind: bytecode.TargetSlot, Slot: fw.Slot}, func(f bytecode.Function, w bytecode.Write) {
			add(Power{Class: Upgrade, Selector: f.Selector, Fallback: f.Fallback, Guards: w.Guards,
				Effect: fmt.Sprintf("writes slot %s, the address whose code a DELEGATECALL runs", bytecode.SlotText(fw.Slot))})
		})
	}
	for _, h := range e.Hooks {
		if h.Target.Kind == 0 {
			continue // a constant address: no one can repoint it
		}
		writers(h.Target, func(f bytecode.Function, w bytecode.Write) {
			add(Power{Class: Hook, Selector: f.Selector, Fallback: f.Fallback, Guards: w.Guards,
				Effect: fmt.Sprintf("writes %s, the address of a contract transfer calls", h.Target.String())})
		})
	}
	// A mint or burn only an OP Stack bridge predeploy may call is the
	// bridge's protocol (supply burnt on one chain is minted on another):
	// no capability.
	out = slices.DeleteFunc(out, func(p Power) bool {
		return !slices.ContainsFunc(p.Guards, func(g bytecode.Guard) bool {
			_, bridge := bridges[g.Address]
			return g.Kind != bytecode.GuardConstant || !bridge
		})
	})
	for _, p := range out {
		slices.SortFunc(p.Guards, compareGuards)
	}
	slices.SortFunc(out, func(a, b Power) int {
		return cmp.Or(cmp.Compare(classRank(a.Class), classRank(b.Class)), bytes.Compare(a.Selector[:], b.Selector[:]))
	})
	return out
}

func compareGuards(a, b bytecode.Guard) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), bytes.Compare(a.Slot[:], b.Slot[:]), cmp.Compare(a.Offset, b.Offset), boolRank(a.Origin)-boolRank(b.Origin),
		bytes.Compare(a.Address[:], b.Address[:]))
}

// privileged: some path has the effect and every such path checks its
// caller.
func privileged(g *bytecode.Guarded) bool {
	return g != nil && !g.Open && len(g.Guards) > 0
}

var effectClassOrder = []Class{Mint, Seize, Blacklist, Pause, Fee, Limit, Trading, Hook, Upgrade}

func classRank(c Class) int { return slices.Index(effectClassOrder, c) }

// gateClass: a list is a blacklist (or allow-list), a flag a trading
// switch unless its writer is a known pause function, a limit or a
// cooldown a limit.
func gateClass(k bytecode.GateKind, writer bytecode.Selector) Class {
	switch k {
	case bytecode.GateList:
		return Blacklist
	case bytecode.GateLimit, bytecode.GateCooldown:
		return Limit
	}
	if known, ok := knownSelectors[writer]; ok && known.class == Pause {
		return Pause
	}
	return Trading
}

var gateText = map[bytecode.GateKind]string{
	bytecode.GateList:     "a list keyed by an address",
	bytecode.GateFlag:     "a switch",
	bytecode.GateLimit:    "a limit on the amount or a balance",
	bytecode.GateCooldown: "a wait compared with the time",
}

var transferNames = map[bytecode.Selector]string{
	{0xa9, 0x05, 0x9c, 0xbb}: "transfer",
	{0x23, 0xb8, 0x72, 0xdd}: "transferFrom",
}

func selectorName(s bytecode.Selector) string {
	if n, ok := transferNames[s]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", s[:])
}

// GuardText describes a guard for evidence.
func GuardText(g bytecode.Guard) string {
	who := "msg.sender"
	if g.Origin {
		who = "tx.origin"
	}
	switch g.Kind {
	case bytecode.GuardSlot:
		if g.Offset > 0 {
			return fmt.Sprintf("%s == the address in slot %s (bits from %d)", who, bytecode.SlotText(g.Slot), g.Offset)
		}
		return fmt.Sprintf("%s == the address in slot %s", who, bytecode.SlotText(g.Slot))
	case bytecode.GuardConstant:
		return fmt.Sprintf("%s == 0x%x (in the code)", who, g.Address[:])
	}
	return fmt.Sprintf("a mapping at slot %s keyed by %s is set", bytecode.SlotText(g.Slot), who)
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// effectVerdict is what the powers by effect add to a verdict.
type effectVerdict struct {
	has map[Class]bool
	// explained: selectors whose function has a power by effect.
	explained map[bytecode.Selector]bool
	// severeLive: a severe power with a live guard; hidden: a live guard
	// that is not owner(); incomplete: a function not followed.
	severeLive, hidden, incomplete bool
}

var deadAddress = [20]byte{18: 0xde, 19: 0xad}

// bridges are the OP Stack predeploys a bridged token lets mint and burn
// (ERC-7802's crosschainMint, OptimismMintableERC20's mint): the supply
// they create is burnt on another chain, so a guard that is one of them
// is no controller.
var bridges = map[[20]byte]string{
	{0: 0x42, 19: 0x28}: "SuperchainTokenBridge",
	{0: 0x42, 19: 0x10}: "L2StandardBridge",
}

func gone(a [20]byte) bool { return a == [20]byte{} || a == deadAddress }

// guardState says whether a guard still lets someone in, and why. A
// mapping keyed by the caller is an AccessControl role when the code has
// one (held as Facts.Roles says), else an allow-list assumed held.
func (e *EffectFacts) guardState(g bytecode.Guard, f Facts) (live bool, addr [20]byte, text string) {
	switch g.Kind {
	case bytecode.GuardSlot:
		v, read := e.Slots[SlotField{g.Slot, g.Offset}]
		if !read {
			return true, v, GuardText(g) + " (not read: assumed live)"
		}
		text := fmt.Sprintf("%s, which holds 0x%x", GuardText(g), v[:])
		if gone(v) {
			// Empty now, but a function someone alive may call can set it.
			if who, ok := e.settable(g, f); ok {
				return true, v, text + ", but " + who
			}
		}
		return !gone(v), v, text
	case bytecode.GuardConstant:
		if name, ok := bridges[g.Address]; ok {
			return false, g.Address, GuardText(g) + " (the OP Stack's " + name + " predeploy: supply moved between chains, no one's power)"
		}
		if slices.Contains(f.Pools, g.Address) {
			return false, g.Address, GuardText(g) + " (the token's own pool: a pool calls the token only to pay a swap, no one's power)"
		}
		return !gone(g.Address), g.Address, GuardText(g)
	}
	if f.RoleBased {
		held := slices.ContainsFunc(f.Roles, func(r Role) bool { return r.Held })
		if held {
			return true, [20]byte{}, GuardText(g) + " (an AccessControl role, held)"
		}
		return false, [20]byte{}, GuardText(g) + " (an AccessControl role, held by no one)"
	}
	return true, [20]byte{}, GuardText(g) + " (its members cannot be listed from storage: assumed held)"
}

// settable says whether a function whose own guard is live can write the
// guard field g (setSpender() by a live owner, acceptOwnership() by a
// pending owner), and which: the field's emptiness is then no one's
// renounce. One level: a setter's own guards are judged by their words.
func (e *EffectFacts) settable(g bytecode.Guard, f Facts) (string, bool) {
	field := bytecode.Target{Kind: bytecode.TargetSlot, Slot: g.Slot, Offset: g.Offset}
	for _, w := range e.Setters {
		if !w.Target.Covers(field) {
			continue
		}
		for _, sg := range w.Guards {
			if sg.Kind == bytecode.GuardSlot {
				v, read := e.Slots[SlotField{sg.Slot, sg.Offset}]
				if !read || gone(v) {
					continue
				}
				return fmt.Sprintf("0x%x sets it, callable when %s, which holds 0x%x", w.Selector[:], GuardText(sg), v[:]), true
			}
			if live, _, text := e.guardState(sg, f); live && sg.Kind != bytecode.GuardSlot {
				return fmt.Sprintf("0x%x sets it, callable when %s", w.Selector[:], text), true
			}
		}
	}
	return "", false
}

// evaluateEffects adds the flags of the powers by effect (RC-14), hidden
// owners (RC-15), fake renounces (RC-16) and an incomplete analysis
// (RC-17).
func evaluateEffects(f Facts, add func(flag, rule, evidence string)) effectVerdict {
	out := effectVerdict{has: map[Class]bool{}, explained: map[bytecode.Selector]bool{}}
	e := f.Effects
	if e == nil {
		return out
	}
	type liveGuard struct {
		guard bytecode.Guard
		addr  [20]byte
		power string
	}
	var hidden []liveGuard
	for _, p := range e.Powers {
		out.has[p.Class] = true
		if !p.Fallback {
			out.explained[p.Selector] = true
		}
		name := fmt.Sprintf("0x%x", p.Selector[:])
		if p.Fallback {
			name = "the fallback"
		}
		live := false
		var texts []string
		for _, g := range p.Guards {
			l, addr, text := e.guardState(g, f)
			texts = append(texts, text)
			live = live || l
			owners := e.Owner != nil && g.Kind == bytecode.GuardSlot && *e.Owner == (SlotField{g.Slot, g.Offset})
			if l && !owners && g.Kind != bytecode.GuardMapping && !slices.ContainsFunc(hidden, func(h liveGuard) bool { return h.guard == g }) {
				hidden = append(hidden, liveGuard{g, addr, name})
			}
		}
		state := "every guard is gone"
		if live {
			state = "live"
		}
		add(classFlag[p.Class], RuleEffect, fmt.Sprintf("%s in the %s code %s; callable when %s (%s)", name, e.Source, p.Effect, strings.Join(texts, ", or "), state))
		probedFloor := f.LimitFloor && slices.Contains(LimitSetters(), p.Selector)
		if live && !(p.Class == Fee && p.Capped) && !(p.Class == Limit && (p.Floor || probedFloor)) {
			out.severeLive = true
		}
	}
	for _, h := range hidden {
		out.hidden = true
		where := "owner() reads no storage field"
		if e.Owner != nil {
			where = "owner() reads slot " + bytecode.SlotText(e.Owner.Slot)
		}
		// A field a getter returns by name (pauser(), blacklister()) is a
		// declared controller: it controls, it is not hidden.
		if h.guard.Kind != bytecode.GuardSlot || !slices.Contains(e.Getters, SlotField{h.guard.Slot, h.guard.Offset}) {
			add(FlagHiddenOwner, RuleHiddenOwner, fmt.Sprintf("%s guards %s and is live (0x%x); %s", GuardText(h.guard), h.power, h.addr[:], where))
		}
		if e.HasRenounce && h.guard.Kind == bytecode.GuardSlot &&
			!slices.ContainsFunc(e.Renounce, func(t bytecode.Target) bool {
				return t.Covers(bytecode.Target{Kind: bytecode.TargetSlot, Slot: h.guard.Slot, Offset: h.guard.Offset})
			}) {
			add(FlagFakeRenounce, RuleFakeRenounce, fmt.Sprintf("renounceOwnership() does not clear slot %s, which guards %s and holds 0x%x", bytecode.SlotText(h.guard.Slot), h.power, h.addr[:]))
		}
	}
	if e.Incomplete {
		out.incomplete = true
		add(FlagUnanalysable, RuleUnanalysable, "a function of the "+e.Source+" code could not be followed to its end (a computed jump, or past the analysis bounds): its powers are unknown")
	}
	return out
}

// EffectFactsOf gathers the facts of a code's powers by effect, once per
// code: the addresses in their guard fields (GuardFields says which) are
// the caller's to read into Slots, with the Source, for each token.
func EffectFactsOf(e bytecode.Effects) EffectFacts {
	powers := Powers(e)
	fx := EffectFacts{Powers: powers, Incomplete: !e.Complete, Openers: openers(e, powers), Writers: gateWriters(e), Fees: e.Fees}
	for _, g := range e.Layout.Getters {
		fx.Getters = append(fx.Getters, SlotField{g.Slot, g.Offset})
	}
	fx.Setters = guardSetters(e, powers)
	if e.Layout.Owner.Kind == bytecode.TargetSlot {
		fx.Owner = &SlotField{e.Layout.Owner.Slot, e.Layout.Owner.Offset}
	}
	for _, fn := range e.Functions {
		if fn.Selector == selRenounceOwnership && !fn.Fallback {
			fx.HasRenounce = true
			for _, w := range fn.Writes {
				fx.Renounce = append(fx.Renounce, w.Target)
			}
		}
	}
	return fx
}

var selRenounceOwnership = bytecode.Selector{0x71, 0x50, 0x18, 0xa6}

// guardSetters are the functions that write the powers' guard fields and
// check their own caller (an owner's setSpender(), acceptOwnership()):
// who can fill a guard that is empty now. A write anyone can make is left
// out: an initializer that reverts once run looks the same.
func guardSetters(e bytecode.Effects, powers []Power) []GateWriter {
	var fields []bytecode.Target
	for _, p := range powers {
		for _, g := range p.Guards {
			if g.Kind == bytecode.GuardSlot {
				fields = append(fields, bytecode.Target{Kind: bytecode.TargetSlot, Slot: g.Slot, Offset: g.Offset})
			}
		}
	}
	return writersOf(e, fields, func(w bytecode.Write) bool { return privileged(&w.Guarded) })
}

// GuardFields are the storage fields whose addresses the verdict needs:
// the guards of the powers and of the gates' writers that are slots, and
// then owner()'s field (to tell a hidden owner); none when no power has a
// guard field, and no read.
func (fx *EffectFacts) GuardFields() []SlotField {
	var out []SlotField
	add := func(guards []bytecode.Guard) {
		for _, g := range guards {
			if f := (SlotField{g.Slot, g.Offset}); g.Kind == bytecode.GuardSlot && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	for _, p := range fx.Powers {
		add(p.Guards)
	}
	for _, w := range fx.Writers {
		add(w.Guards)
	}
	for _, w := range fx.Setters {
		add(w.Guards)
	}
	if o := fx.Owner; len(out) > 0 && o != nil && !slices.Contains(out, *o) {
		out = append(out, *o)
	}
	return out
}
