package rugcheck

import (
	"slices"
	"testing"

	"golang.org/x/crypto/sha3"

	"github.com/tollgate/tollgate/service/bytecode"
)

// TestSelectorTable: every selector is keccak-256 of its signature.
func TestSelectorTable(t *testing.T) {
	t.Parallel()
	for sel, k := range knownSelectors {
		h := sha3.NewLegacyKeccak256()
		h.Write([]byte(k.signature))
		if got := h.Sum(nil)[:4]; !slices.Equal(got, sel[:]) {
			t.Errorf("%s: table %x, keccak %x", k.signature, sel, got)
		}
	}
	if len(knownSelectors) < 60 {
		t.Errorf("only %d selectors", len(knownSelectors))
	}
	for _, sel := range LimitSetters() {
		if knownSelectors[sel].class != Limit {
			t.Errorf("limit setter %x is not a Limit selector", sel)
		}
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	s := bytecode.Scan{Selectors: []bytecode.Selector{
		{0x00, 0xb8, 0xcf, 0x2a}, // blockBots(address[]) (PUSH3 in solc output)
		{0x40, 0xc1, 0x0f, 0x19}, // mint(address,uint256)
		{0x5c, 0x97, 0x5a, 0xbb}, // paused(): a view, no power
		{0xa9, 0x05, 0x9c, 0xbb}, // transfer: ordinary
	}}
	caps := Capabilities(s, "token")
	if len(caps) != 2 || caps[0].Class != Mint || caps[1].Class != Blacklist || caps[1].Signatures[0] != "blockBots(address[])" || caps[0].Source != "token" {
		t.Errorf("capabilities %+v", caps)
	}
}

// TestLiquidityPairMint: a V2 pair's mint(address) is liquidity, the same
// selector in a token without the pair interface is a privilege.
func TestLiquidityPairMint(t *testing.T) {
	t.Parallel()
	pair := bytecode.Scan{Selectors: []bytecode.Selector{selGetReserves, selToken0, selMintTo, selBurnTo, selToken1}}
	slices.SortFunc(pair.Selectors, func(a, b bytecode.Selector) int { return slices.Compare(a[:], b[:]) })
	if caps := Capabilities(pair, "token"); len(caps) != 0 || !LiquidityPair(pair) {
		t.Errorf("pair: %+v", caps)
	}
	token := bytecode.Scan{Selectors: []bytecode.Selector{selMintTo}}
	if caps := Capabilities(token, "token"); len(caps) != 1 || caps[0].Class != Mint {
		t.Errorf("token: %+v", caps)
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	mint := []Capability{{Class: Mint}}
	pause := []Capability{{Class: Pause}}
	limit := []Capability{{Class: Limit}}
	held := []Role{{Name: "MINTER_ROLE", Held: true, Source: "enumerable"}}
	none := []Role{{Name: "MINTER_ROLE", Source: "enumerable"}}
	assumed := []Role{{Name: "MINTER_ROLE", Held: true, Source: "assumed"}}
	collapse := &Collapse{Pool: "0xpool", Kind: "liquidity", Block: 7}
	tests := []struct {
		name  string
		f     Facts
		want  Verdict
		flags []string
	}{
		{"clean renounced", Facts{OwnerKnown: true, Renounced: true, Transfers: 5}, Pass, []string{FlagOwnerRenounced}},
		{"clean, owner active", Facts{OwnerKnown: true, Transfers: 5}, Pass, []string{FlagOwnerActive}},
		{"owner can mint", Facts{Capabilities: mint, OwnerKnown: true, Transfers: 5}, Fail, []string{FlagMintable, FlagOwnerActive}},
		{"mint renounced", Facts{Capabilities: mint, OwnerKnown: true, Renounced: true, Transfers: 5}, Warn, []string{FlagMintable, FlagOwnerRenounced}},
		{"mint, roles held", Facts{Capabilities: mint, RoleBased: true, Roles: held, Transfers: 5}, Fail, []string{FlagMintable, FlagNoOwner, FlagRoleBased, FlagRolesHeld}},
		{"mint, roles assumed", Facts{Capabilities: mint, RoleBased: true, Roles: assumed, Transfers: 5}, Fail, []string{FlagMintable, FlagNoOwner, FlagRoleBased, FlagRolesAssumed}},
		{"mint, roles nobody holds", Facts{Capabilities: mint, RoleBased: true, Roles: none, Transfers: 5}, Warn, []string{FlagMintable, FlagNoOwner, FlagRoleBased}},
		{"owner can pause: freezes all", Facts{Capabilities: pause, OwnerKnown: true, Transfers: 5}, Fail, []string{FlagOwnerActive, FlagPausable}},
		{"pause renounced", Facts{Capabilities: pause, OwnerKnown: true, Renounced: true, Transfers: 5}, Warn, []string{FlagOwnerRenounced, FlagPausable}},
		{"limit without floor", Facts{Capabilities: limit, OwnerKnown: true, Transfers: 5}, Fail, []string{FlagOwnerActive, FlagTxLimits}},
		{"limit with floor", Facts{Capabilities: limit, OwnerKnown: true, LimitFloor: true, Transfers: 5}, Warn, []string{FlagOwnerActive, FlagTxLimitFloor, FlagTxLimits}},
		{"proxy, EOA admin", Facts{Proxy: true, Upgrade: UpgradeActive, Transfers: 5}, Fail, []string{FlagNoOwner, FlagProxy, FlagUpgradeable}},
		{"proxy, renounced ProxyAdmin", Facts{Proxy: true, Upgrade: UpgradeRenounced, OwnerKnown: true, Transfers: 5}, Pass, []string{FlagOwnerActive, FlagProxy, FlagUpgradeRenounced}},
		{"UUPS, owner renounced", Facts{Proxy: true, Upgrade: UpgradeByToken, OwnerKnown: true, Renounced: true, Transfers: 5}, Warn, []string{FlagOwnerRenounced, FlagProxy, FlagUpgradeable}},
		{"UUPS, owner active", Facts{Proxy: true, Upgrade: UpgradeByToken, OwnerKnown: true, Transfers: 5}, Fail, []string{FlagOwnerActive, FlagProxy, FlagUpgradeable}},
		{"clone", Facts{Proxy: true, OwnerKnown: true, Transfers: 5}, Pass, []string{FlagOwnerActive, FlagProxy}},
		{"unresolved forwarder", Facts{Unresolved: true, OwnerKnown: true, Renounced: true, Transfers: 5}, Warn, []string{FlagOwnerRenounced, FlagUnresolvedProxy}},
		{"no activity", Facts{OwnerKnown: true, Renounced: true}, Warn, []string{FlagNoActivity, FlagOwnerRenounced}},
		{"selfdestruct", Facts{OwnerKnown: true, Renounced: true, Transfers: 1, SelfDestruct: true}, Warn, []string{FlagOwnerRenounced, FlagSelfDestruct}},
		{"rugged, clean code", Facts{OwnerKnown: true, Renounced: true, Transfers: 9, Collapse: collapse}, Warn, []string{FlagOwnerRenounced, FlagPoolCollapsed}},
		{"rugged, mintable", Facts{Capabilities: mint, OwnerKnown: true, Transfers: 9, Collapse: collapse}, Fail, []string{FlagMintable, FlagOwnerActive, FlagPoolCollapsed}},
		{"known issuer", Facts{Capabilities: append(mint, Capability{Class: Blacklist}), Proxy: true, Upgrade: UpgradeActive, OwnerKnown: true, Transfers: 9, KnownIssuer: true}, Warn,
			[]string{FlagBlacklist, FlagKnownIssuer, FlagMintable, FlagOwnerActive, FlagProxy, FlagUpgradeable}},
	}
	for _, tt := range tests {
		r := Evaluate(tt.f)
		if r.Verdict != tt.want || !slices.Equal(r.Flags, tt.flags) {
			t.Errorf("%s: %s %v, want %s %v", tt.name, r.Verdict, r.Flags, tt.want, tt.flags)
		}
		if len(r.Rules) != len(r.Flags) {
			t.Errorf("%s: %d rules for %d flags", tt.name, len(r.Rules), len(r.Flags))
		}
		for i, fr := range r.Rules {
			if fr.Flag != r.Flags[i] || fr.Rule == "" {
				t.Errorf("%s: rule %d %+v", tt.name, i, fr)
			}
		}
	}
}
