package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
)

// ParamError is a parameter value the contract refuses. Its message names
// the parameter and, where the set is closed, the accepted values.
type ParamError struct {
	// Param is the offending parameter.
	Param string
	// Problem says what is wrong, e.g. `has unsupported value "XYZ"`.
	Problem string
	// Accepted lists the values (or, for an unknown parameter, the
	// parameters) that would be accepted; nil when the set is open.
	Accepted []string
	// NotFound marks a path value outside a closed set: such a path names
	// no resource, so it is a 404 rather than a 400.
	NotFound bool
}

func (e *ParamError) Error() string {
	msg := fmt.Sprintf("parameter %q %s", e.Param, e.Problem)
	if len(e.Accepted) > 0 {
		msg += "; accepted: " + strings.Join(e.Accepted, ", ")
	}
	return msg
}

// GRPCStatus is the one mapping of a parameter error to a status, used by
// the gRPC service and the gateway alike: InvalidArgument, or NotFound for
// a path value outside its set, with a tollgatev1.Error detail naming the
// parameter and the accepted values.
func (e *ParamError) GRPCStatus() *status.Status {
	code := codes.InvalidArgument
	if e.NotFound {
		code = codes.NotFound
	}
	st := status.New(code, e.Error())
	param := strings.ToValidUTF8(e.Param, "\uFFFD")
	if withDetail, err := st.WithDetails(&tollgatev1.Error{Param: &param, Accepted: e.Accepted}); err == nil {
		return withDetail
	}
	return st
}

var integerText = regexp.MustCompile(`^[+-]?[0-9]+$`)

func compilePattern(p string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", p, err)
	}
	return re, nil
}

// CheckHTTP checks the raw path values and query of a REST request for o,
// before any payment logic. Unknown and repeated query parameters are
// refused on paid operations (a misspelt parameter must not buy the answer
// to another question) and ignored on free ones. It returns the query with
// clamped integers rewritten into range, ready for the gateway.
func (o *Operation) CheckHTTP(pathValue func(name string) string, query url.Values) (url.Values, error) {
	for i := range o.Params {
		p := &o.Params[i]
		if p.In != InPath {
			continue
		}
		if _, err := p.normalize(pathValue(p.Name)); err != nil {
			return nil, err
		}
	}
	out := url.Values{}
	if o.Paid() {
		for _, name := range sortedKeys(query) {
			p := o.param(name)
			if p == nil || p.In != InQuery {
				names := o.queryNames()
				if len(names) == 0 {
					return nil, &ParamError{Param: name, Problem: "is not accepted: " + o.Path() + " takes no query parameters"}
				}
				return nil, &ParamError{Param: name, Problem: "is not a query parameter of " + o.Path(), Accepted: names}
			}
		}
	}
	for name, vals := range query {
		if p := o.param(name); p == nil || p.In != InQuery {
			out[name] = vals
		}
	}
	for i := range o.Params {
		p := &o.Params[i]
		vals, given := query[p.Name]
		if p.In != InQuery || !given {
			continue
		}
		if len(vals) != 1 {
			return nil, &ParamError{Param: p.Name, Problem: fmt.Sprintf("is given %d times; give it once", len(vals))}
		}
		v, err := p.normalize(vals[0])
		if err != nil {
			return nil, err
		}
		out.Set(p.Name, v)
	}
	return out, nil
}

// CheckArguments checks the arguments of a call of o as an MCP tool, a
// JSON object of parameter names to values (a string parameter's value a
// JSON string, an integer's a JSON integer; null is the same as absent),
// by the rules CheckHTTP applies to a REST request: unknown parameters
// are refused and the path's are required. It returns the request the
// service will run as normalized text, every parameter, path and query
// alike, given or defaulted: two calls that differ only in spelling
// (an address's letter case, an integer clamped to the same bound, a
// default left out or written) get the same values, so they identify
// the same paid call.
func (o *Operation) CheckArguments(raw json.RawMessage) (url.Values, error) {
	var args map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return nil, &ParamError{Param: "arguments", Problem: "must be a JSON object of parameter names to values"}
		}
	}
	out := url.Values{}
	for _, name := range slices.Sorted(maps.Keys(args)) {
		p := o.param(name)
		if p == nil {
			var names []string
			for _, q := range o.Params {
				names = append(names, q.Name)
			}
			if len(names) == 0 {
				return nil, &ParamError{Param: name, Problem: "is not accepted: " + o.Name + " takes no arguments"}
			}
			return nil, &ParamError{Param: name, Problem: "is not an argument of " + o.Name, Accepted: names}
		}
		if string(args[name]) == "null" {
			continue
		}
		text, err := p.argumentText(args[name])
		if err != nil {
			return nil, err
		}
		n, err := p.normalize(text)
		if err != nil {
			return nil, err
		}
		out.Set(name, n)
	}
	for i := range o.Params {
		p := &o.Params[i]
		if out.Has(p.Name) {
			continue
		}
		if p.Required() {
			return nil, &ParamError{Param: p.Name, Problem: "is required"}
		}
		if d := p.Rule.GetDefault(); d != "" {
			n, err := p.normalize(d) // checked when the catalog was built
			if err != nil {
				return nil, err
			}
			out.Set(p.Name, n)
		}
	}
	return out, nil
}

// argumentText is the text of a JSON argument of p's type.
func (p *Param) argumentText(raw json.RawMessage) (string, error) {
	if !p.Integer() {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", &ParamError{Param: p.Name, Problem: "must be a JSON string, got " + string(raw), Accepted: p.Accepted()}
		}
		return s, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var n json.Number
	if err := d.Decode(&n); err != nil || raw[0] == '"' || !integerText.MatchString(n.String()) {
		return "", &ParamError{Param: p.Name, Problem: "must be a JSON integer, got " + string(raw), Accepted: p.Accepted()}
	}
	return n.String(), nil
}

// NewRequest returns o's request message with args, checked text by
// parameter name (CheckArguments' answer), and the defaults of the
// parameters not given.
func (o *Operation) NewRequest(args url.Values) (proto.Message, error) {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(o.Method.Input().FullName())
	if err != nil {
		return nil, fmt.Errorf("catalog: %s: %w", o.FullMethod(), err)
	}
	m := mt.New()
	for i := range o.Params {
		p := &o.Params[i]
		if !args.Has(p.Name) {
			continue
		}
		v, err := p.value(args.Get(p.Name))
		if err != nil {
			return nil, err
		}
		m.Set(p.Field, v)
	}
	if err := o.Apply(m.Interface()); err != nil {
		return nil, err
	}
	return m.Interface(), nil
}

// Apply checks a typed request message of o (a gRPC call, or a REST call
// after CheckHTTP), fills the defaults of absent parameters and clamps
// integers where the rule says so.
func (o *Operation) Apply(req proto.Message) error {
	m := req.ProtoReflect()
	if m.Descriptor().FullName() != o.Method.Input().FullName() {
		return fmt.Errorf("catalog: %s is not the request of %s", m.Descriptor().FullName(), o.FullMethod())
	}
	for i := range o.Params {
		p := &o.Params[i]
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(p.Name))
		if fd.HasPresence() && !m.Has(fd) {
			if d := p.Rule.GetDefault(); d != "" {
				v, err := p.value(d)
				if err != nil {
					return err
				}
				m.Set(fd, v)
			}
			continue
		}
		text := m.Get(fd).String()
		if p.Integer() {
			text = strconv.FormatInt(m.Get(fd).Int(), 10)
		}
		v, err := p.value(text)
		if err != nil {
			return err
		}
		m.Set(fd, v)
	}
	return nil
}

// value checks text and converts it into the field's value.
func (p *Param) value(text string) (protoreflect.Value, error) {
	n, err := p.normalize(text)
	if err != nil {
		return protoreflect.Value{}, err
	}
	if !p.Integer() {
		return protoreflect.ValueOfString(n), nil
	}
	i, err := strconv.ParseInt(n, 10, 32)
	if err != nil {
		return protoreflect.Value{}, &ParamError{Param: p.Name, Problem: fmt.Sprintf("value %q is out of range", text)}
	}
	return protoreflect.ValueOfInt32(int32(i)), nil
}

func (p *Param) check(text string) error {
	_, err := p.normalize(text)
	return err
}

// normalize checks one raw value against the rule and returns it as the
// service reads it: clamped integers are rewritten into range, integers
// written in their plain decimal form ("+07" is "7"), addresses
// checksummed. Enum values are matched exactly, so no other spelling of
// one gets this far.
func (p *Param) normalize(text string) (string, error) {
	r := p.Rule
	fail := func(problem string, accepted []string) (string, error) {
		return "", &ParamError{Param: p.Name, Problem: problem, Accepted: accepted, NotFound: p.In == InPath && len(accepted) > 0}
	}
	if !p.Integer() {
		if enum := r.GetEnum(); len(enum) > 0 && !slices.Contains(enum, text) {
			return fail(fmt.Sprintf("has unsupported value %q", text), enum)
		}
		if p.re != nil && !p.re.MatchString(text) {
			return fail(fmt.Sprintf("value %q does not match %s", text, r.GetPattern()), nil)
		}
		if p.address {
			return common.HexToAddress(text).Hex(), nil
		}
		return text, nil
	}
	if !integerText.MatchString(text) {
		problem := fmt.Sprintf("must be an integer, got %q", text)
		if r.Minimum != nil && r.Maximum != nil {
			problem = fmt.Sprintf("must be an integer from %d to %d, got %q", *r.Minimum, *r.Maximum, text)
			if r.GetClamp() {
				problem = fmt.Sprintf("must be an integer (values outside %d-%d are clamped into it), got %q", *r.Minimum, *r.Maximum, text)
			}
		}
		return fail(problem, p.Accepted())
	}
	n, _ := new(big.Int).SetString(strings.TrimPrefix(text, "+"), 10)
	if ints := r.GetIntEnum(); len(ints) > 0 {
		if !n.IsInt64() || !slices.Contains(ints, int32(n.Int64())) || n.Int64() != int64(int32(n.Int64())) {
			return fail(fmt.Sprintf("has unsupported value %s", text), p.Accepted())
		}
	}
	lo, hi := r.Minimum, r.Maximum
	switch {
	case lo != nil && n.Cmp(big.NewInt(int64(*lo))) < 0:
		if !r.GetClamp() {
			return fail(fmt.Sprintf("must be at least %d, got %s", *lo, text), nil)
		}
		n.SetInt64(int64(*lo))
	case hi != nil && n.Cmp(big.NewInt(int64(*hi))) > 0:
		if !r.GetClamp() {
			return fail(fmt.Sprintf("must be at most %d, got %s", *hi, text), nil)
		}
		n.SetInt64(int64(*hi))
	}
	if !n.IsInt64() || n.Int64() != int64(int32(n.Int64())) {
		return fail(fmt.Sprintf("value %s is out of range", text), nil)
	}
	return n.String(), nil
}

func (o *Operation) param(name string) *Param {
	for i := range o.Params {
		if o.Params[i].Name == name {
			return &o.Params[i]
		}
	}
	return nil
}

func (o *Operation) queryNames() []string {
	var names []string
	for _, p := range o.Params {
		if p.In == InQuery {
			names = append(names, p.Name)
		}
	}
	return names
}

func sortedKeys(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
