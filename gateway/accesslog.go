package gateway

import (
	"log/slog"
	"net/http"
	"time"
)

// AccessLog returns next wrapped to log one line per request: method,
// path, status, response bytes and duration, at INFO except 402s, which
// are logged at DEBUG (unpaid load would flood the log; the gate logs
// their count periodically). Put it outermost, so answers written by
// handlers in front of the gateway (such as 402s) are logged too.
func AccessLog(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		level := slog.LevelInfo
		switch rec.status {
		case http.StatusPaymentRequired:
			level = slog.LevelDebug // challenges are counted, not logged one by one (payment.Gate.RunCounters)
		case http.StatusTooManyRequests:
			level = slog.LevelDebug // a flood must not flood the log; tollgate_http_requests_total counts them
		}
		logger.LogAttrs(r.Context(), level, "http",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Int("bytes", rec.bytes),
			slog.Duration("duration", time.Since(start)),
			slog.String("remote", r.RemoteAddr),
		)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
	wrote  bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
