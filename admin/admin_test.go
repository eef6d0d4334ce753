package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

func counter(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, m := range fams[name].GetMetric() {
		match := true
		for k, v := range labels {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			match = match && found
		}
		if match {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

func TestJSONRPC(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		body string
		want []string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`, []string{"eth_blockNumber"}},
		{` [{"method":"eth_call"},{"method":"eth_getLogs"}]`, []string{"eth_call", "eth_getLogs"}},
		{`{"method":"eth_call; DROP"}`, []string{"unknown"}},
		{`not json`, []string{"unknown"}},
		{`[]`, []string{"unknown"}},
	} {
		r, _ := http.NewRequest("POST", "http://node", strings.NewReader(tt.body))
		if got := JSONRPC(r); !slices.Equal(got, tt.want) {
			t.Errorf("JSONRPC(%s) = %v, want %v", tt.body, got, tt.want)
		}
		if b, _ := io.ReadAll(r.Body); string(b) != tt.body {
			t.Errorf("the request body was consumed: %q", b)
		}
	}
}

// TestTransport: each call of a batch is counted; an upstream's 5xx and
// 429, and no answer at all, are errors; a 4xx is the request's.
func TestTransport(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer node.Close()
	m := NewMetrics(Build{}, nil)
	c := &http.Client{Transport: m.Transport("chain", JSONRPC, nil)}
	post := func(body string) {
		resp, err := c.Post(node.URL, "application/json", bytes.NewReader([]byte(body)))
		if err == nil {
			resp.Body.Close()
		}
	}
	post(`[{"method":"eth_call"},{"method":"eth_call"},{"method":"eth_getLogs"}]`)
	status = http.StatusBadGateway
	post(`{"method":"eth_call"}`)
	status = http.StatusTooManyRequests
	post(`{"method":"eth_call"}`)
	status = http.StatusBadRequest
	post(`{"method":"eth_getLogs"}`)
	dead := &http.Client{Transport: m.Transport("candles", Named("candles"), nil)}
	if _, err := dead.Get("http://127.0.0.1:1/products"); err == nil {
		t.Fatal("a closed port answered")
	}
	fams := scrape(t, m)
	for _, tt := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"upstream": "chain", "method": "eth_call", "outcome": "ok"}, 2},
		{map[string]string{"upstream": "chain", "method": "eth_call", "outcome": "error"}, 2},
		{map[string]string{"upstream": "chain", "method": "eth_getLogs", "outcome": "ok"}, 2},
		{map[string]string{"upstream": "candles", "method": "candles", "outcome": "error"}, 1},
	} {
		if got := counter(fams, "tollgate_upstream_requests_total", tt.labels); got != tt.want {
			t.Errorf("%v: %v, want %v", tt.labels, got, tt.want)
		}
	}
	var batch uint64
	for _, mm := range fams["tollgate_upstream_request_duration_seconds"].GetMetric() {
		for _, l := range mm.GetLabel() {
			if l.GetName() == "method" && l.GetValue() == "batch" {
				batch += mm.GetHistogram().GetSampleCount()
			}
		}
	}
	if batch != 1 {
		t.Errorf("the batch was timed %d times, want once", batch)
	}
}

// TestReadiness: ready only while every check passes; the answer names
// what failed; Drain turns it off for good and tollgate_ready follows.
func TestReadiness(t *testing.T) {
	t.Parallel()
	m := NewMetrics(Build{Version: "v1.2.3", Revision: "abc"}, func(context.Context) (int, time.Duration, error) { return 2, 90 * time.Second, nil })
	var storeErr error
	r := NewReadiness(m, time.Second,
		Check{Name: "store", Run: func(context.Context) error { return storeErr }},
		Check{Name: "chain", Run: func(context.Context) error { return nil }})
	h := Handler(m, r)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, `"ready"`) {
		t.Errorf("all checks pass: %d %s", code, body)
	}
	if v := counter(scrape(t, m), "tollgate_ready", nil); v != 1 {
		t.Errorf("tollgate_ready %v", v)
	}
	storeErr = errors.New("connection refused")
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, `"store":"connection refused"`) {
		t.Errorf("store down: %d %s", code, body)
	}
	storeErr = nil
	r.Drain()
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("draining: %d %s", code, body)
	}
	fams := scrape(t, m)
	if v := counter(fams, "tollgate_ready", nil); v != 0 {
		t.Errorf("tollgate_ready %v while draining", v)
	}
	if counter(fams, "tollgate_settlements_unresolved", nil) != 2 || counter(fams, "tollgate_settlements_oldest_unresolved_age_seconds", nil) != 90 {
		t.Error("the unresolved gauges do not read the store's figures")
	}
	if counter(fams, "tollgate_build_info", map[string]string{"version": "v1.2.3", "revision": "abc"}) != 1 {
		t.Error("no build info")
	}
	if code, body := get("/elsewhere"); code != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("unknown path: %d %s", code, body)
	}
}

// TestInstrument: requests are counted by route pattern, method and
// status; unknown routes share one label value.
func TestInstrument(t *testing.T) {
	t.Parallel()
	m := NewMetrics(Build{}, nil)
	h := m.Instrument(func(r *http.Request) string {
		if r.URL.Path == "/regime" {
			return "GET /regime"
		}
		return "other"
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/regime" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("{}"))
	}))
	for _, p := range []string{"/regime", "/regime", "/x1", "/x2"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("PROPFIND", "/regime", nil))
	fams := scrape(t, m)
	for _, tt := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"route": "GET /regime", "method": "GET", "status": "200"}, 2},
		{map[string]string{"route": "other", "method": "GET", "status": "404"}, 2},
		{map[string]string{"route": "GET /regime", "method": "other", "status": "200"}, 1},
	} {
		if got := counter(fams, "tollgate_http_requests_total", tt.labels); got != tt.want {
			t.Errorf("%v: %v, want %v", tt.labels, got, tt.want)
		}
	}
}

// TestExpectedSeries: the Expect methods expose each combination they are
// given at zero, the closed label sets (a cycle's result, an upstream
// call's outcome, a cache's hit or miss) are exposed whole, and counting
// afterwards moves only the series counted.
func TestExpectedSeries(t *testing.T) {
	t.Parallel()
	m := NewMetrics(Build{}, nil)
	m.ExpectPayments([]string{"regime", "whales"}, []string{"rest", "mcp"}, []string{"r1", "r2"}, []string{"f1"})
	m.ExpectBatch([]string{"claim", "settle"}, []string{"ok", "error"})
	m.ExpectRoutes([]string{"GET /regime", "other"}, []int{200, 502})
	m.ExpectCaches("candles")
	fresh := scrape(t, m)
	byTransport := [][]string{{"regime", "rest"}, {"whales", "rest"}, {"regime", "mcp"}, {"whales", "mcp"}}
	for _, tt := range []struct {
		name   string
		labels []string // label names, in the order of each row's values
		rows   [][]string
	}{
		{"tollgate_payment_challenges_total", []string{"operation", "transport"}, byTransport},
		{"tollgate_payment_presented_total", []string{"operation", "transport"}, byTransport},
		{"tollgate_payment_verified_total", []string{"operation", "transport"}, byTransport},
		{"tollgate_payment_settled_total", []string{"operation", "transport"}, byTransport},
		{"tollgate_payment_revenue_usd_total", []string{"operation", "transport"}, byTransport},
		{"tollgate_payment_settle_duration_seconds", []string{"operation"}, [][]string{{"regime"}, {"whales"}}},
		{"tollgate_payment_refused_total", []string{"operation", "transport", "reason"}, [][]string{
			{"regime", "rest", "r1"}, {"regime", "rest", "r2"}, {"whales", "rest", "r1"}, {"whales", "rest", "r2"},
			{"regime", "mcp", "r1"}, {"regime", "mcp", "r2"}, {"whales", "mcp", "r1"}, {"whales", "mcp", "r2"}}},
		{"tollgate_payment_failed_total", []string{"operation", "transport", "reason"}, [][]string{
			{"regime", "rest", "f1"}, {"whales", "rest", "f1"}, {"regime", "mcp", "f1"}, {"whales", "mcp", "f1"}}},
		{"tollgate_batch_transactions_total", []string{"kind", "result"}, [][]string{{"claim", "ok"}, {"claim", "error"}, {"settle", "ok"}, {"settle", "error"}}},
		{"tollgate_batch_usd_total", []string{"kind"}, [][]string{{"claim"}, {"settle"}}},
		{"tollgate_http_requests_total", []string{"route", "method", "status"},
			[][]string{{"GET /regime", "GET", "200"}, {"GET /regime", "GET", "502"}, {"other", "GET", "200"}, {"other", "GET", "502"}}},
		{"tollgate_http_request_duration_seconds", []string{"route"}, [][]string{{"GET /regime"}, {"other"}}},
		{"tollgate_cache_requests_total", []string{"cache", "result"}, [][]string{{"candles", "hit"}, {"candles", "miss"}}},
		{"tollgate_whale_scan_cycles_total", []string{"result"}, [][]string{{"ok"}, {"error"}}},
	} {
		var got [][]string
		for _, s := range fresh[tt.name].GetMetric() {
			var row []string
			for _, l := range tt.labels {
				for _, have := range s.GetLabel() {
					if have.GetName() == l {
						row = append(row, have.GetValue())
					}
				}
			}
			got = append(got, row)
			if v := s.GetCounter().GetValue() + float64(s.GetHistogram().GetSampleCount()); v != 0 {
				t.Errorf("%s%v is %v before anything happened", tt.name, row, v)
			}
		}
		sortRows := func(rows [][]string) {
			slices.SortFunc(rows, func(a, b []string) int { return slices.Compare(a, b) })
		}
		sortRows(got)
		sortRows(tt.rows)
		if !slices.EqualFunc(got, tt.rows, slices.Equal) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.rows)
		}
	}

	m.Refused("regime", "mcp", "r2")
	m.ExpectCaches("bytecode") // a cache expected later, as serve expects the analytics' own
	m.CacheLookup("bytecode", true)
	m.Upstream("chain", "eth_call", time.Millisecond, nil)
	after := scrape(t, m)
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"tollgate_payment_refused_total", map[string]string{"operation": "regime", "transport": "mcp", "reason": "r2"}, 1},
		{"tollgate_payment_refused_total", map[string]string{"operation": "regime", "transport": "rest", "reason": "r2"}, 0},
		{"tollgate_payment_refused_total", map[string]string{"operation": "whales", "transport": "mcp", "reason": "r2"}, 0},
		{"tollgate_cache_requests_total", map[string]string{"cache": "bytecode", "result": "hit"}, 1},
		{"tollgate_cache_requests_total", map[string]string{"cache": "bytecode", "result": "miss"}, 0},
		{"tollgate_upstream_requests_total", map[string]string{"upstream": "chain", "method": "eth_call", "outcome": "ok"}, 1},
		{"tollgate_upstream_requests_total", map[string]string{"upstream": "chain", "method": "eth_call", "outcome": "error"}, 0},
	} {
		if !slices.ContainsFunc(after[tt.name].GetMetric(), func(s *dto.Metric) bool { return labelsMatch(s, tt.labels) }) {
			t.Errorf("%s%v is not exposed", tt.name, tt.labels)
		} else if got := counter(after, tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
}

func labelsMatch(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == k && l.GetValue() == v }) {
			return false
		}
	}
	return true
}
