package service

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/deployer"
	"github.com/tollgate/tollgate/service/holders"
	"github.com/tollgate/tollgate/service/liquidity"
	"github.com/tollgate/tollgate/service/rugcheck"
	"github.com/tollgate/tollgate/service/trading"
	"github.com/tollgate/tollgate/service/whales"
)

// Chain analytics choices (docs/rules.md).
const (
	// rugWindowBlocks is the activity window of /rugcheck: 24 h of Base blocks.
	rugWindowBlocks = 43_200
	// tokenWindowBlocks is the transfers window of /token: 1 h of Base blocks.
	tokenWindowBlocks = 1_800
)

// knownIssuers are issuer tokens on Base that are mintable, pausable or
// blacklisting by design: their verdict is at most WARN, with a note.
var knownIssuers = map[common.Address]struct{ name, reason string }{
	common.HexToAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"): {"Circle USDC", "a regulated stablecoin: mint, pause and blacklist belong to its issuer by design"},
	common.HexToAddress("0x60a3E35Cc302bFA44Cb288Bc5a4F316Fdb1adb42"): {"Circle EURC", "a regulated stablecoin: mint, pause and blacklist belong to its issuer by design"},
	common.HexToAddress("0x4200000000000000000000000000000000000006"): {"WETH (OP Stack predeploy)", "wrapped ether: minting is deposit of ETH"},
}

var deadAddress = common.HexToAddress("0x000000000000000000000000000000000000dEaD")

// Chain is what the chain analytics need; *chain.Client provides it.
type Chain interface {
	Inspect(ctx context.Context, addr common.Address, windowBlocks uint64, ownerProbes ...[]byte) (*chain.Contract, error)
	Storage(ctx context.Context, addr common.Address, block uint64, slots []common.Hash) ([]common.Hash, error)
	Together(n int) []*chain.Client
}

// errNotToken marks an address that holds no token contract.
type errNotToken struct{ addr, why string }

func (e *errNotToken) Error() string {
	return fmt.Sprintf("%s is not a token contract: %s", e.addr, e.why)
}

// scans caches bytecode analyses by code hash: code never changes under
// its hash, so a hot rug check skips the scan, the effects analysis and
// the powers derived from it.
type scans struct {
	mu      sync.Mutex
	m       map[common.Hash]bytecode.Scan
	effects map[common.Hash]analysed
	lookup  func(cache string, hit bool)
}

// analysed is a code's effects and the facts of its powers, without the
// token's storage (EffectFacts.Slots) or role (Source).
type analysed struct {
	effects bytecode.Effects
	facts   rugcheck.EffectFacts
}

// effectsOf is the effects analysis of code (whose scan is sc), cached.
func (s *scans) effectsOf(hash common.Hash, code []byte, sc bytecode.Scan) analysed {
	s.mu.Lock()
	an, ok := s.effects[hash]
	s.mu.Unlock()
	if ok {
		return an
	}
	e := bytecode.AnalyzeEffects(code, sc)
	an = analysed{effects: e, facts: rugcheck.EffectFactsOf(e)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.effects == nil || len(s.effects) > 10_000 {
		s.effects = map[common.Hash]analysed{}
	}
	s.effects[hash] = an
	return an
}

func (s *scans) get(hash common.Hash, code []byte) bytecode.Scan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.m[hash]; ok {
		s.lookup(CacheBytecode, true)
		return sc
	}
	s.lookup(CacheBytecode, false)
	if len(s.m) > 10_000 {
		clear(s.m) // bounded: a sweep is cheaper than an LRU here
	}
	sc := bytecode.Analyze(code)
	s.m[hash] = sc
	return sc
}

func (a *Analytics) inspect(ctx context.Context, addrHex string, window uint64, ownerProbes ...[]byte) (*chain.Contract, error) {
	if a.chain == nil {
		return nil, errNoChain
	}
	addr := common.HexToAddress(addrHex)
	k, err := a.chain.Inspect(ctx, addr, window, ownerProbes...)
	switch {
	case errors.Is(err, chain.ErrNoCode):
		return nil, &errNotToken{addr.Hex(), "no contract code at this address (an externally owned account, or nothing)"}
	case err != nil:
		return nil, err
	case k.Delegate != nil:
		return nil, &errNotToken{addr.Hex(), "an EIP-7702 delegated account, delegating to " + k.Delegate.Hex()}
	case k.TotalSupply == nil || !k.BalanceOf:
		// Rule RC-12: a proxy admin, a beacon, a factory, a wallet.
		return nil, &errNotToken{addr.Hex(), "a contract without ERC-20 behaviour (totalSupply() and balanceOf(address) do not both answer a 32-byte word): " +
			"e.g. a proxy admin, a beacon, a factory or a wallet"}
	}
	return k, nil
}

var errNoChain = errors.New("service: no chain configured")

// limitProbes are the calls whose success from the owner shows a limit
// setter without floor (rule RC-2): each of rugcheck.LimitSetters with 0.
var limitProbes = func() [][]byte {
	var out [][]byte
	for _, sel := range rugcheck.LimitSetters() {
		out = append(out, append(sel[:], make([]byte, 32)...))
	}
	return out
}()

// GetRugCheck implements tollgatev1.AnalyticsServiceServer.
func (a *Analytics) GetRugCheck(ctx context.Context, req *tollgatev1.GetRugCheckRequest) (*tollgatev1.GetRugCheckResponse, error) {
	k, err := a.inspect(ctx, req.GetAddr(), rugWindowBlocks, limitProbes...)
	if err != nil {
		return nil, err
	}
	scan := a.scans.get(k.CodeHash, k.Code)
	caps := rugcheck.Capabilities(scan, "token")
	roleBased, selfDestruct := rugcheck.RoleBased(scan), scan.SelfDestruct
	var implHash common.Hash
	var implScan *bytecode.Scan
	if len(k.ImplementationCode) > 0 {
		implHash = crypto.Keccak256Hash(k.ImplementationCode)
		is := a.scans.get(implHash, k.ImplementationCode)
		implScan = &is
		caps = append(caps, rugcheck.Capabilities(is, "implementation")...)
		roleBased, selfDestruct = roleBased || rugcheck.RoleBased(is), selfDestruct || is.SelfDestruct
	}
	renounced := k.Owner != nil && (*k.Owner == (common.Address{}) || *k.Owner == deadAddress)
	known, isKnown := knownIssuers[k.Address]
	power := upgradePower(k, renounced)
	effects, source := a.effectsOf(k, scan, implHash, implScan)
	unresolved, unresolvedWhy := unresolvedForwarder(k, scan, implScan, effects.effects)
	roles, protoRoles := roleHoldings(k, roleBased)
	from, _ := window(k)
	facts := rugcheck.Facts{
		Capabilities:       caps,
		Proxy:              k.ProxyKind != "",
		ProxyEvidence:      fmt.Sprintf("%s proxy, implementation %s", k.ProxyKind, k.Implementation.Hex()),
		Upgrade:            power.upgrade,
		UpgradeEvidence:    power.evidence,
		Unresolved:         unresolved,
		UnresolvedEvidence: unresolvedWhy,
		OwnerKnown:         k.Owner != nil,
		Renounced:          renounced,
		RoleBased:          roleBased,
		Roles:              roles,
		LimitFloor:         limitFloor(k, caps),
		SelfDestruct:       selfDestruct,
		Transfers:          len(k.Transfers),
		ActivityEvidence:   fmt.Sprintf("no Transfer event in blocks %d-%d", from, k.Head),
		KnownIssuer:        isKnown,
	}
	if k.Owner != nil {
		facts.OwnerEvidence = k.OwnerSource + " = " + k.Owner.Hex()
	}
	var collapse *whales.Collapse
	var snap *whales.Snapshot
	var pools []whales.Pool // the token's followed pools, oldest first
	if a.whales != nil {
		if snap = a.whales.Snapshot(); snap != nil {
			if c, ok := snap.Collapses[k.Address]; ok {
				collapse = &c
				facts.Collapse = &rugcheck.Collapse{Pool: c.Pool, Venue: string(c.Venue), Kind: c.Kind, Block: c.Block}
			}
			pools = snap.Pools[k.Address]
			for _, p := range pools {
				facts.Pools = append(facts.Pools, p.Holder)
			}
		}
	}
	// The guard fields of the powers ride in the trading probes' first
	// batch of storage reads.
	fx := effects.facts // a copy: Source and Slots are this token's
	fields := fx.GuardFields()
	also := make([]common.Hash, len(fields))
	for i, f := range fields {
		also[i] = f.Slot
	}
	got, err := a.readBeside(ctx, k, effects.effects, snap, pools, also)
	if err != nil {
		return nil, err
	}
	facts.Trading, facts.Holders, facts.Deployer, facts.Liquidity = &got.trading, &got.holders, &got.deployer, got.liquidity
	fx.Source, fx.Slots = source, map[rugcheck.SlotField][20]byte{}
	for _, f := range fields {
		w := got.trading.Slots[f.Slot]
		fx.Slots[f] = fieldAddress(w.Bytes32(), f.Offset)
	}
	facts.Effects = &fx
	report := rugcheck.Evaluate(facts)
	checks := &tollgatev1.RugChecks{
		CodeHash: k.CodeHash.Hex(),
		CodeSize: uint32(len(k.Code)),
		Owner:    &tollgatev1.OwnerInfo{Source: "none", Renounced: renounced},
		Activity: activity(k),
		Block:    uint32(k.Head),
		Roles:    protoRoles,
	}
	for _, r := range report.Rules {
		checks.Rules = append(checks.Rules, &tollgatev1.FlagRule{Flag: r.Flag, Rule: r.Rule, Evidence: r.Evidence})
	}
	for _, p := range facts.Effects.Powers {
		checks.Capabilities = append(checks.Capabilities, &tollgatev1.Capability{Class: capabilityClass(p.Class), Source: facts.Effects.Source,
			Selectors: []string{"0x" + hex.EncodeToString(p.Selector[:])}, Signatures: []string{}, Effect: powerText(p)})
	}
	for _, c := range rugcheck.NamedCapabilities(facts) {
		pc := &tollgatev1.Capability{Class: capabilityClass(c.Class), Signatures: c.Signatures, Source: c.Source}
		for _, s := range c.Selectors {
			pc.Selectors = append(pc.Selectors, "0x"+hex.EncodeToString(s[:]))
		}
		checks.Capabilities = append(checks.Capabilities, pc)
	}
	if k.Owner != nil {
		checks.Owner.Address, checks.Owner.Source = wrapperspb.String(k.Owner.Hex()), k.OwnerSource
	}
	switch {
	case k.ProxyKind != "":
		p := &tollgatev1.ProxyInfo{Kind: proxyKind(k.ProxyKind), Implementation: k.Implementation.Hex(), UpgraderSource: power.source}
		if k.Beacon != nil {
			p.Beacon = wrapperspb.String(k.Beacon.Hex())
		}
		if k.Admin != nil {
			p.Admin = wrapperspb.String(k.Admin.Hex())
		}
		if power.upgrader != nil {
			p.Upgrader = wrapperspb.String(power.upgrader.Hex())
		}
		if implHash != (common.Hash{}) {
			p.ImplementationCodeHash = implHash.Hex()
		}
		checks.Proxy = p
	case unresolved:
		checks.Proxy = &tollgatev1.ProxyInfo{Kind: tollgatev1.ProxyKind_PROXY_KIND_UNRESOLVED, UpgraderSource: "unknown"}
	}
	checks.Trading = tradingState(got.trading)
	checks.Holders = holderShares(got.holders)
	checks.Deployer = deployerRecord(got.deployer)
	checks.Liquidity = poolLiquidity(got.liquidity)
	if collapse != nil {
		checks.PoolCollapse = &tollgatev1.PoolCollapse{Pool: collapse.Pool, Venue: string(collapse.Venue), Kind: collapse.Kind, Block: uint32(collapse.Block)}
	}
	if isKnown {
		checks.KnownToken = &tollgatev1.KnownToken{Name: known.name, Reason: known.reason}
	}
	resp := &tollgatev1.GetRugCheckResponse{
		Token:   k.Address.Hex(),
		Name:    k.Name,
		Symbol:  k.Symbol,
		Verdict: verdict(report.Verdict),
		Flags:   report.Flags,
		Checks:  checks,
		AsOf:    asOf(time.Now()),
	}
	if resp.Flags == nil {
		resp.Flags = []string{}
	}
	return resp, nil
}

// effectsOf is the effects analysis of the code behind k (the
// implementation's behind a proxy), cached by code hash, and which code
// that is.
func (a *Analytics) effectsOf(k *chain.Contract, scan bytecode.Scan, implHash common.Hash, implScan *bytecode.Scan) (analysed, string) {
	if implScan != nil {
		return a.scans.effectsOf(implHash, k.ImplementationCode, *implScan), "implementation"
	}
	return a.scans.effectsOf(k.CodeHash, k.Code, scan), "token"
}

// fieldAddress is the address packed at a bit offset of a storage word.
func fieldAddress(w common.Hash, offset uint) [20]byte {
	var a [20]byte
	if offset%8 != 0 || offset > 96 {
		return a
	}
	end := 32 - int(offset/8)
	copy(a[:], w[end-20:end])
	return a
}

// powerText is a power's effect and guards, for its Capability record.
func powerText(p rugcheck.Power) string {
	var guards []string
	for _, g := range p.Guards {
		guards = append(guards, rugcheck.GuardText(g))
	}
	return p.Effect + "; callable when " + strings.Join(guards, ", or ")
}

// upgrade is who can replace a proxy's implementation (rule RC-4).
type upgrade struct {
	upgrade  string          // rugcheck.Upgrade*
	source   string          // ProxyInfo.upgrader_source
	upgrader *common.Address // nil: nobody, or nobody known
	evidence string
}

// upgradePower reads the upgrade power of k: an admin account upgrades; an
// admin contract (OpenZeppelin's ProxyAdmin) upgrades through its
// owner(), nobody when that owner is renounced, and is assumed able to
// upgrade when it has no owner() (a multisig, a timelock); a beacon's
// owner() upgrades every proxy of the beacon; without an admin (UUPS) the
// implementation's own upgrade function does, under the token's owner.
func upgradePower(k *chain.Contract, ownerRenounced bool) upgrade {
	gone := func(a common.Address) bool { return a == (common.Address{}) || a == deadAddress }
	switch {
	case k.ProxyKind == "" || k.ProxyKind == "eip1167" || k.ProxyKind == "erc7511":
		if k.ProxyKind != "" {
			return upgrade{source: "immutable", evidence: "a clone: its implementation is part of its code"}
		}
		return upgrade{}
	case k.ProxyKind == "eip1967-beacon":
		switch b := k.Beacon.Hex(); {
		case k.BeaconOwner == nil:
			return upgrade{rugcheck.UpgradeActive, "beacon", k.Beacon, "beacon " + b + " has no owner(): assumed able to upgrade"}
		case gone(*k.BeaconOwner):
			return upgrade{rugcheck.UpgradeRenounced, "renounced", nil, "beacon " + b + " owner() = " + k.BeaconOwner.Hex()}
		default:
			return upgrade{rugcheck.UpgradeActive, "beacon-owner", k.BeaconOwner, "beacon " + b + " owner() = " + k.BeaconOwner.Hex()}
		}
	case k.Admin != nil:
		adm := k.Admin.Hex()
		switch {
		case len(k.AdminCode) == 0:
			return upgrade{rugcheck.UpgradeActive, "admin-account", k.Admin, "admin " + adm + " is an account"}
		case k.AdminOwner == nil:
			return upgrade{rugcheck.UpgradeActive, "admin-contract", k.Admin, "admin " + adm + " is a contract without owner(): assumed able to upgrade"}
		case gone(*k.AdminOwner):
			return upgrade{rugcheck.UpgradeRenounced, "renounced", nil, "admin contract " + adm + " owner() = " + k.AdminOwner.Hex()}
		default:
			return upgrade{rugcheck.UpgradeActive, "admin-contract-owner", k.AdminOwner, "admin contract " + adm + " owner() = " + k.AdminOwner.Hex()}
		}
	}
	u := upgrade{rugcheck.UpgradeByToken, "token-owner", nil, "no admin: the implementation's own upgrade function decides (UUPS), under the token's owner or roles"}
	if k.Owner != nil && !ownerRenounced {
		u.upgrader = k.Owner
	}
	return u
}

// standardSlots are the storage slots whose forwarders Inspect resolves.
var standardSlots = map[common.Hash]bool{
	chain.SlotImplementation: true, chain.SlotBeacon: true, chain.SlotProxiable: true, chain.SlotZosImpl: true,
}

// unresolvedForwarder applies rule RC-5: a DELEGATECALL whose target comes
// from a storage slot no proxy standard uses, or is computed, is a proxy
// whose code nobody analysed. Not flagged: a target from a standard slot
// (resolved, or empty: nothing runs), the contract itself (Multicall), a
// constant (a library or an immutable: fixed code), or the calldata
// (upgradeToAndCall, execute-style functions: the caller's own choice). A
// proxy that Inspect resolved is checked through its implementation's
// code instead.
func unresolvedForwarder(k *chain.Contract, token bytecode.Scan, impl *bytecode.Scan, e bytecode.Effects) (bool, string) {
	s := token
	where := "the token"
	if k.ProxyKind != "" {
		if impl == nil {
			return false, ""
		}
		s, where = *impl, "the implementation"
	}
	nonstandard := func(f bytecode.Forwarder) bool {
		return f.Origin == bytecode.OriginSlot && !standardSlots[common.Hash(f.Slot)] &&
			!(k.ProxyKind == "gnosis-safe" && common.Hash(f.Slot) == chain.SlotSafeSingleton)
	}
	for _, f := range s.Forwarders {
		switch {
		case nonstandard(f):
			return true, fmt.Sprintf("DELEGATECALL at pc %d of %s to the address in storage slot %s, which no proxy standard uses", f.PC, where, common.Hash(f.Slot).Hex())
		case f.Origin == bytecode.OriginUnknown && !resolvedByPaths(f.PC, e, nonstandard):
			return true, fmt.Sprintf("DELEGATECALL at pc %d of %s to a computed address", f.PC, where)
		}
	}
	return false, ""
}

// resolvedByPaths: the effects analysis, which follows each path with the
// arguments internal functions pass on, followed every function and saw
// the DELEGATECALL at pc only with known origins (OpenZeppelin 4.9's UUPS
// upgradeToAndCall calls the implementation passed in its calldata).
func resolvedByPaths(pc int, e bytecode.Effects, nonstandard func(bytecode.Forwarder) bool) bool {
	if !e.Complete {
		return false
	}
	seen := false
	for _, f := range e.Forwards {
		if f.PC != pc {
			continue
		}
		if f.Origin == bytecode.OriginUnknown || nonstandard(f) {
			return false
		}
		seen = true
	}
	return seen
}

// roleHoldings tells whether anyone holds the AccessControl roles (rule
// RC-7): getRoleMemberCount where the contract enumerates its roles;
// otherwise the RoleGranted/RoleRevoked events of the activity window,
// replayed in order; the admin role, which grants every other, is assumed
// held when the window has no event of it.
func roleHoldings(k *chain.Contract, roleBased bool) ([]rugcheck.Role, []*tollgatev1.RoleHolding) {
	if !roleBased {
		return nil, nil
	}
	// Replay the window's events: the last event of each (role, account).
	type key struct {
		role    common.Hash
		account common.Address
	}
	last := map[key]bool{}
	var order []common.Hash
	seen := map[common.Hash]bool{}
	for _, e := range k.RoleEvents {
		last[key{e.Role, e.Account}] = e.Granted
		if !seen[e.Role] {
			seen[e.Role] = true
			order = append(order, e.Role)
		}
	}
	heldByEvents := func(role common.Hash) bool {
		for kk, granted := range last {
			if kk.role == role && granted {
				return true
			}
		}
		return false
	}
	names := map[common.Hash]string{}
	for _, r := range chain.Roles {
		names[r.ID] = r.Name
	}
	var roles []rugcheck.Role
	var out []*tollgatev1.RoleHolding
	addRole := func(id common.Hash, held bool, members *uint64, source string) {
		name := names[id]
		if name == "" {
			name = id.Hex()
		}
		roles = append(roles, rugcheck.Role{Name: name, Held: held, Source: source})
		rh := &tollgatev1.RoleHolding{Name: name, Id: id.Hex(), Held: held, Source: source}
		if members != nil {
			rh.Members = wrapperspb.UInt32(uint32(min(*members, 1<<32-1)))
		}
		out = append(out, rh)
	}
	enumerable := false
	for i, r := range chain.Roles {
		if i < len(k.RoleMembers) && k.RoleMembers[i] != nil {
			enumerable = true
			addRole(r.ID, *k.RoleMembers[i] > 0, k.RoleMembers[i], "enumerable")
		}
	}
	if !enumerable && !seen[common.Hash{}] {
		addRole(common.Hash{}, true, nil, "assumed")
	}
	for _, id := range order {
		if enumerable && names[id] != "" {
			continue // counted
		}
		addRole(id, heldByEvents(id), nil, "events")
	}
	return roles, out
}

// limitFloor applies rule RC-2: a limit setter present in the code can
// freeze every holder unless the owner's call with 0 reverts. True when
// no limit setter is present (only functions that loosen limits) or every
// one present reverted; false when any succeeded or none could be asked
// (no active owner: the setter is guarded otherwise).
func limitFloor(k *chain.Contract, caps []rugcheck.Capability) bool {
	setters := rugcheck.LimitSetters()
	probed := false
	for _, c := range caps {
		if c.Class != rugcheck.Limit {
			continue
		}
		for _, sel := range c.Selectors {
			i := slices.Index(setters, sel)
			if i < 0 {
				continue
			}
			if k.OwnerProbes == nil || k.OwnerProbes[i] {
				return false
			}
			probed = true
		}
	}
	return probed // no setter probed (removeLimits() alone): no floor to speak of
}

// GetToken implements tollgatev1.AnalyticsServiceServer. Each fact the
// token does not answer is left out, not the whole snapshot.
func (a *Analytics) GetToken(ctx context.Context, req *tollgatev1.GetTokenRequest) (*tollgatev1.GetTokenResponse, error) {
	k, err := a.inspect(ctx, req.GetAddr(), tokenWindowBlocks)
	if err != nil {
		return nil, err
	}
	info := &tollgatev1.TokenInfo{Address: k.Address.Hex(), Name: k.Name, Symbol: k.Symbol}
	if k.Decimals != nil {
		d := int32(*k.Decimals)
		info.Decimals = &d
	}
	if k.TotalSupply != nil {
		s := k.TotalSupply.String()
		info.TotalSupply = &s
	}
	act := activity(k)
	return &tollgatev1.GetTokenResponse{
		Token: info,
		Transfers: &tollgatev1.TokenTransfers{
			WindowBlocks: act.WindowBlocks, Count: act.Transfers, UniqueSenders: act.UniqueSenders, UniqueReceivers: act.UniqueReceivers,
		},
		AsOf: asOf(time.Now()),
	}, nil
}

// window returns the activity window of k: its first and last block.
func window(k *chain.Contract) (from, to uint64) {
	if k.Head >= k.WindowBlocks {
		from = k.Head - k.WindowBlocks + 1
	}
	return from, k.Head
}

func activity(k *chain.Contract) *tollgatev1.TransferActivity {
	senders, receivers := map[common.Address]bool{}, map[common.Address]bool{}
	for _, t := range k.Transfers {
		senders[t.From], receivers[t.To] = true, true
	}
	from, _ := window(k)
	return &tollgatev1.TransferActivity{
		WindowBlocks: uint32(k.WindowBlocks), FromBlock: uint32(from), ToBlock: uint32(k.Head),
		Transfers: uint32(len(k.Transfers)), UniqueSenders: uint32(len(senders)), UniqueReceivers: uint32(len(receivers)),
	}
}

func verdict(v rugcheck.Verdict) tollgatev1.Verdict {
	switch v {
	case rugcheck.Pass:
		return tollgatev1.Verdict_VERDICT_PASS
	case rugcheck.Warn:
		return tollgatev1.Verdict_VERDICT_WARN
	}
	return tollgatev1.Verdict_VERDICT_FAIL
}

func capabilityClass(c rugcheck.Class) tollgatev1.CapabilityClass {
	return map[rugcheck.Class]tollgatev1.CapabilityClass{
		rugcheck.Mint: tollgatev1.CapabilityClass_CAPABILITY_CLASS_MINT, rugcheck.Blacklist: tollgatev1.CapabilityClass_CAPABILITY_CLASS_BLACKLIST,
		rugcheck.Pause: tollgatev1.CapabilityClass_CAPABILITY_CLASS_PAUSE, rugcheck.Fee: tollgatev1.CapabilityClass_CAPABILITY_CLASS_FEE,
		rugcheck.Limit: tollgatev1.CapabilityClass_CAPABILITY_CLASS_LIMIT, rugcheck.Trading: tollgatev1.CapabilityClass_CAPABILITY_CLASS_TRADING,
		rugcheck.Upgrade: tollgatev1.CapabilityClass_CAPABILITY_CLASS_UPGRADE, rugcheck.Seize: tollgatev1.CapabilityClass_CAPABILITY_CLASS_SEIZE,
		rugcheck.Hook: tollgatev1.CapabilityClass_CAPABILITY_CLASS_HOOK,
	}[c]
}

func proxyKind(k string) tollgatev1.ProxyKind {
	switch strings.ToLower(k) {
	case "eip1967":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1967
	case "eip1967-beacon":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1967_BEACON
	case "eip1822":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1822
	case "eip1167":
		return tollgatev1.ProxyKind_PROXY_KIND_EIP1167
	case "zeppelinos":
		return tollgatev1.ProxyKind_PROXY_KIND_ZEPPELINOS
	case "gnosis-safe":
		return tollgatev1.ProxyKind_PROXY_KIND_GNOSIS_SAFE
	}
	return tollgatev1.ProxyKind_PROXY_KIND_ERC7511
}

// tradingState is the answer's record of what a buyer faces now.
func tradingState(s trading.State) *tollgatev1.TradingState {
	out := &tollgatev1.TradingState{Unread: s.Unread, PositionPct: trading.PositionShare * 100}
	if out.Unread == nil {
		out.Unread = []string{}
	}
	if s.Pool != nil {
		out.Pool, out.Venue = wrapperspb.String(s.Pool.ID), s.Pool.Venue
	}
	pct := func(p *float64) *wrapperspb.DoubleValue {
		if p == nil {
			return nil
		}
		return wrapperspb.Double(*p)
	}
	out.BuyTaxPct, out.SellTaxPct, out.TransferTaxPct = pct(s.BuyTax), pct(s.SellTax), pct(s.TransferTax)
	if s.TradingOpen != nil {
		out.TradingOpen = wrapperspb.Bool(*s.TradingOpen)
	}
	if s.TransfersPaused != nil {
		out.TransfersPaused = wrapperspb.Bool(*s.TransfersPaused)
	}
	limit := func(l trading.Limit) *tollgatev1.TradeLimit {
		tl := &tollgatev1.TradeLimit{Read: l.Known, ProbedPct: l.Probed * 100}
		if l.Bound {
			tl.Pct = wrapperspb.Double(l.Share * 100)
		}
		return tl
	}
	out.MaxBuy, out.MaxSale, out.MaxWallet = limit(s.MaxBuy), limit(s.MaxSale), limit(s.MaxWallet)
	if s.Cooldown != nil {
		out.CooldownSeconds = wrapperspb.UInt32(uint32(*s.Cooldown))
	}
	out.Locked = s.Locked
	for _, p := range []*trading.Probe{s.Buy, s.Sale, s.Transfer} {
		if p == nil {
			continue
		}
		status := map[bytecode.Status]tollgatev1.ProbeStatus{bytecode.Passes: tollgatev1.ProbeStatus_PROBE_STATUS_PASSES,
			bytecode.Reverts: tollgatev1.ProbeStatus_PROBE_STATUS_REVERTS, bytecode.Unknown: tollgatev1.ProbeStatus_PROBE_STATUS_UNKNOWN}[p.Status]
		out.Probes = append(out.Probes, &tollgatev1.TradeProbe{Call: p.Call, How: p.How(s), Status: status, Reason: p.Reason()})
	}
	return out
}

// beside is what the rug check reads after Inspect, side by side.
type beside struct {
	trading   trading.State
	holders   holders.Holders
	deployer  deployer.Record
	liquidity []liquidity.PoolLiquidity
}

// readBeside reads what a buyer of k faces (e is its code's effects; also
// are slots the caller needs read too), who holds its supply, who
// deployed it and how its pools' liquidity is held. None needs another's
// answer, so the four run side by side, and their requests travel
// together: one batch a turn for all four (chain.Client.Together).
func (a *Analytics) readBeside(ctx context.Context, k *chain.Contract, e bytecode.Effects, snap *whales.Snapshot, pools []whales.Pool,
	also []common.Hash) (beside, error) {
	var pool *trading.Pool
	if len(pools) > 0 {
		pool = &trading.Pool{ID: pools[0].ID, Venue: string(pools[0].Venue), Holder: pools[0].Holder}
	}
	var (
		out  beside
		wg   sync.WaitGroup
		errs [4]error
	)
	rs := a.chain.Together(len(errs))
	reads := []func(c *chain.Client) error{
		func(c *chain.Client) (err error) {
			out.trading, err = trading.Read(ctx, c, e, trading.Token{Address: k.Address, Block: k.Head, Time: k.HeadTime, Supply: k.TotalSupply, Pool: pool, Also: also})
			return err
		},
		func(c *chain.Client) (err error) {
			out.holders, err = holders.Read(ctx, c, holderInput(k, pools))
			return err
		},
		func(c *chain.Client) (err error) {
			out.deployer, err = deployer.Read(ctx, c, deployer.Input{Token: k.Address, Block: k.Head, Pools: pools, Snapshot: snap}, deployer.DefaultConfig())
			return err
		},
		func(c *chain.Client) (err error) {
			out.liquidity, err = liquidity.Read(ctx, c, liquidityInput(k, pools))
			return err
		},
	}
	for i, read := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rs[i].Done()
			errs[i] = read(rs[i])
		}()
	}
	wg.Wait()
	return out, errors.Join(errs[:]...)
}

// holderMargin is how far before its first pool's creation a token's
// history is read from: a launch pools its token within a day.
const holderMargin = 43_200

// holderInput is what the holder reading needs of k: its history from a
// day before its first followed pool (or from the bound back), its pools
// set apart, and, for the deployer's share, its first pool's creator.
func holderInput(k *chain.Contract, pools []whales.Pool) holders.Token {
	t := holders.Token{Address: k.Address, Block: k.Head, Supply: k.TotalSupply, Owner: k.Owner, Exclude: map[common.Address]string{}}
	for addr, name := range liquidity.Lockers() {
		t.Exclude[addr] = "a liquidity locker (" + name + ")"
	}
	for i, p := range pools {
		t.Exclude[p.Holder] = fmt.Sprintf("a pool of the token (%s, %s)", p.Venue, p.ID)
		if i == 0 {
			t.From = p.Created - min(p.Created, holderMargin)
			if p.Creator != (common.Address{}) {
				creator := p.Creator
				t.Deployer = &creator
			}
		}
	}
	return t
}

func holderShare(h holders.Holder) *tollgatev1.HolderShare {
	return &tollgatev1.HolderShare{Address: h.Address.Hex(), Balance: h.Balance.String(), Pct: h.Share * 100, Why: h.Why}
}

// holderShares is the answer's record of who holds the supply.
func holderShares(h holders.Holders) *tollgatev1.HolderShares {
	out := &tollgatev1.HolderShares{Top: []*tollgatev1.HolderShare{}, Top10Pct: h.Top10Share * 100, Count: uint32(min(h.Count, 1<<32-1)),
		CountExact: h.CountExact, Excluded: []*tollgatev1.HolderShare{}, Burned: []*tollgatev1.HolderShare{}, Estimated: h.Estimated, Note: h.Note, Logs: uint32(h.Logs)}
	for _, x := range h.Top {
		out.Top = append(out.Top, holderShare(x))
	}
	for _, x := range h.Excluded {
		out.Excluded = append(out.Excluded, holderShare(x))
	}
	for _, x := range h.Burns {
		out.Burned = append(out.Burned, holderShare(x))
	}
	if h.Owner != nil {
		out.Owner = holderShare(*h.Owner)
	}
	if h.Deployer != nil {
		out.Deployer = holderShare(*h.Deployer)
	}
	return out
}

// deployerRecord is the answer's record of the token's deployer.
func deployerRecord(r deployer.Record) *tollgatev1.DeployerRecord {
	out := &tollgatev1.DeployerRecord{Source: r.Source, Block: uint32(r.Block), Launchpad: r.Launchpad, Tokens: []*tollgatev1.DeployedToken{},
		More: uint32(r.More), PulledRecently: r.PulledRecently, Note: r.Note}
	if r.Deployer != nil {
		out.Address = wrapperspb.String(r.Deployer.Hex())
		out.Transaction = wrapperspb.String(r.Tx.Hex())
	}
	if r.Factory != nil {
		out.Factory = wrapperspb.String(r.Factory.Hex())
	}
	for _, t := range r.Tokens {
		d := &tollgatev1.DeployedToken{Token: t.Address.Hex(), Pool: t.Pool.ID, Created: uint32(t.Created), Recent: t.Recent}
		if c := t.Collapse; c != nil {
			d.Collapse = &tollgatev1.PoolCollapse{Pool: c.Pool, Venue: string(c.Venue), Kind: c.Kind, Block: uint32(c.Block)}
		}
		out.Tokens = append(out.Tokens, d)
	}
	return out
}

// liquidityInput is what the liquidity reading needs of k: its followed
// pools, its owner, and its first pool's creator for the deployer (the
// deployer record, read beside it, cannot be waited for).
func liquidityInput(k *chain.Contract, pools []whales.Pool) liquidity.Input {
	in := liquidity.Input{Token: k.Address, Block: k.Head, Owner: k.Owner}
	for i, p := range pools {
		in.Pools = append(in.Pools, liquidity.Pool{ID: p.ID, Venue: p.Venue, Holder: p.Holder, Quote: p.Quote, Created: p.Created, Creator: p.Creator})
		if i == 0 && p.Creator != (common.Address{}) {
			creator := p.Creator
			in.Deployer = &creator
		}
	}
	return in
}

// poolLiquidity is the answer's record of how each pool's liquidity is
// held.
func poolLiquidity(ps []liquidity.PoolLiquidity) []*tollgatev1.PoolLiquidity {
	out := []*tollgatev1.PoolLiquidity{}
	amount := func(v *big.Int) *wrapperspb.StringValue {
		if v == nil {
			return nil
		}
		return wrapperspb.String(v.String())
	}
	for _, p := range ps {
		pl := &tollgatev1.PoolLiquidity{Pool: p.ID, Venue: string(p.Venue), QuoteReserve: amount(p.QuoteReserve), QuoteAtCreation: amount(p.QuoteAtCreation),
			QuoteRemoved: amount(p.QuoteRemoved), BurnedPct: p.Burned * 100, LockedPct: p.Locked * 100, DeployerPct: p.Deployer * 100,
			OwnerPct: p.Owner * 100, OtherPct: p.Other * 100, Locks: []*tollgatev1.LiquidityLock{}, Unread: p.Unread}
		if pl.Unread == nil {
			pl.Unread = []string{}
		}
		for _, l := range p.Locks {
			pl.Locks = append(pl.Locks, &tollgatev1.LiquidityLock{Locker: l.Locker.Hex(), Name: l.Name, Recognised: l.Recognised, Pct: l.Share * 100,
				Until: uint32(min(l.Until, 1<<32-1)), Expired: l.Expired})
		}
		out = append(out, pl)
	}
	return out
}
