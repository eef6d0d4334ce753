// Package bytecode reads EVM runtime bytecode without running it against a
// chain: which function selectors the dispatcher compares the calldata
// against, whether reachable code can DELEGATECALL (and where the called
// address comes from) or SELFDESTRUCT, the minimal-proxy (EIP-1167,
// ERC-7511) and EIP-7702 delegation shapes ([Analyze], flow.go), and what
// each function does ([AnalyzeEffects], effects.go, paths.go, term.go).
// Pure functions, no I/O; what the findings mean (capabilities, proxies,
// verdicts) is service/rugcheck's.
//
// # Effects
//
// [AnalyzeEffects] follows every function the dispatcher reaches, and the
// fallback, path by path, with the stack, memory at constant offsets and
// the path's own storage writes held as symbolic terms (the caller, a
// calldata word, SLOAD of a slot, keccak of memory words, opcodes over
// them); a branch whose condition neither constants nor the path's own
// earlier branches decide is followed both ways. Nothing is simulated.
// A block reached again in the same state, agreeing on the earlier
// conditions its paths consulted, is not followed twice; loops take two
// turns per call frame; the work is bounded per function and per code
// (past the bounds a function is incomplete). It reports who may call
// each function (caller or tx.origin against a storage field, a constant
// or a mapping keyed by the caller), what it writes, its mints and
// seizures on the token's own layout (from balanceOf and totalSupply),
// what transfer and transferFrom read on paths that revert, the rates
// they scale credits by, the contracts they call, and every DELEGATECALL's
// target as each path found it.
//
// # Concrete calls
//
// [Effects.Evaluate] follows one concrete call of the code (who calls,
// with which arguments, at which time) with the storage words its caller
// supplies as known values: the path explorer above, but a branch those
// values decide goes the one way it would, a loop turns as often as the
// storage says, and a read of a slot the path wrote is resolved by the
// slot's value. A branch they do not decide (a word not supplied, an
// external call's result, an ether balance, a code size) is followed both
// ways. It says whether the call passes (and what it writes: a fee is the
// credit it leaves short of the amount) or reverts (and the condition
// that decided it, with the fields it read), or that it cannot tell,
// naming the slots it lacked so that the caller reads them and asks
// again. Nothing is executed on a node: the code is the token's, the
// words the chain's.
//
// # Reachable code only
//
// A contract's code is not all its own: a factory carries its children's
// creation code after its runtime code, a constructor may append data, and
// solc appends a CBOR metadata trailer. [Analyze] therefore does not scan
// the code linearly. It follows control flow from pc 0 with an abstract
// stack: a value is a PUSH constant, the selector (or the raw calldata word
// it comes from), another calldata word, an SLOAD of a constant slot,
// ADDRESS, unknown, or opaque (anything, the selector included). A block starts at pc 0, at a JUMPDEST, or after a JUMPI,
// and ends at JUMP, JUMPI, STOP, RETURN, REVERT, INVALID, SELFDESTRUCT, an
// undefined opcode, or the next JUMPDEST. A JUMP or JUMPI whose target is a
// constant on the abstract stack (pushed just before it, or earlier and
// moved by DUP/SWAP, including return addresses pushed by the caller of an
// internal function several blocks before) goes to that JUMPDEST; a
// constant that is not a JUMPDEST ends the path, as it ends execution.
// Internal functions are analysed once for all their callers. A jump to a
// constant while a return address (a constant naming a JUMPDEST) is on the
// stack is a call: the callee runs in a frame whose stack is a placeholder
// for that return address and the values above it, and the caller's stack
// below stays out of the callee's analysis. A jump to the placeholder is a
// return: every caller of the frame goes on at its own return address with
// its own stack and the values returned (an SLOAD of a constant slot
// returned by an internal _implementation() keeps its origin). A callee
// that reads below its return address is analysed again inline, in each
// caller's frame with the caller's whole stack. Within a frame, a block is
// analysed once per context, the stack height and the positions and values
// of the return addresses on it; other values entering one context are
// joined (a value that may be the selector joined with a different one
// becomes opaque, anything else unknown). Constants that are neither a
// JUMPDEST nor 20 bytes or more (an address, a slot) are forgotten at a
// block's end. The work is bounded: past 1024 contexts for one block, or
// past 8 analysis steps per byte of code plus 4096 (a step is an
// instruction, or eight stack values copied into a context), a block is
// analysed once more with a stack of unknown depth and content, in frame
// 0, which covers every later entry and stays sound (its jumps become
// unresolved, below). Solc's output needs about one step per byte; random
// code of a few KiB takes at most tens of milliseconds.
//
// # Unresolved jumps
//
// A jump target that is not a constant (read from memory, storage, calldata
// or computed, as Vyper's selector jump table and internal function
// pointers are) is treated conservatively: it may go to every JUMPDEST of
// the code region, entered with the jumping block's stack. The code region
// ends at the data boundary: the first INVALID (0xfe) at or after the end
// of the code already found reachable, which is where solc ends the runtime
// code before its embedded sub-assemblies (children's creation code) and
// data; without such a byte, at the metadata trailer or the end of the
// code. The boundary is recomputed as more code becomes reachable, until
// nothing changes. What this gives up: code placed after such an INVALID
// and reached only through a computed jump is not scanned. [Scan.Unresolved]
// counts these jumps; solc's output (legacy and via-IR, 0.5 to 0.8) has
// none, so a non-zero count marks hand-written, unusual or adversarial code.
//
// # Selectors
//
// A selector is reported when reachable code compares it with a constant by
// EQ, XOR or SUB (the last two branch on inequality: XOR ISZERO JUMPI, or
// SUB/XOR JUMPI to the next check, as Vyper does): the selector being
// calldataload(0) shifted right by 224 (SHR, or DIV by 2**224 in old solc),
// masked or not, compared against a constant below 2**32; or the raw
// calldataload(0), or its top four bytes masked in place, compared against
// a full-word constant whose low 28 bytes are zero (PUSH32 sel<<224). GT
// and LT comparisons (solc's binary-search split of large dispatchers)
// report nothing: their pivots are selectors only when also compared for
// equality. Where the compared value is opaque (loaded from memory, or from
// a stack of unknown origin), the syntactic shapes DUP1 PUSHn sel EQ|XOR
// and PUSHn sel DUP2 EQ|XOR with n from 2 to 4 still count, as they did in
// the linear scan this package replaced.
//
// # Forwarders
//
// Every reachable DELEGATECALL is reported as a [Forwarder] with the origin
// of the address it calls: an SLOAD of a constant slot (an ERC-1967 proxy,
// or a proxy keeping its implementation in a slot of its own), a constant
// (an EIP-1167 clone's PUSH20, or a Solidity immutable: zero in compiler
// output, the address once deployed), ADDRESS (a delegatecall to itself, as
// Multicall does), calldata (the caller picks the code: upgradeToAndCall's
// call into the new implementation, or an "execute"-style function), or
// unknown (memory, a mapping, another call's return data such as a beacon's
// implementation()). Which function a DELEGATECALL belongs to is not
// reported: a proxy's fallback forwarder and its upgradeToAndCall are told
// apart by their origins, not by their selectors.
package bytecode
