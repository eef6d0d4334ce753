// Package rugcheck holds the published rug-check rules (docs/rules.md):
// which dispatcher selectors reveal which privileged capability, which
// function effects are powers and who holds them (effects.go), what a
// buyer faces now judged by its effect (trading.go, over service/trading's
// probes), who holds the supply, the deployer's record and how the pools'
// liquidity is held (supply.go, over service/holders, service/deployer and
// service/liquidity), and how all of it makes a PASS, WARN or FAIL verdict
// with stable flag identifiers. Pure functions over facts the service
// gathered from the code and the chain; no I/O.
package rugcheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/deployer"
	"github.com/tollgate/tollgate/service/holders"
	"github.com/tollgate/tollgate/service/liquidity"
	"github.com/tollgate/tollgate/service/trading"
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
	FlagMintable         = "mintable"
	FlagBlacklist        = "blacklist"
	FlagPausable         = "pausable"
	FlagFeeSetter        = "fee-setter"
	FlagTxLimits         = "tx-limits"
	FlagTxLimitFloor     = "tx-limit-floor"
	FlagTradingSwitch    = "trading-switch"
	FlagUpgradeable      = "upgradeable"
	FlagUpgradeRenounced = "upgrade-renounced"
	FlagProxy            = "proxy"
	FlagUnresolvedProxy  = "unresolved-proxy"
	FlagOwnerActive      = "owner-active"
	FlagOwnerRenounced   = "owner-renounced"
	FlagNoOwner          = "no-owner"
	FlagRoleBased        = "role-based-access"
	FlagRolesHeld        = "roles-held"
	FlagRolesAssumed     = "roles-assumed"
	FlagSelfDestruct     = "selfdestruct"
	FlagNoActivity       = "no-recent-transfers"
	FlagKnownIssuer      = "known-issuer"
	FlagPoolCollapsed    = "pool-collapsed"
	FlagSeizable         = "seizable"
	FlagExternalHook     = "external-hook"
	FlagHiddenOwner      = "hidden-owner"
	FlagFakeRenounce     = "fake-renounce"
	FlagUnanalysable     = "analysis-incomplete"
)

// Rules: the identifier of the published rule behind each flag
// (docs/rules.md, "Rug check"), so that every flag can be re-derived.
const (
	RuleCapability     = "RC-1"  // a dispatcher selector of a privileged function
	RuleLimitFloor     = "RC-2"  // a limit setter called with 0 by the owner (eth_call)
	RuleProxy          = "RC-3"  // a proxy slot or clone shape names the implementation
	RuleUpgradePower   = "RC-4"  // who can upgrade: admin, ProxyAdmin owner(), beacon owner(), token owner
	RuleUnresolved     = "RC-5"  // a DELEGATECALL forwarder no known slot resolves
	RuleOwner          = "RC-6"  // owner() / getOwner()
	RuleRoles          = "RC-7"  // AccessControl: who holds the roles
	RuleSelfDestruct   = "RC-8"  // SELFDESTRUCT in the code
	RuleActivity       = "RC-9"  // Transfer events in the activity window
	RuleKnownIssuer    = "RC-10" // issuer token recognised by address
	RulePoolCollapse   = "RC-11" // the whale scan saw the token's pool collapse
	RuleNotToken       = "RC-12" // no ERC-20 totalSupply/balanceOf: refused (no flag)
	RuleLiquidityToken = "RC-13" // a V2 pair's mint(address) is not a privilege (no flag)
	RuleEffect         = "RC-14" // a function's effect and its guards (static analysis of the code)
	RuleHiddenOwner    = "RC-15" // a live guard other than owner()
	RuleFakeRenounce   = "RC-16" // renounceOwnership() leaves a live guard
	RuleUnanalysable   = "RC-17" // the analysis could not follow every function
)

var classFlag = map[Class]string{
	Mint: FlagMintable, Blacklist: FlagBlacklist, Pause: FlagPausable, Fee: FlagFeeSetter,
	Limit: FlagTxLimits, Trading: FlagTradingSwitch, Upgrade: FlagUpgradeable,
	Seize: FlagSeizable, Hook: FlagExternalHook,
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

// Capabilities maps a scan's selectors to capability classes. A Uniswap
// V2-style pair's mint(address) (with getReserves, token0, token1 and
// burn(address) beside it) is left out: it mints liquidity tokens to
// whoever added reserves, which anyone may do (rule RC-13).
func Capabilities(s bytecode.Scan, source string) []Capability {
	pair := LiquidityPair(s)
	byClass := map[Class]*Capability{}
	for _, sel := range s.Selectors {
		k, ok := knownSelectors[sel]
		if !ok || k.class == "" || (pair && sel == selMintTo) {
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

// LiquidityPair reports the interface of a Uniswap V2-style pair.
func LiquidityPair(s bytecode.Scan) bool {
	return s.Has(selMintTo) && s.Has(selGetReserves) && s.Has(selToken0) && s.Has(selToken1) && s.Has(selBurnTo)
}

// RoleBased reports AccessControl (hasRole/grantRole) in a scan. Its
// presence is not control: Facts.Roles says whether anyone holds a role.
func RoleBased(s bytecode.Scan) bool {
	return s.Has(selHasRole) || s.Has(selGrantRole)
}

// Upgrade power behind a proxy.
const (
	// UpgradeNone: not a proxy, or a clone (its implementation is code).
	UpgradeNone = ""
	// UpgradeActive: an account, the owner of an admin contract or
	// beacon, or an admin contract or beacon without owner() (a multisig,
	// a timelock) can replace the implementation.
	UpgradeActive = "active"
	// UpgradeRenounced: the admin contract's or beacon's owner() is the
	// zero or dead address: nobody can.
	UpgradeRenounced = "renounced"
	// UpgradeByToken: no admin; the implementation's own upgrade function
	// (UUPS) decides, under the token's owner or roles.
	UpgradeByToken = "token"
)

// Role is an AccessControl role and whether anyone holds it.
type Role struct {
	Name string
	Held bool
	// Source: "enumerable", "events" or "assumed" (neither tells; an
	// unknown holder is assumed).
	Source string
}

// Collapse is a collapse of the token's pool seen by the whale scan.
type Collapse struct {
	Pool  string // address, or a V4 pool id
	Venue string // the pool's venue kind ("v2", "v4", "slipstream", …)
	Kind  string // "liquidity" or "drawdown"
	Block uint64
}

// Facts are what the chain said about a token. The *Evidence strings say
// what was read, for the rules of the answer.
type Facts struct {
	// Capabilities of the token's code and, for a proxy, its implementation.
	Capabilities []Capability
	// Proxy reports a proxy (EIP-1967, EIP-1822, beacon, ZeppelinOS, Safe
	// or clone); ProxyEvidence names its kind and implementation.
	Proxy         bool
	ProxyEvidence string
	// Upgrade is the upgrade power (Upgrade* constants), UpgradeEvidence
	// who holds it.
	Upgrade         string
	UpgradeEvidence string
	// Unresolved: the code forwards calls with DELEGATECALL to an address
	// no known slot or shape names (UnresolvedEvidence says where from).
	Unresolved         bool
	UnresolvedEvidence string
	// OwnerKnown: owner() or getOwner() answered (OwnerEvidence); Renounced:
	// it is the zero or the dead address.
	OwnerKnown    bool
	Renounced     bool
	OwnerEvidence string
	// RoleBased: AccessControl functions present; Roles: who holds them.
	RoleBased bool
	Roles     []Role
	// LimitFloor: every limit setter present reverted when the owner
	// called it with 0 (eth_call): the limits cannot freeze holders.
	LimitFloor   bool
	SelfDestruct bool
	// Transfers in the activity window, ActivityEvidence its blocks.
	Transfers        int
	ActivityEvidence string
	// KnownIssuer: an issuer token mintable or pausable by design.
	KnownIssuer bool
	// Collapse of the token's pool in the whale scan's window, or nil.
	Collapse *Collapse
	// Effects are the powers found by what the code does, or nil when
	// the code was not analysed.
	Effects *EffectFacts
	// Trading is what a buyer faces now, or nil when not read.
	Trading *trading.State
	// Pools are the contracts holding the token's pools (pairs, V3
	// pools, the V4 PoolManager): a guard naming one is no controller.
	Pools [][20]byte
	// Holders is who holds the supply, Deployer who deployed it and what
	// became of its other tokens; nil when not read.
	Holders  *holders.Holders
	Deployer *deployer.Record
	// Liquidity is how each followed pool's liquidity is held.
	Liquidity []liquidity.PoolLiquidity
}

// EffectFacts are the powers of a token's code (the implementation's,
// behind a proxy) found by effect, and what its storage says of their
// guards.
type EffectFacts struct {
	Powers []Power
	// Source is "token" or "implementation".
	Source string
	// Slots are the addresses read from the guard fields (the token's
	// storage, the proxy's behind a proxy).
	Slots map[SlotField][20]byte
	// Owner is where owner() reads its answer, nil when not a field.
	Owner *SlotField
	// Renounce lists what renounceOwnership() writes; HasRenounce says
	// the function exists.
	HasRenounce bool
	Renounce    []bytecode.Target
	// Incomplete: some function could not be followed to its end.
	Incomplete bool
	// Openers are functions that only open what transfer checks
	// (Openers): their names reveal no capability.
	Openers []bytecode.Selector
	// Writers are the functions writing what transfer checks, whoever
	// may call them; Fees the rates transfer scales credits by.
	Writers []GateWriter
	Fees    []bytecode.Fee
	// Getters are the address fields a function returns by name: the
	// controllers a token declares.
	Getters []SlotField
	// Setters are the guarded functions that write the powers' guard
	// fields.
	Setters []GateWriter
}

// SlotField is an address field of a storage slot.
type SlotField struct {
	Slot   [32]byte
	Offset uint
}

// NamedCapabilities are the capabilities found by name, less the capabilities found by name the selectors
// whose functions only open what transfer checks (EffectFacts.Openers):
// removeLimits() and a one-way enableTrading() freeze no one.
func NamedCapabilities(f Facts) []Capability {
	if f.Effects == nil || len(f.Effects.Openers) == 0 {
		return f.Capabilities
	}
	var out []Capability
	for _, c := range f.Capabilities {
		var kept Capability = c
		kept.Selectors, kept.Signatures = nil, nil
		for i, sel := range c.Selectors {
			if !slices.Contains(f.Effects.Openers, sel) {
				kept.Selectors = append(kept.Selectors, sel)
				kept.Signatures = append(kept.Signatures, c.Signatures[i])
			}
		}
		if len(kept.Selectors) > 0 {
			out = append(out, kept)
		}
	}
	return out
}

// severe: a capability that takes holders' tokens or value, or freezes
// them: mint, seize, blacklist, fee, trading switch, upgrade, hook, pause,
// a limit with no floor.
func severe(has map[Class]bool, limitFloor bool) bool {
	return has[Mint] || has[Seize] || has[Blacklist] || has[Fee] || has[Trading] || has[Upgrade] || has[Hook] ||
		has[Pause] || (has[Limit] && !limitFloor)
}

// FlagRule is the rule behind a flag and the evidence it read.
type FlagRule struct {
	Flag, Rule, Evidence string
}

// Report is the verdict, its flags (sorted) and the rule of each flag.
type Report struct {
	Verdict Verdict
	Flags   []string
	Rules   []FlagRule
}

// Evaluate applies the verdict rule:
//
//	control = owner active, or an AccessControl role held (or assumed
//	          held), or someone able to upgrade the proxy
//	severe  = mint, blacklist, fee, trading or upgrade capability; pause
//	          (it freezes every holder); a limit setter with no floor
//	FAIL    severe capability under control
//	WARN    severe capability without control, a limit with a floor,
//	        SELFDESTRUCT, an unresolved proxy, a collapse of the token's
//	        pool, or no transfer in the activity window
//	PASS    otherwise
//	known issuer tokens (USDC, EURC, WETH on Base) are at most WARN
func Evaluate(f Facts) Report {
	var rules []FlagRule
	add := func(flag, rule, evidence string) {
		rules = append(rules, FlagRule{Flag: flag, Rule: rule, Evidence: evidence})
	}
	has := map[Class]bool{}
	for _, c := range NamedCapabilities(f) {
		has[c.Class] = true
		ev := make([]string, len(c.Selectors))
		for i, sel := range c.Selectors {
			ev[i] = fmt.Sprintf("0x%x %s", sel[:], c.Signatures[i])
		}
		add(classFlag[c.Class], RuleCapability, strings.Join(ev, ", ")+" in the "+c.Source+" code")
	}
	upgradeControl := false
	switch f.Upgrade {
	case UpgradeActive:
		has[Upgrade], upgradeControl = true, true
		add(FlagUpgradeable, RuleUpgradePower, f.UpgradeEvidence)
	case UpgradeByToken:
		has[Upgrade] = true
		add(FlagUpgradeable, RuleUpgradePower, f.UpgradeEvidence)
	case UpgradeRenounced:
		add(FlagUpgradeRenounced, RuleUpgradePower, f.UpgradeEvidence)
	}
	if f.Proxy {
		add(FlagProxy, RuleProxy, f.ProxyEvidence)
	}
	if f.Unresolved {
		add(FlagUnresolvedProxy, RuleUnresolved, f.UnresolvedEvidence)
	}
	ownerActive := f.OwnerKnown && !f.Renounced
	switch {
	case ownerActive:
		add(FlagOwnerActive, RuleOwner, f.OwnerEvidence)
	case f.OwnerKnown:
		add(FlagOwnerRenounced, RuleOwner, f.OwnerEvidence)
	default:
		add(FlagNoOwner, RuleOwner, "neither owner() nor getOwner() answers an address")
	}
	rolesHeld, assumed := false, false
	var held []string
	for _, r := range f.Roles {
		if r.Held {
			rolesHeld = true
			assumed = assumed || r.Source == "assumed"
			held = append(held, r.Name+" ("+r.Source+")")
		}
	}
	if f.RoleBased {
		add(FlagRoleBased, RuleRoles, "hasRole/grantRole in the dispatcher")
		switch {
		case assumed:
			add(FlagRolesAssumed, RuleRoles, "no getRoleMemberCount and no RoleGranted in the window: a holder is assumed")
		case rolesHeld:
			add(FlagRolesHeld, RuleRoles, strings.Join(held, ", "))
		}
	}
	if has[Limit] && f.LimitFloor {
		add(FlagTxLimitFloor, RuleLimitFloor, "every limit setter reverts when the owner sets 0")
	}
	if f.SelfDestruct {
		add(FlagSelfDestruct, RuleSelfDestruct, "SELFDESTRUCT (0xff) in the code")
	}
	if f.Transfers == 0 {
		add(FlagNoActivity, RuleActivity, f.ActivityEvidence)
	}
	if f.Collapse != nil {
		add(FlagPoolCollapsed, RulePoolCollapse, fmt.Sprintf("pool %s (%s): %s collapse at block %d", f.Collapse.Pool, f.Collapse.Venue, f.Collapse.Kind, f.Collapse.Block))
	}
	fx := evaluateEffects(f, add)
	tradeFail, tradeWarn := evaluateTrading(f, add)
	supplyWarn := evaluateSupply(f, add)
	control := ownerActive || rolesHeld || upgradeControl || fx.hidden
	// A capability found by name is judged by owner(), roles and the
	// upgrade power, unless every selector that revealed it has a power by
	// effect: then its guards judge it (a mint behind a dead guard is no
	// controlled mint, whoever owner() names).
	named := maps.Clone(has)
	for _, c := range NamedCapabilities(f) {
		if len(c.Selectors) > 0 && !slices.ContainsFunc(c.Selectors, func(sel bytecode.Selector) bool { return !fx.explained[sel] }) {
			delete(named, c.Class)
		}
	}
	if f.Upgrade == UpgradeActive || f.Upgrade == UpgradeByToken {
		named[Upgrade] = true
	}
	for cl := range fx.has {
		has[cl] = true
	}
	v := Pass
	switch {
	case severe(named, f.LimitFloor) && control, fx.severeLive, tradeFail:
		v = Fail
	case severe(has, f.LimitFloor), has[Limit], f.SelfDestruct, f.Unresolved, f.Collapse != nil, f.Transfers == 0, fx.incomplete, tradeWarn, supplyWarn:
		v = Warn
	}
	if f.KnownIssuer {
		add(FlagKnownIssuer, RuleKnownIssuer, "issuer token recognised by address")
		v = min(v, Warn)
	}
	slices.SortStableFunc(rules, func(a, b FlagRule) int { return strings.Compare(a.Flag, b.Flag) })
	// One rule per flag: a class found in both the token and its
	// implementation, or by two rules, keeps every evidence.
	var merged []FlagRule
	for _, r := range rules {
		if n := len(merged); n > 0 && merged[n-1].Flag == r.Flag {
			if merged[n-1].Rule != r.Rule {
				merged[n-1].Rule += "," + r.Rule
			}
			merged[n-1].Evidence += "; " + r.Evidence
			continue
		}
		merged = append(merged, r)
	}
	flags := make([]string, len(merged))
	for i, r := range merged {
		flags[i] = r.Flag
	}
	return Report{Verdict: v, Flags: flags, Rules: merged}
}
