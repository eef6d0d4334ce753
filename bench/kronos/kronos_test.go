// Package kronos measures Kronos from outside: BenchmarkCommand the
// whole `tollgate kronos` command, and BenchmarkPaidColdBurst
// (burst_test.go) a burst of paid cold /forecast requests to `tollgate
// serve`.
//
// BenchmarkCommand runs the command cold: each run is a fresh process
// that reads a checkpoint, loads it and forecasts, the way an operator
// times it. The checkpoints have the published shapes (Kronos-mini,
// -small and -base, with their tokenizer) and random weights
// (kronos.WriteRandom): the arithmetic, and so the time, are those of the
// released weights. The input is 464 hourly candles; each run forecasts
// 48.
//
//	go test -run x -bench . -benchtime 5x ./bench/kronos/
//
// Leaves: mini/greedy, small/1-sample, small/5-samples (the service's
// sampling: temperature 1, top-p 0.9) and base/5-samples. ns/op is the
// wall time of one command, from exec to exit; forecast-ms and load-ms
// are what the command reports on stderr for its two parts.
//
// "Cold" is a new process, not a cold disk: the checkpoint files are in
// the page cache after the first run (each leaf's first run, b.N = 1,
// reads them from disk when the benchmark has just written them).
//
// -kronos.tollgate=BIN measures that binary instead of building
// ./cmd/tollgate: one built from another commit, or with -tags purego
// (the portable kernels), for a before and after.
package kronos

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bench/rig"
	"github.com/tollgate/tollgate/service/forecast/kronos"
)

var tollgateBin = flag.String("kronos.tollgate", "", "measure this tollgate binary instead of building ./cmd/tollgate")

func BenchmarkCommand(b *testing.B) {
	bin := *tollgateBin
	if bin == "" {
		bin = rig.BuildTollgate(b)
	}
	root := b.TempDir()
	input := filepath.Join(root, "input.csv")
	if err := os.WriteFile(input, candlesCSV(464), 0o644); err != nil {
		b.Fatal(err)
	}
	checkpoints := map[string][2]string{}
	checkpoint := func(name string) [2]string {
		if dirs, ok := checkpoints[name]; ok {
			return dirs
		}
		mc, tc, ok := kronos.PublishedShape(name)
		if !ok {
			b.Fatalf("no published shape %s", name)
		}
		md, td, err := kronos.WriteRandom(filepath.Join(root, name), mc, tc, 1)
		if err != nil {
			b.Fatal(err)
		}
		checkpoints[name] = [2]string{md, td}
		return checkpoints[name]
	}
	for _, bc := range []struct {
		name, model string
		args        []string
	}{
		{"mini/greedy", "Kronos-mini", []string{"--greedy"}},
		{"small/1-sample", "Kronos-small", []string{"--samples", "1"}},
		{"small/5-samples", "Kronos-small", []string{"--samples", "5"}},
		{"base/5-samples", "Kronos-base", []string{"--samples", "5"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			dirs := checkpoint(bc.model)
			args := append([]string{"kronos", "--kronos-model", dirs[0], "--kronos-tokenizer", dirs[1], "--pred-len", "48"}, bc.args...)
			args = append(args, input)
			var forecast, load time.Duration
			b.ResetTimer()
			for b.Loop() {
				f, l := run(b, bin, args)
				forecast += f
				load += l
			}
			b.ReportMetric(float64(forecast.Milliseconds())/float64(b.N), "forecast-ms")
			b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "load-ms")
		})
	}
}

// summary is the command's closing line on stderr, e.g. "kronos-small
// (24741376 parameters): 464 candles at 1h0m0s, 48 forecast in 1.07s
// (loaded in 112ms)".
var summary = regexp.MustCompile(`forecast in (\S+) \(loaded in (\S+)\)`)

// run runs the command once, checks that it printed 48 candles, and
// returns the forecast and load times it reported.
func run(b *testing.B, bin string, args []string) (forecast, load time.Duration) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("tollgate %v: %v\n%s", args, err, stderr.Bytes())
	}
	if lines := bytes.Count(stdout.Bytes(), []byte("\n")); lines != 49 {
		b.Fatalf("tollgate kronos printed %d lines, want a header and 48 candles:\n%s", lines, stdout.Bytes())
	}
	m := summary.FindSubmatch(stderr.Bytes())
	if m == nil {
		b.Fatalf("no timing line on stderr:\n%s", stderr.Bytes())
	}
	f, err1 := time.ParseDuration(string(m[1]))
	l, err2 := time.ParseDuration(string(m[2]))
	if err1 != nil || err2 != nil {
		b.Fatalf("timing line %q: %v %v", m[0], err1, err2)
	}
	return f, l
}

// candlesCSV is n hourly candles of a seeded random walk around 60,000,
// oldest first, in the command's input format.
func candlesCSV(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	buf.WriteString("timestamp,open,high,low,close,volume\n")
	t := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	price := 60000.0
	for range n {
		open := price
		price *= math.Exp(0.01 * rng.NormFloat64())
		high := max(open, price) * (1 + 0.003*math.Abs(rng.NormFloat64()))
		low := min(open, price) * (1 - 0.003*math.Abs(rng.NormFloat64()))
		volume := 50 * math.Exp(0.5*rng.NormFloat64())
		fmt.Fprintf(&buf, "%s,%s,%s,%s,%s,%s\n", t.Format(time.RFC3339), f(open), f(high), f(low), f(price), f(volume))
		t = t.Add(time.Hour)
	}
	return buf.Bytes()
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', 5, 64) }
