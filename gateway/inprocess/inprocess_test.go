package inprocess_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/gateway/inprocess"
)

// TestConn: a call reaches the registered service through the
// interceptors in their order, with the caller's metadata as incoming
// metadata and its deadline; the headers an interceptor sets reach the
// caller; the reply is a copy; errors arrive as a client of a grpc.Server
// sees them.
func TestConn(t *testing.T) {
	t.Parallel()
	var order []string
	var sawMD, sawDeadline bool
	record := func(name string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			order = append(order, name+" "+info.FullMethod)
			if md, ok := metadata.FromIncomingContext(ctx); ok && slices.Equal(md.Get("x-caller"), []string{"test"}) {
				sawMD = true
			}
			_, sawDeadline = ctx.Deadline()
			if err := grpc.SetHeader(ctx, metadata.Pairs("x-served-by", name)); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}
	}
	refuse := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		switch req.(*healthpb.HealthCheckRequest).GetService() {
		case "refused":
			return nil, status.Error(codes.InvalidArgument, "refused")
		case "plain":
			return nil, errors.New("a plain error")
		case "slow":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return h(ctx, req)
	}
	conn := inprocess.New(record("outer"), record("inner"), refuse)
	srv := health.NewServer()
	srv.SetServingStatus("tollgate", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(conn, srv)
	client := healthpb.NewHealthClient(conn)

	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-caller", "test"), time.Minute)
	defer cancel()
	var header metadata.MD
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "tollgate"}, grpc.Header(&header))
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", resp, err)
	}
	want := []string{"outer /grpc.health.v1.Health/Check", "inner /grpc.health.v1.Health/Check"}
	if !slices.Equal(order, want) || !sawMD || !sawDeadline {
		t.Errorf("interceptors ran %q (want %q), saw the metadata %v, the deadline %v", order, want, sawMD, sawDeadline)
	}
	if got := header.Get("x-served-by"); !slices.Equal(got, []string{"outer", "inner"}) {
		t.Errorf("header x-served-by %q", got)
	}

	for _, tt := range []struct {
		service string
		timeout time.Duration
		code    codes.Code
	}{
		{"unknown", time.Minute, codes.NotFound}, // the health server's own answer
		{"refused", time.Minute, codes.InvalidArgument},
		{"plain", time.Minute, codes.Unknown},
		{"slow", 10 * time.Millisecond, codes.DeadlineExceeded},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: tt.service})
		cancel()
		if status.Code(err) != tt.code {
			t.Errorf("%s: %v, want %s", tt.service, err, tt.code)
		}
	}
	if err := conn.Invoke(context.Background(), "/grpc.health.v1.Health/Nope", &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("an unknown method: %v", err)
	}
	if _, err := client.Watch(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("a stream: %v", err)
	}
}
