// Package restjson writes Tollgate's wire JSON: the records of the protos
// as the REST API sends them (enum strings, field order, no NaN) and the
// one error body of every failed call. Both facades over the gRPC core
// use it, so a record is the same bytes whether a REST GET or an MCP tool
// call bought it.
package restjson

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate/tollgate/service/catalog"
)

// Marshaler is the gateway's runtime.Marshaler. It writes protojson's
// canonical mapping with EmitUnpopulated (every field present, unset
// messages and wrappers as null, proto3 optional fields omitted when unset),
// with differences that make it Tollgate's REST JSON:
//
//   - enum values are written as their (tollgate.v1.json_value) strings;
//   - keys follow the proto field order and no whitespace is added
//     (protojson randomises spacing on purpose);
//   - what the OpenAPI document does not allow is an error rather than
//     output: NaN and infinities (not the strings "NaN"/"Infinity"), an
//     unset message field that is neither a wrapper nor (field).nullable
//     (it would be null), and an enum left at its *_UNSPECIFIED zero. A
//     response that cannot be written is a 500, which is never charged.
//
// It encodes straight from protoreflect into one buffer rather than
// rewriting protojson's output, which keeps key order and costs less than
// protojson itself (see BenchmarkMarshal).
type Marshaler struct {
	enums map[protoreflect.EnumValueDescriptor]string // quoted wire strings
}

var (
	errNotFinite  = errors.New("restjson: NaN or infinite number")
	errUnsetField = errors.New("restjson: required field left unset")
)

// nullable reports whether an unset message field may be written as null:
// wrappers ("number or null") and messages marked (field).nullable.
func nullable(fd protoreflect.FieldDescriptor) bool {
	if md := fd.Message(); md.FullName().Parent() == "google.protobuf" && strings.HasSuffix(string(md.Name()), "Value") {
		return true
	}
	return catalog.FieldRule(fd).GetNullable()
}

// New indexes the (json_value) strings of every enum in the
// registered files of package pkg.
func New(files *protoregistry.Files, pkg protoreflect.FullName) *Marshaler {
	m := &Marshaler{enums: map[protoreflect.EnumValueDescriptor]string{}}
	var walkEnums func(protoreflect.EnumDescriptors)
	walkEnums = func(eds protoreflect.EnumDescriptors) {
		for i := 0; i < eds.Len(); i++ {
			vals := eds.Get(i).Values()
			for j := 0; j < vals.Len(); j++ {
				m.enums[vals.Get(j)] = strconv.Quote(catalog.JSONValue(vals.Get(j)))
			}
		}
	}
	var walkMessages func(protoreflect.MessageDescriptors)
	walkMessages = func(mds protoreflect.MessageDescriptors) {
		for i := 0; i < mds.Len(); i++ {
			walkEnums(mds.Get(i).Enums())
			walkMessages(mds.Get(i).Messages())
		}
	}
	files.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
		walkEnums(fd.Enums())
		walkMessages(fd.Messages())
		return true
	})
	return m
}

// responseBody is what grpc-gateway wraps a response in when its HTTP rule
// names a response_body field.
type responseBody interface{ XXX_ResponseBody() interface{} }

// ContentType implements runtime.Marshaler: an HttpBody says its own.
func (m *Marshaler) ContentType(v interface{}) string {
	if rb, ok := v.(responseBody); ok {
		v = rb.XXX_ResponseBody()
	}
	if hb, ok := v.(*httpbody.HttpBody); ok && hb.GetContentType() != "" {
		return hb.GetContentType()
	}
	return "application/json"
}

// Marshal implements runtime.Marshaler.
func (m *Marshaler) Marshal(v interface{}) ([]byte, error) {
	switch v := v.(type) {
	case *httpbody.HttpBody:
		return v.GetData(), nil
	case proto.Message:
		return m.appendMessage(make([]byte, 0, 512), v.ProtoReflect())
	default:
		return json.Marshal(v)
	}
}

// Unmarshal implements runtime.Marshaler. Every operation is a GET, so it
// only serves grpc-gateway's own needs.
func (m *Marshaler) Unmarshal(data []byte, v interface{}) error {
	if msg, ok := v.(proto.Message); ok {
		return protojson.Unmarshal(data, msg)
	}
	return json.Unmarshal(data, v)
}

// NewDecoder implements runtime.Marshaler.
func (m *Marshaler) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v interface{}) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		return m.Unmarshal(data, v)
	})
}

// NewEncoder implements runtime.Marshaler.
func (m *Marshaler) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v interface{}) error {
		b, err := m.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}

func (m *Marshaler) appendMessage(b []byte, msg protoreflect.Message) ([]byte, error) {
	md := msg.Descriptor()
	if md.FullName().Parent() == "google.protobuf" {
		return appendWellKnown(b, msg)
	}
	b = append(b, '{')
	fields := md.Fields()
	first := true
	var err error
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !msg.Has(fd) {
			continue // unset proto3 optional or oneof member: omitted
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, fd.JSONName()...)
		b = append(b, '"', ':')
		switch {
		case fd.IsList():
			b, err = m.appendList(b, fd, msg.Get(fd).List())
		case fd.IsMap():
			b, err = m.appendMap(b, fd, msg.Get(fd).Map())
		case fd.Message() != nil && !msg.Has(fd):
			if !nullable(fd) {
				return nil, fmt.Errorf("%s: %w", fd.FullName(), errUnsetField)
			}
			b = append(b, "null"...)
		default:
			b, err = m.appendSingular(b, fd, msg.Get(fd))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fd.FullName(), err)
		}
	}
	return append(b, '}'), nil
}

func (m *Marshaler) appendList(b []byte, fd protoreflect.FieldDescriptor, l protoreflect.List) ([]byte, error) {
	b = append(b, '[')
	var err error
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = m.appendSingular(b, fd, l.Get(i)); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendMap writes map entries with keys in protojson's order: strings
// lexically, integers numerically, false before true.
func (m *Marshaler) appendMap(b []byte, fd protoreflect.FieldDescriptor, mp protoreflect.Map) ([]byte, error) {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareMapKeys)
	b = append(b, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendString(b, k.String()); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = m.appendSingular(b, fd.MapValue(), mp.Get(k)); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func compareMapKeys(x, y protoreflect.MapKey) int {
	switch xv := x.Interface().(type) {
	case string:
		yv := y.String()
		switch {
		case xv < yv:
			return -1
		case xv > yv:
			return 1
		}
		return 0
	case bool:
		switch {
		case xv == y.Bool():
			return 0
		case !xv:
			return -1
		}
		return 1
	case int32, int64:
		return cmpInt(x.Int(), y.Int())
	default:
		return cmpInt(int64(x.Uint()), int64(y.Uint()))
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendSingular writes one value of fd (an element, for lists and maps).
func (m *Marshaler) appendSingular(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool()), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(b, v.Int(), 10), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(b, v.Uint(), 10), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		b = append(b, '"')
		return append(strconv.AppendInt(b, v.Int(), 10), '"'), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		b = append(b, '"')
		return append(strconv.AppendUint(b, v.Uint(), 10), '"'), nil
	case protoreflect.FloatKind:
		return appendFloat(b, v.Float(), 32)
	case protoreflect.DoubleKind:
		return appendFloat(b, v.Float(), 64)
	case protoreflect.StringKind:
		return appendString(b, v.String())
	case protoreflect.BytesKind:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v.Bytes())
		return append(b, '"'), nil
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return append(b, "null"...), nil
		}
		ev := fd.Enum().Values().ByNumber(v.Enum())
		if ev == nil {
			return strconv.AppendInt(b, int64(v.Enum()), 10), nil
		}
		if ev.Number() == 0 && strings.HasSuffix(string(ev.Name()), "_UNSPECIFIED") {
			return nil, errUnsetField
		}
		if s, ok := m.enums[ev]; ok {
			return append(b, s...), nil
		}
		return appendString(b, catalog.JSONValue(ev))
	default:
		return m.appendMessage(b, v.Message())
	}
}

// appendWellKnown writes a google.protobuf message: wrappers as their value,
// anything else (Struct, Timestamp, ...) as protojson writes it.
func appendWellKnown(b []byte, msg protoreflect.Message) ([]byte, error) {
	md := msg.Descriptor()
	switch md.Name() {
	case "DoubleValue", "FloatValue", "Int32Value", "UInt32Value", "Int64Value",
		"UInt64Value", "BoolValue", "StringValue", "BytesValue":
		fd := md.Fields().ByNumber(1)
		return (&Marshaler{}).appendSingular(b, fd, msg.Get(fd))
	}
	out, err := protojson.Marshal(msg.Interface())
	if err != nil {
		return nil, err
	}
	return appendCompact(b, out)
}

func appendCompact(b, js []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, js); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// appendFloat formats like protojson (encoding/json's rules), refusing
// values that JSON numbers cannot hold.
func appendFloat(b []byte, n float64, bitSize int) ([]byte, error) {
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return nil, errNotFinite
	}
	format := byte('f')
	if abs := math.Abs(n); abs != 0 {
		if bitSize == 64 && (abs < 1e-6 || abs >= 1e21) ||
			bitSize == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, n, format, -1, bitSize)
	if format == 'e' { // e-09 -> e-9, as encoding/json and protojson write it
		if l := len(b); l >= 4 && b[l-4] == 'e' && b[l-3] == '-' && b[l-2] == '0' {
			b[l-2] = b[l-1]
			b = b[:l-1]
		}
	}
	return b, nil
}

var errInvalidUTF8 = errors.New("restjson: invalid UTF-8 in string")

// appendString quotes s as protojson does: escapes for '"', '\\' and
// control characters only; invalid UTF-8 is an error.
func appendString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, errInvalidUTF8
			}
			i += size
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

const hex = "0123456789abcdef"

// StatusOf is the status a call's error is answered with: its own gRPC
// status; DeadlineExceeded for a deadline, whoever's; or, for an error
// that is no status (the caller's own failure, which it logs: unexpected
// is true), Internal with a fixed text, since a status message reaches
// the client.
func StatusOf(err error) (st *status.Status, unexpected bool) {
	st, ok := status.FromError(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, "deadline exceeded"), false
	case !ok:
		return status.New(codes.Internal, "internal error"), true
	}
	return st, false
}

// StatusBody returns the HTTP status of a gRPC status and its Error body:
//
//	{"error":"invalid_argument","message":"...","status":400,"param":"product","accepted":["BTC-USD","ETH-USD"]}
//
// "error" is the gRPC code in snake case, "status" repeats the HTTP
// status, "param" and "accepted" appear when a parameter is to blame.
// gRPC codes become HTTP statuses here and nowhere else, by
// grpc-gateway's standard table (runtime.HTTPStatusFromCode):
//
//	InvalidArgument, FailedPrecondition, OutOfRange  400
//	NotFound                                         404
//	Unimplemented                                    501
//	Unavailable                                      503
//	DeadlineExceeded                                 504
//	Internal, Unknown, DataLoss                      500
func StatusBody(st *status.Status) (int, []byte) {
	code := st.Code()
	body := &tollgatev1.Error{Error: CodeName(code), Message: st.Message()}
	for _, d := range st.Details() {
		if e, ok := d.(*tollgatev1.Error); ok {
			body.Param, body.Accepted = e.Param, e.Accepted
		}
	}
	return ErrorBody(runtime.HTTPStatusFromCode(code), body)
}

// ErrorBody returns body as JSON with httpStatus in its status field, and
// the status to answer with. Text that echoes the request (paths,
// parameter names) is made valid UTF-8, so that a request with %FF in it
// gets its 400 or 404 rather than a marshaling failure.
func ErrorBody(httpStatus int, body *tollgatev1.Error) (int, []byte) {
	body.Status = int32(httpStatus)
	body.Message = strings.ToValidUTF8(body.Message, "\uFFFD")
	if body.Param != nil {
		p := strings.ToValidUTF8(body.GetParam(), "\uFFFD")
		body.Param = &p
	}
	for i, a := range body.Accepted {
		body.Accepted[i] = strings.ToValidUTF8(a, "\uFFFD")
	}
	out, err := (&Marshaler{}).Marshal(body)
	if err != nil { // unreachable: every string above is valid UTF-8
		return http.StatusInternalServerError, []byte(`{"error":"internal","message":"internal error","status":500,"accepted":[]}`)
	}
	return httpStatus, out
}

// CodeName returns a gRPC code in snake case: InvalidArgument ->
// "invalid_argument".
func CodeName(c codes.Code) string {
	var out []rune
	for i, r := range c.String() {
		if unicode.IsUpper(r) {
			if i > 0 {
				out = append(out, '_')
			}
			r = unicode.ToLower(r)
		}
		out = append(out, r)
	}
	return string(out)
}
