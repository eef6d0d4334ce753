package bytecode_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/service/bytecode"
)

func TestDumpEffects(t *testing.T) {
	file := os.Getenv("EFF_FILE")
	name := os.Getenv("EFF_NAME")
	if file == "" {
		t.Skip()
	}
	var fx struct {
		Contracts map[string]struct {
			DeployedBytecode string
		}
	}
	b, _ := os.ReadFile(file)
	json.Unmarshal(b, &fx)
	for n, c := range fx.Contracts {
		if name != "" && n != name {
			continue
		}
		code, _ := hex.DecodeString(strings.TrimPrefix(c.DeployedBytecode, "0x"))
		s := bytecode.Analyze(code)
		e := bytecode.AnalyzeEffects(code, s)
		fmt.Printf("== %s complete=%v layout bal=%x supply=%x/%v\n", n, e.Complete, e.Layout.Balances, e.Layout.TotalSupply[31], e.Layout.TotalSupplyKnown)
		for _, f := range e.Functions {
			if !f.Complete || os.Getenv("EFF_ALL") != "" {
				fmt.Printf("  fn %x fb=%v complete=%v\n", f.Selector, f.Fallback, f.Complete)
			}
			for _, w := range f.Writes {
				fmt.Printf("     write %s change=%d open=%v guards=%s ceil=%v/%v\n", tg(w.Target), w.Change, w.Open, gs(w.Guards), w.Ceiling, w.Bound.Uint64())
			}
			if f.SelfDestruct != nil {
				fmt.Printf("     selfdestruct %+v\n", *f.SelfDestruct)
			}
		}
		for _, g := range e.Gates {
			fmt.Printf("  gate %s kind=%d sel=%x\n", tg(g.Target), g.Kind, g.Selector)
		}
		for _, g := range e.Fees {
			fmt.Printf("  fee %s div=%d\n", tg(g.Target), g.Divisor.Uint64())
		}
		for _, g := range e.Hooks {
			fmt.Printf("  hook %+v\n", g)
		}
	}
}

func tg(t bytecode.Target) string {
	return fmt.Sprintf("[k%d slot=%x off=%d key=%d nested=%v]", t.Kind, strings.TrimLeft(string(t.Slot[:]), "\x00"), t.Offset, t.Key, t.Nested)
}

func gs(g []bytecode.Guard) string {
	var out []string
	for _, x := range g {
		out = append(out, fmt.Sprintf("{k%d slot=%x off=%d addr=%x origin=%v}", x.Kind, strings.TrimLeft(string(x.Slot[:]), "\x00"), x.Offset, x.Address, x.Origin))
	}
	return strings.Join(out, ",")
}
