package rugcheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/holiman/uint256"

	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/trading"
)

// Flags of what a buyer faces now (rules RC-18 to RC-22), judged by their
// effect with the storage as it is, whoever can still change it.
const (
	FlagExtremeTax     = "extreme-tax"
	FlagHighTax        = "high-tax"
	FlagCannotSell     = "cannot-sell"
	FlagTradingClosed  = "trading-closed"
	FlagTransfersPause = "transfers-paused"
	FlagTrappingLimit  = "trapping-limit"
	FlagSaleLocked     = "sale-locked"
)

// Rules of what a buyer faces now (docs/rules.md, "Trading now").
const (
	RuleTax         = "RC-18" // a tax read on a buy, a sale or a transfer
	RuleCannotSell  = "RC-19" // a sale to the pool reverts now
	RuleClosed      = "RC-20" // trading closed or transfers paused by a switch
	RuleTrappingCap = "RC-21" // a limit too small to sell a position
	RuleSaleLocked  = "RC-22" // a wait after a buy longer than a holder's horizon
)

// Lines of the trading rules.
const (
	// ExtremeTax: a tax at or above half the amount is a trap (FAIL).
	ExtremeTax = 50.0
	// HighTax: a tax at or above a tenth of the amount is a warning.
	HighTax = 10.0
	// TinyLimit: a largest buy, sale or wallet under this share of the
	// supply (0.01 %) makes a holder of 1 % of the supply need more than
	// a hundred sales: a trap.
	TinyLimit = 0.0001
	// Horizon: a wait after a buy before a sale passes, in seconds,
	// longer than a day is a lock.
	Horizon = 24 * 3600
)

// GateWriter is a function that writes what transfer checks on a path
// that reverts, and who may call it: a trading switch's opener or closer,
// a list's keeper, a limit's setter.
type GateWriter struct {
	Target   bytecode.Target
	Selector bytecode.Selector
	Fallback bool
	// Open: some path writing it checks no caller.
	Open   bool
	Guards []bytecode.Guard
}

// gateWriters are the writers of e's gates.
func gateWriters(e bytecode.Effects) []GateWriter {
	targets := make([]bytecode.Target, len(e.Gates))
	for i, g := range e.Gates {
		targets[i] = g.Target
	}
	return writersOf(e, targets, func(bytecode.Write) bool { return true })
}

// writersOf are the functions of e with a write to one of targets that
// keep keeps, one per function and target written.
func writersOf(e bytecode.Effects, targets []bytecode.Target, keep func(bytecode.Write) bool) []GateWriter {
	var out []GateWriter
	for _, t := range targets {
		for _, f := range e.Functions {
			for _, w := range f.Writes {
				if !w.Target.Covers(t) || !keep(w) || slices.ContainsFunc(out, func(o GateWriter) bool {
					return o.Target == w.Target && o.Selector == f.Selector && o.Fallback == f.Fallback
				}) {
					continue
				}
				out = append(out, GateWriter{Target: w.Target, Selector: f.Selector, Fallback: f.Fallback, Open: w.Open, Guards: w.Guards})
			}
		}
	}
	return out
}

// openable says whether someone alive can write what a revert's
// condition read (a switch's field), and who.
func (e *EffectFacts) openable(d *bytecode.Decider, f Facts) (bool, string) {
	if e == nil || d == nil {
		return true, "the writers of what it reads are unknown: assumed openable"
	}
	var writers []string
	for _, r := range d.Reads {
		for _, w := range e.Writers {
			if !w.Target.Covers(r.Target) {
				continue
			}
			name := fmt.Sprintf("0x%x", w.Selector[:])
			if w.Fallback {
				name = "the fallback"
			}
			if w.Open {
				return true, name + " writes it and anyone may call it"
			}
			for _, g := range w.Guards {
				if live, _, text := e.guardState(g, f); live {
					return true, name + " writes it, callable when " + text
				}
			}
			var texts []string
			for _, g := range w.Guards {
				_, _, text := e.guardState(g, f)
				texts = append(texts, text)
			}
			writers = append(writers, name+" (callable when "+strings.Join(texts, ", or ")+")")
		}
	}
	if len(writers) == 0 {
		return false, "no function writes it"
	}
	return false, "its writers' guards are all gone: " + strings.Join(writers, "; ")
}

// evaluateTrading adds the flags of what a buyer faces now (RC-18 to
// RC-22) and says whether they fail or warn the token.
func evaluateTrading(f Facts, add func(flag, rule, evidence string)) (fail, warn bool) {
	t := f.Trading
	if t == nil || !t.Evaluable {
		return false, false
	}
	for _, tx := range []struct {
		name  string
		pct   *float64
		probe *trading.Probe
	}{{"buy", t.BuyTax, t.Buy}, {"sell", t.SellTax, t.Sale}, {"transfer", t.TransferTax, t.Transfer}} {
		if tx.pct == nil {
			continue
		}
		ev := fmt.Sprintf("%s tax %.4g %%: %s credits the recipient %.4g %% of what it debits%s", tx.name, *tx.pct, tx.probe.How(*t), 100-*tx.pct, feeFields(f))
		switch {
		case *tx.pct >= ExtremeTax:
			fail = true
			add(FlagExtremeTax, RuleTax, ev)
		case *tx.pct >= HighTax:
			warn = true
			add(FlagHighTax, RuleTax, ev)
		}
	}
	closed := t.TradingOpen != nil && !*t.TradingOpen
	if s := t.Sale; s != nil && s.Status == bytecode.Reverts {
		ev := s.How(*t) + " " + s.Reason()
		switch {
		case t.Locked:
			fail = true
			add(FlagSaleLocked, RuleSaleLocked, "no sale passes within ten years of a buy: "+ev)
		case t.MaxSale.Bound && s.Decider != nil && s.Decider.Kind == bytecode.GateLimit:
			// A limit on the sale: RC-21 judges it by its size.
		case closed && s.Decider != nil && s.Decider.Kind == bytecode.GateFlag:
			open, why := f.Effects.openable(s.Decider, f)
			add(FlagTradingClosed, RuleClosed, "a buy and a sale revert on a switch: "+ev+"; "+why)
			if open {
				warn = true
			} else {
				fail = true
			}
		default:
			fail = true
			add(FlagCannotSell, RuleCannotSell, ev)
		}
	}
	if p := t.Transfer; p != nil && t.TransfersPaused != nil && *t.TransfersPaused && !closed {
		open, why := f.Effects.openable(p.Decider, f)
		add(FlagTransfersPause, RuleClosed, p.How(*t)+" "+p.Reason()+"; "+why)
		if open {
			warn = true
		} else {
			fail = true
		}
	}
	if c := t.Cooldown; c != nil && *c > Horizon {
		fail = true
		add(FlagSaleLocked, RuleSaleLocked, fmt.Sprintf("a sale passes only %d s after a buy (more than a day): %s", *c, t.Sale.How(*t)))
	}
	for _, l := range []struct {
		name string
		l    trading.Limit
	}{{"buy", t.MaxBuy}, {"sale", t.MaxSale}, {"wallet", t.MaxWallet}} {
		if l.l.Bound && l.l.Share < TinyLimit {
			fail = true
			add(FlagTrappingLimit, RuleTrappingCap, fmt.Sprintf("the largest %s is %s (%.3g %% of the supply): a holder of 1 %% needs more than %d sales; the next amount %s",
				l.name, l.l.Amount, l.l.Share*100, int(0.01/TinyLimit), (&trading.Probe{Status: bytecode.Reverts, Decider: l.l.Decider}).Reason()))
		}
	}
	return fail, warn
}

// feeFields names the fee fields the effects analysis found and their
// words now, when read.
func feeFields(f Facts) string {
	if f.Effects == nil || f.Trading == nil || len(f.Effects.Fees) == 0 {
		return ""
	}
	var out []string
	for _, fee := range f.Effects.Fees {
		// A rate: a field read at or below its divisor (a reflection's
		// rate of its supplies is no fee field).
		v, ok := f.Trading.Slots[fee.Target.Slot]
		if fee.Target.Kind != bytecode.TargetSlot || fee.Divisor.IsZero() || !ok {
			continue
		}
		rate := new(uint256.Int).Rsh(&v, fee.Target.Offset)
		if fee.Target.Offset > 0 {
			rate.And(rate, new(uint256.Int).SubUint64(new(uint256.Int).Lsh(uint256.NewInt(1), 64), 1))
		}
		if rate.Gt(&fee.Divisor) {
			continue
		}
		out = append(out, fmt.Sprintf("%s = %s (of %s)", fee.Target.String(), rate.Dec(), fee.Divisor.Dec()))
	}
	if len(out) == 0 {
		return ""
	}
	return "; fee fields: " + strings.Join(out, ", ")
}
