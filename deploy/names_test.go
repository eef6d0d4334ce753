package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/admin"
)

// exposition is every series name of the operator listener's exposition
// (histograms with their _bucket, _sum and _count) and the label names of
// each. Every observer is called once first: a vector without children is
// not exposed.
func exposition(t *testing.T) map[string][]string {
	t.Helper()
	m := admin.NewMetrics(admin.Build{Version: "v", Revision: "r"}, func(context.Context) (int, time.Duration, error) { return 1, time.Minute, nil })
	m.Challenged("regime", "rest")
	m.Presented("regime", "rest")
	m.Refused("regime", "rest", "invalid_exact_evm_signature")
	m.Verified("regime", "rest")
	m.Settled("regime", "rest", 0.05, time.Second)
	m.SettleFailed("regime", "rest", "settlement_unknown")
	m.CacheLookup("candles", true)
	m.WhaleScan(time.Second, 4, 2, nil)
	m.WhaleScan(time.Second, 4, 2, errors.New("down"))
	m.Upstream("chain", "eth_call", time.Millisecond, nil)
	m.Instrument(func(*http.Request) string { return "GET /regime" }, http.NotFoundHandler()).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/regime", nil))
	admin.NewReadiness(m, time.Second).Probe(context.Background())
	m.WatchBatch(func(context.Context) (int, float64, time.Duration, error) { return 1, 0.25, time.Minute, nil })
	m.BatchTransaction("claim", "ok", 0.25)
	m.BatchStopEvidences("voucher_ahead", "opened_elsewhere", "claimed_elsewhere")
	m.BatchChannelStopped("voucher_ahead")
	m.EscrowWatchStarted() // the escrow watcher's series exist once it runs
	m.EscrowWatched(nil)
	m.EscrowWatched(errors.New("down"))

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	names := map[string][]string{"up": {"instance", "job"}} // Prometheus' own, per target
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?`)
	label := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		mm := sample.FindStringSubmatch(line)
		if mm == nil {
			t.Fatalf("exposition line %q", line)
		}
		labels := names[mm[1]]
		for _, l := range label.FindAllStringSubmatch(mm[3], -1) {
			if !slices.Contains(labels, l[1]) {
				labels = append(labels, l[1])
			}
		}
		// Every series gets the scrape's target labels.
		for _, l := range []string{"instance", "job"} {
			if !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		names[mm[1]] = labels
	}
	return names
}

// selector is a series name in a PromQL expression with the label names
// its braces (if any) match on.
type selector struct {
	name   string
	labels []string
}

var (
	metricName = regexp.MustCompile(`\b((?:tollgate|go|process)_[a-zA-Z0-9_:]*|up)\b(\{[^}]*\})?`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
)

// selectors finds the series an expression reads, and the label names it
// groups or joins by.
func selectors(expr string) ([]selector, []string) {
	var out []selector
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		s := selector{name: m[1]}
		for _, l := range matcher.FindAllStringSubmatch(m[2], -1) {
			s.labels = append(s.labels, l[1])
		}
		out = append(out, s)
	}
	var by []string
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				by = append(by, l)
			}
		}
	}
	return out, by
}

// TestDashboardAndAlertsUseRealSeries: every series the Grafana dashboard
// and the Prometheus alert rules read exists in the exposition, with the
// labels they select and group by, so a renamed metric cannot leave an
// empty panel or a silent alert.
func TestDashboardAndAlertsUseRealSeries(t *testing.T) {
	t.Parallel()
	have := exposition(t)
	var exprs []string

	raw, err := os.ReadFile("grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("grafana/tollgate.json: %v", err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				// Panel queries, and template variables' label_values(...) queries.
				if s, ok := x.(string); ok && (k == "expr" || k == "query" && strings.Contains(s, "(")) {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	dashboardExprs := len(exprs)

	raw, err = os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatalf("prometheus/alerts.yml: %v", err)
	}
	recorded := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	if dashboardExprs < 10 || len(exprs)-dashboardExprs < 4 {
		t.Fatalf("%d dashboard queries and %d alert expressions: the files are not what this test expects", dashboardExprs, len(exprs)-dashboardExprs)
	}

	seen := map[string]bool{}
	for _, e := range exprs {
		sels, by := selectors(e)
		if len(sels) == 0 && !strings.Contains(e, "$") {
			t.Errorf("expression reads no Tollgate series: %s", e)
		}
		var exprLabels []string
		for _, s := range sels {
			if recorded[s.name] {
				continue
			}
			labels, ok := have[s.name]
			if !ok {
				t.Errorf("%s is not in the exposition (in %s)", s.name, e)
				continue
			}
			seen[s.name] = true
			exprLabels = append(exprLabels, labels...)
			for _, l := range s.labels {
				if l != "__name__" && !slices.Contains(labels, l) {
					t.Errorf("%s has no label %q (in %s)", s.name, l, e)
				}
			}
		}
		for _, l := range by {
			if len(exprLabels) > 0 && !slices.Contains(exprLabels, l) && l != "le" {
				t.Errorf("grouping by %q, which none of its series has (in %s)", l, e)
			}
		}
	}
	// The dashboard and the alerts watch the payment funnel and the
	// upstreams, whatever else they show.
	for _, must := range []string{"tollgate_payment_revenue_usd_total", "tollgate_payment_settled_total", "tollgate_settlements_oldest_unresolved_age_seconds",
		"tollgate_upstream_requests_total", "tollgate_whale_scan_lag_blocks"} {
		if !seen[must] {
			t.Errorf("neither the dashboard nor the alerts use %s", must)
		}
	}
}
