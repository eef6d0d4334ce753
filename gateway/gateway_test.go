package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tollgate/tollgate/gateway"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/catalog"
	"github.com/tollgate/tollgate/service/market"
)

const publicURL = "http://tollgate.test"

// stack is the gRPC server and the gateway in process.
type stack struct {
	url     string
	handler http.Handler
	conn    *grpc.ClientConn
	calls   atomic.Int64 // AnalyticsService calls that reached the handler
}

func newStack(t testing.TB) *stack {
	t.Helper()
	cache, err := market.NewCache(market.NewDevnet(), market.DefaultCacheConfig())
	if err != nil {
		t.Fatal(err)
	}
	return newStackWith(t, service.NewAnalytics(service.Sources{Candles: cache}), 5*time.Second, service.DataSource{Kind: "candles", Name: "devnet-synthetic", Synthetic: true})
}

// newStackWith serves analytics behind the real interceptors and a gateway
// whose proxied calls time out after timeout; /tollgate lists sources.
func newStackWith(t testing.TB, analytics tollgatev1.AnalyticsServiceServer, timeout time.Duration, sources ...service.DataSource) *stack {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	disc, err := service.NewDiscovery(service.DiscoveryConfig{PublicURL: publicURL, Version: "test", Sources: sources, MCPPath: "/mcp"}, cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{}
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, "/tollgate.v1.AnalyticsService/") {
			s.calls.Add(1)
		}
		return h(ctx, req)
	}
	interceptors := append(service.Interceptors(cat, slog.New(slog.DiscardHandler)), count)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(interceptors...))
	tollgatev1.RegisterAnalyticsServiceServer(srv, analytics)
	tollgatev1.RegisterDiscoveryServiceServer(srv, disc)
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h, err := gateway.New(context.Background(), gateway.Config{Timeout: timeout}, conn, conn, cat, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	s.url, s.conn, s.handler = hs.URL, conn, h
	return s
}

type reply struct {
	status int
	header http.Header
	body   []byte
	req    *http.Request
	resp   *http.Response
}

func (s *stack) do(t *testing.T, method, path string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body, req: req, resp: resp}
}

const usdc = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"

// TestErrors covers every error the gateway answers: each has the Error
// body, its status field equals the HTTP status, it names the parameter,
// it validates against the OpenAPI document, and bad input never reaches
// the analytics (where payment will sit in front).
func TestErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	tests := []struct {
		method, path string
		status       int
		code         string
		param        string
		accepted     []string
		reachesRPC   bool
	}{
		{"GET", "/candles?product=DOGE-USD", 400, "invalid_argument", "product", []string{"BTC-USD", "ETH-USD"}, false},
		{"GET", "/candles?granularity=60", 400, "invalid_argument", "granularity", []string{"300", "900", "3600", "21600", "86400"}, false},
		{"GET", "/candles?granularity=abc", 400, "invalid_argument", "granularity", nil, false},
		{"GET", "/candles?product=ETH-USD&product=BTC-USD", 400, "invalid_argument", "product", nil, false},
		{"GET", "/candles?limit=10", 400, "invalid_argument", "limit", []string{"product", "granularity"}, false},
		{"GET", "/candles?%zz", 400, "invalid_argument", "query", nil, false},
		{"GET", "/whales?%FF=1", 400, "invalid_argument", "\uFFFD", nil, false},
		{"GET", "/%FF", 404, "not_found", "", nil, false},
		{"GET", "//health", 404, "not_found", "", nil, false},
		{"GET", "/demo/../health", 404, "not_found", "", nil, false},
		{"GET", "/rugcheck/" + usdc, 501, "unimplemented", "", nil, true},
		{"GET", "/rugcheck/0x1234", 400, "invalid_argument", "addr", nil, false},
		{"GET", "/rugcheck/" + usdc + "00", 400, "invalid_argument", "addr", nil, false},
		{"GET", "/token/not-an-address", 400, "invalid_argument", "addr", nil, false},
		{"GET", "/token/" + strings.ToLower(usdc), 501, "unimplemented", "", nil, true},
		{"GET", "/whales", 501, "unimplemented", "", nil, true},
		{"GET", "/whales?page=2", 400, "invalid_argument", "page", nil, false},
		{"GET", "/signal?product=BTC-USD", 400, "invalid_argument", "product", []string{"ETH-USD"}, false},
		{"GET", "/lanes", 501, "unimplemented", "", nil, true},
		{"GET", "/forecast?product=INFY.NS", 501, "unimplemented", "", nil, true},
		{"GET", "/forecast?product=RELIANCE.NS&pred_len=1000", 501, "unimplemented", "", nil, true},
		{"GET", "/forecast?product=TCS.NS&pred_len=-5", 501, "unimplemented", "", nil, true},
		{"GET", "/forecast?pred_len=2.5", 400, "invalid_argument", "pred_len", nil, false},
		{"GET", "/forecast?product=AAPL", 400, "invalid_argument", "product", nil, false},
		{"GET", "/demo/nope", 404, "not_found", "op", []string{"rugcheck", "whales", "candles", "signal", "signal-pack", "regime", "token", "lanes", "forecast"}, false},
		{"GET", "/nope", 404, "not_found", "", nil, false},
		{"GET", "/candles/", 404, "not_found", "", nil, false},
		{"GET", "/rugcheck/", 400, "invalid_argument", "addr", nil, false},
		{"POST", "/regime", 405, "method_not_allowed", "", nil, false},
		{"DELETE", "/health", 405, "method_not_allowed", "", nil, false},
		{"PUT", "/nope", 404, "not_found", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			before := s.calls.Load()
			r := s.do(t, tt.method, tt.path)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var body struct {
				Error    string   `json:"error"`
				Message  string   `json:"message"`
				Status   int      `json:"status"`
				Param    string   `json:"param"`
				Accepted []string `json:"accepted"`
			}
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			if body.Error != tt.code || body.Status != tt.status || body.Message == "" {
				t.Errorf("body %s: want error %q status %d and a message", r.body, tt.code, tt.status)
			}
			if body.Param != tt.param {
				t.Errorf("param %q, want %q", body.Param, tt.param)
			}
			if tt.param != "" && tt.param != "\uFFFD" && !strings.Contains(body.Message, tt.param) {
				t.Errorf("message %q does not name %q", body.Message, tt.param)
			}
			if tt.accepted != nil && !slices.Equal(body.Accepted, tt.accepted) {
				t.Errorf("accepted %q, want %q", body.Accepted, tt.accepted)
			}
			if tt.status == 405 && r.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("405 without Allow: GET, HEAD")
			}
			if reached := s.calls.Load() > before; reached != tt.reachesRPC {
				t.Errorf("reached the analytics service: %v, want %v", reached, tt.reachesRPC)
			}
			doc.validateSchema(t, "Error", r.body)
			if tt.method == "GET" && tt.status != 404 || tt.path == "/demo/nope" {
				doc.validateResponse(t, r)
			}
		})
	}
}

// TestFreeEndpoints checks every free operation and validates its body.
func TestFreeEndpoints(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	tests := []struct {
		path, contentType, schema string
		contains                  []string
	}{
		{"/", "application/json", "GetIndexResponse", []string{publicURL + "/openapi.json"}},
		{"/health", "application/json", "GetHealthResponse", []string{`"status":"ok"`}},
		{"/health?nocache=1", "application/json", "GetHealthResponse", []string{`"status":"ok"`}},
		{"/tollgate", "application/json", "GetProjectResponse", []string{`"priceUsd":"0.50"`, `"path":"/signal-pack"`, `"pattern":"^0x[0-9a-fA-F]{40}$"`}},
		{"/llms.txt", "text/plain; charset=utf-8", "", []string{"# Tollgate", "GET /forecast](" + publicURL + "/forecast): 0.25 USD", "pred_len (query) integer clamped into 1-48, default 24"}},
		{"/openapi.json", "application/json", "", []string{`"openapi":"3.1.0"`, `"url":"` + publicURL + `"`}},
		{"/.well-known/x402", "application/json", "GetX402DiscoveryResponse", []string{publicURL + "/rugcheck/{addr}", `"priceUsd":"0.15"`}},
		{"/.well-known/x402.json", "application/json", "GetX402DiscoveryResponse", []string{publicURL + "/whales"}},
		{"/metrics", "application/json", "GetMetricsResponse", []string{`"name":"forecast","challenges":0,"paid":0,"conversion":null`}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := s.do(t, "GET", tt.path)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != tt.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tt.contentType)
			}
			for _, c := range tt.contains {
				if !strings.Contains(string(r.body), c) {
					t.Errorf("body lacks %q:\n%s", c, r.body)
				}
			}
			if tt.schema != "" {
				doc.validateSchema(t, tt.schema, r.body)
			}
			doc.validateResponse(t, r)
		})
	}
}

// TestDemos checks /demo/{op} for every paid operation: the body is the
// paid record itself, with the spec's enum strings, and validates against
// both the demo operation and the paid operation's 200 schema.
func TestDemos(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	cat, _ := catalog.Load()
	for _, op := range cat.Paid() {
		t.Run(op.Name, func(t *testing.T) {
			r := s.do(t, "GET", "/demo/"+op.Name)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			doc.validateResponse(t, r)
			doc.validateSchema(t, string(op.Method.Output().Name()), r.body)
			var obj map[string]any
			if err := json.Unmarshal(r.body, &obj); err != nil {
				t.Fatal(err)
			}
			if asOf, _ := obj["asOf"].(string); asOf == "" {
				t.Errorf("no asOf in %s", r.body)
			} else if _, err := time.Parse(time.RFC3339, asOf); err != nil || !strings.HasSuffix(asOf, "Z") {
				t.Errorf("asOf %q is not RFC 3339 UTC", asOf)
			}
			if strings.Contains(string(r.body), "_UNSPECIFIED") || strings.Contains(string(r.body), "REGIME_") {
				t.Errorf("proto enum name leaked into REST JSON: %s", r.body)
			}
		})
	}
}

func TestDemoEnumStrings(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for path, want := range map[string]string{
		"/demo/regime":      `"regime":"TREND-UP"`,
		"/demo/signal":      `"gate":"GO"`,
		"/demo/rugcheck":    `"verdict":"FAIL"`,
		"/demo/signal-pack": `"flag":"NORMAL"`,
		"/demo/candles":     `"regime":"trend"`,
		"/demo/lanes":       `"lastClose":null`,
	} {
		if r := s.do(t, "GET", path); !strings.Contains(string(r.body), want) {
			t.Errorf("%s lacks %s: %s", path, want, r.body)
		}
	}
}

// TestDemoOverGRPC: gRPC clients get the typed oneof with proto enum names.
func TestDemoOverGRPC(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	resp, err := tollgatev1.NewDiscoveryServiceClient(s.conn).GetDemo(context.Background(), &tollgatev1.GetDemoRequest{Op: "signal"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSignal().GetGate() != tollgatev1.Gate_GATE_GO {
		t.Errorf("GetDemo(signal) = %v", resp)
	}
}

// failingAnalytics answers each method with a different failure.
type failingAnalytics struct {
	tollgatev1.UnimplementedAnalyticsServiceServer
}

func (failingAnalytics) GetRegime(context.Context, *tollgatev1.GetRegimeRequest) (*tollgatev1.GetRegimeResponse, error) {
	return nil, status.Error(codes.Unavailable, "market feed unavailable")
}

func (failingAnalytics) GetWhales(context.Context, *tollgatev1.GetWhalesRequest) (*tollgatev1.GetWhalesResponse, error) {
	return nil, fmt.Errorf("scan: %w", context.DeadlineExceeded)
}

func (failingAnalytics) GetLanes(context.Context, *tollgatev1.GetLanesRequest) (*tollgatev1.GetLanesResponse, error) {
	return nil, errors.New("disk on fire at /var/lib/secret")
}

func (failingAnalytics) GetSignalPack(ctx context.Context, _ *tollgatev1.GetSignalPackRequest) (*tollgatev1.GetSignalPackResponse, error) {
	<-ctx.Done() // slower than the gateway's deadline
	return nil, ctx.Err()
}

func (failingAnalytics) GetCandles(context.Context, *tollgatev1.GetCandlesRequest) (*tollgatev1.GetCandlesResponse, error) {
	panic("bug")
}

func (failingAnalytics) GetToken(context.Context, *tollgatev1.GetTokenRequest) (*tollgatev1.GetTokenResponse, error) {
	return &tollgatev1.GetTokenResponse{AsOf: "2026-11-20T12:00:00Z", Token: &tollgatev1.TokenInfo{Address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}, Transfers: &tollgatev1.TokenTransfers{}}, nil
}

func (failingAnalytics) GetForecast(context.Context, *tollgatev1.GetForecastRequest) (*tollgatev1.GetForecastResponse, error) {
	return &tollgatev1.GetForecastResponse{LastClose: math.NaN()}, nil
}

// TestUpstreamFailures maps each failure of a handler, through gRPC, to its
// HTTP status and error body.
func TestUpstreamFailures(t *testing.T) {
	t.Parallel()
	s := newStackWith(t, failingAnalytics{}, 300*time.Millisecond)
	doc := loadServedDocument(t, s)
	tests := []struct {
		path   string
		status int
		code   string
		msg    string
	}{
		{"/regime", 503, "unavailable", "market feed unavailable"},
		{"/whales", 504, "deadline_exceeded", "deadline exceeded"},
		{"/signal-pack", 504, "deadline_exceeded", ""},
		{"/lanes", 500, "internal", "internal error"},
		{"/candles", 500, "internal", "internal error"},
		{"/forecast", 500, "internal", ""},
		{"/token/" + usdc, 200, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := s.do(t, "GET", tt.path)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			doc.validateResponse(t, r)
			if tt.status == 200 {
				return
			}
			var body struct {
				Error   string `json:"error"`
				Message string `json:"message"`
				Status  int    `json:"status"`
			}
			if err := json.Unmarshal(r.body, &body); err != nil {
				t.Fatal(err)
			}
			if body.Error != tt.code || body.Status != tt.status || tt.msg != "" && body.Message != tt.msg {
				t.Errorf("body %s, want error %q message %q", r.body, tt.code, tt.msg)
			}
			if strings.Contains(string(r.body), "secret") || strings.Contains(string(r.body), "bug") {
				t.Errorf("internal details leaked: %s", r.body)
			}
			doc.validateSchema(t, "Error", r.body)
			doc.validateResponse(t, r)
		})
	}
}

// TestHead: HEAD is served wherever GET is, with GET's status and headers
// and no body.
func TestHead(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for path, want := range map[string]int{"/health": 200, "/regime": 200, "/candles?product=XYZ": 400, "/nope": 404, "/whales": 501} {
		r := s.do(t, "HEAD", path)
		if r.status != want || len(r.body) != 0 || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("HEAD %s: %d, %d body bytes, %q; want %d, none, application/json", path, r.status, len(r.body), r.header.Get("Content-Type"), want)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
