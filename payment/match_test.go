package payment

import (
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// TestSameAddress: an accepted asset or payTo names the requirement's
// address in any case, with the 0x prefix, and nothing else does.
func TestSameAddress(t *testing.T) {
	a := common.HexToAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{a.Hex(), true},
		{strings.ToLower(a.Hex()), true},
		{"0x" + strings.ToUpper(a.Hex()[2:]), true},
		{"0X" + a.Hex()[2:], true},
		{a.Hex()[2:], false},                    // no prefix
		{a.Hex()[:41], false},                   // short
		{a.Hex() + "00", false},                 // long
		{a.Hex()[:41] + "g", false},             // not hex
		{"0x" + strings.Repeat("0", 40), false}, // another address
	} {
		if got := sameAddress(tc.s, a); got != tc.want {
			t.Errorf("sameAddress(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
