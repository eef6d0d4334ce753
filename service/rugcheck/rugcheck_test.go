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

func TestEvaluate(t *testing.T) {
	t.Parallel()
	mint := []Capability{{Class: Mint}}
	pause := []Capability{{Class: Pause}}
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
		{"mint by roles", Facts{Capabilities: mint, RoleBased: true, Transfers: 5}, Fail, []string{FlagMintable, FlagNoOwner, FlagRoleBased}},
		{"pausable with owner", Facts{Capabilities: pause, OwnerKnown: true, Transfers: 5}, Warn, []string{FlagOwnerActive, FlagPausable}},
		{"proxy with admin", Facts{Proxy: true, Upgradeable: true, AdminSet: true, Transfers: 5}, Fail, []string{FlagNoOwner, FlagProxy, FlagUpgradeable}},
		{"upgradeable, no admin, renounced", Facts{Proxy: true, Upgradeable: true, OwnerKnown: true, Renounced: true, Transfers: 5}, Warn, []string{FlagOwnerRenounced, FlagProxy, FlagUpgradeable}},
		{"clone", Facts{Proxy: true, OwnerKnown: true, Transfers: 5}, Pass, []string{FlagOwnerActive, FlagProxy}},
		{"no activity", Facts{OwnerKnown: true, Renounced: true}, Warn, []string{FlagNoActivity, FlagOwnerRenounced}},
		{"selfdestruct", Facts{OwnerKnown: true, Renounced: true, Transfers: 1, SelfDestruct: true}, Warn, []string{FlagOwnerRenounced, FlagSelfDestruct}},
		{"known issuer", Facts{Capabilities: append(mint, Capability{Class: Blacklist}), Proxy: true, Upgradeable: true, AdminSet: true, OwnerKnown: true, Transfers: 9, KnownIssuer: true}, Warn,
			[]string{FlagBlacklist, FlagKnownIssuer, FlagMintable, FlagOwnerActive, FlagProxy, FlagUpgradeable}},
	}
	for _, tt := range tests {
		r := Evaluate(tt.f)
		if r.Verdict != tt.want || !slices.Equal(r.Flags, tt.flags) {
			t.Errorf("%s: %s %v, want %s %v", tt.name, r.Verdict, r.Flags, tt.want, tt.flags)
		}
	}
}
