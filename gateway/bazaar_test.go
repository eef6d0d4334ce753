package gateway_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate/tollgate/gateway"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
	"github.com/tollgate/tollgate/service/catalog"
)

// maxChallengeHeader bounds the PAYMENT-REQUIRED header: Node's HTTP
// parser (the official @x402/fetch clients) and HAProxy's default buffer
// refuse a response whose headers pass 16 KiB in all; this leaves 4 KiB
// for the others.
const maxChallengeHeader = 12 << 10

// challenge is an unpaid call's 402, decoded.
type challenge struct {
	header int // length of PAYMENT-REQUIRED
	v2     map[string]any
	v1     map[string]any
}

// paidServer is the real gate, with the catalog's routes, in front of the
// gateway.
func paidServer(t *testing.T, s *stack) *httptest.Server {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	gate, err := payment.NewGate(payment.GateConfig{
		PublicURL: publicURL, Network: "eip155:8453", NetworkV1: "base", ChainID: big.NewInt(8453),
		Asset: common.HexToAddress(usdc), AssetName: "USD Coin", AssetVersion: "2", Decimals: 6,
		PayTo: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"), MaxTimeout: 300, Schemes: []payment.Scheme{challengeOnly(t)},
	}, gateway.PaidRoutes(cat), nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gate.Handler(s.handler))
	t.Cleanup(srv.Close)
	return srv
}

func getChallenge(t *testing.T, url string) challenge {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	h := resp.Header.Get("PAYMENT-REQUIRED")
	raw, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	c := challenge{header: len(h)}
	if err := json.Unmarshal(raw, &c.v2); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &c.v1); err != nil {
		t.Fatal(err)
	}
	return c
}

// exampleURL is op's primary path with each path parameter set to its
// declared example.
func exampleURL(t *testing.T, op *catalog.Operation) string {
	t.Helper()
	path := op.Path()
	for _, p := range op.Params {
		if p.In == catalog.InPath {
			if p.Rule.GetExample() == "" {
				t.Fatalf("%s: path parameter %s has no example", op.Name, p.Name)
			}
			path = strings.ReplaceAll(path, "{"+p.Name+"}", p.Rule.GetExample())
		}
	}
	return path
}

// at walks v along keys of nested objects; nil when a key is missing.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func keys(v any) []string {
	m, _ := v.(map[string]any)
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// wantProperty is the JSON Schema property the protos declare for p.
func wantProperty(p catalog.Param) map[string]any {
	want := map[string]any{"type": "string"}
	typed := func(s string) any { return s }
	if p.Integer() {
		want["type"] = "integer"
		typed = func(s string) any { n, _ := strconv.Atoi(s); return float64(n) }
	}
	if acc := p.Accepted(); len(acc) > 0 {
		var enum []any
		for _, v := range acc {
			enum = append(enum, typed(v))
		}
		want["enum"] = enum
	}
	if s := p.Rule.GetPattern(); s != "" {
		want["pattern"] = s
	}
	if p.Rule.Minimum != nil {
		want["minimum"] = float64(p.Rule.GetMinimum())
	}
	if p.Rule.Maximum != nil {
		want["maximum"] = float64(p.Rule.GetMaximum())
	}
	if p.Rule.GetClamp() {
		want["x-clamp"] = true
	}
	if d := p.Rule.GetDefault(); d != "" {
		want["default"] = typed(d)
	}
	return want
}

func compileSchema(t *testing.T, schema any) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///schema.json", schema); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// asInstance re-reads v the way the validator wants JSON (numbers as
// json.Number).
func asInstance(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestChallengeDescribesOperation checks, for every paid operation of the
// catalog, the discovery fields of its 402: the v2 bazaar extension lists
// exactly the operation's parameters, where the protos put them, with the
// constraints the protos declare; its info validates against its own
// schema; the demo sample of the operation validates against the
// response schema it carries; the v1 outputSchema lists the same
// parameters and the same response schema; and the header stays small
// enough for the official clients.
func TestChallengeDescribesOperation(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	srv := paidServer(t, s)
	cat, _ := catalog.Load()
	for _, op := range cat.Paid() {
		t.Run(op.Name, func(t *testing.T) {
			t.Parallel()
			c := getChallenge(t, srv.URL+exampleURL(t, op))
			if c.header > maxChallengeHeader {
				t.Errorf("PAYMENT-REQUIRED is %d bytes, more than %d", c.header, maxChallengeHeader)
			}
			ext := at(c.v2, "extensions", "bazaar")
			info, schema := at(ext, "info"), at(ext, "schema")
			if at(info, "input", "type") != "http" || at(info, "input", "method") != "GET" || at(info, "output", "type") != "json" {
				t.Errorf("info = %v", info)
			}
			if err := compileSchema(t, schema).Validate(asInstance(t, info)); err != nil {
				t.Errorf("info does not validate against the extension's schema: %v", err)
			}

			var query, path, required []string
			for _, p := range op.Params {
				if p.In == catalog.InPath {
					path = append(path, p.Name)
					required = append(required, p.Name)
				} else {
					query = append(query, p.Name)
				}
			}
			slices.Sort(query)
			slices.Sort(path)
			inputSchema := at(schema, "properties", "input", "properties")
			if got := keys(at(info, "input", "queryParams")); !slices.Equal(got, query) && len(query) > 0 {
				t.Errorf("info.input.queryParams = %v, want %v", got, query)
			}
			if got := keys(at(inputSchema, "queryParams", "properties")); !slices.Equal(got, query) && !(len(got) == 0 && len(query) == 0) {
				t.Errorf("schema queryParams = %v, want %v", got, query)
			}
			if at(inputSchema, "queryParams", "additionalProperties") != false {
				t.Errorf("schema queryParams allows unknown parameters; the gateway refuses them")
			}
			if len(path) == 0 {
				if at(info, "input", "pathParams") != nil || at(ext, "routeTemplate") != nil {
					t.Errorf("path parameters or routeTemplate declared for %s", op.Path())
				}
			} else {
				if got := keys(at(info, "input", "pathParams")); !slices.Equal(got, path) {
					t.Errorf("info.input.pathParams = %v, want %v", got, path)
				}
				if got := keys(at(inputSchema, "pathParams", "properties")); !slices.Equal(got, path) {
					t.Errorf("schema pathParams = %v, want %v", got, path)
				}
				if got := fmt.Sprint(at(inputSchema, "pathParams", "required")); got != fmt.Sprint(required) {
					t.Errorf("schema pathParams required = %s, want %v", got, required)
				}
				tmpl := op.Path()
				for _, p := range path {
					tmpl = strings.ReplaceAll(tmpl, "{"+p+"}", ":"+p)
				}
				if at(ext, "routeTemplate") != tmpl {
					t.Errorf("routeTemplate = %v, want %s", at(ext, "routeTemplate"), tmpl)
				}
			}

			for _, p := range op.Params {
				where := "queryParams"
				if p.In == catalog.InPath {
					where = "pathParams"
				}
				got, _ := at(inputSchema, where, "properties", p.Name).(map[string]any)
				if d, _ := got["description"].(string); d == "" {
					t.Errorf("%s: no description", p.Name)
				}
				got = maps(got)
				delete(got, "description")
				if want := wantProperty(p); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: schema %v, want %v", p.Name, got, want)
				}
				accepts, _ := c.v1["accepts"].([]any)
				v1Text := ""
				if len(accepts) == 1 {
					v1Text, _ = at(accepts[0], "outputSchema", "input", where, p.Name).(string)
				}
				if v1Text == "" {
					t.Errorf("%s: not in the v1 outputSchema.input.%s", p.Name, where)
				}
			}

			output := at(schema, "properties", "output", "properties", "example")
			if at(output, "type") != "object" || at(output, "properties", "asOf") == nil {
				t.Fatalf("response schema = %v", output)
			}
			accepts, _ := c.v1["accepts"].([]any)
			if len(accepts) != 1 || !shortens(withoutDescriptions(at(accepts[0], "outputSchema", "output")), output) {
				t.Fatalf("v1 outputSchema.output is not the v2 response schema")
			}
			if d, _ := at(accepts[0], "outputSchema", "output", "description").(string); d == "" {
				t.Errorf("v1 outputSchema.output has no description")
			}
			if at(accepts[0], "outputSchema", "input", "discoverable") != true || at(accepts[0], "outputSchema", "input", "method") != "GET" {
				t.Errorf("v1 outputSchema.input = %v", at(accepts[0], "outputSchema", "input"))
			}
			// v2 clients (@x402/core) echo the extensions in their payment:
			// such a header must still be one the gate accepts.
			echo, err := json.Marshal(map[string]any{
				"x402Version": 2, "resource": c.v2["resource"], "accepted": at(c.v2, "accepts").([]any)[0], "extensions": c.v2["extensions"],
				"payload": map[string]any{"signature": "0x" + strings.Repeat("ab", 65), "authorization": map[string]any{
					"from": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
					"value": "500000", "validAfter": "0", "validBefore": "1900000000", "nonce": "0x" + strings.Repeat("cd", 32),
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := exact.DecodeHeader(base64.StdEncoding.EncodeToString(echo), 2); err != nil {
				t.Errorf("a v2 payment echoing the extension is refused: %v", err)
			}

			demo := s.do(t, "GET", "/demo/"+op.Name)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(demo.body))
			if err != nil {
				t.Fatal(err)
			}
			if err := compileSchema(t, output).Validate(inst); err != nil {
				t.Errorf("the demo sample does not validate against the response schema: %v", err)
			}
		})
	}
}

// withoutDescriptions drops the description keywords of a JSON Schema,
// as the v2 extension does (properties called "description" stay).
func withoutDescriptions(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		if list, ok := s.([]any); ok {
			out := make([]any, len(list))
			for i, e := range list {
				out[i] = withoutDescriptions(e)
			}
			return out
		}
		return s
	}
	out := map[string]any{}
	for k, v := range m {
		switch {
		case k == "description":
			if _, text := v.(string); text {
				continue
			}
		case k == "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = withoutDescriptions(p)
			}
			out[k] = props
			continue
		}
		out[k] = withoutDescriptions(v)
	}
	return out
}

// maps returns a shallow copy of m.
func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestWellKnownMatchesChallenge checks that /.well-known/x402 describes
// every paid operation as its 402 does: the same parameter schemas, the
// same response schema, the same route template.
func TestWellKnownMatchesChallenge(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	srv := paidServer(t, s)
	r := s.do(t, "GET", "/.well-known/x402")
	var wk struct {
		Items []struct {
			Resource      string         `json:"resource"`
			Method        string         `json:"method"`
			Input         map[string]any `json:"input"`
			Output        map[string]any `json:"output"`
			RouteTemplate string         `json:"routeTemplate"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.body, &wk); err != nil || r.status != http.StatusOK {
		t.Fatalf("/.well-known/x402: %d %s", r.status, r.body)
	}
	cat, _ := catalog.Load()
	paid := cat.Paid()
	if len(wk.Items) != len(paid) {
		t.Fatalf("%d items, want %d", len(wk.Items), len(paid))
	}
	for i, op := range paid {
		t.Run(op.Name, func(t *testing.T) {
			t.Parallel()
			item := wk.Items[i]
			if item.Resource != publicURL+op.Path() || item.Method != "GET" {
				t.Fatalf("item %d is %s %s, want GET %s", i, item.Method, item.Resource, publicURL+op.Path())
			}
			ext := at(getChallenge(t, srv.URL+exampleURL(t, op)).v2, "extensions", "bazaar")
			input := at(ext, "schema", "properties", "input", "properties")
			if at(item.Input, "type") != "http" || at(item.Input, "method") != "GET" {
				t.Errorf("input = %v", item.Input)
			}
			for _, where := range []string{"queryParams", "pathParams"} {
				if got, want := item.Input[where], at(input, where); !reflect.DeepEqual(got, want) {
					t.Errorf("input.%s = %v\nthe 402 has %v", where, got, want)
				}
			}
			if got, want := withoutDescriptions(at(item.Output, "schema")), at(ext, "schema", "properties", "output", "properties", "example"); at(item.Output, "type") != "json" || !shortens(got, want) {
				t.Errorf("output differs from the 402's response schema")
			}
			if want, _ := at(ext, "routeTemplate").(string); item.RouteTemplate != want {
				t.Errorf("routeTemplate = %q, the 402 has %q", item.RouteTemplate, want)
			}
		})
	}
}

// shortens: short is the schema full, or full with some nested objects
// reduced to their type (the gate shortens a bazaar extension too large
// for a client to echo in its payment header), never anything else.
func shortens(full, short any) bool {
	f, fok := full.(map[string]any)
	s, sok := short.(map[string]any)
	if !fok || !sok {
		return reflect.DeepEqual(full, short)
	}
	if _, object := f["properties"]; object && len(s) == 1 && reflect.DeepEqual(s["type"], f["type"]) {
		return true
	}
	if len(f) != len(s) {
		return false
	}
	for k, fv := range f {
		sv, ok := s[k]
		if !ok {
			return false
		}
		switch k {
		case "properties":
			fp, _ := fv.(map[string]any)
			sp, _ := sv.(map[string]any)
			if len(fp) != len(sp) {
				return false
			}
			for name, p := range fp {
				if !shortens(p, sp[name]) {
					return false
				}
			}
		case "items":
			if !shortens(fv, sv) {
				return false
			}
		case "oneOf", "anyOf", "allOf":
			fl, _ := fv.([]any)
			sl, _ := sv.([]any)
			if len(fl) != len(sl) {
				return false
			}
			for i := range fl {
				if !shortens(fl[i], sl[i]) {
					return false
				}
			}
		default:
			if !reflect.DeepEqual(fv, sv) {
				return false
			}
		}
	}
	return true
}
