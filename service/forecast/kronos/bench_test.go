package kronos

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Benchmarks on random weights of the published shapes, the reference's
// timing setting (testdata/README.md): 464 hourly candles, 48 steps.
//
//	go test -run x -bench . ./service/forecast/kronos/
func BenchmarkForecast(b *testing.B) {
	for _, bc := range []struct {
		name    string
		cfg     ModelConfig
		samples int
	}{
		{"mini/464x48/1-sample", kronosMini, 1},
		{"small/464x48/1-sample", kronosSmall, 1},
		{"small/464x48/5-samples", kronosSmall, 5},
		// Kronos-base, 4–6 times Kronos-small's work: whether five samples
		// fit the default --forecast-timeout (20 s); issue 35.
		{"base/464x48/5-samples", kronosBase, 5},
	} {
		b.Run(bc.name, func(b *testing.B) {
			md, td, err := WriteRandom(b.TempDir(), bc.cfg, tokenizerBase, 1)
			if err != nil {
				b.Fatal(err)
			}
			m, err := Load(md, td)
			if err != nil {
				b.Fatal(err)
			}
			candles, future := syntheticCandles(464, 48)
			o := DefaultOptions()
			o.Samples = bc.samples
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.Forecast(context.Background(), candles, future, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadSmall reports the memory a loaded Kronos-small (with
// Kronos-Tokenizer-base) holds: live heap after Load and a GC, and the
// process's resident set.
func BenchmarkLoadSmall(b *testing.B) {
	md, td, err := WriteRandom(b.TempDir(), kronosSmall, tokenizerBase, 1)
	if err != nil {
		b.Fatal(err)
	}
	var m *Model
	var before, after runtime.MemStats
	for b.Loop() {
		m = nil
		runtime.GC()
		runtime.ReadMemStats(&before)
		if m, err = Load(md, td); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
	if rss := residentMiB(); rss > 0 {
		b.ReportMetric(rss, "rss-MiB")
	}
	runtime.KeepAlive(m)
}

// residentMiB reads VmRSS from /proc (Linux); 0 elsewhere.
func residentMiB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
