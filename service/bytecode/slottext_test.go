package bytecode

import (
	"strings"
	"testing"
)

// TestSlotText: evidence names every slot with its number, slot 0
// included ("the address in slot 0x0", never "slot 0x").
func TestSlotText(t *testing.T) {
	t.Parallel()
	var big [32]byte
	big[0], big[31] = 0x19, 0xbd
	for _, tc := range []struct {
		slot [32]byte
		want string
	}{
		{[32]byte{}, "0x0"},
		{[32]byte{31: 3}, "0x3"},
		{[32]byte{30: 1}, "0x100"},
		{big, "0x19" + strings.Repeat("0", 60) + "bd"},
	} {
		if got := SlotText(tc.slot); got != tc.want {
			t.Errorf("SlotText(%x) = %q; want %q", tc.slot, got, tc.want)
		}
		if s := (Target{Kind: TargetSlot, Slot: tc.slot}).String(); s != "slot "+tc.want {
			t.Errorf("Target.String() = %q; want %q", s, "slot "+tc.want)
		}
	}
}
