package bytecode

import (
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

// A term is a symbolic EVM word on one path of the effects analysis
// (effects.go): a constant, an input of the call (the caller, a calldata
// word, the time), a storage read, a hash of memory words, or an opcode
// applied to terms. Terms are immutable; two terms with equal hashes are
// taken to be the same value (storage slots, repeated conditions).
type term struct {
	op   termOp
	code byte        // the opcode of a tOp term
	k    uint256.Int // tConst: the value; tCalldata: the offset; tFresh: an id
	args []*term
	hash uint64
	// has: kinds of leaves inside the term (has* bits), for quick tests.
	has uint8
}

// Leaf kinds a term may contain.
const (
	hasCaller   uint8 = 1 << iota // CALLER or ORIGIN
	hasCalldata                   // a calldata word
	hasSload                      // a storage read
	hasTime                       // TIMESTAMP or NUMBER
	hasWide                       // a value a widening explorer forgot
)

type termOp uint8

const (
	tConst    termOp = iota
	tCaller          // CALLER
	tOrigin          // ORIGIN
	tValue           // CALLVALUE
	tSelf            // ADDRESS
	tTime            // TIMESTAMP
	tNumber          // NUMBER
	tCalldata        // CALLDATALOAD at a constant offset k
	tSload           // SLOAD(args[0]) of storage as the path found it
	tSha3            // KECCAK256 of the memory words args
	tFresh           // a value nothing is known of (a call's result, GAS, ...)
	tWide            // a value a widening explorer forgot at a join point (k: its place)
	tOp              // code applied to args
)

var (
	zeroWord    uint256.Int
	addressMask = new(uint256.Int).Sub(new(uint256.Int).Lsh(uint256.NewInt(1), 160), uint256.NewInt(1))
)

func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	return h
}

func newTerm(op termOp, code byte, k *uint256.Int, args ...*term) *term {
	t := &term{op: op, code: code, args: args}
	if k != nil {
		t.k = *k
	}
	h := mix(uint64(op)<<8|uint64(code), 0)
	for _, w := range t.k {
		h = mix(h, w)
	}
	for _, a := range args {
		h = mix(h, a.hash)
		t.has |= a.has
	}
	t.hash = h
	switch {
	case op == tCaller || op == tOrigin:
		t.has |= hasCaller
	case op == tCalldata || op == tOp && code == opCALLDATALOAD:
		t.has |= hasCalldata
	case op == tSload:
		t.has |= hasSload
	case op == tTime || op == tNumber:
		t.has |= hasTime
	case op == tWide:
		t.has |= hasWide
	}
	return t
}

func constTerm(v *uint256.Int) *term { return newTerm(tConst, 0, v) }

func constU64(v uint64) *term { return constTerm(uint256.NewInt(v)) }

func (t *term) isConst() bool { return t.op == tConst }

func (t *term) isConstU64(v uint64) bool {
	return t.op == tConst && t.k.IsUint64() && t.k.Uint64() == v
}

// apply builds code(args), folding constants and the masks solc puts
// around addresses and booleans.
func apply(code byte, args ...*term) *term {
	if folded, ok := fold(code, args); ok {
		return constTerm(folded)
	}
	switch code {
	case 0x16: // AND: an address masked to 160 bits is the address
		for i, a := range args {
			if a.op == tConst && a.k.Eq(addressMask) && isAddressTerm(args[1-i]) {
				return args[1-i]
			}
			if a.op == tConst && a.k.Eq(new(uint256.Int).Not(&zeroWord)) {
				return args[1-i]
			}
		}
	case 0x01, 0x17, 0x18: // ADD, OR, XOR with zero
		for i, a := range args {
			if a.op == tConst && a.k.IsZero() {
				return args[1-i]
			}
		}
	}
	return newTerm(tOp, code, nil, args...)
}

// isAddressTerm: the value is an address (160 bits) by construction.
func isAddressTerm(t *term) bool {
	switch t.op {
	case tCaller, tOrigin, tSelf:
		return true
	case tOp:
		return t.code == 0x16 && len(t.args) == 2 && (t.args[0].op == tConst && t.args[0].k.Eq(addressMask) || t.args[1].op == tConst && t.args[1].k.Eq(addressMask))
	}
	return false
}

// fold evaluates code over constant arguments.
func fold(code byte, args []*term) (*uint256.Int, bool) {
	for _, a := range args {
		if a.op != tConst {
			return nil, false
		}
	}
	z := new(uint256.Int)
	x := func(i int) *uint256.Int { return &args[i].k }
	b := func(v bool) (*uint256.Int, bool) {
		if v {
			return z.SetOne(), true
		}
		return z.Clear(), true
	}
	switch code {
	case 0x01:
		return z.Add(x(0), x(1)), true
	case 0x02:
		return z.Mul(x(0), x(1)), true
	case 0x03:
		return z.Sub(x(0), x(1)), true
	case 0x04:
		return z.Div(x(0), x(1)), true
	case 0x05:
		return z.SDiv(x(0), x(1)), true
	case 0x06:
		return z.Mod(x(0), x(1)), true
	case 0x07:
		return z.SMod(x(0), x(1)), true
	case 0x08:
		return z.AddMod(x(0), x(1), x(2)), true
	case 0x09:
		return z.MulMod(x(0), x(1), x(2)), true
	case 0x0a:
		return z.Exp(x(0), x(1)), true
	case 0x0b:
		return z.ExtendSign(x(1), x(0)), true
	case 0x10:
		return b(x(0).Lt(x(1)))
	case 0x11:
		return b(x(0).Gt(x(1)))
	case 0x12:
		return b(x(0).Slt(x(1)))
	case 0x13:
		return b(x(0).Sgt(x(1)))
	case 0x14:
		return b(x(0).Eq(x(1)))
	case 0x15:
		return b(x(0).IsZero())
	case 0x16:
		return z.And(x(0), x(1)), true
	case 0x17:
		return z.Or(x(0), x(1)), true
	case 0x18:
		return z.Xor(x(0), x(1)), true
	case 0x19:
		return z.Not(x(0)), true
	case 0x1a:
		return z.Set(x(1)).Byte(x(0)), true
	case 0x1b, 0x1c, 0x1d:
		if !x(0).IsUint64() || x(0).Uint64() >= 256 {
			if code == 0x1d && x(1).Sign() < 0 {
				return z.Not(z.Clear()), true
			}
			return z.Clear(), true
		}
		n := uint(x(0).Uint64())
		switch code {
		case 0x1b:
			return z.Lsh(x(1), n), true
		case 0x1c:
			return z.Rsh(x(1), n), true
		}
		return z.SRsh(x(1), n), true
	case 0x20:
		return nil, false // KECCAK256 of memory is built by sha3
	}
	return nil, false
}

// sha3 is KECCAK256 over memory words: a constant when every word is.
func sha3(words []*term) *term {
	buf := make([]byte, 0, 32*len(words))
	for _, w := range words {
		if w.op != tConst {
			return newTerm(tSha3, 0, nil, words...)
		}
		b := w.k.Bytes32()
		buf = append(buf, b[:]...)
	}
	return constTerm(new(uint256.Int).SetBytes(crypto.Keccak256(buf)))
}

// strip removes what does not change a value's identity for the
// analysis: address masks, ISZERO pairs, and a low-bits AND mask (a bool
// or a packed field at offset 0). It reports whether it dropped an odd
// number of ISZEROs (the value's truth is inverted).
func strip(t *term) (*term, bool) {
	neg := false
	for {
		switch {
		case t.op == tOp && t.code == 0x15:
			t, neg = t.args[0], !neg
		case t.op == tOp && t.code == 0x16 && len(t.args) == 2 && t.args[0].op == tConst && lowMask(&t.args[0].k):
			t = t.args[1]
		case t.op == tOp && t.code == 0x16 && len(t.args) == 2 && t.args[1].op == tConst && lowMask(&t.args[1].k):
			t = t.args[0]
		default:
			return t, neg
		}
	}
}

// lowMask: v is 2^n − 1 for some n ≥ 1 (a mask of the low n bits).
func lowMask(v *uint256.Int) bool {
	if v.IsZero() {
		return false
	}
	p := new(uint256.Int).AddUint64(v, 1)
	return p.IsZero() || new(uint256.Int).And(p, v).IsZero()
}

// field is a packed storage field: the slot read, and the bit offset the
// value was shifted down by (0 for a whole word or the low bytes).
type field struct {
	slot   *term
	offset uint
}

// asField reads t as a field of a storage slot: SLOAD(s), possibly
// shifted right (SHR, or DIV by a power of two as older solc does) and
// masked.
func asField(t *term) (field, bool) {
	t, _ = strip(t)
	switch {
	case t.op == tSload:
		return field{slot: t.args[0]}, true
	case t.op == tOp && t.code == 0x1c && t.args[0].op == tConst && t.args[0].k.IsUint64(): // SHR(n, x)
		if f, ok := asField(t.args[1]); ok {
			f.offset += uint(t.args[0].k.Uint64())
			return f, true
		}
	case t.op == tOp && t.code == 0x04 && t.args[1].op == tConst: // DIV(x, 2^n)
		if n, ok := powerOfTwo(&t.args[1].k); ok {
			if f, ok := asField(t.args[0]); ok {
				f.offset += n
				return f, true
			}
		}
	}
	return field{}, false
}

func powerOfTwo(v *uint256.Int) (uint, bool) {
	if v.IsZero() || !new(uint256.Int).And(v, new(uint256.Int).SubUint64(v, 1)).IsZero() {
		return 0, false
	}
	return uint(v.BitLen() - 1), true
}

// mapping reads a slot as an element of a mapping: KECCAK256(key, base),
// the layout solc uses for mapping(k => v) at slot base (both pipelines,
// 0.5–0.8).
func mapping(slot *term) (key, base *term, ok bool) {
	if slot.op != tSha3 || len(slot.args) != 2 {
		return nil, nil, false
	}
	return slot.args[0], slot.args[1], true
}

// contains reports whether pred holds for t or any term inside it. Terms
// share subterms (x·x·x…): each is looked at once.
func contains(t *term, pred func(*term) bool) bool {
	found := false
	visit(t, func(x *term) {
		found = found || pred(x)
	})
	return found
}

// visit calls f once on t and on every distinct term inside it, depth
// first.
func visit(t *term, f func(*term)) {
	walk(t, func(x *term) bool {
		f(x)
		return true
	})
}

// walk calls f once on t and on every distinct term inside a term f
// returned true for, depth first.
func walk(t *term, f func(*term) bool) {
	seen := map[*term]bool{}
	var step func(*term)
	step = func(t *term) {
		if seen[t] {
			return
		}
		seen[t] = true
		if !f(t) {
			return
		}
		for _, a := range t.args {
			step(a)
		}
	}
	step(t)
}
