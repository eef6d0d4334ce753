package payment

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
)

// Discovery describes how to call a paid operation and what it returns,
// for x402 discovery: the bazaar extension of the v2 challenge
// (specs/extensions/bazaar.md, the shape @x402/extensions declares) and
// the outputSchema of the v1 one. The gate renders it once per route.
type Discovery struct {
	// Params are the operation's path and query parameters; together they
	// are every parameter it accepts.
	Params []Param
	// Output is the JSON Schema (draft 2020-12) of a successful response's
	// body. It must be self-contained: no $ref or $id outside itself. The
	// v1 body carries it whole; the v2 extension without its descriptions,
	// since v2 clients echo the extension in their payment header, which
	// must stay under the size the gate accepts (and proxies pass).
	Output map[string]any
}

// Param is one path or query parameter of a paid operation.
type Param struct {
	// Name is the parameter's name in the path template or the query.
	Name string
	// In is "path" or "query".
	In string
	// Required is true for path parameters.
	Required bool
	// Description says what the parameter means.
	Description string
	// Schema is the JSON Schema of its value: type, enum, pattern,
	// minimum, maximum, default.
	Schema map[string]any
	// Example is a value the operation accepts, shown in the bazaar's
	// info.input; it must satisfy Schema.
	Example any
}

// discovery is a route's description rendered for the wire, once.
type discovery struct {
	bazaar json.RawMessage // v2 extensions.bazaar of the REST route
	tool   json.RawMessage // v2 extensions.bazaar of the operation as an MCP tool
	v1     map[string]any  // v1 accepts[].outputSchema
}

// InputSchema is the JSON Schema of the operation's parameters as one
// object, the way an MCP tool takes them: each parameter a property with
// its schema and description, the path parameters required, no others
// allowed. The MCP facade lists it as the tool's inputSchema and the
// gate declares it in the tool's bazaar extension.
func (d *Discovery) InputSchema() map[string]any {
	props, required := map[string]any{}, []string{}
	if d != nil {
		for _, p := range d.Params {
			props[p.Name] = paramSchema(p)
			if p.Required {
				required = append(required, p.Name)
			}
		}
	}
	return paramsSchema(props, required)
}

// paramSchema is p's schema with its description.
func paramSchema(p Param) map[string]any {
	prop := make(map[string]any, len(p.Schema)+1)
	for k, v := range p.Schema {
		prop[k] = v
	}
	if p.Description != "" {
		prop["description"] = p.Description
	}
	return prop
}

// jsonSchemaDialect is the $schema of the bazaar extension's schema.
const jsonSchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// newDiscovery renders d for the route of the operation called name with
// the net/http pattern ("GET /rugcheck/{addr}") and as the MCP tool of
// that name, described by description. A nil d describes a GET that
// returns JSON, with no parameters declared.
func newDiscovery(name, description, pattern string, d *Discovery) (*discovery, error) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "GET", pattern
	}
	if d == nil {
		d = &Discovery{}
	}
	query, queryExamples, queryRequired := map[string]any{}, map[string]any{}, []string{}
	pathProps, pathExamples, pathRequired := map[string]any{}, map[string]any{}, []string{}
	v1Query, v1Path := map[string]any{}, map[string]any{}
	for _, p := range d.Params {
		props, examples, required, v1 := query, queryExamples, &queryRequired, v1Query
		switch p.In {
		case "query":
		case "path":
			props, examples, required, v1 = pathProps, pathExamples, &pathRequired, v1Path
		default:
			return nil, fmt.Errorf("parameter %s: in %q is neither path nor query", p.Name, p.In)
		}
		if _, dup := props[p.Name]; dup {
			return nil, fmt.Errorf("parameter %s: declared twice", p.Name)
		}
		props[p.Name] = paramSchema(p)
		if p.Example != nil {
			examples[p.Name] = p.Example
		}
		if p.Required {
			*required = append(*required, p.Name)
		}
		v1[p.Name] = paramText(p)
	}

	input := map[string]any{"type": "http", "method": method, "queryParams": queryExamples}
	inputSchema := map[string]any{
		"type":        map[string]any{"type": "string", "const": "http"},
		"method":      map[string]any{"type": "string", "enum": []string{method}},
		"queryParams": paramsSchema(query, queryRequired),
	}
	ext := map[string]any{}
	if len(pathProps) > 0 {
		input["pathParams"] = pathExamples
		inputSchema["pathParams"] = paramsSchema(pathProps, pathRequired)
		ext["routeTemplate"] = routeTemplate(path)
	}
	output := map[string]any{"type": "object", "properties": map[string]any{"type": map[string]any{"type": "string"}}, "required": []string{"type"}}
	if d.Output != nil {
		output["properties"].(map[string]any)["example"] = withoutDescriptions(d.Output)
	}
	ext["info"] = map[string]any{"input": input, "output": map[string]any{"type": "json"}}
	ext["schema"] = map[string]any{
		"$schema": jsonSchemaDialect,
		"type":    "object",
		"properties": map[string]any{
			"input":  map[string]any{"type": "object", "properties": inputSchema, "required": []string{"type", "method"}, "additionalProperties": false},
			"output": output,
		},
		"required": []string{"input"},
	}
	bazaar, err := json.Marshal(ext)
	if err != nil {
		return nil, err
	}
	if len(bazaar) > maxBazaar && d.Output != nil {
		// Too large to echo: the records inside the body keep their
		// types, not their fields.
		output["properties"].(map[string]any)["example"] = withoutDescriptions(shallow(d.Output, 2))
		if bazaar, err = json.Marshal(ext); err != nil {
			return nil, err
		}
	}
	example := maps.Clone(queryExamples)
	maps.Copy(example, pathExamples)
	tool, err := json.Marshal(toolBazaar(name, description, d.InputSchema(), example, output))
	if err != nil {
		return nil, err
	}

	v1Input := map[string]any{"type": "http", "method": method, "discoverable": true, "queryParams": v1Query}
	if len(v1Path) > 0 {
		v1Input["pathParams"] = v1Path
	}
	v1Output := d.Output
	if v1Output == nil {
		v1Output = map[string]any{"type": "object"}
	}
	return &discovery{bazaar: bazaar, tool: tool, v1: map[string]any{"input": v1Input, "output": v1Output}}, nil
}

// toolBazaar is the bazaar extension of an operation offered as an MCP
// tool (the "mcp" input form of specs/extensions/bazaar.md, as
// @x402/extensions declares it): the tool's name, description, transport
// and input schema, an example of its arguments, and the output as the
// REST form has it.
func toolBazaar(name, description string, inputSchema, example, output map[string]any) map[string]any {
	input := map[string]any{"type": "mcp", "toolName": name, "transport": "streamable-http", "inputSchema": inputSchema, "example": example}
	inputProps := map[string]any{
		"type":        map[string]any{"type": "string", "const": "mcp"},
		"toolName":    map[string]any{"type": "string", "const": name},
		"transport":   map[string]any{"type": "string", "enum": []string{"streamable-http"}},
		"inputSchema": map[string]any{"type": "object"},
		"example":     map[string]any{"type": "object"},
	}
	if description != "" {
		input["description"] = description
		inputProps["description"] = map[string]any{"type": "string"}
	}
	return map[string]any{
		"info": map[string]any{"input": input, "output": map[string]any{"type": "json"}},
		"schema": map[string]any{
			"$schema": jsonSchemaDialect,
			"type":    "object",
			"properties": map[string]any{
				"input":  map[string]any{"type": "object", "properties": inputProps, "required": []string{"type", "toolName", "inputSchema"}, "additionalProperties": false},
				"output": output,
			},
			"required": []string{"input"},
		},
	}
}

// maxBazaar is the largest bazaar extension kept whole: a v2 client
// echoes it in its payment header, base64 of the payload, its terms and
// all the extensions (payment-identifier's and sign-in-with-x's too),
// which must stay under the gate's 8 KiB (TestPaymentHeaderBudget).
const maxBazaar = 3 << 10

// shallow returns a copy of the JSON Schema s whose objects nested more
// than depth levels down keep their type only: the records inside a body,
// not their fields.
func shallow(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	if _, object := m["properties"]; object && depth == 0 {
		out := map[string]any{}
		if t, ok := m["type"]; ok {
			out["type"] = t
		}
		return out
	}
	out := maps.Clone(m)
	if props, ok := m["properties"].(map[string]any); ok {
		sub := make(map[string]any, len(props))
		for name, p := range props {
			sub[name] = shallow(p, depth-1)
		}
		out["properties"] = sub
	}
	if items, ok := m["items"]; ok {
		out["items"] = shallow(items, depth)
	}
	for _, k := range []string{"oneOf", "anyOf", "allOf"} {
		if list, ok := m[k].([]any); ok {
			sub := make([]any, len(list))
			for i, p := range list {
				sub[i] = shallow(p, depth)
			}
			out[k] = sub
		}
	}
	return out
}

// withoutDescriptions returns a copy of the JSON Schema s without its
// description keywords, keeping properties that happen to be called
// "description".
func withoutDescriptions(s any) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		switch k {
		case "description":
			if _, text := v.(string); text {
				continue
			}
		case "properties", "patternProperties", "$defs":
			if props, ok := v.(map[string]any); ok {
				sub := make(map[string]any, len(props))
				for name, p := range props {
					sub[name] = withoutDescriptions(p)
				}
				v = sub
			}
		case "items", "additionalProperties", "not", "contains", "if", "then", "else":
			v = withoutDescriptions(v)
		case "oneOf", "anyOf", "allOf", "prefixItems":
			if list, ok := v.([]any); ok {
				sub := make([]any, len(list))
				for i, p := range list {
					sub[i] = withoutDescriptions(p)
				}
				v = sub
			}
		}
		out[k] = v
	}
	return out
}

// routeTemplate writes a net/http path pattern the way the bazaar
// extension does: "/rugcheck/{addr}" is "/rugcheck/:addr".
func routeTemplate(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = ":" + strings.TrimSuffix(s[1:len(s)-1], "...")
		}
	}
	return strings.Join(segs, "/")
}

// paramsSchema is the JSON Schema of a parameter map: exactly these
// properties, the required ones present.
func paramsSchema(props map[string]any, required []string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// paramText describes a parameter in one string, the form x402 v1 gives
// outputSchema.input.queryParams (a map of names to strings):
// "integer, 1 to 48, default 24: Hours to forecast".
func paramText(p Param) string {
	parts := []string{fmt.Sprint(p.Schema["type"])}
	if e, ok := p.Schema["enum"].([]any); ok {
		vals := make([]string, len(e))
		for i, v := range e {
			vals[i] = fmt.Sprint(v)
		}
		parts = append(parts, "one of "+strings.Join(vals, ", "))
	}
	if s, ok := p.Schema["pattern"]; ok {
		parts = append(parts, fmt.Sprint("matching ", s))
	}
	lo, hasLo := p.Schema["minimum"]
	hi, hasHi := p.Schema["maximum"]
	switch {
	case hasLo && hasHi:
		parts = append(parts, fmt.Sprint(lo, " to ", hi))
	case hasLo:
		parts = append(parts, fmt.Sprint("at least ", lo))
	case hasHi:
		parts = append(parts, fmt.Sprint("at most ", hi))
	}
	if v, ok := p.Schema["default"]; ok {
		parts = append(parts, fmt.Sprint("default ", v))
	}
	if p.Required {
		parts = append(parts, "required")
	}
	s := strings.Join(parts, ", ")
	if p.Description != "" {
		s += ": " + p.Description
	}
	return s
}
