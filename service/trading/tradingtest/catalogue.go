package tradingtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"

	"github.com/tollgate/tollgate/devnet"
)

// Contract is one contract of the fixed-trap catalogue
// (service/trading/testdata/Traps.sol), as compile.js builds it.
type Contract struct {
	ABI abi.ABI
	// Bytecode is the creation code, without constructor arguments.
	Bytecode []byte
	// DeployedBytecode is the runtime code, its immutables zero.
	DeployedBytecode []byte
}

// Catalogue returns the fixed-trap catalogue by contract name, read from
// service/trading/testdata/traps.json, and the tokens of the precision
// tests (service/bytecode/testdata/genuine/genuine.json: OpenZeppelin's
// ERC20Votes, a SafeMoon-style token). It finds the files from this
// package's source, so tests of any package can call it.
func Catalogue(t testing.TB) map[string]Contract {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("tradingtest: no source path to find testdata/traps.json from")
	}
	out := map[string]Contract{}
	for _, f := range []string{"../testdata/traps.json", "../../bytecode/testdata/genuine/genuine.json"} {
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(self), f))
		if err != nil {
			t.Fatal(err)
		}
		var build struct {
			Contracts map[string]struct {
				ABI              json.RawMessage `json:"abi"`
				Bytecode         string          `json:"bytecode"`
				DeployedBytecode string          `json:"deployedBytecode"`
			} `json:"contracts"`
		}
		if err := json.Unmarshal(raw, &build); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, c := range build.Contracts {
			parsed, err := abi.JSON(bytes.NewReader(c.ABI))
			if err != nil {
				t.Fatalf("%s: %s: %v", f, name, err)
			}
			out[name] = Contract{ABI: parsed, Bytecode: common.FromHex(c.Bytecode), DeployedBytecode: common.FromHex(c.DeployedBytecode)}
		}
	}
	return out
}

// DeployTrap deploys the catalogue's contract name with constructor args
// from `from` and returns its address and ABI. Most traps take the router
// first (they create their pair from it): pass v.Router. A deployment
// that fails fails the test.
func (v *V2) DeployTrap(t testing.TB, from devnet.Account, name string, args ...any) (common.Address, abi.ABI) {
	t.Helper()
	c, ok := Catalogue(t)[name]
	if !ok {
		t.Fatalf("no %s in the trap catalogue", name)
	}
	ctor, err := c.ABI.Pack("", args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	addr, err := v.Chain.DeployCode(context.Background(), from, append(bytes.Clone(c.Bytecode), ctor...))
	if err != nil {
		t.Fatalf("deploy %s: %v", name, err)
	}
	return addr, c.ABI
}
