package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/gateway"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// fakeConn answers every gRPC call with invoke.
type fakeConn struct {
	grpc.ClientConnInterface
	invoke func(method string, req, resp any) error
}

func (c fakeConn) Invoke(_ context.Context, method string, req, resp any, _ ...grpc.CallOption) error {
	return c.invoke(method, req, resp)
}

// fakeGate records the calls it is given and runs them, unpaid; with
// err set it refuses them, as the gate refuses a tool it does not price.
type fakeGate struct {
	mu    sync.Mutex
	calls []payment.ToolCall
	err   error
}

func (g *fakeGate) CallTool(ctx context.Context, c payment.ToolCall) (*mcp.CallToolResult, error) {
	g.mu.Lock()
	g.calls = append(g.calls, c)
	g.mu.Unlock()
	if g.err != nil {
		return nil, g.err
	}
	r := c.Run(ctx)
	return &mcp.CallToolResult{IsError: r.Failed(), Content: []mcp.Content{&mcp.TextContent{Text: string(r.Body())}}}, nil
}

func newTestServer(t *testing.T, conn grpc.ClientConnInterface) (*mcp.ClientSession, *fakeGate) {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	gate := &fakeGate{}
	h, err := New(Config{Timeout: time.Second, Version: "test", PublicURL: "http://tollgate.test"}, conn, cat, gateway.PaidRoutes(cat), gate, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	session, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session, gate
}

// TestToolCalls: a tool call's arguments are checked before the gate sees
// it; the gate gets the normalized arguments and the payment; running the
// call invokes the operation's RPC with them and answers the REST JSON, or
// the REST error body with its status.
func TestToolCalls(t *testing.T) {
	t.Parallel()
	var got proto.Message
	conn := fakeConn{invoke: func(method string, req, resp any) error {
		got = req.(proto.Message)
		switch r := resp.(type) {
		case *tollgatev1.GetForecastResponse:
			r.Product, r.PredLen, r.Closes = "ETH-USD", 48, []float64{1.5}
			return nil
		case *tollgatev1.GetRugCheckResponse:
			return status.Error(codes.NotFound, "no such token")
		}
		return status.Error(codes.Unimplemented, method)
	}}
	session, gate := newTestServer(t, conn)
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		tool      string
		args      map[string]any
		meta      mcp.Meta
		wantGate  bool
		wantQuery string
		wantText  string
	}{
		{"bad enum", "forecast", map[string]any{"product": "DOGE"}, nil, false, "", `"status":400`},
		{"string for an integer", "forecast", map[string]any{"pred_len": "5"}, nil, false, "", `must be a JSON integer`},
		{"unknown argument", "regime", map[string]any{"x": 1}, nil, false, "", `takes no arguments`},
		{"missing path argument", "rugcheck", nil, nil, false, "", `"addr\" is required`},
		{"clamped and paid", "forecast", map[string]any{"product": "ETH-USD", "pred_len": 500}, mcp.Meta{payment.MetaPayment: "abc"}, true, "pred_len=48&product=ETH-USD", `"predLen":48`},
		{"null is the default", "forecast", map[string]any{"pred_len": nil}, nil, true, "pred_len=24&product=BTC-USD", `"product":"ETH-USD"`},
		{"an RPC error is REST's", "rugcheck", map[string]any{"addr": "0x00000000000000000000000000000000000000aa"}, nil, true, "addr=0x00000000000000000000000000000000000000AA", `{"error":"not_found","message":"no such token","status":404`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			gate.mu.Lock()
			before := len(gate.calls)
			gate.mu.Unlock()
			r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args, Meta: tt.meta})
			if err != nil {
				t.Fatal(err)
			}
			text := r.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, tt.wantText) {
				t.Errorf("text %s, want %s", text, tt.wantText)
			}
			gate.mu.Lock()
			defer gate.mu.Unlock()
			if called := len(gate.calls) > before; called != tt.wantGate {
				t.Fatalf("gate called: %v, want %v (%s)", called, tt.wantGate, text)
			}
			if !tt.wantGate {
				if !r.IsError {
					t.Errorf("an invalid call is no error: %s", text)
				}
				return
			}
			c := gate.calls[len(gate.calls)-1]
			if c.Name != tt.tool || c.Arguments.Encode() != tt.wantQuery || (tt.meta != nil) != (c.Payment != nil) {
				t.Errorf("gate got %s %q payment %v", c.Name, c.Arguments.Encode(), c.Payment)
			}
		})
	}
	if f, ok := got.(*tollgatev1.GetRugCheckRequest); !ok || f.GetAddr() != "0x00000000000000000000000000000000000000AA" {
		t.Errorf("the last RPC request was %v", got)
	}
}

// TestResentSpellings: what a tool call buys is its arguments as the
// service reads them (payment.ToolCall.Arguments, the resource a spent
// payment is recorded with), so a resend that spells the same call
// otherwise (an address in another case, an integer clamped to the same
// bound, a default written or left out) reaches the gate with the same
// arguments and gets the recorded answer; another call does not.
func TestResentSpellings(t *testing.T) {
	t.Parallel()
	conn := fakeConn{invoke: func(string, any, any) error { return nil }}
	session, gate := newTestServer(t, conn)
	const lower, mixed, upper = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913", "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "0x833589FCD6EDB6E08F4C7C32D4F71B54BDA02913"
	for _, tt := range []struct {
		name         string
		tool         string
		paid, resent map[string]any
		same         bool
	}{
		{"rugcheck: address in lowercase, then checksummed", "rugcheck", map[string]any{"addr": lower}, map[string]any{"addr": mixed}, true},
		{"rugcheck: address checksummed, then in capitals", "rugcheck", map[string]any{"addr": mixed}, map[string]any{"addr": upper}, true},
		{"token: address in capitals, then in lowercase", "token", map[string]any{"addr": upper}, map[string]any{"addr": lower}, true},
		{"forecast: clamped to the bound", "forecast", map[string]any{"pred_len": 48}, map[string]any{"pred_len": 500}, true},
		{"forecast: defaults left out, then written", "forecast", map[string]any{}, map[string]any{"product": "BTC-USD", "pred_len": 24}, true},
		{"candles: a default as null", "candles", map[string]any{"granularity": nil}, map[string]any{"granularity": 3600}, true},
		{"rugcheck: another address", "rugcheck", map[string]any{"addr": lower}, map[string]any{"addr": "0x833589fcd6edb6e08f4c7c32d4f71b54bda02914"}, false},
		{"forecast: another length", "forecast", map[string]any{"pred_len": 24}, map[string]any{"pred_len": 12}, false},
		{"forecast: another product", "forecast", map[string]any{}, map[string]any{"product": "ETH-USD"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, args := range []map[string]any{tt.paid, tt.resent} {
				gate.mu.Lock()
				before := len(gate.calls)
				gate.mu.Unlock()
				r, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.tool, Arguments: args, Meta: mcp.Meta{payment.MetaPayment: "abc"}})
				if err != nil {
					t.Fatal(err)
				}
				gate.mu.Lock()
				calls := gate.calls[before:]
				gate.mu.Unlock()
				if len(calls) != 1 {
					t.Fatalf("%v: the gate got %d calls (%s)", args, len(calls), r.Content[0].(*mcp.TextContent).Text)
				}
				got = append(got, payment.ToolResource(calls[0].Name)+"?"+calls[0].Arguments.Encode())
			}
			if same := payment.SameResource(got[0], got[1]); same != tt.same {
				t.Errorf("paid %s, resent %s: the same call %v, want %v", got[0], got[1], same, tt.same)
			}
		})
	}
}

// TestErrorCodes: every JSON-RPC error of the server has a standard code
// (none is 0): a resource read of a URI or a /demo/{op} that names
// nothing is invalid params (-32602, MCP's "resource not found") with the
// URI in its data; a read the server or its upstream fails is an internal
// error (-32603), as is a tool the gate does not price.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	conn := fakeConn{invoke: func(method string, req, _ any) error {
		switch req.(*tollgatev1.GetDemoRequest).GetOp() {
		case "whales":
			return status.Error(codes.Unavailable, "the scan is not ready")
		case "lanes":
			return errors.New("connection reset") // no status: the caller's own failure
		}
		return nil
	}}
	session, gate := newTestServer(t, conn)
	const base = "http://tollgate.test"
	for _, tt := range []struct {
		name     string
		uri      string
		wantCode int64
		wantText string // in the message or the data
	}{
		{"a demo of no operation", base + "/demo/nothing", jsonrpc.CodeInvalidParams, `"error":"not_found"`},
		{"a demo of no name", base + "/demo/", jsonrpc.CodeInvalidParams, `"error":"not_found"`},
		{"an escaped path", base + "/demo/%zz", jsonrpc.CodeInvalidParams, `"uri"`},
		{"a URI of no resource", base + "/nothing", jsonrpc.CodeInvalidParams, `"uri"`},
		{"another host", "http://elsewhere.test/demo/whales", jsonrpc.CodeInvalidParams, `"uri"`},
		{"an upstream down", base + "/demo/whales", jsonrpc.CodeInternalError, `the scan is not ready`},
		{"a failure of the server", base + "/demo/lanes", jsonrpc.CodeInternalError, `"error":"internal"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := session.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: tt.uri})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) {
				t.Fatalf("read %s: %v, want a JSON-RPC error", tt.uri, err)
			}
			var data struct{ URI string }
			_ = json.Unmarshal(rpcErr.Data, &data)
			if rpcErr.Code != tt.wantCode || data.URI != tt.uri || !strings.Contains(rpcErr.Message+string(rpcErr.Data), tt.wantText) {
				t.Errorf("read %s: code %d %q data %s, want code %d with the URI and %s", tt.uri, rpcErr.Code, rpcErr.Message, rpcErr.Data, tt.wantCode, tt.wantText)
			}
		})
	}
	t.Run("a tool the gate does not price", func(t *testing.T) {
		gate.mu.Lock()
		gate.err = errors.New(`gate: no paid operation called "regime"`)
		gate.mu.Unlock()
		_, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "regime"})
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInternalError || strings.Contains(rpcErr.Message, "gate") {
			t.Errorf("call: %v, want an internal error that does not tell why", err)
		}
	})
}

// TestToolsFromRoutes: every paid operation is a tool, named as it, with
// the route's parameters as its input and its record or a requirement as
// its output; an operation without a described route is an error.
func TestToolsFromRoutes(t *testing.T) {
	t.Parallel()
	cat, _ := catalog.Load()
	routes := gateway.PaidRoutes(cat)
	ts, err := tools(cat, routes)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != len(cat.Paid()) {
		t.Fatalf("%d tools for %d paid operations", len(ts), len(cat.Paid()))
	}
	for _, tl := range ts {
		in, _ := json.Marshal(tl.InputSchema)
		want, _ := json.Marshal(routes[0].Discovery.InputSchema())
		if tl.Name == routes[0].Name && string(in) != string(want) {
			t.Errorf("%s: input %s, want %s", tl.Name, in, want)
		}
		anyOf := tl.OutputSchema.(map[string]any)["anyOf"].([]any)
		if len(anyOf) != 3 {
			t.Errorf("%s: outputSchema %v", tl.Name, tl.OutputSchema)
		}
	}
	if _, err := tools(cat, routes[1:]); err == nil || !strings.Contains(err.Error(), routes[0].Name) {
		t.Errorf("a paid operation without a route: %v", err)
	}
}

// fakeLimiter allows what allow says and records the buckets asked.
type fakeLimiter struct {
	allow bool
	paid  []bool
}

func (l *fakeLimiter) Allow(_ *http.Request, paid bool) (time.Duration, bool) {
	l.paid = append(l.paid, paid)
	return 1500 * time.Millisecond, l.allow
}

// TestLimit: a request takes from the paid bucket only when it carries a
// tool call with a payment; a refused one is a 429 with Retry-After and
// never reaches the server, which still reads the whole body otherwise.
func TestLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		body    string
		buckets []bool // the tokens taken: paid or free
		allow   bool
	}{
		{"list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []bool{false}, true},
		{"unpaid call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"regime"}}`, []bool{false}, true},
		{"paid call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"regime","_meta":{"x402/payment":{}}}}`, []bool{true}, true},
		{"payment elsewhere", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"x402/payment":{}}}}`, []bool{false}, true},
		{"batch: a token a message", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"x402/payment":"x"}}},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"x402/payment":"y"}}}]`, []bool{false, true, true}, true},
		{"junk", `{{`, []bool{false}, true},
		{"refused", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []bool{false}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := &fakeLimiter{allow: tt.allow}
			var seen string
			h := Limit(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				seen = string(b)
			}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body)))
			if !slices.Equal(l.paid, tt.buckets) {
				t.Errorf("buckets asked %v, want %v", l.paid, tt.buckets)
			}
			switch {
			case tt.allow && seen != tt.body:
				t.Errorf("the server read %q", seen)
			case !tt.allow && (rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" || seen != ""):
				t.Errorf("refused: %d Retry-After %q, server read %q", rec.Code, rec.Header().Get("Retry-After"), seen)
			}
		})
	}
}

// TestOtherMethods: a browser's preflight is answered for any origin; a
// sessionless server has no stream to open and no session to end: GET
// and DELETE are 405, as the transport allows.
func TestOtherMethods(t *testing.T) {
	t.Parallel()
	cat, _ := catalog.Load()
	h, err := New(Config{Timeout: time.Second, Version: "test", PublicURL: "http://tollgate.test"}, fakeConn{}, cat, gateway.PaidRoutes(cat), &fakeGate{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pre := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodOptions, "/mcp", nil)
	req.Header.Set("Origin", "https://agent.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	h.ServeHTTP(pre, req)
	if pre.Code != http.StatusNoContent || pre.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(pre.Header().Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version") {
		t.Errorf("preflight: %d %v", pre.Code, pre.Header())
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, "/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s /mcp: %d, want 405", method, rec.Code)
		}
	}
}

// TestQuietSessions: the stateless endpoint writes no INFO line of its
// own per call (the SDK's session opened and closed): the access log has
// the calls.
func TestQuietSessions(t *testing.T) {
	t.Parallel()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return log.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := New(Config{Timeout: time.Second, Version: "test", PublicURL: "http://tollgate.test"}, fakeConn{}, cat, gateway.PaidRoutes(cat), &fakeGate{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	session, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := session.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	session.Close()
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(log.String(), "level=INFO") {
		t.Errorf("the endpoint logged at INFO per call:\n%s", log.String())
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
