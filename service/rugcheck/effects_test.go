package rugcheck

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/sha3"

	"github.com/tollgate/tollgate/service/bytecode"
)

// catalogue is one compiler setting's build of the renamed-power
// catalogue (service/bytecode/testdata/effects).
type catalogue struct {
	Compiler  string
	Contracts map[string]struct {
		DeployedBytecode    string
		ImmutableReferences map[string][]struct{ Start, Length int }
	}
}

// immutableMinter is what the tests deploy ImmutableFarm with.
var immutableMinter = [20]byte{0xbe, 0xef}

// loadCatalogues reads every compiler setting's build.
func loadCatalogues(t testing.TB) map[string]catalogue {
	t.Helper()
	files, err := filepath.Glob("../bytecode/testdata/effects/0.*.json")
	if err != nil || len(files) < 9 {
		t.Fatalf("catalogue builds: %v %v", files, err)
	}
	out := map[string]catalogue{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var c catalogue
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = c
	}
	return out
}

// code is a contract's runtime code with its immutables filled in.
func (c catalogue) code(t testing.TB, name string) []byte {
	t.Helper()
	k := c.Contracts[name]
	code, err := hex.DecodeString(strings.TrimPrefix(k.DeployedBytecode, "0x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, refs := range k.ImmutableReferences {
		for _, r := range refs {
			clear(code[r.Start : r.Start+r.Length])
			copy(code[r.Start+r.Length-20:], immutableMinter[:])
		}
	}
	return code
}

func sel(sig string) bytecode.Selector {
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(sig))
	var s bytecode.Selector
	copy(s[:], h.Sum(nil))
	return s
}

func slotGuard(n byte) bytecode.Guard {
	g := bytecode.Guard{Kind: bytecode.GuardSlot}
	g.Slot[31] = n
	return g
}

// wantPower is an expected power: its class, the function's signature,
// its guards, and whether a fee is capped.
type wantPower struct {
	class  Class
	sig    string
	guards []bytecode.Guard
	capped bool
}

func (w wantPower) String() string {
	var gs []string
	for _, g := range w.guards {
		gs = append(gs, GuardText(g))
	}
	return fmt.Sprintf("%s by %s [%s] capped=%v", w.class, w.sig, strings.Join(gs, "; "), w.capped)
}

// TestPowersCatalogue: every renamed power of the catalogue is found by
// its effect, with the function and the guard that holds it, whatever
// solc release (0.5–0.8), optimizer setting or pipeline built it; the
// controls whose power is a constant find none.
func TestPowersCatalogue(t *testing.T) {
	t.Parallel()
	owner := slotGuard(3)
	origin := slotGuard(4)
	origin.Origin = true
	ops := bytecode.Guard{Kind: bytecode.GuardMapping}
	ops.Slot[31] = 4
	dead := bytecode.Guard{Kind: bytecode.GuardConstant}
	dead.Address[18], dead.Address[19] = 0xde, 0xad
	want := map[string][]wantPower{
		"HiddenFarm":    {{Mint, "farm(address,uint256)", []bytecode.Guard{slotGuard(4)}, false}},
		"Rescue":        {{Seize, "rescue(address,uint256)", []bytecode.Guard{owner}, false}},
		"Girls":         {{Blacklist, "setGirl(address,uint8)", []bytecode.Guard{owner}, false}},
		"Bots":          {{Blacklist, "manage(address[],bool)", []bytecode.Guard{owner}, false}},
		"Guests":        {{Blacklist, "invite(address,bool)", []bytecode.Guard{owner}, false}},
		"Launch":        {{Trading, "openTrading(bool)", []bytecode.Guard{owner}, false}},
		"OneWayLaunch":  nil,
		"Pauser":        {{Pause, "pause()", []bytecode.Guard{owner}, false}},
		"LiftOnly":      nil,
		"Halt":          {{Trading, "hold(bool)", []bytecode.Guard{owner}, false}},
		"MaxTx":         {{Limit, "tune(uint256)", []bytecode.Guard{owner}, false}},
		"MaxWallet":     {{Limit, "resize(uint256)", []bytecode.Guard{owner}, false}},
		"Cooldown":      {{Limit, "pace(uint256)", []bytecode.Guard{owner}, false}},
		"Tax":           {{Fee, "setFeeRate(uint256,uint256)", []bytecode.Guard{owner}, false}},
		"CappedTax":     {{Fee, "setRate(uint256)", []bytecode.Guard{owner}, true}},
		"FixedTax":      nil,
		"FakeRenounce":  {{Fee, "setFeeRate(uint256)", []bytecode.Guard{owner, slotGuard(4)}, false}},
		"Hooked":        {{Trading, "setGuard(address)", []bytecode.Guard{owner}, false}, {Hook, "setGuard(address)", []bytecode.Guard{owner}, false}},
		"Cleanup":       nil,
		"Swappable":     {{Upgrade, "setLogic(address)", []bytecode.Guard{owner}, false}},
		"OriginFarm":    {{Mint, "harvest(uint256)", []bytecode.Guard{origin}, false}},
		"Operators":     {{Mint, "farm(address,uint256)", []bytecode.Guard{ops}, false}},
		"DeadFarm":      {{Mint, "farm(address,uint256)", []bytecode.Guard{dead}, false}},
		"ImmutableFarm": {{Mint, "farm(address,uint256)", []bytecode.Guard{{Kind: bytecode.GuardConstant, Address: immutableMinter}}, false}},
	}
	for setting, c := range loadCatalogues(t) {
		for name, powers := range want {
			if _, ok := c.Contracts[name]; !ok {
				if name == "ImmutableFarm" && strings.HasPrefix(setting, "0.5") {
					continue // immutables need solc 0.6.5
				}
				t.Errorf("%s: no %s", setting, name)
				continue
			}
			code := c.code(t, name)
			e := bytecode.AnalyzeEffects(code, bytecode.Analyze(code))
			if !e.Complete {
				t.Errorf("%s %s: analysis incomplete", setting, name)
			}
			var got []string
			for _, p := range Powers(e) {
				got = append(got, wantPower{p.Class, fmt.Sprintf("%x", p.Selector), p.Guards, p.Capped}.String())
			}
			var exp []string
			for _, p := range powers {
				s := sel(p.sig)
				exp = append(exp, wantPower{p.class, fmt.Sprintf("%x", s), p.guards, p.capped}.String())
			}
			slices.Sort(got)
			slices.Sort(exp)
			if !slices.Equal(got, exp) {
				t.Errorf("%s %s:\n got  %q\n want %q", setting, name, got, exp)
			}
		}
	}
}

// TestVerdictCatalogue: each renamed power FAILs while its guard is live
// and does not once the guard is gone (renounced, zero, dead), with the
// power's function, effect and guard value as evidence; a live guard that
// owner() does not name is a hidden owner, and a renounceOwnership() that
// leaves it is a fake renounce.
func TestVerdictCatalogue(t *testing.T) {
	t.Parallel()
	deployer := [20]byte{0xd0}
	dev := [20]byte{0xde, 0x01}
	field := func(n byte) SlotField {
		var f SlotField
		f.Slot[31] = n
		return f
	}
	type state struct {
		name     string
		slots    map[SlotField][20]byte
		verdict  Verdict
		flags    []string // must be among the flags
		absent   []string // must not be
		evidence string   // in the evidence of the first flag
	}
	live := map[SlotField][20]byte{field(3): deployer, field(4): dev}
	renounced := map[SlotField][20]byte{field(3): {}, field(4): {}}
	ownerGone := map[SlotField][20]byte{field(3): {}, field(4): dev}
	tests := map[string][]state{
		"HiddenFarm": {{"dev live, owner() zero", ownerGone, Fail, []string{FlagMintable, FlagHiddenOwner}, nil, "0xde01"},
			{"dev zero", renounced, Warn, []string{FlagMintable}, []string{FlagHiddenOwner}, "every guard is gone"}},
		"Rescue":       {{"owner live", live, Fail, []string{FlagSeizable}, nil, "debits a balance"}, {"renounced", renounced, Warn, []string{FlagSeizable}, nil, ""}},
		"Girls":        {{"owner live", live, Fail, []string{FlagBlacklist}, nil, "a list keyed by an address"}, {"renounced", renounced, Warn, nil, nil, ""}},
		"Bots":         {{"owner live", live, Fail, []string{FlagBlacklist}, nil, ""}, {"renounced", renounced, Warn, nil, nil, ""}},
		"Guests":       {{"owner live", live, Fail, []string{FlagBlacklist}, nil, ""}, {"renounced", renounced, Warn, nil, nil, ""}},
		"Launch":       {{"owner live", live, Fail, []string{FlagTradingSwitch}, nil, "a switch"}, {"renounced", renounced, Warn, nil, nil, ""}},
		"OneWayLaunch": {{"a switch that only opens", live, Pass, nil, []string{FlagTradingSwitch}, ""}},
		"Pauser":       {{"owner live", live, Fail, []string{FlagPausable}, nil, "a switch"}, {"renounced", renounced, Warn, []string{FlagPausable}, nil, ""}},
		"LiftOnly":     {{"limits that only lift", live, Pass, nil, []string{FlagTxLimits, FlagTxLimitFloor}, ""}},
		"Halt":         {{"owner live", live, Fail, []string{FlagTradingSwitch}, nil, ""}, {"renounced", renounced, Warn, nil, nil, ""}},
		"MaxTx":        {{"owner live", live, Fail, []string{FlagTxLimits}, nil, "a limit"}, {"renounced", renounced, Warn, nil, nil, ""}},
		"MaxWallet":    {{"owner live", live, Fail, []string{FlagTxLimits}, nil, ""}, {"renounced", renounced, Warn, nil, nil, ""}},
		"Cooldown":     {{"owner live", live, Fail, []string{FlagTxLimits}, nil, "a wait"}, {"renounced", renounced, Warn, nil, nil, ""}},
		"Tax":          {{"owner live", live, Fail, []string{FlagFeeSetter}, nil, "the rate transfer scales"}, {"renounced", renounced, Warn, nil, nil, ""}},
		"CappedTax":    {{"owner live, capped at 10 %", live, Warn, []string{FlagFeeSetter}, nil, "at most 10/100"}},
		"FixedTax":     {{"a constant rate", live, Pass, nil, []string{FlagFeeSetter}, ""}},
		"FakeRenounce": {{"renounced, shadow live", ownerGone, Fail, []string{FlagFeeSetter, FlagHiddenOwner, FlagFakeRenounce}, nil, ""},
			{"both gone", renounced, Warn, nil, []string{FlagHiddenOwner, FlagFakeRenounce}, ""}},
		"Hooked":        {{"owner live", live, Fail, []string{FlagExternalHook}, nil, "a contract transfer calls"}, {"renounced", renounced, Warn, nil, nil, ""}},
		"Swappable":     {{"owner live", live, Fail, []string{FlagUpgradeable}, nil, "the address whose code a DELEGATECALL runs"}, {"renounced", renounced, Warn, []string{FlagUpgradeable}, nil, ""}},
		"OriginFarm":    {{"dev live", live, Fail, []string{FlagMintable, FlagHiddenOwner}, nil, "tx.origin"}, {"dev zero", renounced, Warn, nil, nil, ""}},
		"Operators":     {{"operators assumed", live, Fail, []string{FlagMintable}, []string{FlagHiddenOwner}, "assumed held"}},
		"ImmutableFarm": {{"immutable minter", live, Fail, []string{FlagMintable, FlagHiddenOwner}, nil, "0xbeef"}},
		"DeadFarm":      {{"dead constant", live, Warn, []string{FlagMintable}, []string{FlagHiddenOwner}, "every guard is gone"}},
		// Powers no name reveals: a mint only the fallback reaches; an
		// address the owner sets that moves anyone's tokens with no
		// allowance, empty now but settable while the owner is live.
		"FallbackFarm": {{"operator live", live, Fail, []string{FlagMintable, FlagHiddenOwner}, nil, "the fallback"},
			{"operator zero", renounced, Warn, []string{FlagMintable}, []string{FlagHiddenOwner}, "every guard is gone"}},
		// A switch open now that blocks every sender not on the team when
		// the owner closes it: require(open || team[from]).
		"TeamSwitch": {{"owner live", live, Fail, []string{FlagTradingSwitch}, nil, "a switch"}, {"renounced", renounced, Warn, []string{FlagTradingSwitch}, nil, "every guard is gone"}},
		"Spender": {{"spender unset, owner live", map[SlotField][20]byte{field(3): deployer, field(4): {}}, Fail, []string{FlagSeizable}, nil, "sets it, callable when msg.sender == the address in slot 0x3"},
			{"both gone", renounced, Warn, []string{FlagSeizable}, nil, "every guard is gone"}},
	}
	for setting, c := range loadCatalogues(t) {
		for name, states := range tests {
			if _, ok := c.Contracts[name]; !ok {
				continue
			}
			code := c.code(t, name)
			scan := bytecode.Analyze(code)
			e := bytecode.AnalyzeEffects(code, scan)
			for _, st := range states {
				owner := st.slots[field(3)]
				fx := EffectFactsOf(e)
				fx.Source, fx.Slots = "token", st.slots
				facts := Facts{Capabilities: Capabilities(scan, "token"), OwnerKnown: true, Renounced: gone(owner),
					OwnerEvidence: fmt.Sprintf("owner() = 0x%x", owner), Transfers: 1, Effects: &fx}
				r := Evaluate(facts)
				if r.Verdict != st.verdict {
					t.Errorf("%s %s (%s): %s %v, want %s", setting, name, st.name, r.Verdict, r.Rules, st.verdict)
				}
				for _, fl := range st.flags {
					if !slices.Contains(r.Flags, fl) {
						t.Errorf("%s %s (%s): no %s in %v", setting, name, st.name, fl, r.Flags)
					}
				}
				for _, fl := range st.absent {
					if slices.Contains(r.Flags, fl) {
						t.Errorf("%s %s (%s): %s in %v", setting, name, st.name, fl, r.Rules)
					}
				}
				if st.evidence != "" && len(st.flags) > 0 {
					for _, rule := range r.Rules {
						if rule.Flag == st.flags[0] && !strings.Contains(rule.Evidence, st.evidence) {
							t.Errorf("%s %s (%s): %s evidence %q lacks %q", setting, name, st.name, rule.Flag, rule.Evidence, st.evidence)
						}
					}
				}
			}
		}
	}
}
