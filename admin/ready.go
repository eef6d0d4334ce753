package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// Check is one condition of readiness: Run returns nil when it holds.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// Readiness answers whether this process should get traffic: every check
// passes and it is not shutting down. A load balancer stops sending
// requests to a replica whose probe fails.
type Readiness struct {
	checks   []Check
	timeout  time.Duration
	metrics  *Metrics // nil: tollgate_ready is not kept
	draining atomic.Bool
	mu       sync.Mutex // one probe at a time: a slow store is not asked twice at once
}

// NewReadiness returns the probe over checks, each given timeout per
// probe; it does no I/O.
func NewReadiness(m *Metrics, timeout time.Duration, checks ...Check) *Readiness {
	return &Readiness{checks: checks, timeout: timeout, metrics: m}
}

// Drain turns readiness off for good: shutdown calls it before it stops
// accepting requests, so that load balancers move traffic away first.
func (r *Readiness) Drain() {
	r.draining.Store(true)
	if r.metrics != nil {
		r.metrics.ready.Set(0)
	}
}

// Probe runs the checks and returns the failures by check name (empty:
// ready).
func (r *Readiness) Probe(ctx context.Context) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	failed := map[string]string{}
	if r.draining.Load() {
		failed["shutdown"] = "shutting down"
	}
	for _, c := range r.checks {
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		err := c.Run(cctx)
		cancel()
		if err != nil {
			failed[c.Name] = err.Error()
		}
	}
	if r.metrics != nil {
		ready := 0.0
		if len(failed) == 0 {
			ready = 1
		}
		r.metrics.ready.Set(ready)
	}
	return failed
}

// ServeHTTP answers GET /readyz: 200 {"status":"ready"}, or 503 with the
// failed checks and why.
func (r *Readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	failed := r.Probe(req.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if len(failed) == 0 {
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ready"})
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "not ready", "failed": failed})
}

// Handler is the operator listener: GET /metrics (Prometheus), GET
// /readyz, and /debug/pprof/. Anything else is a JSON 404.
func Handler(m *Metrics, ready *Readiness) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("GET /readyz", ready)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": "not_found", "status": http.StatusNotFound,
			"message": "the operator listener serves GET /metrics, /readyz and /debug/pprof/"})
	})
	return mux
}
