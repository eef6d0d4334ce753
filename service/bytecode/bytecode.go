// Package bytecode reads EVM runtime bytecode without running it: a linear
// disassembly that skips PUSH data, the solc metadata trailer, the
// function selectors a Solidity-style dispatcher compares the calldata
// against, minimal-proxy (EIP-1167, ERC-7511) and EIP-7702 delegation
// shapes, and the presence of DELEGATECALL and SELFDESTRUCT. Pure
// functions, no I/O; what the findings mean is service/rugcheck's.
package bytecode

import (
	"bytes"
	"slices"
)

// Opcodes the scanner cares about.
const (
	opEQ           = 0x14
	opPUSH0        = 0x5f
	opPUSH1        = 0x60
	opPUSH4        = 0x63
	opPUSH32       = 0x7f
	opDUP1         = 0x80
	opDUP2         = 0x81
	opDELEGATECALL = 0xf4
	opSELFDESTRUCT = 0xff
)

// Selector is a 4-byte function selector.
type Selector [4]byte

// Scan is what a bytecode reveals.
type Scan struct {
	// Size is the length of the code, metadata included.
	Size int
	// Metadata reports that a solc CBOR metadata trailer was found and
	// left out of the disassembly.
	Metadata bool
	// Selectors are the dispatcher's selectors, sorted and unique.
	Selectors []Selector
	// DelegateCall and SelfDestruct report those opcodes in the code.
	DelegateCall bool
	SelfDestruct bool
}

// Analyze scans code.
func Analyze(code []byte) Scan {
	body, meta := StripMetadata(code)
	s := Scan{Size: len(code), Metadata: meta}
	// Walk the instructions, remembering the last three so a dispatcher
	// comparison can be recognised: DUP1 PUSHn sel EQ (solc's usual form)
	// or PUSHn sel DUP2 EQ (some optimizer outputs).
	var prev [3]instruction
	seen := map[Selector]bool{}
	for pc := 0; pc < len(body); {
		op := body[pc]
		var data []byte
		if op >= opPUSH1 && op <= opPUSH32 {
			n := int(op-opPUSH1) + 1
			end := min(pc+1+n, len(body))
			data = body[pc+1 : end]
			pc = end
		} else {
			pc++
		}
		switch op {
		case opDELEGATECALL:
			s.DelegateCall = true
		case opSELFDESTRUCT:
			s.SelfDestruct = true
		case opEQ:
			var push instruction
			switch {
			case prev[1].op == opDUP1 && isSelectorPush(prev[2]):
				push = prev[2]
			case isSelectorPush(prev[1]) && prev[2].op == opDUP2:
				push = prev[1]
			}
			if push.op != 0 {
				var sel Selector
				copy(sel[4-len(push.data):], push.data) // PUSH1-PUSH3: leading zero bytes were dropped
				if !seen[sel] {
					seen[sel] = true
					s.Selectors = append(s.Selectors, sel)
				}
			}
		}
		prev[0], prev[1], prev[2] = prev[1], prev[2], instruction{op, data}
	}
	slices.SortFunc(s.Selectors, func(a, b Selector) int { return bytes.Compare(a[:], b[:]) })
	return s
}

// instruction is an opcode and its PUSH data, if any.
type instruction struct {
	op   byte
	data []byte
}

// isSelectorPush accepts PUSH2-PUSH4 (solc pushes a selector with leading
// zero bytes in fewer bytes: blockBots(address[]) = 0x00b8cf2a is PUSH3).
// PUSH1 is left out: DUP1 PUSH1 1 EQ is an ordinary comparison in real
// code, and a selector with three leading zero bytes is a 1 in 16 million
// event.
func isSelectorPush(i instruction) bool {
	return i.op > opPUSH1 && i.op <= opPUSH4 && len(i.data) == int(i.op-opPUSH1)+1
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
