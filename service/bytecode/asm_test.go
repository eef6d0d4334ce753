package bytecode_test

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// opcodes names the opcodes the tests assemble; PUSHn, DUPn and SWAPn are
// computed.
var opcodes = map[string]byte{
	"STOP": 0x00, "ADD": 0x01, "SUB": 0x03, "DIV": 0x04, "LT": 0x10, "GT": 0x11, "EQ": 0x14,
	"ISZERO": 0x15, "AND": 0x16, "XOR": 0x18, "SHL": 0x1b, "SHR": 0x1c, "ADDRESS": 0x30,
	"CALLDATALOAD": 0x35, "CALLDATASIZE": 0x36, "CALLDATACOPY": 0x37, "CODECOPY": 0x39,
	"RETURNDATASIZE": 0x3d, "RETURNDATACOPY": 0x3e, "POP": 0x50, "MLOAD": 0x51, "MSTORE": 0x52,
	"SLOAD": 0x54, "SSTORE": 0x55, "JUMP": 0x56, "JUMPI": 0x57, "GAS": 0x5a, "JUMPDEST": 0x5b,
	"RETURN": 0xf3, "DELEGATECALL": 0xf4, "REVERT": 0xfd, "INVALID": 0xfe, "SELFDESTRUCT": 0xff,
	"MOD": 0x06, "CALLER": 0x33, "SHA3": 0x20,
}

// asm assembles whitespace-separated mnemonics into bytecode. "name:"
// defines a label at the current offset; "PUSHn @name" pushes a label's
// offset, "PUSHn 0x…" a constant (left-padded to n bytes); a bare "0x…"
// is raw bytes (data); "#…" up to the end of the line is a comment.
func asm(t testing.TB, src string) []byte {
	t.Helper()
	var toks []string
	for line := range strings.Lines(src) {
		line, _, _ = strings.Cut(line, "#")
		toks = append(toks, strings.Fields(line)...)
	}
	labels := map[string]int{}
	for pass := range 2 {
		var out []byte
		for i := 0; i < len(toks); i++ {
			tok := toks[i]
			switch {
			case strings.HasSuffix(tok, ":"):
				name := strings.TrimSuffix(tok, ":")
				if _, dup := labels[name]; dup && pass == 0 {
					t.Fatalf("label %q defined twice", name)
				}
				labels[name] = len(out)
			case strings.HasPrefix(tok, "0x"):
				out = append(out, mustHex(t, tok)...)
			case strings.HasPrefix(tok, "PUSH"):
				n, err := strconv.Atoi(tok[4:])
				if err != nil || n > 32 {
					t.Fatalf("bad %q", tok)
				}
				out = append(out, byte(0x5f+n))
				if n == 0 {
					continue
				}
				i++
				arg := make([]byte, n)
				switch a := toks[i]; {
				case strings.HasPrefix(a, "@"):
					if off, ok := labels[a[1:]]; ok {
						for k := n - 1; k >= 0; k-- {
							arg[k] = byte(off)
							off >>= 8
						}
					} else if pass == 1 {
						t.Fatalf("no label %q", a)
					}
				default:
					b := mustHex(t, a)
					if len(b) > n {
						t.Fatalf("%s %s: too long", tok, a)
					}
					copy(arg[n-len(b):], b)
				}
				out = append(out, arg...)
			case strings.HasPrefix(tok, "DUP") || strings.HasPrefix(tok, "SWAP"):
				base, digits := byte(0x80), tok[3:]
				if tok[0] == 'S' {
					base, digits = 0x90, tok[4:]
				}
				n, err := strconv.Atoi(digits)
				if err != nil || n < 1 || n > 16 {
					t.Fatalf("bad %q", tok)
				}
				out = append(out, base+byte(n-1))
			default:
				op, ok := opcodes[tok]
				if !ok {
					t.Fatalf("unknown mnemonic %q", tok)
				}
				out = append(out, op)
			}
		}
		if pass == 1 {
			return out
		}
	}
	panic("unreachable")
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.TrimPrefix(s, "0x")
	if len(s)%2 == 1 {
		s = "0" + s
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAsm(t *testing.T) {
	t.Parallel()
	got := fmt.Sprintf("%x", asm(t, "PUSH2 @l PUSH1 0x1 DUP2 SWAP3 l: JUMPDEST 0xfe01 # comment\nPUSH0"))
	if want := "61000760018192" + "5b" + "fe01" + "5f"; got != want {
		t.Errorf("asm = %s, want %s", got, want)
	}
}
