package circle_test

// Sanity checks of fiattoken.json, the fixture compile.js makes from Circle's
// FiatToken v2.2 sources. Being under testdata/, this package is left out of
// ./... patterns; run it by its path:
//
//	go test ./service/bytecode/testdata/circle/ -count=1

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

type contract struct {
	ABI                    []struct{ Type, Name string }
	Bytecode               string
	DeployedBytecode       string
	DeployedLinkReferences map[string]map[string][]struct{ Start, Length int }
}

func load(t *testing.T) (map[string]contract, map[string]map[string]string) {
	t.Helper()
	raw, err := os.ReadFile("fiattoken.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Contracts map[string]contract
		Libraries map[string]map[string]string
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	return f.Contracts, f.Libraries
}

func decode(t *testing.T, name, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		t.Fatalf("%s: not hex: %v", name, err)
	}
	return b
}

// comparedSelectors returns each PUSH4 value that an EQ follows directly,
// walking the instructions so that PUSH data is never read as code: the
// selector comparisons of the dispatcher.
func comparedSelectors(code []byte) map[[4]byte]bool {
	out := map[[4]byte]bool{}
	for pc := 0; pc < len(code); pc++ {
		op := code[pc]
		if op == 0x63 && pc+5 < len(code) && code[pc+5] == 0x14 { // PUSH4 x; EQ
			out[[4]byte(code[pc+1:pc+5])] = true
		}
		if op >= 0x60 && op <= 0x7f { // PUSH1..PUSH32
			pc += int(op - 0x5f)
		}
	}
	return out
}

func TestFiatTokenV2_2Runtime(t *testing.T) {
	contracts, libraries := load(t)
	c, ok := contracts["FiatTokenV2_2"]
	if !ok {
		t.Fatal("no FiatTokenV2_2 in fiattoken.json")
	}
	code := decode(t, "FiatTokenV2_2 deployedBytecode", c.DeployedBytecode)
	if len(code) < 10*1024 {
		t.Fatalf("runtime code is %d bytes, want at least 10 KiB", len(code))
	}
	t.Logf("FiatTokenV2_2 runtime code: %d bytes", len(code))
	decode(t, "FiatTokenV2_2 bytecode", c.Bytecode)

	// The SignatureChecker placeholders hold the fixed library address.
	n := 0
	for file, libs := range c.DeployedLinkReferences {
		for lib, places := range libs {
			addr := decode(t, "library address", libraries[file][lib])
			for _, p := range places {
				if got := code[p.Start : p.Start+p.Length]; string(got) != string(addr) {
					t.Errorf("%s:%s at %d: %x, want %x", file, lib, p.Start, got, addr)
				}
				n++
			}
		}
	}
	if n == 0 {
		t.Error("no library link references: FiatTokenV2_2 should call SignatureChecker")
	}

	abi := map[string]bool{}
	for _, e := range c.ABI {
		if e.Type == "function" {
			abi[e.Name] = true
		}
	}
	dispatch := comparedSelectors(code)
	for _, s := range []struct{ sig, hex string }{
		{"blacklist(address)", "f9f92be4"},
		{"isBlacklisted(address)", "fe575a87"},
		{"transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)", "e3ee160e"},
		{"configureMinter(address,uint256)", "4e44d956"},
	} {
		if got := hex.EncodeToString(crypto.Keccak256([]byte(s.sig))[:4]); got != s.hex {
			t.Errorf("selector of %s is %s, not %s", s.sig, got, s.hex)
		}
		if !abi[s.sig[:strings.IndexByte(s.sig, '(')]] {
			t.Errorf("%s is not in the ABI", s.sig)
		}
		if !strings.Contains(c.DeployedBytecode, "63"+s.hex) {
			t.Errorf("no PUSH4 0x%s in the runtime code", s.hex)
		}
		var sel [4]byte
		hex.Decode(sel[:], []byte(s.hex))
		if !dispatch[sel] {
			t.Errorf("the dispatcher does not compare 0x%s (%s)", s.hex, s.sig)
		}
	}
}

func TestOtherContracts(t *testing.T) {
	contracts, _ := load(t)
	for _, name := range []string{"FiatTokenProxy", "SignatureChecker"} {
		c, ok := contracts[name]
		if !ok {
			t.Fatalf("no %s in fiattoken.json", name)
		}
		if code := decode(t, name, c.DeployedBytecode); len(code) == 0 {
			t.Errorf("%s: empty runtime code", name)
		}
	}
}
