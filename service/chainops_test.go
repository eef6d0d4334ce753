package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/rugcheck"
)

// TestUnresolvedForwarder: rule RC-5 flags a DELEGATECALL to a
// non-standard slot or a computed address, and nothing else.
func TestUnresolvedForwarder(t *testing.T) {
	t.Parallel()
	fw := func(o bytecode.Origin, slot common.Hash) bytecode.Scan {
		return bytecode.Scan{DelegateCall: true, Forwarders: []bytecode.Forwarder{{PC: 9, Origin: o, Slot: slot}}}
	}
	custom := common.HexToHash("0x1234")
	complete := func(fws ...bytecode.Forwarder) bytecode.Effects {
		return bytecode.Effects{Complete: true, Forwards: fws}
	}
	tests := []struct {
		name string
		k    chain.Contract
		s    bytecode.Scan
		impl *bytecode.Scan
		e    bytecode.Effects
		want bool
	}{
		{"custom slot", chain.Contract{}, fw(bytecode.OriginSlot, custom), nil, bytecode.Effects{}, true},
		{"computed", chain.Contract{}, fw(bytecode.OriginUnknown, common.Hash{}), nil, bytecode.Effects{}, true},
		{"EIP-1967 slot, empty", chain.Contract{}, fw(bytecode.OriginSlot, chain.SlotImplementation), nil, bytecode.Effects{}, false},
		{"ZeppelinOS slot", chain.Contract{}, fw(bytecode.OriginSlot, chain.SlotZosImpl), nil, bytecode.Effects{}, false},
		{"multicall", chain.Contract{}, fw(bytecode.OriginSelf, common.Hash{}), nil, bytecode.Effects{}, false},
		{"library", chain.Contract{}, fw(bytecode.OriginConstant, common.Hash{}), nil, bytecode.Effects{}, false},
		{"upgradeToAndCall", chain.Contract{}, fw(bytecode.OriginCalldata, common.Hash{}), nil, bytecode.Effects{}, false},
		{"safe slot 0", chain.Contract{ProxyKind: "gnosis-safe"}, fw(bytecode.OriginSlot, common.Hash{}), &bytecode.Scan{}, bytecode.Effects{}, false},
		{"slot 0, not a Safe", chain.Contract{}, fw(bytecode.OriginSlot, common.Hash{}), nil, bytecode.Effects{}, true},
		{"resolved proxy, plain implementation", chain.Contract{ProxyKind: "eip1967"}, fw(bytecode.OriginSlot, custom), &bytecode.Scan{}, bytecode.Effects{}, false},
		{"resolved proxy, implementation forwards again", chain.Contract{ProxyKind: "eip1967"}, bytecode.Scan{}, func() *bytecode.Scan {
			s := fw(bytecode.OriginSlot, custom)
			return &s
		}(), bytecode.Effects{}, true},
		// OpenZeppelin 4.9 UUPS: the flow scan loses the address through
		// internal functions; the paths see the calldata (or do not).
		{"computed, calldata on every path", chain.Contract{}, fw(bytecode.OriginUnknown, common.Hash{}), nil,
			complete(bytecode.Forwarder{PC: 9, Origin: bytecode.OriginCalldata}), false},
		{"computed, a path with a computed address", chain.Contract{}, fw(bytecode.OriginUnknown, common.Hash{}), nil,
			complete(bytecode.Forwarder{PC: 9, Origin: bytecode.OriginCalldata}, bytecode.Forwarder{PC: 9}), true},
		{"computed, a custom slot on a path", chain.Contract{}, fw(bytecode.OriginUnknown, common.Hash{}), nil,
			complete(bytecode.Forwarder{PC: 9, Origin: bytecode.OriginSlot, Slot: custom}), true},
		{"computed, paths not all followed", chain.Contract{}, fw(bytecode.OriginUnknown, common.Hash{}), nil,
			bytecode.Effects{Forwards: []bytecode.Forwarder{{PC: 9, Origin: bytecode.OriginCalldata}}}, true},
	}
	for _, tt := range tests {
		got, why := unresolvedForwarder(&tt.k, tt.s, tt.impl, tt.e)
		if got != tt.want || got != (why != "") {
			t.Errorf("%s: %v %q", tt.name, got, why)
		}
	}
}

// TestLimitFloor: rule RC-2 needs every present limit setter to have
// reverted at 0 from the owner; loosening functions alone never freeze.
func TestLimitFloor(t *testing.T) {
	t.Parallel()
	setters := rugcheck.LimitSetters()
	capsOf := func(sels ...bytecode.Selector) []rugcheck.Capability {
		return []rugcheck.Capability{{Class: rugcheck.Limit, Selectors: sels}}
	}
	probes := func(ok int) []bool {
		p := make([]bool, len(setters))
		if ok >= 0 {
			p[ok] = true
		}
		return p
	}
	removeLimits := bytecode.Selector{0x75, 0x10, 0x39, 0xfc}
	for _, tt := range []struct {
		name   string
		caps   []rugcheck.Capability
		probes []bool
		want   bool
	}{
		{"setter accepts 0", capsOf(setters[0]), probes(0), false},
		{"setter reverts at 0", capsOf(setters[0]), probes(-1), true},
		{"not probed (no active owner)", capsOf(setters[0]), nil, false},
		{"another setter accepts 0", capsOf(setters[0], setters[1]), probes(1), false},
		{"only removeLimits(): nothing probed, no floor to speak of", capsOf(removeLimits), nil, false},
	} {
		if got := limitFloor(&chain.Contract{OwnerProbes: tt.probes}, tt.caps); got != tt.want {
			t.Errorf("%s: %v", tt.name, got)
		}
	}
}

// TestRoleHoldings: rule RC-7's sources: enumerable counts, the window's
// events replayed in order, and the admin role assumed held otherwise.
func TestRoleHoldings(t *testing.T) {
	t.Parallel()
	minter := chain.Roles[1].ID
	a, b := common.HexToAddress("0xa"), common.HexToAddress("0xb")
	one, zero := uint64(1), uint64(0)
	enumerable := []*uint64{&one, &zero, &zero, &zero, &zero}
	tests := []struct {
		name string
		k    chain.Contract
		want string // name:held:source, ...
	}{
		{"enumerable", chain.Contract{RoleMembers: enumerable},
			"DEFAULT_ADMIN_ROLE:true:enumerable MINTER_ROLE:false:enumerable PAUSER_ROLE:false:enumerable UPGRADER_ROLE:false:enumerable BLACKLISTER_ROLE:false:enumerable"},
		{"no events: admin assumed", chain.Contract{}, "DEFAULT_ADMIN_ROLE:true:assumed"},
		{"granted then revoked", chain.Contract{RoleEvents: []chain.RoleEvent{
			{Role: common.Hash{}, Account: a, Granted: true}, {Role: minter, Account: b, Granted: true},
			{Role: minter, Account: b}, {Role: common.Hash{}, Account: a},
		}}, "DEFAULT_ADMIN_ROLE:false:events MINTER_ROLE:false:events"},
		{"minter granted, admin unseen", chain.Contract{RoleEvents: []chain.RoleEvent{{Role: minter, Account: b, Granted: true}}},
			"DEFAULT_ADMIN_ROLE:true:assumed MINTER_ROLE:true:events"},
	}
	for _, tt := range tests {
		roles, out := roleHoldings(&tt.k, true)
		var got []string
		for _, r := range roles {
			got = append(got, fmt.Sprintf("%s:%v:%s", r.Name, r.Held, r.Source))
		}
		if strings.Join(got, " ") != tt.want || len(out) != len(roles) {
			t.Errorf("%s: %v", tt.name, got)
		}
	}
	if roles, _ := roleHoldings(&chain.Contract{}, false); roles != nil {
		t.Errorf("no AccessControl: %v", roles)
	}
}

// TestUpgradePower: rule RC-4 for every kind of admin and beacon.
func TestUpgradePower(t *testing.T) {
	t.Parallel()
	eoa, contract, dead := common.HexToAddress("0xe0a"), common.HexToAddress("0xc0de"), common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	zero := common.Address{}
	tests := []struct {
		name    string
		k       chain.Contract
		upgrade string
		source  string
	}{
		{"not a proxy", chain.Contract{}, rugcheck.UpgradeNone, ""},
		{"clone", chain.Contract{ProxyKind: "eip1167"}, rugcheck.UpgradeNone, "immutable"},
		{"EOA admin", chain.Contract{ProxyKind: "eip1967", Admin: &eoa}, rugcheck.UpgradeActive, "admin-account"},
		{"ProxyAdmin owned", chain.Contract{ProxyKind: "eip1967", Admin: &contract, AdminCode: []byte{1}, AdminOwner: &eoa}, rugcheck.UpgradeActive, "admin-contract-owner"},
		{"ProxyAdmin renounced", chain.Contract{ProxyKind: "eip1967", Admin: &contract, AdminCode: []byte{1}, AdminOwner: &zero}, rugcheck.UpgradeRenounced, "renounced"},
		{"multisig admin", chain.Contract{ProxyKind: "zeppelinos", Admin: &contract, AdminCode: []byte{1}}, rugcheck.UpgradeActive, "admin-contract"},
		{"beacon owned", chain.Contract{ProxyKind: "eip1967-beacon", Beacon: &contract, BeaconOwner: &eoa}, rugcheck.UpgradeActive, "beacon-owner"},
		{"beacon renounced", chain.Contract{ProxyKind: "eip1967-beacon", Beacon: &contract, BeaconOwner: &dead}, rugcheck.UpgradeRenounced, "renounced"},
		{"beacon without owner()", chain.Contract{ProxyKind: "eip1967-beacon", Beacon: &contract}, rugcheck.UpgradeActive, "beacon"},
		{"UUPS", chain.Contract{ProxyKind: "eip1822", Owner: &eoa}, rugcheck.UpgradeByToken, "token-owner"},
	}
	for _, tt := range tests {
		u := upgradePower(&tt.k, false)
		if u.upgrade != tt.upgrade || u.source != tt.source || (tt.upgrade == rugcheck.UpgradeActive) != (u.upgrader != nil) && tt.source != "token-owner" {
			t.Errorf("%s: %+v", tt.name, u)
		}
	}
}
