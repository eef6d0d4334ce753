package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the operator listener's Prometheus exposition with the
// client library's own parser.
func scrape(t *testing.T, adminURL string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(adminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// value is the sum of the samples of family name whose labels include
// every pair of want (counters and gauges; a histogram's sample count); 0
// when there is none (a vector without children is not exposed).
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f := fams[name]
	sum := 0.0
next:
	for _, m := range f.GetMetric() {
		for i := 0; i < len(want); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == want[i] && l.GetValue() == want[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// TestOperatorListener: the operator listener serves a Prometheus
// exposition that parses, readiness and pprof; a 402 and a paid call
// move the funnel, request, upstream and cache series by exactly what
// they did; the public listener serves none of it.
func TestOperatorListener(t *testing.T) {
	t.Parallel()
	s, err := serveFor(t, []string{"--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"ready"`)) {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}

	before := scrape(t, s.admin)
	for _, name := range []string{"tollgate_build_info", "tollgate_ready", "go_goroutines", "process_resident_memory_bytes",
		"tollgate_settlements_unresolved", "tollgate_settlements_oldest_unresolved_age_seconds"} {
		if before[name] == nil {
			t.Errorf("the exposition has no %s", name)
		}
	}
	if v := value(before, "tollgate_ready"); v != 1 {
		t.Errorf("tollgate_ready %v after a passing probe", v)
	}

	if resp, err := http.Get(s.base + "/regime"); err != nil || resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("unpaid /regime: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"pay", s.base + "/regime"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("pay: %v\n%s", err, errOut.String())
	}
	after := scrape(t, s.admin)
	for _, tt := range []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"tollgate_payment_challenges_total", []string{"operation", "regime"}, 2}, // ours and the payer's first GET
		{"tollgate_payment_presented_total", []string{"operation", "regime"}, 1},
		{"tollgate_payment_verified_total", []string{"operation", "regime"}, 1},
		{"tollgate_payment_settled_total", []string{"operation", "regime"}, 1},
		{"tollgate_payment_revenue_usd_total", []string{"operation", "regime"}, 0.05},
		{"tollgate_payment_settle_duration_seconds", []string{"operation", "regime"}, 1},
		{"tollgate_payment_refused_total", nil, 0},
		{"tollgate_payment_failed_total", nil, 0},
		{"tollgate_http_requests_total", []string{"route", "GET /regime", "method", "GET", "status", "402"}, 2},
		{"tollgate_http_requests_total", []string{"route", "GET /regime", "method", "GET", "status", "200"}, 1},
		{"tollgate_http_request_duration_seconds", []string{"route", "GET /regime"}, 3},
	} {
		d := value(after, tt.name, tt.labels...) - value(before, tt.name, tt.labels...)
		if d < tt.delta-1e-9 || d > tt.delta+1e-9 {
			t.Errorf("%s%v moved by %v, want %v", tt.name, tt.labels, d, tt.delta)
		}
	}
	// The settlement's chain calls (send, receipts) and the candle cache.
	if value(after, "tollgate_upstream_requests_total", "upstream", "chain", "method", "eth_sendRawTransaction") < 1 {
		t.Error("no eth_sendRawTransaction counted for the settlement")
	}
	if value(after, "tollgate_cache_requests_total", "cache", "candles") < 1 {
		t.Error("no candle cache lookup counted")
	}
	// The analytics' own caches: a first forecast is a miss.
	out.Reset()
	if err := run(context.Background(), []string{"pay", s.base + "/forecast?product=ETH-USD&pred_len=6"}, envOf(nil), &out, &errOut); err != nil {
		t.Fatalf("pay /forecast: %v\n%s", err, errOut.String())
	}
	if m := scrape(t, s.admin); value(m, "tollgate_cache_requests_total", "cache", "forecasts", "result", "miss") != 1 {
		t.Errorf("forecast cache lookups: %v misses, want 1", value(m, "tollgate_cache_requests_total", "cache", "forecasts", "result", "miss"))
	}

	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline"} {
		resp, err := http.Get(s.admin + path)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %v %v", path, resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	resp, err = http.Get(s.admin + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error  string
		Status int
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 404 || e.Error != "not_found" || e.Status != 404 {
		t.Errorf("unknown admin path: %d %+v", resp.StatusCode, e)
	}
	// The public listener keeps the spec's JSON /metrics and has no pprof.
	for path, want := range map[string]int{"/debug/pprof/": 404, "/readyz": 404} {
		resp, err := http.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("public GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestVersionStamped: a built binary reports the module version, the VCS
// revision and the commit time from its build info (not "devel"), and
// /health carries the same.
func TestVersionStamped(t *testing.T) {
	t.Parallel()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "tollgate")
	// -buildvcs=true: the default (auto) stamps too, unless GOFLAGS turns it off.
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(out), "\n")
	rev := strings.TrimSpace(string(head))
	if !strings.HasPrefix(lines[0], "tollgate v") || strings.Contains(lines[0], "devel") ||
		!strings.HasPrefix(lines[1], "revision "+rev) || !strings.HasPrefix(lines[2], "commit time 20") {
		t.Errorf("tollgate version:\n%s(HEAD is %s)", out, rev)
	}
	if b := buildInfo(); b.Version != "devel" || b.Revision != "" {
		t.Errorf("the test binary (no VCS stamp) reports %+v", b)
	}
}
