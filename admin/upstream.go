package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"time"

	"google.golang.org/grpc"
)

// Transport returns base (nil: http.DefaultTransport) counting and timing
// each call to upstream. A call fails when no answer came or the answer's
// status is 5xx or 429 (the upstream's trouble, not the request's).
// method names the call: JSONRPC for a chain node, PathMethod for a REST
// upstream, or nil for "GET"/"POST".
func (m *Metrics) Transport(upstream string, method func(*http.Request) []string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{m: m, upstream: upstream, method: method, base: base}
}

type transport struct {
	m        *Metrics
	upstream string
	method   func(*http.Request) []string
	base     http.RoundTripper
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	methods := []string{r.Method}
	if t.method != nil {
		methods = t.method(r)
	}
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	t.m.record(t.upstream, methods, time.Since(start), err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests)
	return resp, err
}

// JSONRPC names the calls of a JSON-RPC request: its method, or each
// method of a batch. The body is read from r.GetBody, which go-ethereum's
// HTTP client sets; without it the call is "unknown".
func JSONRPC(r *http.Request) []string {
	if r.GetBody == nil {
		return []string{"unknown"}
	}
	body, err := r.GetBody()
	if err != nil {
		return []string{"unknown"}
	}
	defer body.Close()
	raw, err := io.ReadAll(io.LimitReader(body, 1<<20))
	if err != nil {
		return []string{"unknown"}
	}
	type call struct {
		Method string `json:"method"`
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '[' {
		var calls []call
		if json.Unmarshal(raw, &calls) != nil || len(calls) == 0 {
			return []string{"unknown"}
		}
		out := make([]string, len(calls))
		for i, c := range calls {
			out[i] = methodName(c.Method)
		}
		return out
	}
	var c call
	if json.Unmarshal(raw, &c) != nil {
		return []string{"unknown"}
	}
	return []string{methodName(c.Method)}
}

// methodName bounds the label: JSON-RPC method names are short
// identifiers; anything else is "unknown".
func methodName(s string) string {
	if s == "" || len(s) > 64 {
		return "unknown"
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "unknown"
		}
	}
	return s
}

// PathMethod names a REST call by the last element of its path
// ("/products/ETH-USD/candles" is "candles", "/settle" is "settle").
// Use it only where that element is a fixed word, not an identifier.
func PathMethod(r *http.Request) []string {
	return []string{methodName(path.Base(r.URL.Path))}
}

// Named names every call of a REST upstream name, for upstreams whose
// paths carry identifiers.
func Named(name string) func(*http.Request) []string {
	return func(*http.Request) []string { return []string{name} }
}

// UnaryClient counts and times the gRPC calls of a client to upstream,
// named by their method ("Predict").
func (m *Metrics) UnaryClient(upstream string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		m.Upstream(upstream, path.Base(method), time.Since(start), err)
		return err
	}
}
