package payment

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestNewDiscovery renders descriptions into the bazaar extension and the
// v1 outputSchema: the extension's info validates against its schema, a
// path parameter gives a routeTemplate, and bad descriptions are refused.
func TestNewDiscovery(t *testing.T) {
	t.Parallel()
	addr := Param{Name: "addr", In: "path", Required: true, Description: "Token.", Schema: map[string]any{"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}, Example: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}
	days := Param{Name: "days", In: "query", Description: "Window.", Schema: map[string]any{"type": "integer", "minimum": 1, "maximum": 30, "default": 7}, Example: 7}
	output := map[string]any{"type": "object", "properties": map[string]any{"asOf": map[string]any{"type": "string"}}, "required": []any{"asOf"}}
	tests := []struct {
		name      string
		pattern   string
		d         *Discovery
		route     string // routeTemplate, "" for none
		v1Query   string // the v1 text of "days", "" when absent
		wantError string
	}{
		{name: "undescribed", pattern: "GET /regime"},
		{name: "query", pattern: "GET /whales", d: &Discovery{Params: []Param{days}, Output: output}, v1Query: "integer, 1 to 30, default 7: Window."},
		{name: "path and query", pattern: "GET /rugcheck/{addr}", d: &Discovery{Params: []Param{addr, days}, Output: output}, route: "/rugcheck/:addr", v1Query: "integer, 1 to 30, default 7: Window."},
		{name: "bad location", pattern: "GET /x", d: &Discovery{Params: []Param{{Name: "h", In: "header"}}}, wantError: "neither path nor query"},
		{name: "duplicate", pattern: "GET /x", d: &Discovery{Params: []Param{days, days}}, wantError: "declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := newDiscovery("op", "", tt.pattern, tt.d)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("err = %v, want %q", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ext, err := jsonschema.UnmarshalJSON(bytes.NewReader(got.bazaar))
			if err != nil {
				t.Fatal(err)
			}
			m := ext.(map[string]any)
			c := jsonschema.NewCompiler()
			if err := c.AddResource("mem:///bazaar.json", m["schema"]); err != nil {
				t.Fatal(err)
			}
			s, err := c.Compile("mem:///bazaar.json")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(m["info"]); err != nil {
				t.Errorf("info does not validate against schema: %v", err)
			}
			if r, _ := m["routeTemplate"].(string); r != tt.route {
				t.Errorf("routeTemplate = %q, want %q", r, tt.route)
			}
			in := got.v1["input"].(map[string]any)
			if in["discoverable"] != true || in["method"] != "GET" || in["type"] != "http" {
				t.Errorf("v1 input = %v", in)
			}
			if text, _ := in["queryParams"].(map[string]any)["days"].(string); text != tt.v1Query {
				t.Errorf("v1 days = %q, want %q", text, tt.v1Query)
			}
			// A wrong example must fail the extension's own schema.
			if tt.d != nil && len(tt.d.Params) > 0 {
				bad := *tt.d
				bad.Params = append([]Param(nil), tt.d.Params...)
				for i := range bad.Params {
					bad.Params[i].Example = "not-a-value"
				}
				d, _ := newDiscovery("op", "", tt.pattern, &bad)
				var e struct{ Info json.RawMessage }
				if err := json.Unmarshal(d.bazaar, &e); err != nil {
					t.Fatal(err)
				}
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(e.Info))
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Validate(inst); err == nil {
					t.Errorf("an invalid example validates")
				}
			}
		})
	}
}
