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

func TestAccessLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	h := gateway.AccessLog(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte("pay me"))
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/regime?x=1", nil))
	var line struct {
		Msg, Method, Path string
		Status, Bytes     int
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	if line.Msg != "http" || line.Method != "GET" || line.Path != "/regime" || line.Status != 402 || line.Bytes != 6 {
		t.Errorf("log line %+v", line)
	}
}
