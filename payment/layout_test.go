package payment_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tollgate/tollgate/payment"

// importsOf returns what dir's Go files import, by file; test files only
// when tests is set.
func importsOf(t *testing.T, dir string, tests bool) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") && !tests {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			out[f] = append(out[f], path)
		}
	}
	return out
}

// TestSchemesStandAlone: each scheme is a folder of its own under
// payment/ (exact, batch, and any added later): package payment imports
// none of them, and none imports another, tests included, so a scheme is
// added or removed without touching its siblings.
func TestSchemesStandAlone(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var schemes []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "testdata" {
			schemes = append(schemes, e.Name())
		}
	}
	if len(schemes) < 2 {
		t.Fatalf("scheme folders %v; want exact and batch at least", schemes)
	}
	for f, paths := range importsOf(t, ".", false) {
		for _, path := range paths {
			if strings.HasPrefix(path, module+"/") {
				t.Errorf("%s imports the scheme %s: package payment is shared by all", f, path)
			}
		}
	}
	for _, s := range schemes {
		for f, paths := range importsOf(t, s, true) {
			for _, path := range paths {
				if strings.HasPrefix(path, module+"/") && path != module+"/"+s {
					t.Errorf("%s imports %s: schemes share only package payment", f, path)
				}
			}
		}
	}
}
