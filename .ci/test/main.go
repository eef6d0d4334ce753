// Command test runs Tollgate's tests and says, after the run, what they
// could not test on this machine: the README's test command.
//
//	go run ./.ci/test [go test flags] [packages]   (default: ./...)
//
// It runs `go test -json` with the arguments, prints each package's
// result line as `go test` does (and the output of whatever failed), and
// ends with one line per capability whose tests skipped, with the command
// that enables it. A test skips for a missing capability with a message
// of the form
//
//	capability NAME not tested: WHAT; to test it: COMMAND
//
// (HAProxy, PostgreSQL, the npm clients, the Kronos reference
// checkpoints). It exits 1 when anything failed; CI (.ci/run) sets the
// TOLLGATE_REQUIRE_* variables, under which those tests fail instead of
// skipping.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

var capability = regexp.MustCompile(`capability (\S+) not tested: (.*?); to test it: (.*)`)

// skipped is what one capability's skips say.
type skipped struct {
	what, enable string
	tests        []string
}

func main() {
	args := os.Args[1:]
	hasPkg := false
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && (strings.HasPrefix(a, ".") || strings.Contains(a, "/")) {
			hasPkg = true
		}
	}
	if !hasPkg {
		args = append(args, "./...")
	}
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "test:", err)
		os.Exit(1)
	}
	failed := false
	caps := map[string]*skipped{}
	otherSkips := 0
	outputs := map[string][]string{} // by package/test, until it ends
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(os.Stdout, sc.Text()) // not an event: pass it on
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "output", "build-output":
			outputs[key] = append(outputs[key], e.Output)
		case "build-fail":
			failed = true
			fmt.Fprint(os.Stdout, strings.Join(outputs[key], ""))
		case "skip":
			if e.Test != "" {
				if m := capability.FindStringSubmatch(strings.Join(outputs[key], "")); m != nil {
					c := caps[m[1]]
					if c == nil {
						c = &skipped{what: strings.TrimSpace(m[2]), enable: strings.TrimSpace(m[3])}
						caps[m[1]] = c
					}
					c.tests = append(c.tests, e.Test)
				} else if !strings.Contains(e.Test, "/") {
					otherSkips++
				}
			} else {
				fmt.Fprintf(os.Stdout, "?   \t%s\t[no tests to run]\n", e.Package)
			}
			delete(outputs, key)
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(os.Stdout, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
			delete(outputs, key)
		case "fail":
			failed = true
			if e.Test != "" {
				fmt.Fprint(os.Stdout, strings.Join(outputs[key], ""))
			} else {
				fmt.Fprint(os.Stdout, strings.Join(outputs[key], ""))
				fmt.Fprintf(os.Stdout, "FAIL\t%s\t%.3fs\n", e.Package, e.Elapsed)
			}
			delete(outputs, key)
		}
	}
	if err := cmd.Wait(); err != nil {
		failed = true
	}
	if len(caps) > 0 {
		fmt.Fprintln(os.Stdout, "\nNot tested on this machine:")
		names := make([]string, 0, len(caps))
		for n := range caps {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			c := caps[n]
			fmt.Fprintf(os.Stdout, "  %s: %s (%d skipped, e.g. %s); to test it: %s\n", n, c.what, len(c.tests), c.tests[0], c.enable)
		}
	}
	if otherSkips > 0 {
		fmt.Fprintf(os.Stdout, "%d more tests skipped for reasons of their own (go test -v ./... shows them)\n", otherSkips)
	}
	if failed {
		fmt.Fprintln(os.Stdout, "FAIL")
		os.Exit(1)
	}
}
