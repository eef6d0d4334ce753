package bytecode_test

import (
	"encoding/hex"
	"fmt"

	"github.com/tollgate/tollgate/service/bytecode"
)

// A proxy forwarding every call to the address in the EIP-1967
// implementation slot: the forwarder names the slot it reads.
func ExampleAnalyze_forwarder() {
	code, _ := hex.DecodeString(
		"7f360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc54" + // PUSH32 slot SLOAD
			"365f5f37" + // CALLDATASIZE PUSH0 PUSH0 CALLDATACOPY
			"5f5f365f845af4" + // PUSH0 PUSH0 CALLDATASIZE PUSH0 DUP5 GAS DELEGATECALL
			"3d5f5f3e3d5ff3") // RETURNDATASIZE PUSH0 PUSH0 RETURNDATACOPY RETURNDATASIZE PUSH0 RETURN
	s := bytecode.Analyze(code)
	for _, f := range s.Forwarders {
		fmt.Printf("DELEGATECALL at pc %d, address from %s %x\n", f.PC, f.Origin, f.Slot)
	}
	// Output:
	// DELEGATECALL at pc 44, address from slot 360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc
}

// A factory's runtime code followed by its child's creation code: only the
// factory's own dispatcher counts.
func ExampleAnalyze_appendedCode() {
	code, _ := hex.DecodeString(
		"5f3560e01c" + // PUSH0 CALLDATALOAD PUSH1 0xe0 SHR
			"80639dca362f14601057" + // DUP1 PUSH4 sel EQ PUSH1 16 JUMPI
			"00" + "5b00" + // STOP; 16: JUMPDEST STOP
			"fe" + // INVALID: the end of the runtime code
			"5f3560e01c806340c10f1914601c57005b00") // the child: mint(address,uint256)
	s := bytecode.Analyze(code)
	fmt.Printf("%x, code end %d of %d\n", s.Selectors, s.CodeEnd, s.Size)
	// Output:
	// [9dca362f], code end 18 of 37
}
