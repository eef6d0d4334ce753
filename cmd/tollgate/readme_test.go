package main

import (
	"flag"
	"os"
	"regexp"
	"testing"
)

// TestREADMEFlagTable: every flag of serve has its row in the flag table
// of docs/configuration.md (linked from the README), and every row names a
// flag serve has.
func TestREADMEFlagTable(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| (`--[a-z0-9-]+`(?:, `--[a-z0-9-]+`)*) \\|")
	name := regexp.MustCompile("`--([a-z0-9-]+)`")
	for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			rows[n[1]] = true
		}
	}
	fs, _ := newServeFlags(func(string) string { return "" })
	fs.VisitAll(func(f *flag.Flag) {
		if !rows[f.Name] {
			t.Errorf("--%s has no row in the flag table of docs/configuration.md", f.Name)
		}
		delete(rows, f.Name)
	})
	for n := range rows {
		t.Errorf("the flag table of docs/configuration.md names --%s, which serve does not have", n)
	}
}
