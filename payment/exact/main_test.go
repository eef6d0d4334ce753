package exact_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs this package's tests four at a time unless -parallel is
// given: they spend most of their time waiting for devnet blocks (at most
// one a second, at the wall clock), not on the CPU, so the default of one
// per core leaves the machine idle (measured on 2 cores: 45 s at the
// default, 25 s at 4, 28 s at 8 when devnet starts contend).
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}
