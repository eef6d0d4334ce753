// Package mcpserver serves Tollgate's paid operations as MCP tools over
// the Streamable HTTP transport (POST /mcp): a second facade over the
// gRPC core, beside the REST gateway.
//
// Each tool is one paid operation of the catalog, named as its /demo/{op}
// sample. Its input schema is the operation's parameters and its output
// schema its record, both as the OpenAPI document declares them (read
// through the payment routes' discovery), so an operation added to the
// protos appears on both transports at once. A call's arguments are
// checked by the catalog's rules before any payment logic and normalized
// as the service reads them, which is what the call buys (a resend that
// spells them otherwise is the same call); a checked call is handed to
// the payment gate with a way to run it, and the gate answers the
// payment the MCP way (specs/transports-v2/mcp.md) and runs the call only
// once it is paid. The call goes through the same client connection as
// REST (in process, gateway/inprocess), so the server's interceptors
// (deadlines, logging, recovery, checks) run for both, and its record is written by gateway/restjson,
// so a tool's structuredContent is the REST body. The errors the server
// itself answers carry standard JSON-RPC codes (errors.go).
//
// The server is stateless: every POST stands alone, so any replica answers
// any request and nothing is kept between calls.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate/tollgate/gateway/restjson"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// Path is where the MCP endpoint is served on the public listener.
const Path = "/mcp"

// Config holds the MCP facade's settings.
type Config struct {
	// Timeout bounds each tool's gRPC call, as the gateway's bounds a
	// REST call's; past it the tool fails with deadline_exceeded.
	Timeout time.Duration
	// Version is the server's build version, given in the handshake.
	Version string
	// Instructions tell an agent what the server is and how it is paid.
	Instructions string
	// PublicURL is the base of the free documents' resource URIs, the
	// REST API's public URL.
	PublicURL string
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("mcp: timeout must be positive, got %s", c.Timeout))
	}
	if c.Version == "" {
		errs = append(errs, errors.New("mcp: version is empty"))
	}
	if u, err := url.Parse(c.PublicURL); err != nil || u.Host == "" {
		errs = append(errs, fmt.Errorf("mcp: public URL %q is not absolute", c.PublicURL))
	}
	return errors.Join(errs...)
}

// Gate prices and settles a tool call; *payment.Gate is one.
type Gate interface {
	CallTool(ctx context.Context, c payment.ToolCall) (*mcp.CallToolResult, error)
}

// maxBody bounds a request's body: a tool call with its payment is a few
// kilobytes (a smart wallet's signature included).
const maxBody = 64 << 10

// New returns the MCP endpoint's handler: a tool for each paid operation
// of cat, described by the payment route of the same name, called over
// conn and paid through gate. It does no I/O.
func New(cfg Config, conn grpc.ClientConnInterface, cat *catalog.Catalog, routes []payment.Route, gate Gate, logger *slog.Logger) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The SDK logs each stateless call's session opening and closing at
	// INFO: three lines a call, none of them news. It speaks from WARN;
	// the calls are in the access log.
	sdkLogger := slog.New(atLeast{logger.Handler(), slog.LevelWarn})
	s := mcp.NewServer(&mcp.Implementation{Name: "tollgate", Title: "Tollgate", Version: cfg.Version},
		&mcp.ServerOptions{Instructions: cfg.Instructions, Logger: sdkLogger})
	ts, err := tools(cat, routes)
	if err != nil {
		return nil, err
	}
	m := restjson.New(protoregistry.GlobalFiles, "tollgate.v1")
	newCaller := func(op *catalog.Operation) *caller {
		return &caller{op: op, conn: conn, json: m, timeout: cfg.Timeout, logger: logger}
	}
	for _, t := range ts {
		s.AddTool(t.Tool, newCaller(t.op).handler(gate))
	}
	addResources(s, strings.TrimSuffix(cfg.PublicURL, "/"), cat, newCaller)
	return cors(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       sdkLogger,
		// The SDK refuses a localhost peer asking for another host, which
		// guards a local MCP server against DNS rebinding. Tollgate is a
		// public API with no ambient authority to guard, and a load
		// balancer on the same host forwards the public Host.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        maxBody,
	})), nil
}

// cors lets browser MCP clients call the endpoint, as the REST API lets
// browsers pay: any origin, the transport's headers, a preflight answered
// here (the SDK refuses OPTIONS).
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, Mcp-Protocol-Version")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "POST, GET, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID")
			h.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// caller runs one operation's tool calls.
type caller struct {
	op      *catalog.Operation
	conn    grpc.ClientConnInterface
	json    *restjson.Marshaler
	timeout time.Duration
	logger  *slog.Logger
}

// handler checks a call's arguments, refusing bad ones with an error
// result that asks for no payment, then hands the call to gate.
func (c *caller) handler(gate Gate) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := c.op.CheckArguments(req.Params.Arguments)
		if err != nil {
			_, body := restjson.StatusBody(status.Convert(err))
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}, nil
		}
		var pay any
		if m := req.Params.GetMeta(); m != nil {
			pay = m[payment.MetaPayment]
		}
		r, err := gate.CallTool(ctx, payment.ToolCall{
			Name: c.op.Name, Arguments: args, Payment: pay,
			Run: func(ctx context.Context) *payment.Response { return c.call(ctx, args) },
		})
		if err != nil { // a tool the gate does not price: a wiring mistake
			c.logger.ErrorContext(ctx, "mcp: gate refused the tool", "tool", c.op.Name, "err", err)
			return nil, internalError()
		}
		return r, nil
	}
}

// call runs the operation over gRPC and writes its answer as REST would:
// the record's JSON, or the error body with the status REST gives it.
func (c *caller) call(ctx context.Context, args url.Values) *payment.Response {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.op.NewRequest(args)
	if err != nil {
		return errorResponse(status.Convert(err))
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(c.op.Method.Output().FullName())
	if err != nil {
		c.logger.ErrorContext(ctx, "mcp: no response type", "tool", c.op.Name, "err", err)
		return errorResponse(status.New(codes.Internal, "internal error"))
	}
	resp := mt.New().Interface()
	if err := c.conn.Invoke(ctx, c.op.FullMethod(), req, resp); err != nil {
		st, unexpected := restjson.StatusOf(err)
		if unexpected {
			c.logger.ErrorContext(ctx, "mcp: call failed", "tool", c.op.Name, "err", err)
		}
		return errorResponse(st)
	}
	body, mime, err := c.encode(resp)
	if err != nil {
		c.logger.ErrorContext(ctx, "mcp: record not written", "tool", c.op.Name, "err", err)
		return errorResponse(status.New(codes.Internal, "internal error"))
	}
	return payment.NewResponse(http.StatusOK, mime, body)
}

// encode writes an answer as the REST gateway does: the field the
// operation names as the body, or the set member of the oneof it
// unwraps, or the whole record; an HttpBody as its own data and type,
// a record as REST JSON.
func (c *caller) encode(resp proto.Message) ([]byte, string, error) {
	m := resp.ProtoReflect()
	if name := c.op.ResponseBody; name != "" {
		m = m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name))).Message()
	}
	if name := c.op.UnwrapOneof; name != "" {
		fd := m.WhichOneof(m.Descriptor().Oneofs().ByName(protoreflect.Name(name)))
		if fd == nil {
			return nil, "", errors.New("empty oneof in response")
		}
		m = m.Get(fd).Message()
	}
	if hb, ok := m.Interface().(*httpbody.HttpBody); ok {
		return hb.GetData(), hb.GetContentType(), nil
	}
	body, err := c.json.Marshal(m.Interface())
	return body, "application/json", err
}

func errorResponse(st *status.Status) *payment.Response {
	code, body := restjson.StatusBody(st)
	return payment.NewResponse(code, "application/json", body)
}

// Limiter bounds each client's calls, with a bucket for calls that carry
// a payment and one for the others; *gateway.Limiter is one.
type Limiter interface {
	Allow(r *http.Request, paid bool) (wait time.Duration, ok bool)
}

// Limit returns next behind l, one token a message: a tool call with a
// payment in _meta takes from the paid bucket, any other message from the
// free one, as a REST request with or without a payment header would (a
// JSON-RPC batch, which revisions before 2025-06-18 allow, takes a token
// for each of its messages). A refused request is answered 429 with
// Retry-After and a JSON-RPC error, before the MCP server reads it.
func Limit(l Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buckets := []bool{false} // a request without a body: one free token
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
			if err != nil {
				http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			buckets = paidMessages(body)
		}
		for _, paid := range buckets {
			if wait, ok := l.Allow(r, paid); !ok {
				secs := max(int64(math.Ceil(wait.Seconds())), 1)
				w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"too many requests from this client; retry after %d s"}}`, secs)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// paidMessages says, for each JSON-RPC message of a request body (one,
// or each of a batch), whether it is a tools/call with
// params._meta["x402/payment"]; a body that is no JSON-RPC is one unpaid
// message (the server refuses it).
func paidMessages(body []byte) []bool {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' && !bytes.Contains(body, []byte(payment.MetaPayment)) {
		return []bool{false} // one message, with no payment: the common case, not decoded twice
	}
	type message struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	var msgs []message
	if err := json.Unmarshal(body, &msgs); err != nil || len(msgs) == 0 {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return []bool{false}
		}
		msgs = []message{m}
	}
	out := make([]bool, len(msgs))
	for i, m := range msgs {
		_, ok := m.Params.Meta[payment.MetaPayment]
		out[i] = ok && m.Method == "tools/call"
	}
	return out
}

// atLeast passes on a handler's records of level min and above.
type atLeast struct {
	slog.Handler
	min slog.Level
}

func (a atLeast) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= a.min && a.Handler.Enabled(ctx, l)
}

func (a atLeast) WithAttrs(attrs []slog.Attr) slog.Handler {
	return atLeast{a.Handler.WithAttrs(attrs), a.min}
}

func (a atLeast) WithGroup(name string) slog.Handler {
	return atLeast{a.Handler.WithGroup(name), a.min}
}
