package service

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/service/catalog"
)

// Interceptors returns the unary interceptors every Tollgate gRPC server
// runs, outermost first: a log line per call (panics included), panic
// recovery, and the catalog's parameter rules (defaults filled, integers
// clamped, bad values refused) so that every handler receives a checked
// request.
func Interceptors(cat *catalog.Catalog, logger *slog.Logger) []grpc.UnaryServerInterceptor {
	return []grpc.UnaryServerInterceptor{
		logUnary(logger),
		recoverUnary(logger),
		checkUnary(cat, logger),
	}
}

func recoverUnary(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = grpcError(ctx, logger, fmt.Errorf("panic in %s: %v\n%s", info.FullMethod, p, debug.Stack()))
			}
		}()
		return handler(ctx, req)
	}
}

func logUnary(logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		level := slog.LevelDebug
		if err != nil {
			level = slog.LevelInfo
		}
		logger.Log(ctx, level, "grpc", "method", info.FullMethod, "code", status.Code(err).String(), "duration", time.Since(start))
		return resp, err
	}
}

func checkUnary(cat *catalog.Catalog, logger *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		op, ok := cat.ByFullMethod(info.FullMethod)
		if !ok { // a private method (LaneService): no parameter rules
			resp, err := handler(ctx, req)
			return resp, grpcError(ctx, logger, err)
		}
		msg, ok := req.(proto.Message)
		if !ok {
			return nil, grpcError(ctx, logger, fmt.Errorf("%s: request %T is not a proto message", info.FullMethod, req))
		}
		if err := op.Apply(msg); err != nil {
			return nil, grpcError(ctx, logger, err)
		}
		resp, err := handler(ctx, req)
		return resp, grpcError(ctx, logger, err)
	}
}
