package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// servedDocument is /openapi.json as the gateway serves it, with two
// validators: libopenapi-validator (OpenAPI 3.1 documents and HTTP
// responses) and a JSON Schema 2020-12 compiler for single schemas.
type servedDocument struct {
	raw       map[string]any
	validator validator.Validator
	compiler  *jsonschema.Compiler
}

func loadServedDocument(t *testing.T, s *stack) *servedDocument {
	t.Helper()
	r := s.do(t, "GET", "/openapi.json")
	if r.status != 200 {
		t.Fatalf("/openapi.json: %d", r.status)
	}
	return parseDocument(t, r.body)
}

func parseDocument(t *testing.T, body []byte) *servedDocument {
	t.Helper()
	doc, err := libopenapi.NewDocument(body)
	if err != nil {
		t.Fatalf("libopenapi: %v", err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time and friends are checked, not just annotations
	if err := c.AddResource("openapi.json", raw); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return &servedDocument{raw: m, validator: v, compiler: c}
}

// validateSchema validates body against components.schemas[name].
func (d *servedDocument) validateSchema(t *testing.T, name string, body []byte) {
	t.Helper()
	sch, err := d.compiler.Compile("openapi.json#/components/schemas/" + name)
	if err != nil {
		t.Fatalf("compile schema %s: %v", name, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("body does not validate against %s: %v\n%s", name, err, body)
	}
}

// validateResponse validates a live response against its operation.
func (d *servedDocument) validateResponse(t *testing.T, r reply) {
	t.Helper()
	resp := *r.resp
	resp.Body = io.NopCloser(bytes.NewReader(r.body))
	resp.Request = r.req
	if ok, errs := d.validator.ValidateHttpResponse(r.req, &resp); !ok {
		for _, e := range errs {
			t.Errorf("%s %s -> %d: %s (%s)", r.req.Method, r.req.URL.Path, r.status, e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s at %s", se.Reason, se.FieldPath)
			}
		}
	}
}

func TestOpenAPIDocumentIsValid31(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	if ok, errs := doc.validator.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("%s: %s", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s at %s", se.Reason, se.FieldPath)
			}
		}
	}
	if v := doc.raw["openapi"]; v != "3.1.0" {
		t.Errorf("openapi = %v", v)
	}
	if v := doc.raw["info"].(map[string]any)["version"]; v != "1.0.0" {
		t.Errorf("info.version = %v", v)
	}
	servers := doc.raw["servers"].([]any)
	if len(servers) != 1 || servers[0].(map[string]any)["url"] != publicURL {
		t.Errorf("servers = %v, want the public URL", servers)
	}
	scheme := dig(t, doc.raw, "components", "securitySchemes", "x402").(map[string]any)
	if scheme["type"] != "apiKey" || scheme["in"] != "header" || scheme["name"] != "X-PAYMENT" {
		t.Errorf("x402 security scheme = %v", scheme)
	}
}

// TestOpenAPIOperations checks every path of SPEC §4, its price extension,
// its 402 response, its security and its parameter constraints.
func TestOpenAPIOperations(t *testing.T) {
	t.Parallel()
	doc := loadServedDocument(t, newStack(t))
	paid := map[string]string{
		"/candles": "0.02", "/rugcheck/{addr}": "0.10", "/whales": "0.15", "/signal": "0.20",
		"/signal-pack": "0.50", "/token/{addr}": "0.05", "/regime": "0.05", "/lanes": "0.05", "/forecast": "0.25",
	}
	free := []string{"/", "/health", "/tollgate", "/llms.txt", "/openapi.json", "/demo/{op}", "/.well-known/x402", "/.well-known/x402.json", "/metrics"}
	paths := doc.raw["paths"].(map[string]any)
	if len(paths) != len(paid)+len(free) {
		t.Errorf("%d paths, want %d", len(paths), len(paid)+len(free))
	}
	for path, price := range paid {
		op := dig(t, doc.raw, "paths", path, "get").(map[string]any)
		if op["x-price-usd"] != price {
			t.Errorf("%s x-price-usd = %v, want %s", path, op["x-price-usd"], price)
		}
		if dig(t, op, "x-payment-info", "price") != price {
			t.Errorf("%s x-payment-info.price != %s", path, price)
		}
		responses := op["responses"].(map[string]any)
		for _, code := range []string{"200", "400", "402", "500", "502", "503", "504"} {
			if _, ok := responses[code]; !ok {
				t.Errorf("%s has no %s response", path, code)
			}
		}
		sec, _ := op["security"].([]any)
		if len(sec) == 0 || sec[0].(map[string]any)["x402"] == nil {
			t.Errorf("%s security = %v", path, op["security"])
		}
	}
	for _, path := range free {
		op := dig(t, doc.raw, "paths", path, "get").(map[string]any)
		if _, ok := op["x-price-usd"]; ok {
			t.Errorf("free %s has a price", path)
		}
		if sec, ok := op["security"].([]any); !ok || len(sec) != 0 {
			t.Errorf("free %s security = %v, want []", path, op["security"])
		}
	}
	// Parameter constraints.
	param := func(path, name string) map[string]any {
		for _, p := range dig(t, doc.raw, "paths", path, "get", "parameters").([]any) {
			if p.(map[string]any)["name"] == name {
				return p.(map[string]any)
			}
		}
		t.Fatalf("%s has no parameter %s", path, name)
		return nil
	}
	for _, path := range []string{"/rugcheck/{addr}", "/token/{addr}"} {
		p := param(path, "addr")
		if p["in"] != "path" || p["required"] != true || dig(t, p, "schema", "pattern") != "^0x[0-9a-fA-F]{40}$" {
			t.Errorf("%s addr = %v", path, p)
		}
	}
	checks := []struct {
		path, name string
		enum       []any
		def        any
	}{
		{"/candles", "product", []any{"BTC-USD", "ETH-USD"}, "ETH-USD"},
		{"/candles", "granularity", []any{300.0, 900.0, 3600.0, 21600.0, 86400.0}, 3600.0},
		{"/signal", "product", []any{"ETH-USD"}, "ETH-USD"},
		{"/forecast", "product", []any{"BTC-USD", "ETH-USD", "RELIANCE.NS", "TCS.NS", "HDFCBANK.NS", "INFY.NS", "ICICIBANK.NS"}, "BTC-USD"},
		{"/demo/{op}", "op", []any{"rugcheck", "whales", "candles", "signal", "signal-pack", "regime", "token", "lanes", "forecast"}, nil},
	}
	for _, c := range checks {
		s := param(c.path, c.name)["schema"].(map[string]any)
		if got, _ := s["enum"].([]any); !slices.Equal(got, c.enum) {
			t.Errorf("%s %s enum = %v, want %v", c.path, c.name, got, c.enum)
		}
		if s["default"] != c.def {
			t.Errorf("%s %s default = %v, want %v", c.path, c.name, s["default"], c.def)
		}
	}
	pl := param("/forecast", "pred_len")["schema"].(map[string]any)
	if pl["type"] != "integer" || pl["minimum"] != 1.0 || pl["maximum"] != 48.0 || pl["default"] != 24.0 || pl["x-clamp"] != true {
		t.Errorf("pred_len schema = %v", pl)
	}
	payReq := dig(t, doc.raw, "components", "responses", "PaymentRequired").(map[string]any)
	if dig(t, payReq, "headers", "PAYMENT-REQUIRED") == nil || dig(t, payReq, "content", "application/json", "schema", "$ref") != "#/components/schemas/PaymentRequired" {
		t.Errorf("PaymentRequired response = %v", payReq)
	}
}

// specField is one row of a SPEC §2 table: the JSON type as the spec says
// ("number or null" is "number|null") and whether it is required there.
type specField struct {
	name, typ string
	required  bool
	enum      []string
}

// TestOpenAPICoversSpecRecords: every field, type, enum string and required
// flag of SPEC §2.1-2.9 is in the document (ours may require more: every
// field is always present, and every paid record carries asOf).
func TestOpenAPICoversSpecRecords(t *testing.T) {
	t.Parallel()
	doc := loadServedDocument(t, newStack(t))
	regimes := []string{"TREND-UP", "TREND-DOWN", "RANGE", "CHOP"}
	records := map[string][]specField{
		"GetCandlesResponse": {{"product", "string", true, nil}, {"granularity", "integer", false, nil}, {"count", "integer", false, nil},
			{"candles", "array", true, nil}, {"indicators", "object", false, nil}, {"asOf", "string", false, nil}},
		"Candle": {{"t", "integer", false, nil}, {"open", "number", false, nil}, {"high", "number", false, nil}, {"low", "number", false, nil},
			{"close", "number", false, nil}, {"volume", "number", false, nil}},
		"CandleIndicators": {{"regime", "string", false, []string{"trend", "range", "chop"}}, {"rsi", "number", false, nil},
			{"ema10", "number", false, nil}, {"ema30", "number", false, nil}},
		"GetRugCheckResponse": {{"token", "string", true, nil}, {"name", "string", false, nil}, {"symbol", "string", false, nil},
			{"verdict", "string", true, []string{"PASS", "WARN", "FAIL"}}, {"flags", "array", false, nil}, {"checks", "object", false, nil}, {"asOf", "string", false, nil}},
		"GetWhalesResponse": {{"asOf", "string", false, nil}, {"tokensScanned", "integer", false, nil}, {"wallets", "array", true, nil}},
		"WhaleWallet": {{"address", "string", false, nil}, {"score", "number", false, nil}, {"smartEntries", "integer", false, nil},
			{"tokensCrossed", "integer", false, nil}, {"earlyRate", "number", false, nil}, {"dodgeRate", "number", false, nil}, {"evidenceTokens", "array", false, nil}},
		"GetSignalResponse": {{"product", "string", false, nil}, {"gate", "string", true, []string{"GO", "NO-GO"}}, {"regime", "string", false, regimes},
			{"expectedReturnPct", "number|null", false, nil}, {"rsi", "number", false, nil}, {"emaGapPct", "number", false, nil},
			{"provenance", "object|null", false, nil}, {"asOf", "string", false, nil}},
		"GetSignalPackResponse": {{"product", "string", false, nil}, {"close", "number", false, nil}, {"components", "integer", false, nil},
			{"regime", "string", true, regimes}, {"rsi", "object", true, nil}, {"emaGap", "object", true, nil}, {"volatility", "object", true, nil},
			{"confidence", "object", true, nil}, {"inputs", "object", false, nil}, {"asOf", "string", false, nil}, {"disclaimer", "string", false, nil}},
		"RsiBlock":    {{"value", "number", false, nil}, {"delta3", "number", false, nil}, {"period", "integer", false, nil}},
		"EmaGapBlock": {{"pct", "number", false, nil}, {"slopePct", "number", false, nil}, {"ema10", "number", false, nil}, {"ema30", "number", false, nil}},
		"VolatilityBlock": {{"flag", "string", false, []string{"HIGH", "NORMAL", "LOW", "UNKNOWN"}}, {"realized24hPct", "number|null", false, nil},
			{"baselineMedianPct", "number|null", false, nil}, {"ratio", "number|null", false, nil}, {"baselineWindowHours", "integer", false, nil}},
		"ConfidenceBlock":  {{"score", "integer", false, nil}, {"max", "integer", false, nil}, {"agree", "array", false, nil}, {"disagree", "array", false, nil}},
		"GetTokenResponse": {{"token", "object", true, nil}, {"transfers", "object", false, nil}},
		"TokenInfo": {{"address", "string", false, nil}, {"name", "string", false, nil}, {"symbol", "string", false, nil},
			{"decimals", "integer", false, nil}, {"totalSupply", "string", false, nil}},
		"TokenTransfers": {{"windowBlocks", "integer", false, nil}, {"count", "integer", false, nil}, {"uniqueSenders", "integer", false, nil}, {"uniqueReceivers", "integer", false, nil}},
		"GetRegimeResponse": {{"regime", "string", true, regimes}, {"price", "number", false, nil}, {"ema10", "number", false, nil},
			{"ema30", "number", false, nil}, {"rsi14", "number", false, nil}, {"asOf", "string", false, nil}},
		"GetLanesResponse": {{"lanes", "object", true, nil}, {"totalCloses", "integer", false, nil}, {"chain", "string", false, nil},
			{"disclaimer", "string", false, nil}, {"asOf", "string", false, nil}},
		"LaneRecord": {{"closes", "integer", false, nil}, {"lastClose", "string|null", false, nil}},
		"GetForecastResponse": {{"product", "string", true, nil}, {"lastClose", "number", false, nil}, {"closes", "array", true, nil},
			{"expectedReturnPct", "number", false, nil}, {"predLen", "integer", false, nil}, {"cached", "boolean", false, nil}, {"asOf", "string", false, nil}},
	}
	schemas := dig(t, doc.raw, "components", "schemas").(map[string]any)
	for name, fields := range records {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		props := s["properties"].(map[string]any)
		required := map[string]bool{}
		for _, r := range s["required"].([]any) {
			required[r.(string)] = true
		}
		for _, f := range fields {
			p, ok := props[f.name].(map[string]any)
			if !ok {
				t.Errorf("%s has no field %s", name, f.name)
				continue
			}
			typ, enum := resolveType(t, schemas, p)
			if typ != f.typ {
				t.Errorf("%s.%s type %q, want %q", name, f.name, typ, f.typ)
			}
			if f.required && !required[f.name] {
				t.Errorf("%s.%s is required by the spec", name, f.name)
			}
			if f.enum != nil && !slices.Equal(enum, f.enum) {
				t.Errorf("%s.%s enum %q, want %q", name, f.name, enum, f.enum)
			}
		}
		if strings.HasPrefix(name, "Get") && !required["asOf"] {
			t.Errorf("%s: asOf must be required on every paid record", name)
		}
	}
	if lanes := dig(t, schemas, "GetLanesResponse", "properties", "lanes", "additionalProperties", "$ref"); lanes != "#/components/schemas/LaneRecord" {
		t.Errorf("lanes values = %v", lanes)
	}
	if score := dig(t, schemas, "ConfidenceBlock", "properties", "score").(map[string]any); score["minimum"] != 0.0 || score["maximum"] != 4.0 {
		t.Errorf("confidence.score bounds = %v", score)
	}
	if items := dig(t, schemas, "GetForecastResponse", "properties", "closes", "items", "type"); items != "number" {
		t.Errorf("closes items = %v", items)
	}
}

// resolveType returns a property's JSON type as "string", "number|null",
// "object|null", ... and its enum, following $ref and nullable oneOf.
func resolveType(t *testing.T, schemas map[string]any, p map[string]any) (string, []string) {
	t.Helper()
	if ref, ok := p["$ref"].(string); ok {
		return resolveType(t, schemas, schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any))
	}
	if alts, ok := p["oneOf"].([]any); ok {
		var types []string
		var enum []string
		for _, a := range alts {
			typ, e := resolveType(t, schemas, a.(map[string]any))
			types = append(types, typ)
			enum = append(enum, e...)
		}
		sort.Slice(types, func(i, j int) bool { return types[j] == "null" })
		return strings.Join(types, "|"), enum
	}
	var enum []string
	for _, e := range asSlice(p["enum"]) {
		enum = append(enum, fmt.Sprint(e))
	}
	switch typ := p["type"].(type) {
	case string:
		return typ, enum
	case []any:
		var parts []string
		for _, x := range typ {
			parts = append(parts, x.(string))
		}
		return strings.Join(parts, "|"), enum
	}
	t.Fatalf("no type in %v", p)
	return "", nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("dig %v: %q is not an object", path, k)
		}
		v = m[k]
	}
	return v
}

// TestValidatorsCatchDrift proves the validators used above can fail: a
// proto enum name, a missing required field, a string-typed integer and an
// int64-as-string are all refused.
func TestValidatorsCatchDrift(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	doc := loadServedDocument(t, s)
	bad := []struct{ schema, body string }{
		{"GetRegimeResponse", `{"regime":"REGIME_TREND_UP","price":1,"ema10":1,"ema30":1,"rsi14":1,"asOf":"2026-11-20T12:00:00Z","source":"x"}`},
		{"GetRegimeResponse", `{"regime":"RANGE","price":1,"ema10":1,"ema30":1,"rsi14":1,"asOf":"yesterday","source":"x"}`},
		{"GetRegimeResponse", `{"price":1,"ema10":1,"ema30":1,"rsi14":1,"asOf":"x"}`},
		{"Error", `{"error":"x","message":"y","status":"400","accepted":[]}`},
		{"GetWhalesResponse", `{"asOf":"x","tokensScanned":"184","wallets":[]}`},
		{"GetSignalResponse", `{"product":"ETH-USD","gate":"GO","regime":"RANGE","expectedReturnPct":"1","rsi":1,"emaGapPct":1,"provenance":null,"asOf":"x"}`},
	}
	for _, b := range bad {
		sch, err := doc.compiler.Compile("openapi.json#/components/schemas/" + b.schema)
		if err != nil {
			t.Fatal(err)
		}
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(b.body))
		if sch.Validate(inst) == nil {
			t.Errorf("%s accepted %s", b.schema, b.body)
		}
	}
	r := s.do(t, "GET", "/demo/regime")
	r.body = []byte(strings.Replace(string(r.body), `"TREND-UP"`, `"REGIME_TREND_UP"`, 1))
	resp := *r.resp
	resp.Body = io.NopCloser(bytes.NewReader(r.body))
	if ok, _ := doc.validator.ValidateHttpResponse(r.req, &resp); ok {
		t.Error("response validator accepted a proto enum name")
	}
}
