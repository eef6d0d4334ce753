package admin

import (
	"net/http"
	"strconv"
	"time"
)

// Instrument counts and times every request next answers, by route
// (routeOf returns the matched pattern, e.g. "GET /rugcheck/{addr}", so
// that the label set stays bounded), method and status.
func (m *Metrics) Instrument(routeOf func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := routeOf(r)
		m.httpRequests.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(rec.status)).Inc()
		m.httpDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// ExpectRoutes exposes tollgate_http_requests_total at zero for every
// route (gateway.Routes) answering a GET with each of statuses
// (gateway.Statuses), and tollgate_http_request_duration_seconds for
// every route: the 5xx ratio sees a fresh process's first error.
func (m *Metrics) ExpectRoutes(routes []string, statuses []int) {
	for _, route := range routes {
		m.httpDuration.WithLabelValues(route)
		for _, status := range statuses {
			m.httpRequests.WithLabelValues(route, http.MethodGet, strconv.Itoa(status))
		}
	}
}

// methodLabel keeps the method label bounded: anything unusual is "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPost:
		return m
	}
	return "other"
}

// statusWriter remembers the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
