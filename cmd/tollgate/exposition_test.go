package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/payment/batch"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/catalog"
)

// TestFreshExposition: a server scraped once right after it started (the
// only request before is the start-up check's GET /health) exposes every
// series the Grafana dashboard and the alert rules name, as read from
// deploy/grafana/*.json and deploy/prometheus/*.yml, so that no panel
// says "No data" and no rate misses a first event. The payment refusals
// and failures are exposed at zero for every paid operation and every
// reason code of the gate and its schemes (each code declared in
// payment, payment/exact and payment/batch, but those only the
// reconciler or the claimer use); the batch-settlement transactions for
// every kind and result; the public requests for every route and status
// of the API's contract.
func TestFreshExposition(t *testing.T) {
	t.Parallel()
	s := startServe(t, nil, nil)
	fams := scrape(t, s.admin)

	t.Run("dashboard and alert series", func(t *testing.T) {
		names := deployedSeries(t)
		if len(names) < 25 {
			t.Fatalf("%d series named in deploy/: the files are not where or what this test expects", len(names))
		}
		for _, name := range names {
			if name == "up" { // Prometheus' own, per target
				continue
			}
			if len(family(fams, name).GetMetric()) == 0 {
				t.Errorf("a fresh server does not expose %s", name)
			}
		}
	})

	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, r := range gateway.PaidRoutes(cat) {
		if !slices.Contains(ops, r.Name) {
			ops = append(ops, r.Name)
		}
	}

	t.Run("refused and failed", func(t *testing.T) {
		reasons := map[string]bool{} // every code exposed, refused or failed
		for _, name := range []string{"tollgate_payment_refused_total", "tollgate_payment_failed_total"} {
			byOp := map[string][]string{}
			for _, m := range fams[name].GetMetric() {
				op, reason := label(m, "operation"), label(m, "reason")
				byOp[op] = append(byOp[op], reason)
				reasons[reason] = true
				if v := m.GetCounter().GetValue(); v != 0 {
					t.Errorf("%s{operation=%q,reason=%q} is %v on a fresh server", name, op, reason, v)
				}
			}
			first := byOp[ops[0]]
			if len(first) < 10 {
				t.Errorf("%s: %d reasons for %s: %v", name, len(first), ops[0], first)
			}
			slices.Sort(first)
			for _, op := range ops {
				got := byOp[op]
				slices.Sort(got)
				if !slices.Equal(got, first) {
					t.Errorf("%s: %s has reasons %v, %s has %v", name, op, got, ops[0], first)
				}
			}
			if len(byOp) != len(ops) {
				t.Errorf("%s: operations %v, want the paid ones %v", name, keys(byOp), ops)
			}
		}
		for _, m := range fams["tollgate_siwx_refused_total"].GetMetric() { // a sign-in's refusals
			reasons[label(m, "reason")] = true
		}
		// Codes no request ends with: the ledger's, the claimer's.
		offPath := []string{exact.ReasonExpiredUnused, batch.ReasonClaimPayload, batch.ReasonClaimSimulationFailed,
			batch.ReasonClaimTransactionFailed, batch.ReasonSettlePayload, batch.ReasonSettleSimulationFailed,
			batch.ReasonSettleTransactionFailed, batch.ReasonNothingToSettle, batch.ReasonUnknownSettleAction,
			batch.ReasonAuthorizerNotConfigured, batch.ReasonAuthorizerAddressMismatch}
		for _, dir := range []string{"../../payment", "../../payment/exact", "../../payment/batch"} {
			for name, code := range reasonCodes(t, dir) {
				if !reasons[code] && !slices.Contains(offPath, code) {
					t.Errorf("%s %s (%q) is neither exposed nor known to be off the request path", filepath.Base(dir), name, code)
				}
			}
		}
	})

	t.Run("batch transactions", func(t *testing.T) {
		got := fams["tollgate_batch_transactions_total"].GetMetric()
		kinds, results := []string{batch.KindClaim, batch.KindSettle}, []string{batch.ResultOK, batch.ResultRefused, batch.ResultError, batch.ResultNoop}
		if len(got) != len(kinds)*len(results) {
			t.Errorf("%d batch transaction series, want %d", len(got), len(kinds)*len(results))
		}
		for _, k := range kinds {
			for _, r := range results {
				if v, ok := sample(got, "kind", k, "result", r); !ok || v != 0 {
					t.Errorf("tollgate_batch_transactions_total{kind=%q,result=%q}: %v (exposed: %v), want 0", k, r, v, ok)
				}
			}
		}
	})

	t.Run("public requests", func(t *testing.T) {
		got := fams["tollgate_http_requests_total"].GetMetric()
		for _, route := range gateway.Routes(cat) {
			for _, status := range gateway.Statuses() {
				want := 0.0
				if route == "GET /health" && status == 200 {
					want = 1 // the start-up check
				}
				if v, ok := sample(got, "route", route, "method", "GET", "status", strconv.Itoa(status)); !ok || v != want {
					t.Errorf("tollgate_http_requests_total{route=%q,status=\"%d\"}: %v (exposed: %v), want %v", route, status, v, ok, want)
				}
			}
		}
	})

	t.Run("whale scan and caches", func(t *testing.T) {
		for _, want := range []struct{ name, label, value string }{
			{"tollgate_whale_scan_cycles_total", "result", "ok"}, {"tollgate_whale_scan_cycles_total", "result", "error"},
			{"tollgate_cache_requests_total", "result", "hit"}, {"tollgate_cache_requests_total", "result", "miss"},
		} {
			if _, ok := sample(fams[want.name].GetMetric(), want.label, want.value); !ok {
				t.Errorf("%s{%s=%q} is not exposed", want.name, want.label, want.value)
			}
		}
		for _, cache := range append([]string{candleCache}, service.Caches()...) {
			for _, result := range []string{"hit", "miss"} {
				if _, ok := sample(fams["tollgate_cache_requests_total"].GetMetric(), "cache", cache, "result", result); !ok {
					t.Errorf("tollgate_cache_requests_total{cache=%q,result=%q} is not exposed", cache, result)
				}
			}
		}
	})
}

// metricNames are the series names PromQL in deploy/ reads or its text
// names: Tollgate's, the Go runtime's and the process's, and up.
var metricNames = regexp.MustCompile(`\b((?:tollgate|go|process)_[a-zA-Z0-9_:]*[a-zA-Z0-9]|up)\b`)

// deployedSeries is every series name in the Grafana dashboards and the
// Prometheus files under deploy/ (queries, rules, their descriptions and
// tests), sorted.
func deployedSeries(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"../../deploy/grafana/*.json", "../../deploy/prometheus/*.yml"} {
		m, err := filepath.Glob(pattern)
		if err != nil || len(m) == 0 {
			t.Fatalf("no %s: %v", pattern, err)
		}
		files = append(files, m...)
	}
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricNames.FindAllStringSubmatch(string(raw), -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
	}
	slices.Sort(names)
	return names
}

// family is the metric family of a series name: name itself, or the
// histogram or summary whose _bucket, _sum or _count it is.
func family(fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	if f, ok := fams[name]; ok {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok && (f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				return f
			}
		}
	}
	return nil
}

// label is the value of m's label name.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sample is the counter value of the series of ms whose labels include
// every pair of want; ok false when there is none.
func sample(ms []*dto.Metric, want ...string) (v float64, ok bool) {
next:
	for _, m := range ms {
		for i := 0; i < len(want); i += 2 {
			if label(m, want[i]) != want[i+1] {
				continue next
			}
		}
		return m.GetCounter().GetValue(), true
	}
	return 0, false
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// reasonCodes are the exported Reason… string constants declared in the
// Go files of dir (tests aside), by name: a literal, or a sum of literals
// and the package's constants (batch's reasonPrefix + "…").
func reasonCodes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s: %v", dir, err)
	}
	exprs := map[string]ast.Expr{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							exprs[n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	var eval func(e ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			}
		case *ast.Ident:
			if x, ok := exprs[e.Name]; ok {
				return eval(x)
			}
		case *ast.BinaryExpr:
			a, ok1 := eval(e.X)
			b, ok2 := eval(e.Y)
			return a + b, ok1 && ok2 && e.Op == token.ADD
		case *ast.ParenExpr:
			return eval(e.X)
		}
		return "", false
	}
	out := map[string]string{}
	for name, e := range exprs {
		if !strings.HasPrefix(name, "Reason") || !ast.IsExported(name) {
			continue
		}
		v, ok := eval(e)
		if !ok {
			t.Fatalf("%s: constant %s is not a string this test can evaluate", dir, name)
		}
		out[name] = v
	}
	if len(out) == 0 {
		t.Fatalf("%s declares no Reason constant", dir)
	}
	return out
}
