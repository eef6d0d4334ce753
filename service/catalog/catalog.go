// Package catalog reads the REST contract the protos declare: for each RPC
// bound to an HTTP GET, its paths, its price (the (tollgate.v1.operation)
// option, the only place prices are written) and its parameters with their
// rules (the (tollgate.v1.field) option). It checks parameter values against
// those rules, both as raw HTTP strings before any payment logic and as typed
// request messages on gRPC.
//
// catalog owns no transport. The gRPC service, the gateway and
// protoc-gen-tollgate-openapi all read the contract through it, so a price
// or a rule changes in one .proto line and everywhere at once. It is the
// one service/* package that imports gen/ and that the gateway imports: a
// leaf that reads descriptors, shared by both sides of the gRPC hop.
package catalog

import (
	"fmt"
	"regexp"
	"strings"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// Param locations.
const (
	InPath  = "path"
	InQuery = "query"
)

// Operation is one RPC as offered over REST.
type Operation struct {
	// Name is the catalog name, e.g. "signal-pack".
	Name string
	// Method is the RPC.
	Method protoreflect.MethodDescriptor
	// HTTPMethod is the HTTP verb of every binding ("GET").
	HTTPMethod string
	// Paths are the path templates, the primary binding first.
	Paths []string
	// PriceUSD is the exact decimal price of one call, "" when free.
	PriceUSD string
	// Summary is a one-line description.
	Summary string
	// ContentType is the media type of an HttpBody response, "" for JSON records.
	ContentType string
	// ResponseBody names the response field sent as the HTTP body, if any.
	ResponseBody string
	// UnwrapOneof names the oneof whose set member is the REST body, if any.
	UnwrapOneof string
	// Params are the request fields bound to the path or the query.
	Params []Param
}

// Paid reports whether a call costs money.
func (o *Operation) Paid() bool { return o.PriceUSD != "" }

// Path returns the primary path template.
func (o *Operation) Path() string { return o.Paths[0] }

// FullMethod returns the gRPC method name, "/pkg.Service/Method".
func (o *Operation) FullMethod() string {
	return "/" + string(o.Method.Parent().FullName()) + "/" + string(o.Method.Name())
}

// Param is a request field bound to a path segment or a query parameter.
type Param struct {
	// Name is the proto field name, as written in paths and queries.
	Name string
	// In is InPath or InQuery.
	In string
	// Field is the request field.
	Field protoreflect.FieldDescriptor
	// Rule holds the constraints; never nil.
	Rule *tollgatev1.Field

	re      *regexp.Regexp // compiled Rule.Pattern
	address bool           // Rule.Pattern is addressPattern
}

// addressPattern is the pattern of a parameter that is an EVM address.
// The service reads such a value with common.HexToAddress, blind to its
// letter case, so normalize writes it in its checksummed form (EIP-55):
// every spelling of one address is one argument, one request.
const addressPattern = `^0x[0-9a-fA-F]{40}$`

// Required reports whether the parameter must be given.
func (p *Param) Required() bool { return p.In == InPath }

// Integer reports whether the parameter is an integer.
func (p *Param) Integer() bool {
	switch p.Field.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return true
	}
	return false
}

// Accepted returns the closed set of values as text, or nil.
func (p *Param) Accepted() []string {
	if len(p.Rule.GetEnum()) > 0 {
		return p.Rule.GetEnum()
	}
	if ints := p.Rule.GetIntEnum(); len(ints) > 0 {
		out := make([]string, len(ints))
		for i, v := range ints {
			out[i] = fmt.Sprint(v)
		}
		return out
	}
	return nil
}

// Catalog is the ordered set of operations of some services.
type Catalog struct {
	ops    []*Operation
	byName map[string]*Operation
	byRPC  map[string]*Operation
}

// Load reads the operations of Tollgate's REST services from the compiled
// descriptors: the paid AnalyticsService, then the free DiscoveryService.
func Load() (*Catalog, error) {
	return New(
		tollgatev1.File_tollgate_v1_analytics_proto.Services().ByName("AnalyticsService"),
		tollgatev1.File_tollgate_v1_discovery_proto.Services().ByName("DiscoveryService"),
	)
}

// New reads the operations of services, in declaration order. Methods
// without a google.api.http binding are not operations and are skipped.
func New(services ...protoreflect.ServiceDescriptor) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Operation{}, byRPC: map[string]*Operation{}}
	var problems []string
	for _, sd := range services {
		if sd == nil {
			return nil, fmt.Errorf("catalog: nil service descriptor")
		}
		for i := 0; i < sd.Methods().Len(); i++ {
			op, err := newOperation(sd.Methods().Get(i))
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if op == nil {
				continue
			}
			if _, dup := c.byName[op.Name]; dup {
				problems = append(problems, fmt.Sprintf("%s: duplicate operation name %q", op.FullMethod(), op.Name))
				continue
			}
			c.ops = append(c.ops, op)
			c.byName[op.Name] = op
			c.byRPC[op.FullMethod()] = op
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("catalog: %s", strings.Join(problems, "; "))
	}
	return c, nil
}

// Operations returns every operation, in declaration order.
func (c *Catalog) Operations() []*Operation { return c.ops }

// Paid returns the paid operations, in declaration order.
func (c *Catalog) Paid() []*Operation {
	var out []*Operation
	for _, op := range c.ops {
		if op.Paid() {
			out = append(out, op)
		}
	}
	return out
}

// ByName returns the operation called name.
func (c *Catalog) ByName(name string) (*Operation, bool) {
	op, ok := c.byName[name]
	return op, ok
}

// ByFullMethod returns the operation of a gRPC method "/pkg.Service/Method".
func (c *Catalog) ByFullMethod(m string) (*Operation, bool) {
	op, ok := c.byRPC[m]
	return op, ok
}

func newOperation(md protoreflect.MethodDescriptor) (*Operation, error) {
	rule, _ := proto.GetExtension(md.Options(), annotations.E_Http).(*annotations.HttpRule)
	if rule == nil {
		return nil, nil
	}
	meta, _ := proto.GetExtension(md.Options(), tollgatev1.E_Operation).(*tollgatev1.Operation)
	where := string(md.FullName())
	if meta.GetName() == "" {
		return nil, fmt.Errorf("%s: missing (tollgate.v1.operation).name", where)
	}
	if p := meta.GetPriceUsd(); p != "" && !validPrice(p) {
		return nil, fmt.Errorf("%s: price_usd %q is not a positive decimal with at most 6 places", where, p)
	}
	op := &Operation{
		Name:         meta.GetName(),
		Method:       md,
		PriceUSD:     meta.GetPriceUsd(),
		Summary:      meta.GetSummary(),
		ContentType:  meta.GetContentType(),
		ResponseBody: rule.GetResponseBody(),
		UnwrapOneof:  meta.GetUnwrapOneof(),
	}
	for _, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
		get := r.GetGet()
		if get == "" {
			return nil, fmt.Errorf("%s: only GET bindings are supported", where)
		}
		op.HTTPMethod = "GET"
		op.Paths = append(op.Paths, get)
	}
	if op.UnwrapOneof != "" && md.Output().Oneofs().ByName(protoreflect.Name(op.UnwrapOneof)) == nil {
		return nil, fmt.Errorf("%s: unwrap_oneof %q is not a oneof of %s", where, op.UnwrapOneof, md.Output().FullName())
	}
	pathVars := templateVars(op.Path())
	in := md.Input()
	for i := 0; i < in.Fields().Len(); i++ {
		fd := in.Fields().Get(i)
		p := Param{Name: string(fd.Name()), In: InQuery, Field: fd, Rule: FieldRule(fd)}
		if pathVars[p.Name] {
			p.In = InPath
		}
		if err := checkParamDecl(&p); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		op.Params = append(op.Params, p)
	}
	for v := range pathVars {
		if in.Fields().ByName(protoreflect.Name(v)) == nil {
			return nil, fmt.Errorf("%s: path variable {%s} has no request field", where, v)
		}
	}
	return op, nil
}

// FieldRule returns the (tollgate.v1.field) rule of any field; never nil.
func FieldRule(fd protoreflect.FieldDescriptor) *tollgatev1.Field {
	if r, _ := proto.GetExtension(fd.Options(), tollgatev1.E_Field).(*tollgatev1.Field); r != nil {
		return r
	}
	return &tollgatev1.Field{}
}

// JSONValue returns the REST JSON string of an enum value: its
// (tollgate.v1.json_value) option, else its proto name.
func JSONValue(ev protoreflect.EnumValueDescriptor) string {
	if s, _ := proto.GetExtension(ev.Options(), tollgatev1.E_JsonValue).(string); s != "" {
		return s
	}
	return string(ev.Name())
}

// checkParamDecl rejects rules that cannot apply to the field's type, so a
// mistake in a .proto fails generation and start-up rather than a request.
func checkParamDecl(p *Param) error {
	fd := p.Field
	if fd.IsList() || fd.IsMap() {
		return fmt.Errorf("parameter %s: repeated and map parameters are not supported", p.Name)
	}
	r := p.Rule
	switch {
	case fd.Kind() == protoreflect.StringKind:
		if len(r.GetIntEnum()) > 0 || r.Minimum != nil || r.Maximum != nil || r.GetClamp() {
			return fmt.Errorf("parameter %s: integer rules on a string", p.Name)
		}
		if r.GetPattern() != "" {
			re, err := compilePattern(r.GetPattern())
			if err != nil {
				return fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			p.re = re
		}
		p.address = r.GetPattern() == addressPattern
	case p.Integer():
		if len(r.GetEnum()) > 0 || r.GetPattern() != "" {
			return fmt.Errorf("parameter %s: string rules on an integer", p.Name)
		}
		if r.GetClamp() && (r.Minimum == nil || r.Maximum == nil) {
			return fmt.Errorf("parameter %s: clamp needs minimum and maximum", p.Name)
		}
	default:
		return fmt.Errorf("parameter %s: type %s is not supported", p.Name, fd.Kind())
	}
	if p.In == InQuery && !fd.HasPresence() {
		return fmt.Errorf("parameter %s: query parameters must be proto3 optional", p.Name)
	}
	if d := r.GetDefault(); d != "" {
		if err := p.check(d); err != nil {
			return fmt.Errorf("parameter %s: default: %w", p.Name, err)
		}
	}
	return nil
}

// templateVars returns the variable names of a path template such as
// "/rugcheck/{addr}".
func templateVars(path string) map[string]bool {
	vars := map[string]bool{}
	for _, seg := range strings.Split(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			name, _, _ := strings.Cut(seg[1:len(seg)-1], "=")
			vars[name] = true
		}
	}
	return vars
}

// validPrice accepts "0.02", "1", "0.000001": positive, at most 6 decimal
// places (USDC has 6), no sign, no exponent.
func validPrice(s string) bool {
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 6 || strings.Contains(frac, ".") {
		return false
	}
	nonzero := false
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return false
		}
		nonzero = nonzero || r != '0'
	}
	return nonzero
}
