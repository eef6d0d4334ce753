package bytecode_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/tollgate/tollgate/service/bytecode"
)

// storage is a token's storage for an evaluation: the words set, zero
// elsewhere (known: every slot was read), or unknown elsewhere.
type storage struct {
	words   map[[32]byte]uint256.Int
	partial bool
}

func (s storage) Load(slot [32]byte) (uint256.Int, bool) {
	v, ok := s.words[slot]
	return v, ok || !s.partial
}

func slotN(n uint64) [32]byte { return uint256.NewInt(n).Bytes32() }

// element is the slot of m[key] for a mapping at base (solc's layout).
func element(key [20]byte, base uint64) [32]byte {
	var buf [64]byte
	copy(buf[12:32], key[:])
	b := slotN(base)
	copy(buf[32:], b[:])
	return [32]byte(crypto.Keccak256(buf[:]))
}

func addr(b byte) [20]byte { return [20]byte{19: b} }

func word(a [20]byte) uint256.Int {
	var v uint256.Int
	v.SetBytes20(a[:])
	return v
}

// TestEvaluateCatalogue: concrete transfers of the renamed-power
// catalogue, every compiler setting, read from the kept paths with the
// storage given: a switch closed and open, a limit under and over the
// amount, a cooldown before and after its time, a fee's credit, and the
// slots an evaluation lacks.
func TestEvaluateCatalogue(t *testing.T) {
	files, err := filepath.Glob("testdata/effects/0.*.json")
	if err != nil || len(files) < 9 {
		t.Fatalf("catalogue builds: %v %v", files, err)
	}
	owner, alice, bob, self := addr(0xa0), addr(0xa1), addr(0xb0), addr(0xcc)
	transfer := bytecode.Selector{0xa9, 0x05, 0x9c, 0xbb}
	call := func(amount, time uint64) bytecode.Call {
		return bytecode.Call{Selector: transfer, Caller: alice, Origin: alice, Self: self,
			Args: []uint256.Int{word(bob), *uint256.NewInt(amount)}, Time: time, Number: 100}
	}
	// Base's layout: _balances 0, _allowances 1, _totalSupply 2, _owner 3;
	// each contract's own variables from 4.
	base := func(extra map[[32]byte]uint256.Int) storage {
		w := map[[32]byte]uint256.Int{element(alice, 0): *uint256.NewInt(1000), slotN(2): *uint256.NewInt(1_000_000), slotN(3): word(owner)}
		for k, v := range extra {
			w[k] = v
		}
		return storage{words: w}
	}
	u := func(v uint64) uint256.Int { return *uint256.NewInt(v) }
	// A bool declared after _owner is packed beside it, from bit 160.
	ownerAnd := func(flag uint64) uint256.Int {
		w := word(owner)
		return *w.Or(&w, new(uint256.Int).Lsh(uint256.NewInt(flag), 160))
	}
	cases := []struct {
		name, contract string
		st             storage
		call           bytecode.Call
		status         bytecode.Status
		kind           bytecode.GateKind // of the decider
		readSlot       [32]byte          // the decider reads it
		credit         uint64            // to bob, when it passes
	}{
		{"switch closed", "Launch", base(nil), call(100, 0), bytecode.Reverts, bytecode.GateFlag, slotN(3), 0},
		{"switch open", "Launch", base(map[[32]byte]uint256.Int{slotN(3): ownerAnd(1)}), call(100, 0), bytecode.Passes, 0, [32]byte{}, 100},
		{"over the limit", "MaxTx", base(map[[32]byte]uint256.Int{slotN(4): u(50)}), call(100, 0), bytecode.Reverts, bytecode.GateLimit, slotN(4), 0},
		{"at the limit", "MaxTx", base(map[[32]byte]uint256.Int{slotN(4): u(100)}), call(100, 0), bytecode.Passes, 0, [32]byte{}, 100},
		{"cooling down", "Cooldown", base(map[[32]byte]uint256.Int{element(alice, 4): u(1000), slotN(5): u(30)}), call(100, 1020), bytecode.Reverts, bytecode.GateCooldown, element(alice, 4), 0},
		{"cooled down", "Cooldown", base(map[[32]byte]uint256.Int{element(alice, 4): u(1000), slotN(5): u(30)}), call(100, 1030), bytecode.Passes, 0, [32]byte{}, 100},
		{"constant tax", "FixedTax", base(nil), call(100, 0), bytecode.Passes, 0, [32]byte{}, 97},
		{"stored tax", "Tax", base(map[[32]byte]uint256.Int{slotN(4): u(50), slotN(5): u(49)}), call(100, 0), bytecode.Passes, 0, [32]byte{}, 1},
		{"paused", "Pauser", base(map[[32]byte]uint256.Int{slotN(3): ownerAnd(1)}), call(100, 0), bytecode.Reverts, bytecode.GateFlag, slotN(3), 0},
		{"not paused", "Pauser", base(nil), call(100, 0), bytecode.Passes, 0, [32]byte{}, 100},
		{"no balance", "FixedTax", base(nil), call(2000, 0), bytecode.Reverts, bytecode.GateLimit, element(alice, 0), 0},
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var build struct {
			Contracts map[string]struct{ DeployedBytecode string }
		}
		if err := json.Unmarshal(raw, &build); err != nil {
			t.Fatal(err)
		}
		setting := strings.TrimSuffix(filepath.Base(f), ".json")
		effects := map[string]bytecode.Effects{}
		for _, c := range cases {
			e, ok := effects[c.contract]
			if !ok {
				code, err := hex.DecodeString(strings.TrimPrefix(build.Contracts[c.contract].DeployedBytecode, "0x"))
				if err != nil {
					t.Fatal(err)
				}
				e = bytecode.AnalyzeEffects(code, bytecode.Analyze(code))
				if !e.Evaluable(transfer) {
					t.Fatalf("%s %s: no transfer to follow", setting, c.contract)
				}
				effects[c.contract] = e
			}
			r := e.Evaluate(c.call, c.st)
			if r.Status != c.status {
				t.Errorf("%s %s: %s, want %s (missing %d)", setting, c.name, r.Status, c.status, len(r.Missing))
				continue
			}
			switch c.status {
			case bytecode.Reverts:
				d := r.Decider
				if d == nil || d.Kind != c.kind || d.Panic {
					t.Errorf("%s %s: decider %+v, want kind %d", setting, c.name, d, c.kind)
					continue
				}
				read := false
				for _, rd := range d.Reads {
					read = read || rd.Slot == c.readSlot && rd.Known
				}
				if !read {
					t.Errorf("%s %s: decider reads %+v, not slot %x", setting, c.name, d.Reads, c.readSlot)
				}
			case bytecode.Passes:
				got, found := uint256.Int{}, false
				for _, w := range r.Writes {
					if w.Slot == element(bob, 0) {
						got, found = w.Value, true
					}
				}
				if !found || got.Uint64() != c.credit {
					t.Errorf("%s %s: bob credited %v (%v), want %d; writes %+v", setting, c.name, got.Uint64(), found, c.credit, r.Writes)
				}
			}
		}
		// Nothing known: the call is unknown, and the evaluation names
		// the switch's slot (beside the owner) as missing.
		r := effects["Launch"].Evaluate(call(100, 0), storage{words: map[[32]byte]uint256.Int{}, partial: true})
		missing := map[[32]byte]bool{}
		for _, m := range r.Missing {
			missing[m] = true
		}
		if r.Status != bytecode.Unknown || !missing[slotN(3)] {
			t.Errorf("%s: with no storage %s, missing %x", setting, r.Status, r.Missing)
		}
	}
}
