package catalog_test

import (
	"errors"
	"net/url"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/catalog"
)

func load(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cat
}

// TestPaidOperationsMatchSpec pins the paid paths and prices of SPEC §4.1.
func TestPaidOperationsMatchSpec(t *testing.T) {
	t.Parallel()
	want := []struct{ name, path, price string }{
		{"candles", "/candles", "0.02"},
		{"rugcheck", "/rugcheck/{addr}", "0.10"},
		{"whales", "/whales", "0.15"},
		{"signal", "/signal", "0.20"},
		{"signal-pack", "/signal-pack", "0.50"},
		{"token", "/token/{addr}", "0.05"},
		{"regime", "/regime", "0.05"},
		{"lanes", "/lanes", "0.05"},
		{"forecast", "/forecast", "0.25"},
	}
	paid := load(t).Paid()
	if len(paid) != len(want) {
		t.Fatalf("got %d paid operations, want %d", len(paid), len(want))
	}
	for i, w := range want {
		op := paid[i]
		if op.Name != w.name || op.Path() != w.path || op.PriceUSD != w.price || op.HTTPMethod != "GET" {
			t.Errorf("paid[%d] = %s GET %s %s, want %s GET %s %s", i, op.Name, op.Path(), op.PriceUSD, w.name, w.path, w.price)
		}
	}
}

// TestFreeOperationsMatchSpec pins the free paths of SPEC §4.2.
func TestFreeOperationsMatchSpec(t *testing.T) {
	t.Parallel()
	var got []string
	for _, op := range load(t).Operations() {
		if op.Paid() {
			continue
		}
		got = append(got, op.Paths...)
	}
	want := []string{"/", "/health", "/tollgate", "/llms.txt", "/openapi.json", "/demo/{op}", "/.well-known/x402", "/.well-known/x402.json", "/metrics"}
	if !slices.Equal(got, want) {
		t.Errorf("free paths = %q, want %q", got, want)
	}
}

func TestCheckHTTP(t *testing.T) {
	t.Parallel()
	cat := load(t)
	const addr = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
	tests := []struct {
		name     string
		op       string
		path     map[string]string
		query    string
		wantErr  string // offending parameter, "" for success
		notFound bool
		accepted []string
		wantQ    string // normalized query on success
	}{
		{name: "candles defaults", op: "candles", wantQ: ""},
		{name: "candles ok", op: "candles", query: "product=BTC-USD&granularity=300", wantQ: "granularity=300&product=BTC-USD"},
		{name: "unknown product", op: "candles", query: "product=DOGE-USD", wantErr: "product", accepted: []string{"BTC-USD", "ETH-USD"}},
		{name: "lowercase product", op: "candles", query: "product=eth-usd", wantErr: "product"},
		{name: "empty product", op: "candles", query: "product=", wantErr: "product"},
		{name: "granularity not in set", op: "candles", query: "granularity=60", wantErr: "granularity", accepted: []string{"300", "900", "3600", "21600", "86400"}},
		{name: "granularity not integer", op: "candles", query: "granularity=1h", wantErr: "granularity"},
		{name: "repeated parameter", op: "candles", query: "product=ETH-USD&product=BTC-USD", wantErr: "product"},
		{name: "unknown parameter on paid op", op: "candles", query: "symbol=BTC-USD", wantErr: "symbol", accepted: []string{"product", "granularity"}},
		{name: "parameter on op without any", op: "whales", query: "limit=5", wantErr: "limit"},
		{name: "address ok", op: "rugcheck", path: map[string]string{"addr": addr}},
		{name: "address lowercase ok", op: "token", path: map[string]string{"addr": "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"}},
		{name: "address short", op: "rugcheck", path: map[string]string{"addr": "0x1234"}, wantErr: "addr"},
		{name: "address no prefix", op: "token", path: map[string]string{"addr": "833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}, wantErr: "addr"},
		{name: "address bad hex", op: "token", path: map[string]string{"addr": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA0291g"}, wantErr: "addr"},
		{name: "signal only ETH", op: "signal", query: "product=BTC-USD", wantErr: "product", accepted: []string{"ETH-USD"}},
		{name: "forecast equity", op: "forecast", query: "product=INFY.NS", wantQ: "product=INFY.NS"},
		{name: "forecast unknown equity", op: "forecast", query: "product=WIPRO.NS", wantErr: "product"},
		{name: "pred_len in range", op: "forecast", query: "pred_len=12", wantQ: "pred_len=12"},
		{name: "pred_len clamped high", op: "forecast", query: "pred_len=1000", wantQ: "pred_len=48"},
		{name: "pred_len clamped low", op: "forecast", query: "pred_len=-3", wantQ: "pred_len=1"},
		{name: "pred_len huge clamped", op: "forecast", query: "pred_len=99999999999999999999999", wantQ: "pred_len=48"},
		{name: "pred_len plus sign", op: "forecast", query: "pred_len=%2B7", wantQ: "pred_len=7"},
		{name: "pred_len fraction", op: "forecast", query: "pred_len=1.5", wantErr: "pred_len"},
		{name: "pred_len word", op: "forecast", query: "pred_len=ten", wantErr: "pred_len"},
		{name: "pred_len camel case is not the parameter", op: "forecast", query: "predLen=5", wantErr: "predLen"},
		{name: "demo op ok", op: "demo", path: map[string]string{"op": "signal-pack"}},
		{name: "demo op unknown is not found", op: "demo", path: map[string]string{"op": "nope"}, wantErr: "op", notFound: true},
		{name: "free op ignores unknown query", op: "health", query: "nocache=1", wantQ: "nocache=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, ok := cat.ByName(tt.op)
			if !ok {
				t.Fatalf("no operation %q", tt.op)
			}
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := op.CheckHTTP(func(n string) string { return tt.path[n] }, q)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckHTTP: %v", err)
				}
				if got.Encode() != tt.wantQ {
					t.Errorf("normalized query = %q, want %q", got.Encode(), tt.wantQ)
				}
				return
			}
			var pe *catalog.ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a *ParamError", err)
			}
			if pe.Param != tt.wantErr || pe.NotFound != tt.notFound {
				t.Errorf("ParamError{Param: %q, NotFound: %v}, want {%q, %v}", pe.Param, pe.NotFound, tt.wantErr, tt.notFound)
			}
			if tt.accepted != nil && !slices.Equal(pe.Accepted, tt.accepted) {
				t.Errorf("Accepted = %q, want %q", pe.Accepted, tt.accepted)
			}
		})
	}
}

// TestCheckArguments: a tool call's arguments come back as the request
// the service runs, as text: addresses checksummed whatever their case,
// integers clamped, the defaults of absent (or null) parameters written,
// so spellings of one call are one set of values; an enum value in
// another case is no spelling of it but a refusal.
func TestCheckArguments(t *testing.T) {
	t.Parallel()
	cat := load(t)
	const checksummed = "addr=0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
	tests := []struct {
		name    string
		op      string
		args    string
		want    string // the normalized arguments, encoded
		wantErr string // offending parameter, "" for success
	}{
		{name: "address lowercase", op: "rugcheck", args: `{"addr":"0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"}`, want: checksummed},
		{name: "address uppercase", op: "rugcheck", args: `{"addr":"0x833589FCD6EDB6E08F4C7C32D4F71B54BDA02913"}`, want: checksummed},
		{name: "address checksummed", op: "rugcheck", args: `{"addr":"0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}`, want: checksummed},
		{name: "every address parameter", op: "token", args: `{"addr":"0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"}`, want: checksummed},
		{name: "address short", op: "rugcheck", args: `{"addr":"0x833589fcd6"}`, wantErr: "addr"},
		{name: "address missing", op: "token", args: `{}`, wantErr: "addr"},
		{name: "defaults written", op: "candles", args: `{}`, want: "granularity=3600&product=ETH-USD"},
		{name: "defaults given", op: "candles", args: `{"product":"ETH-USD","granularity":3600}`, want: "granularity=3600&product=ETH-USD"},
		{name: "null is the default", op: "forecast", args: `{"pred_len":null}`, want: "pred_len=24&product=BTC-USD"},
		{name: "clamped", op: "forecast", args: `{"pred_len":500}`, want: "pred_len=48&product=BTC-USD"},
		{name: "at the bound", op: "forecast", args: `{"pred_len":48,"product":"BTC-USD"}`, want: "pred_len=48&product=BTC-USD"},
		{name: "minus zero", op: "forecast", args: `{"pred_len":-0}`, want: "pred_len=1&product=BTC-USD"},
		{name: "enum in another case", op: "forecast", args: `{"product":"btc-usd"}`, wantErr: "product"},
		{name: "no parameters", op: "regime", args: ``, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, ok := cat.ByName(tt.op)
			if !ok {
				t.Fatalf("no operation %q", tt.op)
			}
			got, err := op.CheckArguments([]byte(tt.args))
			if tt.wantErr != "" {
				var pe *catalog.ParamError
				if !errors.As(err, &pe) || pe.Param != tt.wantErr {
					t.Fatalf("CheckArguments(%s) = %v, %v; want a ParamError for %q", tt.args, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Encode() != tt.want {
				t.Errorf("CheckArguments(%s) = %q, %v; want %q", tt.args, got.Encode(), err, tt.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	cat := load(t)
	str := proto.String
	i32 := proto.Int32
	tests := []struct {
		name    string
		op      string
		req     proto.Message
		want    proto.Message
		wantErr string
	}{
		{name: "candles defaults", op: "candles", req: &tollgatev1.GetCandlesRequest{},
			want: &tollgatev1.GetCandlesRequest{Product: str("ETH-USD"), Granularity: i32(3600)}},
		{name: "candles explicit", op: "candles", req: &tollgatev1.GetCandlesRequest{Product: str("BTC-USD"), Granularity: i32(86400)},
			want: &tollgatev1.GetCandlesRequest{Product: str("BTC-USD"), Granularity: i32(86400)}},
		{name: "explicit zero granularity is refused", op: "candles", req: &tollgatev1.GetCandlesRequest{Granularity: i32(0)}, wantErr: "granularity"},
		{name: "forecast defaults", op: "forecast", req: &tollgatev1.GetForecastRequest{},
			want: &tollgatev1.GetForecastRequest{Product: str("BTC-USD"), PredLen: i32(24)}},
		{name: "forecast clamps", op: "forecast", req: &tollgatev1.GetForecastRequest{PredLen: i32(500)},
			want: &tollgatev1.GetForecastRequest{Product: str("BTC-USD"), PredLen: i32(48)}},
		{name: "forecast clamps zero", op: "forecast", req: &tollgatev1.GetForecastRequest{Product: str("TCS.NS"), PredLen: i32(0)},
			want: &tollgatev1.GetForecastRequest{Product: str("TCS.NS"), PredLen: i32(1)}},
		{name: "signal default", op: "signal", req: &tollgatev1.GetSignalRequest{},
			want: &tollgatev1.GetSignalRequest{Product: str("ETH-USD")}},
		{name: "rugcheck empty address", op: "rugcheck", req: &tollgatev1.GetRugCheckRequest{}, wantErr: "addr"},
		{name: "address checksummed", op: "token", req: &tollgatev1.GetTokenRequest{Addr: "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"},
			want: &tollgatev1.GetTokenRequest{Addr: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}},
		{name: "wrong message", op: "rugcheck", req: &tollgatev1.GetTokenRequest{Addr: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}, wantErr: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			op, _ := cat.ByName(tt.op)
			err := op.Apply(tt.req)
			if tt.wantErr != "" {
				var pe *catalog.ParamError
				switch {
				case err == nil:
					t.Fatal("Apply succeeded, want an error")
				case tt.wantErr == "-":
				case !errors.As(err, &pe) || pe.Param != tt.wantErr:
					t.Fatalf("Apply: %v, want a ParamError for %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !proto.Equal(tt.req, tt.want) {
				t.Errorf("after Apply: %v, want %v", tt.req, tt.want)
			}
		})
	}
}

func TestByFullMethod(t *testing.T) {
	t.Parallel()
	op, ok := load(t).ByFullMethod("/tollgate.v1.AnalyticsService/GetSignalPack")
	if !ok || op.Name != "signal-pack" {
		t.Fatalf("ByFullMethod = %v, %v", op, ok)
	}
	if op.FullMethod() != "/tollgate.v1.AnalyticsService/GetSignalPack" {
		t.Errorf("FullMethod = %q", op.FullMethod())
	}
}

func TestJSONValue(t *testing.T) {
	t.Parallel()
	ev := tollgatev1.Gate_GATE_NO_GO.Descriptor().Values().ByNumber(tollgatev1.Gate_GATE_NO_GO.Number())
	if got := catalog.JSONValue(ev); got != "NO-GO" {
		t.Errorf("JSONValue(GATE_NO_GO) = %q, want NO-GO", got)
	}
	un := tollgatev1.Gate_GATE_UNSPECIFIED.Descriptor().Values().ByNumber(0)
	if got := catalog.JSONValue(un); got != "GATE_UNSPECIFIED" {
		t.Errorf("JSONValue(GATE_UNSPECIFIED) = %q, want the proto name", got)
	}
}
