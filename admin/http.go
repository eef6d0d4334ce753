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
