package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// This file reads the generated OpenAPI document (gen/openapi) back as
// self-contained JSON Schema, for the two places that describe a paid
// operation to x402 clients: the bazaar extension of its 402
// (gateway.PaidRoutes) and /.well-known/x402 (service.Discovery). Both
// must say the same thing, so both read it here. What each does with the
// schemas (examples, descriptions, the x402 input shape) stays with it.

// OpenAPI is the part of an OpenAPI 3 document that describes operations:
// the GET operations of its paths and the component schemas they refer to.
type OpenAPI struct {
	paths   map[string]map[string]openAPIOperation
	schemas map[string]any
}

type openAPIOperation struct {
	Parameters []struct {
		Name        string `json:"name"`
		In          string `json:"in"`
		Required    bool   `json:"required"`
		Description string `json:"description"`
		Schema      any    `json:"schema"`
		Example     any    `json:"example"`
	} `json:"parameters"`
	Responses map[string]struct {
		Content map[string]struct {
			Schema any `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

// ParamSchema is one parameter of an operation as the OpenAPI document
// declares it.
type ParamSchema struct {
	// Name and In ("path" or "query") identify the parameter.
	Name, In string
	// Required is the document's required flag.
	Required bool
	// Description is the parameter's description, which OpenAPI keeps
	// beside its schema rather than in it.
	Description string
	// Schema is the parameter's schema as self-contained JSON Schema.
	Schema map[string]any
	// Example is the document's example value, nil when it gives none.
	Example any
}

// ParseOpenAPI reads doc, an OpenAPI 3 document in JSON.
func ParseOpenAPI(doc []byte) (*OpenAPI, error) {
	var d struct {
		Paths      map[string]map[string]openAPIOperation `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	return &OpenAPI{paths: d.Paths, schemas: d.Components.Schemas}, nil
}

// Operation returns the parameters of the GET operation at path (the
// document's path template, e.g. "/rugcheck/{addr}"), in the document's
// order, and the schema of its 200 application/json response. Schemas come
// back as self-contained JSON Schema (see [OpenAPI.plain]) in new maps the
// caller may change. It fails when the operation is missing, when a
// parameter or the response has no schema object, and when a schema
// cannot be inlined.
func (a *OpenAPI) Operation(path string) (params []ParamSchema, response map[string]any, err error) {
	get, ok := a.paths[path]["get"]
	if !ok {
		return nil, nil, fmt.Errorf("no GET %s", path)
	}
	for _, p := range get.Parameters {
		s, err := a.plainObject(p.Schema)
		if err != nil {
			return nil, nil, fmt.Errorf("parameter %s: %w", p.Name, err)
		}
		params = append(params, ParamSchema{
			Name: p.Name, In: p.In, Required: p.Required, Description: p.Description, Schema: s, Example: p.Example,
		})
	}
	response, err = a.plainObject(get.Responses["200"].Content["application/json"].Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("200 response: %w", err)
	}
	return params, response, nil
}

// plainObject is [OpenAPI.plain] for a schema that must be a JSON object.
func (a *OpenAPI) plainObject(schema any) (map[string]any, error) {
	if _, ok := schema.(map[string]any); !ok {
		return nil, errors.New("no schema object")
	}
	s, err := a.plain(schema, nil)
	if err != nil {
		return nil, err
	}
	return s.(map[string]any), nil
}

// plain returns a copy of schema as self-contained JSON Schema: each
// "#/components/schemas/X" reference replaced by X, itself made plain
// (keywords beside a $ref, such as a description, override X's), and
// OpenAPI's own data-type formats (int32, double, ...), which JSON Schema
// validators do not know and warn about, left out. seen holds the names
// being inlined, to refuse a recursive schema, which cannot be inlined.
func (a *OpenAPI) plain(schema any, seen []string) (any, error) {
	switch v := schema.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = a.plain(e, seen); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		if ref, ok := v["$ref"].(string); ok {
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			target, found := a.schemas[name]
			switch {
			case !ok || !found:
				return nil, fmt.Errorf("unresolvable $ref %q", ref)
			case slices.Contains(seen, name):
				return nil, fmt.Errorf("recursive schema %s", name)
			}
			r, err := a.plain(target, append(seen, name))
			if err != nil {
				return nil, err
			}
			m, ok := r.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("$ref %q is not a schema object", ref)
			}
			for k, e := range m {
				out[k] = e
			}
		}
		for k, e := range v {
			if k == "$ref" || k == "format" && openAPIFormat(e) {
				continue
			}
			var err error
			if out[k], err = a.plain(e, seen); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

// openAPIFormat reports whether f is one of the formats OpenAPI adds to
// JSON Schema's for its data types
// (https://spec.openapis.org/oas/v3.1.0#data-types).
func openAPIFormat(f any) bool {
	switch f {
	case "int32", "int64", "float", "double", "byte", "binary", "password":
		return true
	}
	return false
}
