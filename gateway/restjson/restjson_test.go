package restjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/catalog"
)

var emitAll = protojson.MarshalOptions{EmitUnpopulated: true}

func testMarshaler() *Marshaler { return New(protoregistry.GlobalFiles, "tollgate.v1") }

// samples returns every demo record plus messages that exercise the corners
// of the mapping: unset optionals, null wrappers and messages, empty lists
// and maps, escapes, non-ASCII, extreme floats, int64, Struct.
func samples(t testing.TB) map[string]proto.Message {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	disc, err := service.NewDiscovery(service.DiscoveryConfig{PublicURL: "http://tollgate.test", Version: "test", MCPPath: "/mcp"}, cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]proto.Message{}
	for _, op := range cat.Paid() {
		demo, err := disc.GetDemo(context.Background(), &tollgatev1.GetDemoRequest{Op: op.Name})
		if err != nil {
			t.Fatal(err)
		}
		m := demo.ProtoReflect()
		out["demo "+op.Name] = m.Get(m.WhichOneof(m.Descriptor().Oneofs().ByName("sample"))).Message().Interface()
	}
	name := "tricky \"quoted\" \\ back\nnew\ttab \x01 \u2028 é 日本 \U0001F600 <&>"
	checks := &tollgatev1.RugChecks{Owner: &tollgatev1.OwnerInfo{}, Activity: &tollgatev1.TransferActivity{}}
	out["mostly empty rugcheck"] = &tollgatev1.GetRugCheckResponse{Verdict: tollgatev1.Verdict_VERDICT_PASS, Checks: checks}
	out["strings"] = &tollgatev1.GetRugCheckResponse{Token: name, Name: &name, Flags: []string{"", name}, Verdict: tollgatev1.Verdict_VERDICT_WARN, Checks: checks}
	out["floats"] = &tollgatev1.GetForecastResponse{Closes: []float64{0, -0.0, 1e-7, 1e21, 123456789.123, 5e-324, math.MaxFloat64, -1e-9, 0.1}}
	out["null wrappers"] = &tollgatev1.GetSignalResponse{Gate: tollgatev1.Gate_GATE_NO_GO, Regime: tollgatev1.Regime_REGIME_RANGE}
	out["set wrappers"] = &tollgatev1.GetSignalResponse{Gate: tollgatev1.Gate_GATE_GO, Regime: tollgatev1.Regime_REGIME_CHOP, ExpectedReturnPct: wrapperspb.Double(-0.25), Provenance: &tollgatev1.SignalProvenance{}}
	out["maps"] = &tollgatev1.GetLanesResponse{Lanes: map[string]*tollgatev1.LaneRecord{"b": {Closes: 1}, "a": {}, "": {LastClose: wrapperspb.String("x")}, "é": {}}}
	out["enum out of range"] = &tollgatev1.GetRegimeResponse{Regime: tollgatev1.Regime(42)}
	out["struct"] = &tollgatev1.PaymentRequirements{Extra: &tollgatev1.PaymentExtra{}, OutputSchema: mustStruct(t, map[string]any{"input": map[string]any{"type": "http", "method": "GET"}, "n": 1.5})}
	out["uint32 max"] = &tollgatev1.GetWhalesResponse{TokensScanned: math.MaxUint32}
	return out
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRESTJSONMatchesProtojson checks the marshaler against protojson
// (EmitUnpopulated): the same JSON value once protojson's enum names are
// mapped to their json_value strings.
func TestRESTJSONMatchesProtojson(t *testing.T) {
	t.Parallel()
	m := testMarshaler()
	for name, msg := range samples(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := m.Marshal(msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			ref, err := emitAll.Marshal(msg)
			if err != nil {
				t.Fatalf("protojson: %v", err)
			}
			want := rewriteEnums(decode(t, ref), msg.ProtoReflect().Descriptor())
			if !reflect.DeepEqual(decode(t, got), want) {
				t.Errorf("restjson:\n%s\nprotojson (enums mapped):\n%s", got, ref)
			}
		})
	}
}

// TestRESTJSONBytesWithoutEnums: with no enum to rewrite, the output is
// byte for byte protojson's, compacted.
func TestRESTJSONBytesWithoutEnums(t *testing.T) {
	t.Parallel()
	m := testMarshaler()
	for name, msg := range samples(t) {
		if hasEnum(msg.ProtoReflect().Descriptor(), map[protoreflect.FullName]bool{}) {
			continue
		}
		got, err := m.Marshal(msg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ref, _ := emitAll.Marshal(msg)
		var compact bytes.Buffer
		if err := json.Compact(&compact, ref); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, compact.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, compact.Bytes())
		}
	}
}

func TestRESTJSONKeyOrderFollowsFields(t *testing.T) {
	t.Parallel()
	msg := samples(t)["demo signal-pack"]
	got, err := testMarshaler().Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		tok, _ := dec.Token()
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"product", "close", "components", "regime", "rsi", "emaGap", "volatility", "confidence", "inputs", "asOf", "disclaimer"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %q, want %q", keys, want)
	}
}

func TestRESTJSONEnumStrings(t *testing.T) {
	t.Parallel()
	m := testMarshaler()
	tests := []struct {
		msg  proto.Message
		want string
	}{
		{&tollgatev1.GetSignalResponse{Gate: tollgatev1.Gate_GATE_NO_GO, Regime: tollgatev1.Regime_REGIME_RANGE}, `"gate":"NO-GO"`},
		{&tollgatev1.GetRegimeResponse{Regime: tollgatev1.Regime_REGIME_TREND_DOWN}, `"regime":"TREND-DOWN"`},
		{&tollgatev1.GetRugCheckResponse{Verdict: tollgatev1.Verdict_VERDICT_PASS, Checks: &tollgatev1.RugChecks{Owner: &tollgatev1.OwnerInfo{}, Activity: &tollgatev1.TransferActivity{}}}, `"verdict":"PASS"`},
		{&tollgatev1.VolatilityBlock{Flag: tollgatev1.VolatilityFlag_VOLATILITY_FLAG_UNKNOWN}, `"flag":"UNKNOWN"`},
		{&tollgatev1.CandleIndicators{Regime: tollgatev1.CandleRegime_CANDLE_REGIME_CHOP}, `"regime":"chop"`},
		{&tollgatev1.ProxyInfo{Kind: tollgatev1.ProxyKind_PROXY_KIND_EIP1967_BEACON}, `"kind":"eip1967-beacon"`},
	}
	for _, tt := range tests {
		got, err := m.Marshal(tt.msg)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(got, []byte(tt.want)) {
			t.Errorf("%s does not contain %s", got, tt.want)
		}
	}
}

func TestRESTJSONRefusesNonFinite(t *testing.T) {
	t.Parallel()
	m := testMarshaler()
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := m.Marshal(&tollgatev1.GetRegimeResponse{Regime: tollgatev1.Regime_REGIME_CHOP, Price: v})
		if !errors.Is(err, errNotFinite) {
			t.Errorf("Marshal(price %v) error = %v, want errNotFinite", v, err)
		}
	}
	if _, err := m.Marshal(&tollgatev1.GetRugCheckResponse{Token: "\xff"}); !errors.Is(err, errInvalidUTF8) {
		t.Errorf("invalid UTF-8: error = %v", err)
	}
}

// TestRESTJSONRefusesWhatTheDocumentForbids: an unset message that is not
// nullable would be null, and an enum at its zero would be a proto name;
// both are handler bugs, answered 500 (never charged) rather than sent.
func TestRESTJSONRefusesWhatTheDocumentForbids(t *testing.T) {
	t.Parallel()
	m := testMarshaler()
	for name, msg := range map[string]proto.Message{
		"unset indicators": &tollgatev1.GetCandlesResponse{},
		"unset verdict":    &tollgatev1.GetRugCheckResponse{Checks: &tollgatev1.RugChecks{Owner: &tollgatev1.OwnerInfo{}, Activity: &tollgatev1.TransferActivity{}}},
		"unset gate":       &tollgatev1.GetSignalResponse{Regime: tollgatev1.Regime_REGIME_RANGE},
		"unset in a list":  &tollgatev1.GetRugCheckResponse{Verdict: tollgatev1.Verdict_VERDICT_PASS, Checks: &tollgatev1.RugChecks{Owner: &tollgatev1.OwnerInfo{}, Activity: &tollgatev1.TransferActivity{}, Capabilities: []*tollgatev1.Capability{{}}}},
	} {
		if _, err := m.Marshal(msg); !errors.Is(err, errUnsetField) {
			t.Errorf("%s: error = %v, want errUnsetField", name, err)
		}
	}
	ok := &tollgatev1.GetSignalResponse{Gate: tollgatev1.Gate_GATE_GO, Regime: tollgatev1.Regime_REGIME_RANGE}
	if out, err := m.Marshal(ok); err != nil || !bytes.Contains(out, []byte(`"provenance":null`)) {
		t.Errorf("nullable provenance: %s, %v", out, err)
	}
}

func TestRESTJSONHTTPBody(t *testing.T) {
	t.Parallel()
	m := testMarshaler()
	body := &httpbody.HttpBody{ContentType: "text/plain; charset=utf-8", Data: []byte("hello")}
	if ct := m.ContentType(body); ct != "text/plain; charset=utf-8" {
		t.Errorf("ContentType = %q", ct)
	}
	if ct := m.ContentType(&tollgatev1.GetHealthResponse{}); ct != "application/json" {
		t.Errorf("ContentType = %q", ct)
	}
	out, err := m.Marshal(body)
	if err != nil || string(out) != "hello" {
		t.Errorf("Marshal(HttpBody) = %q, %v", out, err)
	}
}

// BenchmarkMarshal compares the REST marshaler with plain protojson
// (EmitUnpopulated) on the demo records; the target is at most 1.3x
// protojson's time.
func BenchmarkMarshal(b *testing.B) {
	all := samples(b)
	big := &tollgatev1.GetCandlesResponse{Product: "ETH-USD", Granularity: 3600, Indicators: &tollgatev1.CandleIndicators{Regime: tollgatev1.CandleRegime_CANDLE_REGIME_RANGE}}
	for i := range 300 {
		f := 3400 + float64(i)*0.37
		big.Candles = append(big.Candles, &tollgatev1.Candle{T: uint32(1795154400 + 3600*i), Open: f, High: f + 5.25, Low: f - 4.5, Close: f + 1.125, Volume: 1843.21 + float64(i)})
	}
	big.Count = int32(len(big.Candles))
	cases := []struct {
		name string
		msg  proto.Message
	}{
		{"signal-pack", all["demo signal-pack"]},
		{"rugcheck", all["demo rugcheck"]},
		{"candles-300", big},
	}
	m := testMarshaler()
	for _, c := range cases {
		b.Run(c.name+"/protojson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := emitAll.Marshal(c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/restjson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Marshal(c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// rewriteEnums maps protojson's enum names in v (a decoded message of md)
// to their json_value strings.
func rewriteEnums(v any, md protoreflect.MessageDescriptor) any {
	obj, ok := v.(map[string]any)
	if !ok || md.FullName().Parent() == "google.protobuf" {
		return v
	}
	for i := 0; i < md.Fields().Len(); i++ {
		fd := md.Fields().Get(i)
		val, ok := obj[fd.JSONName()]
		if !ok {
			continue
		}
		one := func(x any, fd protoreflect.FieldDescriptor) any {
			switch {
			case fd.Enum() != nil:
				if s, ok := x.(string); ok {
					return catalog.JSONValue(fd.Enum().Values().ByName(protoreflect.Name(s)))
				}
				return x
			case fd.Message() != nil:
				return rewriteEnums(x, fd.Message())
			}
			return x
		}
		switch {
		case fd.IsMap():
			if mv, ok := val.(map[string]any); ok {
				for k, x := range mv {
					mv[k] = one(x, fd.MapValue())
				}
			}
		case fd.IsList():
			if lv, ok := val.([]any); ok {
				for i, x := range lv {
					lv[i] = one(x, fd)
				}
			}
		default:
			obj[fd.JSONName()] = one(val, fd)
		}
	}
	return obj
}

func hasEnum(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	for i := 0; i < md.Fields().Len(); i++ {
		fd := md.Fields().Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Enum() != nil || fd.Message() != nil && hasEnum(fd.Message(), seen) {
			return true
		}
	}
	return false
}
