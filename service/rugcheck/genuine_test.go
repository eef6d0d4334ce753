package rugcheck

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/service/bytecode"
)

// genuineCode is a contract's runtime code from a fixture of genuine
// builds (Circle's FiatToken v2.2 from its release sources; OpenZeppelin
// 5's ERC20Votes), its immutables left zero.
func genuineCode(t *testing.T, file, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var b struct {
		Contracts map[string]struct{ DeployedBytecode string }
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	code := common.FromHex(b.Contracts[name].DeployedBytecode)
	if len(code) == 0 {
		t.Fatalf("no %s in %s", name, file)
	}
	return code
}

// TestPrecisionOnGenuineCode: known false flags on genuine contracts
// stay fixed. FiatToken v2.2 (USDC on Base) packs its blacklist bit beside
// each balance: blacklisting is no seizure nor a mint, and its pauser,
// which pauser() names, is a declared controller, not a hidden owner.
// OpenZeppelin's ERC20Votes (checkpoints searched by bisection, a square
// root) is followed to its end and has no power.
func TestPrecisionOnGenuineCode(t *testing.T) {
	t.Parallel()
	blacklist, unBlacklist := sel("blacklist(address)"), sel("unBlacklist(address)")
	cases := []struct {
		name, file, contract string
		facts                Facts
		verdict              Verdict
		absent               []string
		check                func(fx EffectFacts) bool
	}{
		{"FiatToken v2.2", "../bytecode/testdata/circle/fiattoken.json", "FiatTokenV2_2",
			Facts{OwnerKnown: true, OwnerEvidence: "owner() = 0x…", Transfers: 10, KnownIssuer: true},
			Warn, []string{"seizable", "hidden-owner", "analysis-incomplete"},
			func(fx EffectFacts) bool {
				for _, p := range fx.Powers {
					if p.Class == Seize || p.Selector == blacklist || p.Selector == unBlacklist {
						return false
					}
				}
				return !fx.Incomplete
			}},
		{"ERC20Votes", "../bytecode/testdata/genuine/genuine.json", "VotesToken",
			Facts{Transfers: 10}, Pass, []string{"analysis-incomplete"},
			func(fx EffectFacts) bool { return len(fx.Powers) == 0 && !fx.Incomplete }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code := genuineCode(t, c.file, c.contract)
			scan := bytecode.Analyze(code)
			fx := EffectFactsOf(bytecode.AnalyzeEffects(code, scan))
			if !c.check(fx) {
				t.Errorf("powers %+v, incomplete %v", fx.Powers, fx.Incomplete)
			}
			fx.Source, fx.Slots = "token", map[SlotField][20]byte{}
			for _, f := range fx.GuardFields() {
				fx.Slots[f] = [20]byte{19: 0x77} // every guard field holds a live account
			}
			facts := c.facts
			facts.Capabilities, facts.RoleBased, facts.Effects = Capabilities(scan, "token"), RoleBased(scan), &fx
			r := Evaluate(facts)
			if r.Verdict != c.verdict {
				t.Errorf("verdict %s %v, want %s", r.Verdict, r.Rules, c.verdict)
			}
			for _, f := range c.absent {
				if slices.Contains(r.Flags, f) {
					t.Errorf("%s among %v", f, r.Rules)
				}
			}
		})
	}
}
