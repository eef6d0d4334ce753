package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/gen/openapi"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/service/catalog"
)

// PaidRoutes returns the paid operations of cat as payment routes: their
// net/http patterns, the prices declared in the protos, the parameter
// checks the gateway itself runs, so the gate asks no payment for a request
// the gateway would refuse, and their discovery descriptions (parameters
// and response schema) as the generated OpenAPI document renders the same
// protos. An operation the document lacks (it cannot: both are generated
// together) is described as "GET, returns JSON" only.
func PaidRoutes(cat *catalog.Catalog) []payment.Route {
	doc, docErr := parseOpenAPI(openapi.Document())
	var routes []payment.Route
	for _, op := range cat.Paid() {
		for _, path := range op.Paths {
			var disc *payment.Discovery
			if docErr == nil {
				disc, _ = doc.discovery(op, path)
			}
			routes = append(routes, payment.Route{
				Name:        op.Name,
				Pattern:     "GET " + servePattern(path),
				PriceUSD:    op.PriceUSD,
				Description: op.Summary,
				Valid: func(r *http.Request) bool {
					q, err := url.ParseQuery(r.URL.RawQuery)
					if err != nil {
						return false
					}
					_, err = op.CheckHTTP(r.PathValue, q)
					return err == nil
				},
				Discovery: disc,
			})
		}
	}
	return routes
}

// apiDocument is the part of the OpenAPI document discovery reads.
type apiDocument struct {
	Paths      map[string]map[string]apiOperation `json:"paths"`
	Components struct {
		Schemas map[string]any `json:"schemas"`
	} `json:"components"`
}

type apiOperation struct {
	Parameters []struct {
		Name        string         `json:"name"`
		In          string         `json:"in"`
		Required    bool           `json:"required"`
		Description string         `json:"description"`
		Schema      map[string]any `json:"schema"`
		Example     any            `json:"example"`
	} `json:"parameters"`
	Responses map[string]struct {
		Content map[string]struct {
			Schema any `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

func parseOpenAPI(doc []byte) (*apiDocument, error) {
	var d apiDocument
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi document: %w", err)
	}
	return &d, nil
}

// discovery describes op at path: its parameters exactly as the document
// declares them (which must be the catalog's), each with an example value,
// and the JSON Schema of its 200 response with every $ref resolved.
func (d *apiDocument) discovery(op *catalog.Operation, path string) (*payment.Discovery, error) {
	get, ok := d.Paths[path]["get"]
	if !ok {
		return nil, fmt.Errorf("openapi document: no GET %s", path)
	}
	if len(get.Parameters) != len(op.Params) {
		return nil, fmt.Errorf("openapi document: GET %s has %d parameters, the catalog %d", path, len(get.Parameters), len(op.Params))
	}
	out := &payment.Discovery{}
	for i, p := range get.Parameters {
		if p.Name != op.Params[i].Name || p.In != op.Params[i].In {
			return nil, fmt.Errorf("openapi document: GET %s parameter %s (%s) is %s (%s) in the catalog", path, p.Name, p.In, op.Params[i].Name, op.Params[i].In)
		}
		ex := p.Example
		if ex == nil {
			ex = exampleOf(p.Schema)
		}
		schema, err := d.resolve(p.Schema, nil)
		if err != nil {
			return nil, fmt.Errorf("openapi document: GET %s parameter %s: %w", path, p.Name, err)
		}
		out.Params = append(out.Params, payment.Param{
			Name: p.Name, In: p.In, Required: p.Required, Description: p.Description, Schema: schema.(map[string]any), Example: ex,
		})
	}
	schema, err := d.resolve(get.Responses["200"].Content["application/json"].Schema, nil)
	if err != nil {
		return nil, fmt.Errorf("openapi document: GET %s: %w", path, err)
	}
	if out.Output, ok = schema.(map[string]any); !ok {
		return nil, fmt.Errorf("openapi document: GET %s: no JSON response schema", path)
	}
	return out, nil
}

// openAPIFormat reports whether f is one of the formats OpenAPI adds to
// JSON Schema's for its data types.
func openAPIFormat(f any) bool {
	switch f {
	case "int32", "int64", "float", "double", "byte", "binary", "password":
		return true
	}
	return false
}

// exampleOf picks a value a parameter schema accepts: its default, its
// first enum value or its minimum; nil when it has none of them.
func exampleOf(s map[string]any) any {
	if v, ok := s["default"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	return s["minimum"]
}

// resolve returns a copy of schema as plain JSON Schema: each
// "#/components/schemas/X" reference replaced by X, resolved in turn
// (keywords beside a $ref, a description, override X's), and OpenAPI's
// own data-type formats (int32, double, ...), which JSON Schema
// validators do not know and warn about, left out. seen holds the names
// being resolved, to refuse a recursive schema, which cannot be inlined.
func (d *apiDocument) resolve(schema any, seen []string) (any, error) {
	switch v := schema.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = d.resolve(e, seen); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		if ref, ok := v["$ref"].(string); ok {
			name, ok := strings.CutPrefix(ref, "#/components/schemas/")
			target, found := d.Components.Schemas[name]
			switch {
			case !ok || !found:
				return nil, fmt.Errorf("unresolvable $ref %q", ref)
			case slices.Contains(seen, name):
				return nil, fmt.Errorf("recursive schema %s", name)
			}
			r, err := d.resolve(target, append(seen, name))
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
			if out[k], err = d.resolve(e, seen); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

// RouteOf returns the function naming a request's route for metrics: the
// net/http pattern of the operation it matches ("GET /rugcheck/{addr}"),
// or "other" for anything else (unknown paths, other methods), so that
// label values stay bounded.
func RouteOf(cat *catalog.Catalog) func(*http.Request) string {
	mux := http.NewServeMux()
	for _, op := range cat.Operations() {
		for _, path := range op.Paths {
			mux.Handle("GET "+servePattern(path), http.NotFoundHandler())
		}
	}
	return func(r *http.Request) string {
		if _, pattern := mux.Handler(r); pattern != "" {
			return pattern
		}
		return "other"
	}
}
