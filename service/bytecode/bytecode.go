package bytecode

import (
	"bytes"
	"slices"
)

// Selector is a 4-byte function selector.
type Selector [4]byte

// Scan is what a bytecode reveals.
type Scan struct {
	// Size is the length of the code, metadata and appended data included.
	Size int
	// Metadata reports that a solc CBOR metadata trailer was found; it is
	// never analysed as code.
	Metadata bool
	// Selectors are the selectors reachable code compares the calldata's
	// first four bytes against, sorted and unique.
	Selectors []Selector
	// DelegateCall and SelfDestruct report those opcodes in reachable code.
	DelegateCall bool
	SelfDestruct bool
	// Forwarders are the reachable DELEGATECALL sites, sorted by pc, with
	// where the called address comes from.
	Forwarders []Forwarder
	// Unresolved counts the reachable JUMP and JUMPI instructions whose
	// target the analysis did not resolve to constants (computed targets,
	// or any target once the analysis's work bound was reached); each was
	// taken to go to every JUMPDEST before the data boundary (see the
	// package documentation). Zero for solc output.
	Unresolved int
	// CodeEnd is one past the last reachable instruction. Bytes after it
	// (solc's embedded creation code of children, appended data, the
	// metadata trailer) were not analysed as code.
	CodeEnd int
}

// Origin says where the address a DELEGATECALL calls comes from.
type Origin uint8

// Origins of a delegate-called address.
const (
	// OriginUnknown: computed, or read from memory, a mapping or another
	// call's return data (a beacon's implementation()); not resolved
	// statically.
	OriginUnknown Origin = iota
	// OriginSlot: SLOAD of a constant storage slot, [Forwarder.Slot].
	OriginSlot
	// OriginConstant: a constant in the code, [Forwarder.Address]: an
	// EIP-1167 clone's PUSH20, or a Solidity immutable (all zero in
	// compiler output, the real address in deployed code).
	OriginConstant
	// OriginSelf: ADDRESS, the contract's own code (Multicall-style).
	OriginSelf
	// OriginCalldata: an argument of the call, so the caller picks the
	// code to run: upgradeToAndCall's delegatecall to the new
	// implementation, or an "execute"-style function.
	OriginCalldata
)

// String names the origin: "unknown", "slot", "constant", "self" or
// "calldata".
func (o Origin) String() string {
	switch o {
	case OriginSlot:
		return "slot"
	case OriginConstant:
		return "constant"
	case OriginSelf:
		return "self"
	case OriginCalldata:
		return "calldata"
	}
	return "unknown"
}

// Forwarder is one reachable DELEGATECALL and the origin of the address it
// calls. A DELEGATECALL reached with different origins (through different
// callers of a shared internal function) appears once per origin.
type Forwarder struct {
	// PC is the DELEGATECALL's offset in the code.
	PC int
	// Origin says which of Slot and Address is set.
	Origin Origin
	// Slot is the storage slot read, big-endian, for OriginSlot.
	Slot [32]byte
	// Address is the constant address (the low 20 bytes of the pushed
	// word), for OriginConstant.
	Address [20]byte
}

// Analyze scans code: its reachable instructions from pc 0, leaving out
// appended data and the metadata trailer (see the package documentation).
func Analyze(code []byte) Scan {
	body, meta := StripMetadata(code)
	s := Scan{Size: len(code), Metadata: meta}
	a := newAnalysis(code, len(body))
	a.run()
	a.report(&s)
	return s
}

// StripMetadata removes solc's CBOR metadata trailer: its length is the
// code's last two bytes (big-endian), and it is a CBOR map. Code without
// a recognisable trailer is returned whole.
func StripMetadata(code []byte) ([]byte, bool) {
	if len(code) < 4 {
		return code, false
	}
	n := int(code[len(code)-2])<<8 | int(code[len(code)-1])
	start := len(code) - 2 - n
	if n == 0 || start < 0 {
		return code, false
	}
	if first := code[start]; first < 0xa1 || first > 0xbf { // CBOR major type 5 (map)
		return code, false
	}
	return code[:start], true
}

// Has reports whether sel is among the scan's selectors.
func (s Scan) Has(sel Selector) bool {
	_, found := slices.BinarySearchFunc(s.Selectors, sel, func(a, b Selector) int { return bytes.Compare(a[:], b[:]) })
	return found
}

// Minimal-proxy shapes (EIP-1167, ERC-7511): prefix, 20-byte address, suffix.
const (
	eip1167Prefix = "\x36\x3d\x3d\x37\x3d\x3d\x3d\x36\x3d\x73"
	eip1167Suffix = "\x5a\xf4\x3d\x82\x80\x3e\x90\x3d\x91\x60\x2b\x57\xfd\x5b\xf3"
	erc7511Prefix = "\x36\x5f\x5f\x37\x5f\x5f\x36\x5f\x73"
	erc7511Suffix = "\x5a\xf4\x3d\x5f\x5f\x3e\x5f\x3d\x91\x60\x2a\x57\xfd\x5b\xf3"
)

// MinimalProxy returns the implementation address of an EIP-1167 or
// ERC-7511 clone, and which one it is ("eip1167", "erc7511").
func MinimalProxy(code []byte) (impl [20]byte, kind string, ok bool) {
	for _, shape := range []struct {
		kind           string
		prefix, suffix string
	}{{"eip1167", eip1167Prefix, eip1167Suffix}, {"erc7511", erc7511Prefix, erc7511Suffix}} {
		if len(code) == len(shape.prefix)+20+len(shape.suffix) && bytes.HasPrefix(code, []byte(shape.prefix)) && bytes.HasSuffix(code, []byte(shape.suffix)) {
			copy(impl[:], code[len(shape.prefix):len(shape.prefix)+20])
			return impl, shape.kind, true
		}
	}
	return impl, "", false
}

// Delegation returns the delegate of an EIP-7702 delegated account, whose
// code is 0xef0100 followed by an address.
func Delegation(code []byte) ([20]byte, bool) {
	var d [20]byte
	if len(code) != 23 || code[0] != 0xef || code[1] != 0x01 || code[2] != 0x00 {
		return d, false
	}
	copy(d[:], code[3:])
	return d, true
}
