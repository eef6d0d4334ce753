package gateway_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/gateway"
)

// TestAccessLog: one JSON line per request, at INFO, except 402s, which
// go to DEBUG (unpaid load must not flood the INFO log).
func TestAccessLog(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		level  slog.Level
		want   string // level of the line, or "" for none
	}{
		{http.StatusOK, slog.LevelInfo, "INFO"},
		{http.StatusBadRequest, slog.LevelInfo, "INFO"},
		{http.StatusPaymentRequired, slog.LevelInfo, ""},
		{http.StatusPaymentRequired, slog.LevelDebug, "DEBUG"},
	} {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tt.level}))
		h := gateway.AccessLog(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte("pay me"))
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/regime?x=1", nil))
		if tt.want == "" {
			if buf.Len() != 0 {
				t.Errorf("status %d at %s: logged %s", tt.status, tt.level, buf.Bytes())
			}
			continue
		}
		var line struct {
			Level, Msg, Method, Path string
			Status, Bytes            int
		}
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("%v: %s", err, buf.Bytes())
		}
		if line.Level != tt.want || line.Msg != "http" || line.Method != "GET" || line.Path != "/regime" || line.Status != tt.status || line.Bytes != 6 {
			t.Errorf("log line %+v, want level %s status %d", line, tt.want, tt.status)
		}
	}
}
