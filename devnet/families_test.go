package devnet_test

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/devnet/devnettest"
)

// TestFamiliesDeployed: every scenario contract holds code after Start,
// and the library families went in as one block.
func TestFamiliesDeployed(t *testing.T) {
	t.Parallel()
	d, cl := devnettest.Start(t)
	blocks := map[string]bool{}
	for _, sc := range d.Scenario {
		code, err := cl.CodeAt(context.Background(), sc.Address, nil)
		if err != nil || len(code) == 0 {
			t.Errorf("%s (%s): %d code bytes, %v", sc.Name, sc.Address, len(code), err)
		}
		blocks[sc.Expect] = true
	}
	if len(d.Scenario) != 22 || !blocks["REFUSED"] {
		t.Errorf("%d scenario contracts", len(d.Scenario))
	}
}
