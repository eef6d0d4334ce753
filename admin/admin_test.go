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
