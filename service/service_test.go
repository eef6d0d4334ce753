package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/gen/openapi"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/catalog"
)

var discard = slog.New(slog.DiscardHandler)

func TestGRPCError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		err      error
		code     codes.Code
		msg      string
		param    string
		accepted []string
	}{
		{"param", &catalog.ParamError{Param: "product", Problem: `has unsupported value "X"`, Accepted: []string{"BTC-USD", "ETH-USD"}},
			codes.InvalidArgument, `parameter "product" has unsupported value "X"; accepted: BTC-USD, ETH-USD`, "product", []string{"BTC-USD", "ETH-USD"}},
		{"wrapped param", fmt.Errorf("check: %w", &catalog.ParamError{Param: "addr", Problem: "bad"}), codes.InvalidArgument, `parameter "addr" bad`, "addr", nil},
		{"path value outside set", &catalog.ParamError{Param: "op", Problem: "x", Accepted: []string{"a"}, NotFound: true}, codes.NotFound, `parameter "op" x; accepted: a`, "op", []string{"a"}},
		{"deadline", fmt.Errorf("upstream: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "deadline exceeded", "", nil},
		{"canceled", context.Canceled, codes.Canceled, "request canceled", "", nil},
		{"status passes through", status.Error(codes.Unavailable, "feed down"), codes.Unavailable, "feed down", "", nil},
		{"anything else is internal", errors.New("secret database password in here"), codes.Internal, internalMessage, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := status.Convert(grpcError(context.Background(), discard, tt.err))
			if st.Code() != tt.code || st.Message() != tt.msg {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tt.code, tt.msg)
			}
			var detail *tollgatev1.Error
			for _, d := range st.Details() {
				detail, _ = d.(*tollgatev1.Error)
			}
			if detail.GetParam() != tt.param || fmt.Sprint(detail.GetAccepted()) != fmt.Sprint(tt.accepted) {
				t.Errorf("detail = %v, want param %q accepted %q", detail, tt.param, tt.accepted)
			}
		})
	}
	if grpcError(context.Background(), discard, nil) != nil {
		t.Error("grpcError(nil) != nil")
	}
}

// chain runs req through the interceptors into h, as the gRPC server does.
func runChain(t *testing.T, method string, req any, h grpc.UnaryHandler) (any, error) {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	ics := Interceptors(cat, discard)
	info := &grpc.UnaryServerInfo{FullMethod: method}
	next := h
	for i := len(ics) - 1; i >= 0; i-- {
		ic, inner := ics[i], next
		next = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, inner) }
	}
	return next(context.Background(), req)
}

func TestInterceptorsCheckBeforeTheHandler(t *testing.T) {
	t.Parallel()
	called := false
	_, err := runChain(t, "/tollgate.v1.AnalyticsService/GetCandles", &tollgatev1.GetCandlesRequest{Granularity: ptr(int32(60))},
		func(context.Context, any) (any, error) { called = true; return nil, nil })
	if status.Code(err) != codes.InvalidArgument || called {
		t.Errorf("err %v, handler called %v", err, called)
	}
	var seen *tollgatev1.GetForecastRequest
	_, err = runChain(t, "/tollgate.v1.AnalyticsService/GetForecast", &tollgatev1.GetForecastRequest{PredLen: ptr(int32(100))},
		func(_ context.Context, req any) (any, error) {
			seen = req.(*tollgatev1.GetForecastRequest)
			return nil, nil
		})
	if err != nil || seen.GetPredLen() != 48 || seen.GetProduct() != "BTC-USD" {
		t.Errorf("handler saw %v (err %v), want pred_len clamped to 48 and the default product", seen, err)
	}
}

func TestInterceptorsRecoverPanics(t *testing.T) {
	t.Parallel()
	_, err := runChain(t, "/tollgate.v1.AnalyticsService/GetRegime", &tollgatev1.GetRegimeRequest{},
		func(context.Context, any) (any, error) { panic("boom") })
	if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != internalMessage {
		t.Errorf("panic became %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"http://localhost:8402": true, "https://api.example.com/x402/": true,
		"": false, "localhost:8402": false, "ftp://x": false, "https://": false, "https://x?y=1": false,
	} {
		err := DiscoveryConfig{PublicURL: url, Version: "v", MCPPath: "/mcp"}.Validate()
		if (err == nil) != ok {
			t.Errorf("Validate(%q) = %v", url, err)
		}
	}
	if err := (DiscoveryConfig{PublicURL: "http://x"}).Validate(); err == nil {
		t.Error("empty version accepted")
	}
}

func newDiscovery(t *testing.T, base string) *Discovery {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDiscovery(DiscoveryConfig{PublicURL: base, Version: "v1.2.3", MCPPath: "/mcp"}, cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDiscoveryCatalogs(t *testing.T) {
	t.Parallel()
	d := newDiscovery(t, "https://api.example.com/")
	ctx := context.Background()
	proj, _ := d.GetProject(ctx, nil)
	if len(proj.GetPaid()) != 9 || proj.GetBaseUrl() != "https://api.example.com" || proj.GetApiVersion() != "1.0.0" {
		t.Fatalf("project = %v", proj)
	}
	fc := proj.GetPaid()[8]
	if fc.GetName() != "forecast" || fc.GetPriceUsd() != "0.25" || fc.GetUrl() != "https://api.example.com/forecast" ||
		fc.GetDemo() != "https://api.example.com/demo/forecast" || len(fc.GetParameters()) != 2 {
		t.Errorf("forecast entry = %v", fc)
	}
	pl := fc.GetParameters()[1]
	if pl.GetName() != "pred_len" || pl.GetType() != "integer" || pl.GetMinimum() != 1 || pl.GetMaximum() != 48 || !pl.GetClamp() || pl.GetDefault() != "24" {
		t.Errorf("pred_len = %v", pl)
	}
	x, _ := d.GetX402Discovery(ctx, nil)
	if len(x.GetResources()) != 9 || x.GetResources()[1] != "https://api.example.com/rugcheck/{addr}" || x.GetItems()[4].GetPriceUsd() != "0.50" {
		t.Errorf("x402 discovery = %v", x)
	}
	m, _ := d.GetMetrics(ctx, nil)
	if len(m.GetEndpoints()) != 9 || m.GetTotals().GetConversion() != nil || m.GetTotals().GetPaid() != 0 {
		t.Errorf("metrics = %v", m)
	}
	llms, _ := d.GetLlmsTxt(ctx, nil)
	text := string(llms.GetBody().GetData())
	for _, want := range []string{"# Tollgate", "[GET /signal-pack](https://api.example.com/signal-pack): 0.50 USD", "addr (path, required) matching ^0x[0-9a-fA-F]{40}$", "## How to pay", "[GET /.well-known/x402.json]"} {
		if !strings.Contains(text, want) {
			t.Errorf("llms.txt lacks %q", want)
		}
	}
	if ct := llms.GetBody().GetContentType(); ct != "text/plain; charset=utf-8" {
		t.Errorf("llms.txt content type %q", ct)
	}
}

func TestServedOpenAPIKeepsOrderAndSetsServer(t *testing.T) {
	t.Parallel()
	doc, version, err := servedOpenAPI(openapi.Document(), "https://api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if version != "1.0.0" {
		t.Errorf("version %q", version)
	}
	if !bytes.HasPrefix(doc, []byte(`{"openapi":"3.1.0","info":`)) {
		t.Errorf("key order changed: %.60s", doc)
	}
	var m struct {
		Servers []struct{ URL string }
		Paths   map[string]any
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Servers) != 1 || m.Servers[0].URL != "https://api.example.com" || len(m.Paths) != 18 {
		t.Errorf("servers %v, %d paths", m.Servers, len(m.Paths))
	}
	if _, _, err := servedOpenAPI([]byte(`[1]`), "x"); err == nil {
		t.Error("accepted a non-object document")
	}
}

func TestDemosCoverEveryPaidRecord(t *testing.T) {
	t.Parallel()
	d := newDiscovery(t, "http://localhost:8402")
	cat, _ := catalog.Load()
	for _, op := range cat.Paid() {
		demo, err := d.GetDemo(context.Background(), &tollgatev1.GetDemoRequest{Op: op.Name})
		if err != nil {
			t.Fatalf("%s: %v", op.Name, err)
		}
		m := demo.ProtoReflect()
		fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("sample"))
		if fd == nil || fd.Message().FullName() != op.Method.Output().FullName() {
			t.Errorf("demo %s holds %v, want a %s", op.Name, fd, op.Method.Output().FullName())
		}
	}
}

func ptr[T any](v T) *T { return &v }

// fixedCounters serves /metrics fixed counters.
type fixedCounters struct {
	ops        map[string]OpCounters
	unresolved int
	oldest     time.Time
}

func (f fixedCounters) Counters(context.Context) (map[string]OpCounters, error) { return f.ops, nil }
func (f fixedCounters) Unresolved(context.Context) (int, time.Time, error) {
	return f.unresolved, f.oldest, nil
}

// TestMetricsConversion: conversion is paid / challenges, capped at 1 when
// payers pay without a 402 first (paid / max(challenges, paid));
// unresolved settlements are counted with the age of the oldest.
func TestMetricsConversion(t *testing.T) {
	t.Parallel()
	cat, _ := catalog.Load()
	d, err := NewDiscovery(DiscoveryConfig{PublicURL: "https://api.example.com", Version: "v1", MCPPath: "/mcp"}, cat, fixedCounters{
		ops: map[string]OpCounters{
			"regime":  {Challenges: 0, Paid: 7, RevenueUSD: "0.35"}, // paid without ever asking for a 402
			"candles": {Challenges: 3, Paid: 1, RevenueUSD: "0.02"},
		},
		unresolved: 2, oldest: time.Now().Add(-90 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.GetMetrics(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tollgatev1.EndpointCounters{}
	for _, e := range m.GetEndpoints() {
		got[e.GetName()] = e
	}
	if c := got["regime"].GetConversion(); c == nil || c.GetValue() != 1 {
		t.Errorf("regime conversion %v, want 1", c)
	}
	if c := got["candles"].GetConversion(); c == nil || c.GetValue() != 1.0/3 {
		t.Errorf("candles conversion %v, want 1/3", c)
	}
	if got["whales"].GetConversion() != nil {
		t.Errorf("whales conversion %v, want null before any call", got["whales"].GetConversion())
	}
	if c := m.GetTotals().GetConversion().GetValue(); c != 1 || m.GetTotals().GetRevenueUsd() != "0.37" {
		t.Errorf("totals %v", m.GetTotals())
	}
	s := m.GetSettlements()
	if s.GetUnresolved() != 2 || s.GetOldestUnresolvedAgeSeconds() == nil || s.GetOldestUnresolvedAgeSeconds().GetValue() < 89 {
		t.Errorf("settlements %v", s)
	}
}
