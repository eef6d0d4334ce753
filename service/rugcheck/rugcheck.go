// Package rugcheck holds the published rug-check rules (docs/rules.md):
// which dispatcher selectors reveal which privileged capability, and how
// capabilities, ownership, proxies and activity make a PASS, WARN or FAIL
// verdict with stable flag identifiers. Pure functions over facts the
// service gathered from the chain; no I/O.
package rugcheck

import (
	"slices"

	"github.com/tollgate/tollgate/service/bytecode"
)

// Class is a class of privileged capability.
type Class string

// Classes, in report order.
const (
	Mint      Class = "mint"
	Blacklist Class = "blacklist"
	Pause     Class = "pause"
	Fee       Class = "fee"
	Limit     Class = "limit"
	Trading   Class = "trading"
	Upgrade   Class = "upgrade"
)

var classOrder = []Class{Mint, Blacklist, Pause, Fee, Limit, Trading, Upgrade}

// Flags: stable identifiers, documented in docs/rules.md.
const (
	FlagMintable       = "mintable"
	FlagBlacklist      = "blacklist"
	FlagPausable       = "pausable"
	FlagFeeSetter      = "fee-setter"
	FlagTxLimits       = "tx-limits"
	FlagTradingSwitch  = "trading-switch"
	FlagUpgradeable    = "upgradeable"
	FlagProxy          = "proxy"
	FlagOwnerActive    = "owner-active"
	FlagOwnerRenounced = "owner-renounced"
	FlagNoOwner        = "no-owner"
	FlagRoleBased      = "role-based-access"
	FlagSelfDestruct   = "selfdestruct"
	FlagNoActivity     = "no-recent-transfers"
	FlagKnownIssuer    = "known-issuer"
)

var classFlag = map[Class]string{
	Mint: FlagMintable, Blacklist: FlagBlacklist, Pause: FlagPausable, Fee: FlagFeeSetter,
	Limit: FlagTxLimits, Trading: FlagTradingSwitch, Upgrade: FlagUpgradeable,
}

// Verdict of a rug check.
type Verdict int

// Verdicts.
const (
	Pass Verdict = iota + 1
	Warn
	Fail
)

func (v Verdict) String() string {
	return [...]string{"", "PASS", "WARN", "FAIL"}[v]
}

// Capability is a class found, with the selectors that revealed it.
type Capability struct {
	Class      Class
	Selectors  []bytecode.Selector
	Signatures []string
	Source     string // "token" or "implementation"
}

// Capabilities maps a scan's selectors to capability classes.
func Capabilities(s bytecode.Scan, source string) []Capability {
	byClass := map[Class]*Capability{}
	for _, sel := range s.Selectors {
		k, ok := knownSelectors[sel]
		if !ok || k.class == "" {
			continue
		}
		c := byClass[k.class]
		if c == nil {
			c = &Capability{Class: k.class, Source: source}
			byClass[k.class] = c
		}
		c.Selectors = append(c.Selectors, sel)
		c.Signatures = append(c.Signatures, k.signature)
	}
	var out []Capability
	for _, cl := range classOrder {
		if c := byClass[cl]; c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// RoleBased reports AccessControl (hasRole/grantRole) in a scan: someone
// holds roles even when there is no owner().
func RoleBased(s bytecode.Scan) bool {
	return s.Has(selHasRole) || s.Has(selGrantRole)
}

// Facts are what the chain said about a token.
type Facts struct {
	// Capabilities of the token's code and, for a proxy, its implementation.
	Capabilities []Capability
	// Proxy reports a proxy (EIP-1967, EIP-1822, beacon or clone);
	// Upgradeable one whose implementation can change (not a clone);
	// AdminSet an EIP-1967 admin slot holding an address.
	Proxy       bool
	Upgradeable bool
	AdminSet    bool
	// OwnerKnown: owner() or getOwner() answered; Renounced: it is the zero
	// or the dead address.
	OwnerKnown bool
	Renounced  bool
	// RoleBased: AccessControl functions present.
	RoleBased    bool
	SelfDestruct bool
	// Transfers in the activity window.
	Transfers int
	// KnownIssuer: an issuer token mintable or pausable by design.
	KnownIssuer bool
}

// Report is the verdict and its flags.
type Report struct {
	Verdict Verdict
	Flags   []string
}

// Evaluate applies the verdict rule:
//
//	control = owner active, or AccessControl roles, or an upgradeable
//	          proxy's admin set (a clone's implementation cannot change)
//	severe  = mint, blacklist, fee, trading or upgrade capability
//	FAIL    severe capability under control
//	WARN    severe capability without control, pause or limit capability,
//	        SELFDESTRUCT, or no transfer in the activity window
//	PASS    otherwise
//	known issuer tokens (USDC, EURC, WETH on Base) are at most WARN
func Evaluate(f Facts) Report {
	var flags []string
	has := map[Class]bool{}
	for _, c := range f.Capabilities {
		if !has[c.Class] {
			has[c.Class] = true
		}
	}
	if f.Upgradeable {
		has[Upgrade] = true
	}
	for _, cl := range classOrder {
		if has[cl] {
			flags = append(flags, classFlag[cl])
		}
	}
	if f.Proxy {
		flags = append(flags, FlagProxy)
	}
	ownerActive := f.OwnerKnown && !f.Renounced
	switch {
	case ownerActive:
		flags = append(flags, FlagOwnerActive)
	case f.OwnerKnown:
		flags = append(flags, FlagOwnerRenounced)
	default:
		flags = append(flags, FlagNoOwner)
	}
	if f.RoleBased {
		flags = append(flags, FlagRoleBased)
	}
	if f.SelfDestruct {
		flags = append(flags, FlagSelfDestruct)
	}
	if f.Transfers == 0 {
		flags = append(flags, FlagNoActivity)
	}
	control := ownerActive || f.RoleBased || (f.Upgradeable && f.AdminSet)
	severe := has[Mint] || has[Blacklist] || has[Fee] || has[Trading] || has[Upgrade]
	v := Pass
	switch {
	case severe && control:
		v = Fail
	case severe, has[Pause], has[Limit], f.SelfDestruct, f.Transfers == 0:
		v = Warn
	}
	if f.KnownIssuer {
		flags = append(flags, FlagKnownIssuer)
		v = min(v, Warn)
	}
	slices.Sort(flags)
	return Report{Verdict: v, Flags: slices.Compact(flags)}
}
