// Package inprocess is a gRPC client connection to services in the same
// process: a unary call runs the registered service's handler through the
// same server interceptors a grpc.Server runs (deadlines, logging, panic
// recovery, argument checks), with the caller's context, metadata and
// deadline, and without encoding the messages or crossing a socket. The
// REST gateway and the MCP facade call the analytics through it; the gRPC
// listener keeps serving the same services to internal clients.
package inprocess

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Conn is a grpc.ClientConnInterface and a grpc.ServiceRegistrar: the
// services registered on it answer its calls. Streams are not supported.
type Conn struct {
	methods map[string]method // by full method name, "/pkg.Service/Method"
	chain   []grpc.UnaryServerInterceptor
}

// method is one unary method of a registered service.
type method struct {
	impl    any
	handler grpc.MethodHandler
}

var (
	_ grpc.ClientConnInterface = (*Conn)(nil)
	_ grpc.ServiceRegistrar    = (*Conn)(nil)
)

// New returns a connection running calls through interceptors, outermost
// first, as grpc.ChainUnaryInterceptor orders them.
func New(interceptors ...grpc.UnaryServerInterceptor) *Conn {
	return &Conn{methods: map[string]method{}, chain: interceptors}
}

// RegisterService implements grpc.ServiceRegistrar: impl answers sd's
// unary methods.
func (c *Conn) RegisterService(sd *grpc.ServiceDesc, impl any) {
	for _, m := range sd.Methods {
		c.methods["/"+sd.ServiceName+"/"+m.MethodName] = method{impl: impl, handler: m.Handler}
	}
}

// Invoke implements grpc.ClientConnInterface: the handler receives a copy
// of args and reply becomes a copy of its answer, as across a socket. The
// outgoing metadata arrives as incoming metadata; headers and trailers
// the handler sets reach grpc.Header and grpc.Trailer call options. An
// error is a status error, as a client of a grpc.Server sees it.
func (c *Conn) Invoke(ctx context.Context, fullMethod string, args, reply any, opts ...grpc.CallOption) error {
	m, ok := c.methods[fullMethod]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", fullMethod)
	}
	in, ok1 := args.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok1 || !ok2 {
		return status.Errorf(codes.Internal, "%s: messages must be protocol buffers", fullMethod)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	ctx = metadata.NewIncomingContext(ctx, md.Copy())
	st := &stream{method: fullMethod}
	ctx = grpc.NewContextWithServerTransportStream(ctx, st)
	dec := func(v any) error {
		m, ok := v.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "%s: the request must be a protocol buffer", fullMethod)
		}
		proto.Merge(m, in)
		return nil
	}
	resp, err := m.handler(m.impl, ctx, dec, c.intercept)
	st.deliver(opts)
	if err != nil {
		return statusOf(err)
	}
	r, ok := resp.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "%s: the answer is not a protocol buffer", fullMethod)
	}
	proto.Reset(out)
	proto.Merge(out, r)
	return nil
}

// NewStream implements grpc.ClientConnInterface: no service reached
// through Conn streams.
func (c *Conn) NewStream(_ context.Context, _ *grpc.StreamDesc, fullMethod string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Errorf(codes.Unimplemented, "%s: streams are not served in process", fullMethod)
}

// intercept runs handler through the chain, outermost first.
func (c *Conn) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	next := handler
	for i := len(c.chain) - 1; i >= 0; i-- {
		ic, inner := c.chain[i], next
		next = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, inner) }
	}
	return next(ctx, req)
}

// statusOf is err as a client of a grpc.Server receives it: a status
// error as it is, a context's error as its code, anything else Unknown.
func statusOf(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unknown, err.Error())
}

// stream is the grpc.ServerTransportStream a handler sees: it keeps the
// headers and trailers the handler sets.
type stream struct {
	method          string
	mu              sync.Mutex
	header, trailer metadata.MD
}

func (s *stream) Method() string { return s.method }

func (s *stream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.header = metadata.Join(s.header, md)
	return nil
}

func (s *stream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *stream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

// deliver hands the headers and trailers to the call's options.
func (s *stream) deliver(opts []grpc.CallOption) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = s.header.Copy()
		case grpc.TrailerCallOption:
			*o.TrailerAddr = s.trailer.Copy()
		}
	}
}
