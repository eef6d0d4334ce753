package rugcheck

import (
	"fmt"
	"math/big"
	"strings"
)

// Flags of who holds the supply and who deployed the token (rules RC-23
// and RC-24).
const (
	FlagConcentrated   = "concentrated-holders"
	FlagCreatorHolds   = "creator-holds"
	FlagDeployerPulled = "deployer-pulled"
	FlagLaunchpad      = "launchpad"
	// Liquidity (RC-25).
	FlagLiquidityUnlocked = "liquidity-unlocked"
	FlagLiquidityRemoved  = "liquidity-removed"
	FlagLiquiditySecured  = "liquidity-secured"
)

// Rules of the holders and the deployer (docs/rules.md, "Holders",
// "Deployer").
const (
	RuleHolders   = "RC-23" // the holders' shares of the circulating supply
	RuleDeployer  = "RC-24" // the deployer's record in the whale scan's window
	RuleLiquidity = "RC-25" // how each pool's liquidity is held
)

// Lines of the holder rules.
const (
	// ConcentratedTop10: the ten largest holders, pools, lockers and burn
	// addresses left out, holding this share of the circulating supply
	// or more can move its price at will (WARN).
	ConcentratedTop10 = 0.70
	// CreatorShare: an owner or deployer holding this share or more can
	// dump on the buyers (WARN).
	CreatorShare = 0.20
	// PullableShare: the deployer and the owner holding this share of a
	// pool's liquidity or more can pull most of it at will (WARN).
	PullableShare = 0.50
	// RemovedShare: removals since the pool's creation took this share of
	// the quote its first liquidity brought or more (WARN).
	RemovedShare = 0.50
	// SecuredShare and SecuredFor: this share of a pool's liquidity burned,
	// or locked for at least this many seconds more, is evidence of
	// safety (a flag, no verdict).
	SecuredShare = 0.95
	SecuredFor   = 30 * 24 * 3600
)

// evaluateSupply adds the flags of the holders (RC-23), the deployer's
// record (RC-24) and the pools' liquidity (RC-25) and says whether they warn the token; none
// fails it: a concentrated supply or a deployer's past is a risk to
// weigh, not a trap that bites now. The holder rules and the deployer's
// past apply to a launched token (one with a followed pool) only.
func evaluateSupply(f Facts, add func(flag, rule, evidence string)) (warn bool) {
	// Concentration is a buyer's risk once there is a market: a token
	// with no followed pool has its shares reported, not flagged.
	if h := f.Holders; h != nil && len(f.Pools) > 0 {
		estimated := ""
		if h.Estimated {
			estimated = " (estimated: " + h.Note + ")"
		}
		if h.Top10Share >= ConcentratedTop10 {
			warn = true
			var top []string
			for _, x := range h.Top[:min(3, len(h.Top))] {
				top = append(top, fmt.Sprintf("%s %.2f %%", x.Address.Hex(), x.Share*100))
			}
			add(FlagConcentrated, RuleHolders, fmt.Sprintf("the ten largest holders (pools, lockers and burn addresses left out) hold %.2f %% of the circulating supply: %s…%s",
				h.Top10Share*100, strings.Join(top, ", "), estimated))
		}
		if o := h.Owner; o != nil && o.Share >= CreatorShare {
			warn = true
			add(FlagCreatorHolds, RuleHolders, fmt.Sprintf("the owner %s holds %.2f %% of the circulating supply%s", o.Address.Hex(), o.Share*100, estimated))
		}
		if d := h.Deployer; d != nil && d.Share >= CreatorShare && (h.Owner == nil || h.Owner.Address != d.Address) {
			warn = true
			add(FlagCreatorHolds, RuleHolders, fmt.Sprintf("the deployer %s holds %.2f %% of the circulating supply%s", d.Address.Hex(), d.Share*100, estimated))
		}
	}
	for _, p := range f.Liquidity {
		pool := fmt.Sprintf("pool %s (%s)", p.ID, p.Venue)
		if pullable := p.Deployer + p.Owner; pullable >= PullableShare {
			warn = true
			add(FlagLiquidityUnlocked, RuleLiquidity, fmt.Sprintf("%s: the deployer holds %.2f %% and the owner %.2f %% of its liquidity, neither burned nor locked: they can pull it at will", pool, p.Deployer*100, p.Owner*100))
		}
		if p.QuoteAtCreation != nil && p.QuoteRemoved != nil && p.QuoteAtCreation.Sign() > 0 {
			removed, _ := new(big.Rat).SetFrac(p.QuoteRemoved, p.QuoteAtCreation).Float64()
			if removed >= RemovedShare {
				warn = true
				add(FlagLiquidityRemoved, RuleLiquidity, fmt.Sprintf("%s: removals since its creation took %s of the quote, %.0f %% of the %s its first liquidity brought", pool, p.QuoteRemoved, removed*100, p.QuoteAtCreation))
			}
		}
		secured := p.Burned
		var until []string
		for _, l := range p.Locks {
			if !l.Expired && l.Until >= p.Time+SecuredFor {
				secured += l.Share
				until = append(until, fmt.Sprintf("%.2f %% in %s (%s) until %d", l.Share*100, l.Name, l.Locker.Hex(), l.Until))
			}
		}
		if secured >= SecuredShare {
			ev := fmt.Sprintf("%s: %.2f %% of its liquidity burned", pool, p.Burned*100)
			if len(until) > 0 {
				ev += ", " + strings.Join(until, ", ")
			}
			add(FlagLiquiditySecured, RuleLiquidity, ev)
		}
	}
	if r := f.Deployer; r != nil && r.Deployer != nil {
		if r.PulledRecently && len(f.Pools) > 0 {
			warn = true
			var pulled []string
			for _, t := range r.Tokens {
				if t.Recent && t.Collapse != nil {
					pulled = append(pulled, fmt.Sprintf("%s (%s of pool %s at block %d)", t.Address.Hex(), t.Collapse.Kind, t.Collapse.Pool, t.Collapse.Block))
				}
			}
			add(FlagDeployerPulled, RuleDeployer, fmt.Sprintf("the deployer %s launched tokens whose pools collapsed in the last 7 days: %s", r.Deployer.Hex(), strings.Join(pulled, "; ")))
		}
		if r.Launchpad != "" && r.Factory != nil {
			add(FlagLaunchpad, RuleDeployer, fmt.Sprintf("created by %s (factory %s) in transaction %s, sent by %s", r.Launchpad, r.Factory.Hex(), r.Tx.Hex(), r.Deployer.Hex()))
		}
	}
	return warn
}
