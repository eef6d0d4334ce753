package bytecode_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/sha3"

	"github.com/tollgate/tollgate/service/bytecode"
)

func sel(sig string) bytecode.Selector {
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(sig))
	var s bytecode.Selector
	copy(s[:], h.Sum(nil))
	return s
}

func hexb(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimPrefix(strings.ReplaceAll(s, " ", ""), "0x"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRealSolcOutput: on the devnet token, compiled by solc 0.8.37 with
// the optimizer, the dispatcher's selectors are exactly the ABI's functions.
func TestRealSolcOutput(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../devnet/artifacts/USDToken.json")
	if err != nil {
		t.Fatal(err)
	}
	var art struct {
		ABI []struct {
			Type, Name string
			Inputs     []struct{ Type string }
		}
		DeployedBytecode string
	}
	if err := json.Unmarshal(raw, &art); err != nil {
		t.Fatal(err)
	}
	var want []bytecode.Selector
	for _, f := range art.ABI {
		if f.Type != "function" {
			continue
		}
		var types []string
		for _, in := range f.Inputs {
			types = append(types, in.Type)
		}
		want = append(want, sel(f.Name+"("+strings.Join(types, ",")+")"))
	}
	slices.SortFunc(want, func(a, b bytecode.Selector) int { return bytes.Compare(a[:], b[:]) })
	s := bytecode.Analyze(hexb(t, art.DeployedBytecode))
	if !slices.Equal(s.Selectors, want) {
		t.Errorf("selectors %x\nwant      %x", s.Selectors, want)
	}
	if s.DelegateCall || s.SelfDestruct {
		t.Errorf("token scan %+v", s)
	}
}

func TestEdgeCases(t *testing.T) {
	t.Parallel()
	const dispatch = "80 63 40c10f19 14" // DUP1 PUSH4 mint(address,uint256) EQ
	tests := []struct {
		name string
		code string
		want []bytecode.Selector
		meta bool
	}{
		{"DUP1 PUSH4 EQ", dispatch, []bytecode.Selector{sel("mint(address,uint256)")}, false},
		{"PUSH4 DUP2 EQ", "63 8456cb59 81 14", []bytecode.Selector{sel("pause()")}, false},
		{"PUSH3 selector with a leading zero byte", "80 62 b8cf2a 14", []bytecode.Selector{sel("blockBots(address[])")}, false},
		{"PUSH2 selector", "80 61 012a 14", []bytecode.Selector{{0, 0, 1, 0x2a}}, false},
		{"PUSH1 comparison is not a selector", "80 60 01 14", nil, false},
		{"selector-looking bytes inside PUSH32 data", "7f 00 80 63 40c10f19 14" + strings.Repeat("00", 25) + " 00", nil, false},
		{"PUSH4 constant without a comparison (Panic)", "63 4e487b71 60 00 52", nil, false},
		{"PUSH5 is not a selector", "80 64 0040c10f19 14", nil, false},
		{"truncated PUSH at the end", "80 63 40c1", nil, false},
		{"metadata trailer ignored", dispatch + " a2 64 69706673 58 22 " + strings.Repeat("80 63 8456cb59 14", 2) + " 00 16", []bytecode.Selector{sel("mint(address,uint256)")}, true},
		{"no metadata", dispatch + " 00", []bytecode.Selector{sel("mint(address,uint256)")}, false},
		{"duplicates collapse", dispatch + " " + dispatch, []bytecode.Selector{sel("mint(address,uint256)")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := bytecode.Analyze(hexb(t, tt.code))
			if !slices.Equal(s.Selectors, tt.want) || s.Metadata != tt.meta {
				t.Errorf("selectors %x metadata %v; want %x %v", s.Selectors, s.Metadata, tt.want, tt.meta)
			}
		})
	}
}

func TestOpcodesAndProxies(t *testing.T) {
	t.Parallel()
	if s := bytecode.Analyze(hexb(t, "60 00 f4 ff")); !s.DelegateCall || !s.SelfDestruct {
		t.Errorf("%+v", s)
	}
	if s := bytecode.Analyze(hexb(t, "61 f4ff")); s.DelegateCall || s.SelfDestruct {
		t.Error("opcodes inside PUSH data counted")
	}
	impl := "bebebebebebebebebebebebebebebebebebebebe"
	for kind, code := range map[string]string{
		"eip1167": "363d3d373d3d3d363d73" + impl + "5af43d82803e903d91602b57fd5bf3",
		"erc7511": "365f5f375f5f365f73" + impl + "5af43d5f5f3e5f3d91602a57fd5bf3",
	} {
		got, k, ok := bytecode.MinimalProxy(hexb(t, code))
		if !ok || k != kind || hex.EncodeToString(got[:]) != impl {
			t.Errorf("%s: %x %s %v", kind, got, k, ok)
		}
	}
	if _, _, ok := bytecode.MinimalProxy(hexb(t, "363d3d373d3d3d363d73"+impl+"5af43d82803e903d91602b57fd5bf300")); ok {
		t.Error("a longer code is not a clone")
	}
	d, ok := bytecode.Delegation(hexb(t, "ef0100"+impl))
	if !ok || hex.EncodeToString(d[:]) != impl {
		t.Errorf("delegation %x %v", d, ok)
	}
	if _, ok := bytecode.Delegation(hexb(t, "ef0100"+impl+"00")); ok {
		t.Error("24 bytes is not a delegation")
	}
}

// BenchmarkAnalyze24KiB scans a 24 KiB contract (target: at most 200 us).
func BenchmarkAnalyze24KiB(b *testing.B) {
	var code []byte
	for len(code) < 24<<10 {
		code = append(code, 0x80, 0x63, 0x40, 0xc1, 0x0f, 0x19, 0x14, 0x61, 0x01, 0x02, 0x57, 0x5b, 0x60, 0x00, 0x35)
	}
	code = code[:24<<10]
	b.SetBytes(int64(len(code)))
	for b.Loop() {
		bytecode.Analyze(code)
	}
}
