package bytecode_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

func sels(sigs ...string) []bytecode.Selector {
	var out []bytecode.Selector
	for _, s := range sigs {
		out = append(out, sel(s))
	}
	slices.SortFunc(out, func(a, b bytecode.Selector) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func hexb(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimPrefix(strings.ReplaceAll(s, " ", ""), "0x"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Selectors used by the hand-assembled dispatchers.
const (
	mint      = "0x40c10f19" // mint(address,uint256)
	pause     = "0x8456cb59" // pause()
	blockBots = "0xb8cf2a"   // blockBots(address[]), 0x00b8cf2a pushed in three bytes
	owner     = "0x8da5cb5b" // owner()
	// prologue leaves the selector on the stack, as solc >= 0.5 does.
	prologue = "PUSH0 CALLDATALOAD PUSH1 0xe0 SHR "
	// bodies are the functions' code: each stops, so the tests see only
	// what the dispatcher reaches.
	bodies = " PUSH0 DUP1 REVERT f1: JUMPDEST STOP f2: JUMPDEST STOP f3: JUMPDEST STOP "
)

func TestDispatchers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		asm  string
		want []bytecode.Selector
	}{
		{"solc DUP1 PUSH4 EQ", prologue + "DUP1 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI DUP1 PUSH4 " + pause + " EQ PUSH2 @f2 JUMPI" + bodies,
			sels("mint(address,uint256)", "pause()")},
		{"PUSH4 DUP2 EQ", prologue + "PUSH4 " + pause + " DUP2 EQ PUSH2 @f1 JUMPI" + bodies, sels("pause()")},
		{"PUSH3: selector with a leading zero byte", prologue + "DUP1 PUSH3 " + blockBots + " EQ PUSH2 @f1 JUMPI" + bodies, sels("blockBots(address[])")},
		{"PUSH1 compared with the selector", prologue + "DUP1 PUSH1 0x2a EQ PUSH2 @f1 JUMPI" + bodies, []bytecode.Selector{{0, 0, 0, 0x2a}}},
		{"XOR ISZERO JUMPI", prologue + "DUP1 PUSH4 " + mint + " XOR ISZERO PUSH2 @f1 JUMPI" + bodies, sels("mint(address,uint256)")},
		{"Vyper: PUSH4 DUP2 XOR JUMPI to the next check", prologue +
			"PUSH4 " + mint + " DUP2 XOR PUSH2 @next JUMPI STOP next: JUMPDEST PUSH4 " + pause + " DUP2 XOR PUSH2 @f1 JUMPI STOP" + bodies,
			sels("mint(address,uint256)", "pause()")},
		{"SUB with inverted sense", prologue + "DUP1 PUSH4 " + mint + " SUB PUSH2 @next JUMPI STOP next: JUMPDEST PUSH4 " + owner + " DUP2 SUB PUSH2 @f1 JUMPI STOP" + bodies,
			sels("mint(address,uint256)", "owner()")},
		{"full-word PUSH32 against calldataload(0)",
			"PUSH0 CALLDATALOAD DUP1 PUSH32 " + mint + strings.Repeat("00", 28) + " EQ PUSH2 @f1 JUMPI" + bodies,
			sels("mint(address,uint256)")},
		{"top four bytes masked in place",
			"PUSH0 CALLDATALOAD PUSH32 0xffffffff" + strings.Repeat("00", 28) + " AND DUP1 PUSH32 " + pause + strings.Repeat("00", 28) + " EQ PUSH2 @f1 JUMPI" + bodies,
			sels("pause()")},
		{"full word with argument bytes is not a selector",
			"PUSH0 CALLDATALOAD PUSH32 " + mint + strings.Repeat("01", 28) + " EQ PUSH2 @f1 JUMPI" + bodies, nil},
		{"old solc: DIV by 2**224, AND 0xffffffff",
			"PUSH1 0 CALLDATALOAD PUSH29 0x01" + strings.Repeat("00", 28) + " SWAP1 DIV PUSH4 0xffffffff AND DUP1 PUSH4 " + owner + " EQ PUSH2 @f1 JUMPI" + bodies,
			sels("owner()")},
		{"binary search: a pivot only compared by GT is not a selector", prologue +
			"DUP1 PUSH4 0x50000000 GT PUSH2 @low JUMPI DUP1 PUSH4 " + owner + " EQ PUSH2 @f1 JUMPI DUP1 PUSH4 " + pause + " EQ PUSH2 @f2 JUMPI STOP " +
			"low: JUMPDEST DUP1 PUSH4 " + mint + " EQ PUSH2 @f3 JUMPI STOP" + bodies,
			sels("owner()", "pause()", "mint(address,uint256)")},
		{"binary search: LT pivot that is also a function", prologue +
			"DUP1 PUSH4 " + owner + " LT PUSH2 @high JUMPI DUP1 PUSH4 " + owner + " EQ PUSH2 @f1 JUMPI DUP1 PUSH4 " + mint + " EQ PUSH2 @f2 JUMPI STOP " +
			"high: JUMPDEST DUP1 PUSH4 " + pause + " EQ PUSH2 @f3 JUMPI STOP" + bodies,
			sels("owner()", "pause()", "mint(address,uint256)")},
		{"a comparison with calldata at another offset is not a selector",
			"PUSH1 4 CALLDATALOAD DUP1 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI" + bodies, nil},
		{"a PUSH4 constant without a comparison (Panic)", prologue + "PUSH4 0x4e487b71 PUSH0 MSTORE STOP", nil},
		{"PUSH5 compared with the selector", prologue + "DUP1 PUSH5 0x0040c10f19 EQ PUSH2 @f1 JUMPI" + bodies, sels("mint(address,uint256)")},
		{"selector-looking bytes inside PUSH32 data", prologue + "PUSH32 0x0080630a0b0c0d14" + strings.Repeat("00", 24) + " POP STOP", nil},
		{"stack underflow halts: DUP1 at pc 0", "DUP1 PUSH4 " + mint + " EQ STOP", nil},
		{"selector below a return address: found after the call returns", prologue +
			"PUSH2 @ret PUSH2 @fn JUMP " +
			"ret: JUMPDEST DUP1 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI STOP " +
			"fn: JUMPDEST PUSH1 1 POP JUMP" + bodies,
			sels("mint(address,uint256)")},
		{"return address moved by SWAP", prologue +
			"PUSH2 @ret PUSH1 7 PUSH2 @fn JUMP " +
			"ret: JUMPDEST POP DUP1 PUSH4 " + pause + " EQ PUSH2 @f1 JUMPI STOP " +
			"fn: JUMPDEST SWAP1 JUMP" + bodies,
			sels("pause()")},
		{"callee reading its caller's stack (analysed inline)", prologue +
			"PUSH2 @ret PUSH2 @fn JUMP ret: JUMPDEST STOP fn: JUMPDEST DUP2 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI JUMP" + bodies,
			sels("mint(address,uint256)")},
		{"callee returning the selector", "PUSH2 @ret PUSH2 @fn JUMP ret: JUMPDEST DUP1 PUSH4 " + pause + " EQ PUSH2 @f1 JUMPI STOP " +
			"fn: JUMPDEST PUSH0 CALLDATALOAD PUSH1 0xe0 SHR SWAP1 JUMP" + bodies,
			sels("pause()")},
		{"a call below the caller's own return address", prologue +
			"PUSH2 @exit PUSH2 @outer JUMP exit: JUMPDEST STOP " +
			// outer: its return address (exit) is swapped above the inner
			// call's return address, which inner then uses to come back.
			"outer: JUMPDEST PUSH2 @back SWAP1 PUSH2 @inner JUMP " +
			"back: JUMPDEST DUP2 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI JUMP " +
			"inner: JUMPDEST SWAP1 JUMP" + bodies,
			sels("mint(address,uint256)")},
		{"a loop growing the stack ends", prologue + "DUP1 PUSH4 " + owner + " EQ PUSH2 @f1 JUMPI loop: JUMPDEST PUSH1 1 PUSH2 @loop JUMP" + bodies,
			sels("owner()")},
		{"unreachable code after STOP", prologue + "STOP DUP1 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI" + bodies, nil},
		{"jump to a constant that is not a JUMPDEST", prologue + "PUSH2 @notdest JUMP notdest: DUP1 PUSH4 " + mint + " EQ PUSH2 @f1 JUMPI" + bodies, nil},
		{"a loop ends", prologue + "loop: JUMPDEST DUP1 PUSH4 " + mint + " EQ PUSH2 @loop JUMPI PUSH2 @loop JUMP", sels("mint(address,uint256)")},
		{"recursion ends", prologue + "PUSH2 @exit PUSH2 @rec JUMP " +
			"rec: JUMPDEST PUSH0 CALLDATALOAD PUSH2 @done JUMPI PUSH2 @back PUSH2 @rec JUMP back: JUMPDEST done: JUMPDEST JUMP " +
			"exit: JUMPDEST DUP1 PUSH4 " + owner + " EQ PUSH2 @f1 JUMPI STOP" + bodies,
			sels("owner()")},
		{"Vyper-style jump table: target from memory, selector kept on the stack", prologue +
			"PUSH1 2 DUP2 MOD PUSH1 1 SHL PUSH2 @table ADD PUSH1 2 SWAP1 PUSH1 0x1e CODECOPY PUSH0 MLOAD JUMP " +
			"b0: JUMPDEST PUSH4 " + mint + " DUP2 XOR PUSH2 @fail JUMPI PUSH2 @f1 JUMP " +
			"b1: JUMPDEST PUSH4 " + pause + " DUP2 XOR PUSH2 @fail JUMPI PUSH2 @f2 JUMP " +
			"fail: JUMPDEST PUSH0 DUP1 REVERT f1: JUMPDEST STOP f2: JUMPDEST STOP " +
			"INVALID table: 0x0000 " +
			// Appended after the data boundary: a child's dispatcher.
			"JUMPDEST " + prologue + "DUP1 PUSH4 " + owner + " EQ PUSH2 @f1 JUMPI STOP",
			sels("mint(address,uint256)", "pause()")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := bytecode.Analyze(asm(t, tt.asm))
			if !slices.Equal(s.Selectors, tt.want) {
				t.Errorf("selectors %x, want %x", s.Selectors, tt.want)
			}
		})
	}
}

// TestBounded: call strings that double at every level (each function
// calls the next one twice, 2**40 paths) cost one analysis per function:
// callees are analysed once for all their callers.
func TestBounded(t *testing.T) {
	t.Parallel()
	const levels = 40
	var b strings.Builder
	b.WriteString("PUSH2 @done PUSH2 @f0 JUMP done: JUMPDEST " + prologue + "DUP1 PUSH4 " + mint + " EQ PUSH2 @body JUMPI STOP body: JUMPDEST STOP ")
	for i := range levels {
		fmt.Fprintf(&b, "f%d: JUMPDEST PUSH2 @r%da PUSH2 @f%d JUMP r%da: JUMPDEST PUSH2 @r%db PUSH2 @f%d JUMP r%db: JUMPDEST JUMP ", i, i, i+1, i, i, i+1, i)
	}
	fmt.Fprintf(&b, "f%d: JUMPDEST JUMP", levels)
	start := time.Now()
	s := bytecode.Analyze(asm(t, b.String()))
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	if !slices.Equal(s.Selectors, sels("mint(address,uint256)")) || s.Unresolved != 0 {
		t.Errorf("selectors %x unresolved %d", s.Selectors, s.Unresolved)
	}
}

func TestReachability(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		asm                    string
		delegate, selfdestruct bool
		unresolved             int
	}{
		{name: "DELEGATECALL and SELFDESTRUCT reachable",
			asm:      "PUSH0 DUP1 DUP1 DUP1 DUP1 GAS DELEGATECALL PUSH0 SELFDESTRUCT",
			delegate: true, selfdestruct: true},
		{name: "only in PUSH data", asm: "PUSH2 0xf4ff STOP"},
		{name: "only after STOP (appended data)", asm: "STOP PUSH0 DUP1 DUP1 DUP1 DUP1 GAS DELEGATECALL PUSH0 SELFDESTRUCT"},
		{name: "behind a JUMPI", asm: "PUSH0 CALLDATALOAD PUSH2 @kill JUMPI STOP kill: JUMPDEST CALLER SELFDESTRUCT", selfdestruct: true},
		{name: "unresolved jump reaches every JUMPDEST before the data boundary",
			asm: "PUSH0 CALLDATALOAD JUMP a: JUMPDEST CALLER SELFDESTRUCT INVALID " +
				"JUMPDEST PUSH0 DUP1 DUP1 DUP1 DUP1 GAS DELEGATECALL",
			selfdestruct: true, unresolved: 1},
		{name: "the boundary moves past INVALIDs inside reachable code",
			asm: "PUSH2 @b JUMP INVALID c: JUMPDEST CALLER SELFDESTRUCT b: JUMPDEST PUSH0 CALLDATALOAD JUMP " +
				"INVALID JUMPDEST PUSH0 DUP1 DUP1 DUP1 DUP1 GAS DELEGATECALL",
			selfdestruct: true, unresolved: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := bytecode.Analyze(asm(t, tt.asm))
			if s.DelegateCall != tt.delegate || s.SelfDestruct != tt.selfdestruct || s.Unresolved != tt.unresolved {
				t.Errorf("delegatecall %v selfdestruct %v unresolved %d; want %v %v %d",
					s.DelegateCall, s.SelfDestruct, s.Unresolved, tt.delegate, tt.selfdestruct, tt.unresolved)
			}
		})
	}
}

func TestForwarders(t *testing.T) {
	t.Parallel()
	const (
		slot = "0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc"
		addr = "0xbebebebebebebebebebebebebebebebebebebebe"
		// call delegate-calls the address on top of the stack with the calldata.
		call = " CALLDATASIZE PUSH0 DUP1 CALLDATACOPY PUSH0 DUP1 CALLDATASIZE PUSH0 SWAP4 GAS DELEGATECALL STOP"
	)
	var slotWord [32]byte
	var addrWord [20]byte
	copy(slotWord[:], mustHex(t, slot))
	copy(addrWord[:], mustHex(t, addr))
	tests := []struct {
		name string
		asm  string
		want bytecode.Forwarder
	}{
		{"PUSH32 slot SLOAD", "PUSH32 " + slot + " SLOAD" + call, bytecode.Forwarder{Origin: bytecode.OriginSlot, Slot: slotWord}},
		{"PUSH1 slot SLOAD", "PUSH1 0x02 SLOAD" + call, bytecode.Forwarder{Origin: bytecode.OriginSlot, Slot: [32]byte{31: 2}}},
		{"slot masked to an address by solc's (1<<160)-1", "PUSH1 1 PUSH1 1 PUSH1 0xa0 SHL SUB PUSH32 " + slot + " SLOAD AND" + call,
			bytecode.Forwarder{Origin: bytecode.OriginSlot, Slot: slotWord}},
		{"slot read in an internal function", "PUSH2 @ret PUSH2 @impl JUMP ret: JUMPDEST" + call + " impl: JUMPDEST PUSH32 " + slot + " SLOAD SWAP1 JUMP",
			bytecode.Forwarder{Origin: bytecode.OriginSlot, Slot: slotWord}},
		{"PUSH20 constant", "PUSH20 " + addr + call, bytecode.Forwarder{Origin: bytecode.OriginConstant, Address: addrWord}},
		{"immutable: PUSH32 masked", "PUSH32 " + addr + " PUSH1 1 PUSH1 1 PUSH1 0xa0 SHL SUB AND" + call,
			bytecode.Forwarder{Origin: bytecode.OriginConstant, Address: addrWord}},
		{"ADDRESS", "ADDRESS" + call, bytecode.Forwarder{Origin: bytecode.OriginSelf}},
		{"from calldata", "PUSH1 4 CALLDATALOAD" + call, bytecode.Forwarder{Origin: bytecode.OriginCalldata}},
		{"from calldata, masked", "PUSH1 4 CALLDATALOAD PUSH20 0xffffffffffffffffffffffffffffffffffffffff AND" + call, bytecode.Forwarder{Origin: bytecode.OriginCalldata}},
		{"from memory (a call's return data)", "PUSH0 MLOAD" + call, bytecode.Forwarder{Origin: bytecode.OriginUnknown}},
		{"from a mapping", "CALLER PUSH0 MSTORE PUSH1 0x20 PUSH0 SHA3 SLOAD" + call, bytecode.Forwarder{Origin: bytecode.OriginUnknown}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code := asm(t, tt.asm)
			tt.want.PC = bytes.LastIndexByte(code, 0xf4)
			s := bytecode.Analyze(code)
			if want := []bytecode.Forwarder{tt.want}; !slices.Equal(s.Forwarders, want) || !s.DelegateCall {
				t.Errorf("forwarders %+v, want %+v", s.Forwarders, want)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	code := asm(t, prologue+"DUP1 PUSH4 "+mint+" EQ PUSH2 @f1 JUMPI"+bodies)
	trailer := hexb(t, "a2 64 69706673 58 22"+strings.Repeat(" 80 63 8456cb59 14", 2)+" 00 16")
	s := bytecode.Analyze(append(code, trailer...))
	if !s.Metadata || !slices.Equal(s.Selectors, sels("mint(address,uint256)")) || s.Size != len(code)+len(trailer) || s.CodeEnd > len(code) {
		t.Errorf("%+v", s)
	}
	if s := bytecode.Analyze(code); s.Metadata {
		t.Error("metadata found in code without a trailer")
	}
}

func TestOpcodesAndProxies(t *testing.T) {
	t.Parallel()
	impl := "bebebebebebebebebebebebebebebebebebebebe"
	for kind, code := range map[string]string{
		"eip1167": "363d3d373d3d3d363d73" + impl + "5af43d82803e903d91602b57fd5bf3",
		"erc7511": "365f5f375f5f365f73" + impl + "5af43d5f5f3e5f3d91602a57fd5bf3",
	} {
		got, k, ok := bytecode.MinimalProxy(hexb(t, code))
		if !ok || k != kind || hex.EncodeToString(got[:]) != impl {
			t.Errorf("%s: %x %s %v", kind, got, k, ok)
		}
		// The clone's own code forwards to the constant address.
		s := bytecode.Analyze(hexb(t, code))
		if len(s.Forwarders) != 1 || s.Forwarders[0].Origin != bytecode.OriginConstant || hex.EncodeToString(s.Forwarders[0].Address[:]) != impl {
			t.Errorf("%s: forwarders %+v", kind, s.Forwarders)
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

// FuzzAnalyze: any code is analysed without a panic, in bounded time, into
// a well-formed scan.
func FuzzAnalyze(f *testing.F) {
	for _, seed := range []string{
		"", "00", "5b600056", "6000355f5260e01c8063deadbeef14610010575b00",
		"363d3d373d3d3d363d73bebebebebebebebebebebebebebebebebebebebe5af43d82803e903d91602b57fd5bf3",
		"61000556005b6003565b",
	} {
		b, _ := hex.DecodeString(seed)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, code []byte) {
		s := bytecode.Analyze(code)
		if s.Size != len(code) || s.CodeEnd > len(code) || s.Unresolved < 0 {
			t.Fatalf("%+v", s)
		}
		if !slices.IsSortedFunc(s.Selectors, func(a, b bytecode.Selector) int { return bytes.Compare(a[:], b[:]) }) {
			t.Fatalf("selectors not sorted: %x", s.Selectors)
		}
		if len(s.Forwarders) > 0 != s.DelegateCall {
			t.Fatalf("forwarders %v, delegatecall %v", s.Forwarders, s.DelegateCall)
		}
	})
}
