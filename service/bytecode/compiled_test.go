package bytecode_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/service/bytecode"
)

// artifact is the part of a devnet artifact or testdata fixture the tests
// read: the ABI and the runtime code.
type artifact struct {
	ABI              []abiEntry
	Bytecode         string
	DeployedBytecode string
}

type abiEntry struct {
	Type, Name string
	Inputs     []abiParam
}

type abiParam struct {
	Type       string
	Components []abiParam
}

// canonical is a parameter's type as it appears in a signature: tuples
// spelled out, array suffixes kept.
func canonical(p abiParam) string {
	if rest, ok := strings.CutPrefix(p.Type, "tuple"); ok {
		var parts []string
		for _, c := range p.Components {
			parts = append(parts, canonical(c))
		}
		return "(" + strings.Join(parts, ",") + ")" + rest
	}
	return p.Type
}

// functions are the ABI's function selectors, sorted.
func (a artifact) functions() []bytecode.Selector {
	var sigs []string
	for _, f := range a.ABI {
		if f.Type != "function" {
			continue
		}
		var types []string
		for _, in := range f.Inputs {
			types = append(types, canonical(in))
		}
		sigs = append(sigs, f.Name+"("+strings.Join(types, ",")+")")
	}
	return sels(sigs...)
}

func readArtifact(t testing.TB, path string) artifact {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a artifact
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return a
}

// compiled are the solc outputs the tests check: every devnet artifact and
// the testdata fixtures (see testdata/compile.js).
func compiled(t testing.TB) map[string]artifact {
	t.Helper()
	paths, err := filepath.Glob("../../devnet/artifacts/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("devnet artifacts: %v %d", err, len(paths))
	}
	fixtures, _ := filepath.Glob("testdata/*.json")
	out := map[string]artifact{}
	for _, p := range append(paths, fixtures...) {
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = readArtifact(t, p)
	}
	return out
}

// TestCompiled: on every contract compiled by solc (the devnet's, with the
// optimizer; the fixtures' binary-search dispatchers, legacy and via-IR),
// the selectors found are exactly the ABI's functions, every jump target
// is resolved, and only the forwarders delegate-call (a Multicall calls
// its own code).
func TestCompiled(t *testing.T) {
	t.Parallel()
	for name, a := range compiled(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code := hexb(t, a.DeployedBytecode)
			s := bytecode.Analyze(code)
			if want := a.functions(); !slices.Equal(s.Selectors, want) {
				t.Errorf("selectors %x\nwant      %x", s.Selectors, want)
			}
			if s.Unresolved != 0 {
				t.Errorf("%d unresolved jumps", s.Unresolved)
			}
			contract, _, _ := strings.Cut(name, ".")
			forwarder := strings.HasSuffix(contract, "Proxy") // ProxyAdmin is not one
			// A Multicall (the batch-settlement escrow's) delegate-calls
			// only its own code: not a forwarder to anyone else.
			selfOnly := len(s.Forwarders) > 0
			for _, f := range s.Forwarders {
				selfOnly = selfOnly && f.Origin == bytecode.OriginSelf
			}
			ok := s.DelegateCall && len(s.Forwarders) > 0
			if !forwarder {
				ok = !s.DelegateCall && len(s.Forwarders) == 0 || s.DelegateCall && selfOnly
			}
			if !ok || s.SelfDestruct {
				t.Errorf("delegatecall %v forwarders %+v selfdestruct %v", s.DelegateCall, s.Forwarders, s.SelfDestruct)
			}
			if s.CodeEnd > len(code) || s.CodeEnd == 0 {
				t.Errorf("code end %d of %d", s.CodeEnd, len(code))
			}
		})
	}
}

// TestForwarderSlots: the proxies report the slot their fallback reads;
// the only other DELEGATECALL they may have is upgradeToAndCall's, to an
// address from calldata. A beacon proxy's target comes from a call.
func TestForwarderSlots(t *testing.T) {
	t.Parallel()
	const (
		eip1967    = "360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc"
		zeppelinOS = "7050c9e0f4ca769c69bd3a8ef740bc37934f8e2c036e5a723fd8ee048ed3f8c3"
		custom     = "78916641fae9c8549b3be1dd57881b7c135163c302d04808ab47c9b1c832d174"
	)
	all := compiled(t)
	for name, slot := range map[string]string{
		"UpgradeableProxy":       eip1967,
		"OZTransparentProxy":     eip1967,
		"LegacyAdminProxy":       zeppelinOS,
		"CustomSlotProxy.legacy": custom,
		"CustomSlotProxy.viair":  custom,
		"OZBeaconProxy":          "",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, ok := all[name]
			if !ok {
				t.Skipf("no artifact %s", name)
			}
			s := bytecode.Analyze(hexb(t, a.DeployedBytecode))
			found := false
			for _, f := range s.Forwarders {
				switch {
				case slot == "" && f.Origin == bytecode.OriginUnknown,
					slot != "" && f.Origin == bytecode.OriginSlot && bytes.Equal(f.Slot[:], hexb(t, slot)):
					found = true
				case f.Origin == bytecode.OriginCalldata:
				default:
					t.Errorf("forwarder %+v (origin %s)", f, f.Origin)
				}
			}
			if !found {
				t.Errorf("forwarders %+v: none reads slot %q", s.Forwarders, slot)
			}
		})
	}
}

// TestFactoryChildren: a factory's runtime code carries its child's
// creation code (the child's dispatcher included, as a linear scan would
// find it); the factory's selectors are its own functions only.
func TestFactoryChildren(t *testing.T) {
	t.Parallel()
	all := compiled(t)
	for _, tt := range []struct{ factory, child string }{
		{"MiniFactory", "MiniPair"},
		{"UniswapV2Factory", "UniswapV2Pair"}, // Uniswap's own, solc 0.5.16
		{"ManyFactory.legacy", "Many.legacy"},
		{"ManyFactory.viair", "Many.viair"},
	} {
		t.Run(tt.factory, func(t *testing.T) {
			t.Parallel()
			f, ok := all[tt.factory]
			c, ok2 := all[tt.child]
			if !ok || !ok2 {
				t.Skipf("no artifacts %s, %s", tt.factory, tt.child)
			}
			code := hexb(t, f.DeployedBytecode)
			childCode := hexb(t, c.DeployedBytecode)
			if !bytes.Contains(code, childCode[:len(childCode)/2]) {
				t.Fatal("the factory does not carry the child's code: the test proves nothing")
			}
			s := bytecode.Analyze(code)
			if want := f.functions(); !slices.Equal(s.Selectors, want) {
				t.Errorf("selectors %x\nwant      %x", s.Selectors, want)
			}
			for _, sel := range c.functions() {
				if s.Has(sel) && !slices.Contains(f.functions(), sel) {
					t.Errorf("child's selector %x reported as the factory's", sel)
				}
			}
			if s.CodeEnd >= bytes.Index(code, childCode[:len(childCode)/2]) {
				t.Errorf("code end %d reaches into the child's code", s.CodeEnd)
			}
		})
	}
}

// TestAppendedData: data appended after a token's runtime code (a child's
// creation code, immutable arguments, a dispatcher-looking pattern, a
// stray metadata-like trailer) changes nothing.
func TestAppendedData(t *testing.T) {
	t.Parallel()
	all := compiled(t)
	token, ok := all["CleanToken"]
	child, ok2 := all["MintableToken"]
	if !ok || !ok2 {
		t.Skip("no CleanToken or MintableToken artifact")
	}
	code := hexb(t, token.DeployedBytecode)
	want := bytecode.Analyze(code)
	dispatch := asm(t, "JUMPDEST "+prologue+"DUP1 PUSH4 "+mint+" EQ PUSH2 0x0010 JUMPI JUMPDEST PUSH0 DUP1 DUP1 DUP1 DUP1 GAS DELEGATECALL CALLER SELFDESTRUCT")
	for name, data := range map[string][]byte{
		"creation code":    hexb(t, child.Bytecode),
		"dispatcher shape": dispatch,
		"address args":     append(bytes.Repeat([]byte{0xbe}, 20), bytes.Repeat([]byte{0x5b}, 12)...),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := bytecode.Analyze(append(slices.Clip(code), data...))
			if !slices.Equal(s.Selectors, want.Selectors) || s.DelegateCall || s.SelfDestruct || s.CodeEnd != want.CodeEnd {
				t.Errorf("scan %+v\nwant %+v", s, want)
			}
		})
	}
}

// BenchmarkAnalyze24KiB scans a 24 KiB contract (target: at most 2 ms; the
// flow analysis costs about ten times the linear scan it replaced, which
// took about 0.1 ms and read a factory's children as its own code):
// testdata/Big.viair.json, 120 functions compiled by solc with --via-ir
// into 23,916 bytes of runtime code, all of it reachable.
func BenchmarkAnalyze24KiB(b *testing.B) {
	code := bigCode(b, "viair")
	b.SetBytes(int64(len(code)))
	for b.Loop() {
		bytecode.Analyze(code)
	}
}

// BenchmarkAnalyzeArtifacts scans every devnet artifact and fixture once
// per iteration: real solc output, all of it reachable code.
func BenchmarkAnalyzeArtifacts(b *testing.B) {
	var codes [][]byte
	n := 0
	for _, a := range compiled(b) {
		c := mustHex(b, a.DeployedBytecode)
		codes = append(codes, c)
		n += len(c)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, c := range codes {
			bytecode.Analyze(c)
		}
	}
}

// BenchmarkEffects24KiB is the effects analysis (AnalyzeEffects: every
// function followed path by path) of the same 24 KiB contract, legacy and
// via-IR builds; the rug check caches it by code hash.
func BenchmarkEffects24KiB(b *testing.B) {
	for _, build := range []string{"legacy", "viair"} {
		b.Run(build, func(b *testing.B) {
			code := bigCode(b, build)
			scan := bytecode.Analyze(code)
			b.SetBytes(int64(len(code)))
			var e bytecode.Effects
			for b.Loop() {
				e = bytecode.AnalyzeEffects(code, scan)
			}
			if !e.Complete || len(e.Functions) != len(scan.Selectors)+1 {
				b.Errorf("complete %v, %d functions for %d selectors", e.Complete, len(e.Functions), len(scan.Selectors))
			}
		})
	}
}

// bigCode is the runtime code of testdata/Big.<build>.json, the 24 KiB
// contract of the benchmarks.
func bigCode(b *testing.B, build string) []byte {
	raw, err := os.ReadFile("testdata/Big." + build + ".json")
	if err != nil {
		b.Fatal(err)
	}
	var a artifact
	if err := json.Unmarshal(raw, &a); err != nil {
		b.Fatal(err)
	}
	return mustHex(b, a.DeployedBytecode)
}
