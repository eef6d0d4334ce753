package catalog_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gen/openapi"
	"github.com/tollgate/tollgate/service/catalog"
)

// testDoc is a small OpenAPI document with what the generated one uses
// ($refs with overriding keywords, OpenAPI formats) and what it must not
// (recursion, dangling $refs, missing schemas).
const testDoc = `{
  "paths": {
    "/token/{addr}": {"get": {
      "parameters": [
        {"name": "addr", "in": "path", "required": true, "description": "Token address.",
         "schema": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}, "example": "0x4200000000000000000000000000000000000006"},
        {"name": "days", "in": "query", "schema": {"type": "integer", "format": "int32", "default": 7}}
      ],
      "responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Token"}}}}}
    }},
    "/plain": {"get": {
      "responses": {"200": {"content": {"application/json": {"schema": {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}}}}}
    }},
    "/loop": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}}},
    "/dangling": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Gone"}}}}}}},
    "/elsewhere": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "other.json#/Token"}}}}}}},
    "/scalar": {"get": {"responses": {"200": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Scalar"}}}}}}},
    "/text": {"get": {"responses": {"200": {"content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/noschema": {"get": {
      "parameters": [{"name": "q", "in": "query"}],
      "responses": {"200": {"content": {"application/json": {"schema": {"type": "object"}}}}}
    }},
    "/post": {"post": {"responses": {"200": {"content": {"application/json": {"schema": {"type": "object"}}}}}}}
  },
  "components": {"schemas": {
    "Token": {"type": "object", "description": "A token.", "properties": {
      "price": {"$ref": "#/components/schemas/Price", "description": "Last price."},
      "history": {"type": "array", "items": {"$ref": "#/components/schemas/Price"}}
    }},
    "Price": {"type": "number", "format": "double", "description": "A price in USD."},
    "Node": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Node"}}},
    "Scalar": 3
  }}
}`

func TestOpenAPIOperation(t *testing.T) {
	t.Parallel()
	api, err := catalog.ParseOpenAPI([]byte(testDoc))
	if err != nil {
		t.Fatalf("ParseOpenAPI: %v", err)
	}
	tests := []struct {
		path       string
		wantParams string // JSON of the parameters
		wantResp   string // JSON of the response schema
		wantErr    string // part of the error; "" for none
	}{
		{
			path: "/token/{addr}",
			wantParams: `[
			  {"Name": "addr", "In": "path", "Required": true, "Description": "Token address.",
			   "Schema": {"type": "string", "pattern": "^0x[0-9a-fA-F]{40}$"}, "Example": "0x4200000000000000000000000000000000000006"},
			  {"Name": "days", "In": "query", "Required": false, "Description": "",
			   "Schema": {"type": "integer", "default": 7}, "Example": null}
			]`,
			wantResp: `{"type": "object", "description": "A token.", "properties": {
			  "price": {"type": "number", "description": "Last price."},
			  "history": {"type": "array", "items": {"type": "number", "description": "A price in USD."}}
			}}`,
		},
		{
			path:       "/plain",
			wantParams: `null`,
			wantResp:   `{"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}`,
		},
		{path: "/loop", wantErr: "recursive schema Node"},
		{path: "/dangling", wantErr: `unresolvable $ref "#/components/schemas/Gone"`},
		{path: "/elsewhere", wantErr: `unresolvable $ref "other.json#/Token"`},
		{path: "/scalar", wantErr: `$ref "#/components/schemas/Scalar" is not a schema object`},
		{path: "/text", wantErr: "200 response: no schema object"},
		{path: "/noschema", wantErr: "parameter q: no schema object"},
		{path: "/post", wantErr: "no GET /post"},
		{path: "/missing", wantErr: "no GET /missing"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			params, resp, err := api.Operation(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Operation(%q) error = %v, want one containing %q", tt.path, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Operation(%q): %v", tt.path, err)
			}
			assertJSON(t, "parameters", params, tt.wantParams)
			assertJSON(t, "response", resp, tt.wantResp)
		})
	}
}

// TestOpenAPIOperationCopies checks that a caller may change what
// Operation returns (service.describe adds descriptions to parameter
// schemas) without changing the document or another call's result.
func TestOpenAPIOperationCopies(t *testing.T) {
	t.Parallel()
	api, err := catalog.ParseOpenAPI([]byte(testDoc))
	if err != nil {
		t.Fatalf("ParseOpenAPI: %v", err)
	}
	first, resp, err := api.Operation("/token/{addr}")
	if err != nil {
		t.Fatalf("Operation: %v", err)
	}
	first[1].Schema["description"] = "changed"
	resp["properties"].(map[string]any)["price"].(map[string]any)["type"] = "changed"
	second, resp2, err := api.Operation("/token/{addr}")
	if err != nil {
		t.Fatalf("Operation: %v", err)
	}
	if _, ok := second[1].Schema["description"]; ok {
		t.Errorf("second call's parameter schema = %v, changed by the first call's caller", second[1].Schema)
	}
	if got := resp2["properties"].(map[string]any)["price"].(map[string]any)["type"]; got != "number" {
		t.Errorf("second call's price type = %v, changed by the first call's caller", got)
	}
}

func TestParseOpenAPIRefusesMalformed(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{``, `[]`, `{"paths": {"/a": []}}`} {
		if _, err := catalog.ParseOpenAPI([]byte(doc)); err == nil || !strings.HasPrefix(err.Error(), "openapi document: ") {
			t.Errorf("ParseOpenAPI(%q) error = %v, want an openapi document error", doc, err)
		}
	}
}

// TestGeneratedOpenAPIDescribesPaidOperations reads every path of every
// paid operation from the generated document: each must be plain JSON
// Schema, with no $ref or OpenAPI-only format left.
func TestGeneratedOpenAPIDescribesPaidOperations(t *testing.T) {
	t.Parallel()
	api, err := catalog.ParseOpenAPI(openapi.Document())
	if err != nil {
		t.Fatalf("ParseOpenAPI: %v", err)
	}
	for _, op := range load(t).Paid() {
		for _, path := range op.Paths {
			params, resp, err := api.Operation(path)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if len(params) != len(op.Params) {
				t.Errorf("%s: %d parameters, the catalog %d", path, len(params), len(op.Params))
			}
			b, err := json.Marshal([]any{params, resp})
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{`"$ref"`, `"format":"int32"`, `"format":"int64"`, `"format":"double"`, `"format":"float"`} {
				if strings.Contains(string(b), bad) {
					t.Errorf("%s: description still has %s", path, bad)
				}
			}
		}
	}
}

func assertJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var g, w any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, b, want)
	}
}
