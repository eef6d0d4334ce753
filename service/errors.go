package service

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/service/catalog"
	"github.com/tollgate/tollgate/service/chain"
	"github.com/tollgate/tollgate/service/lanes"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/rules"
)

// internalMessage is all a client learns of an unexpected error; the
// details go to the log.
const internalMessage = "internal error"

// grpcError is the one place domain errors become gRPC status codes:
//
//	*catalog.ParamError                InvalidArgument (NotFound for a path value outside its set)
//	market.ErrUnavailable,             Unavailable: the candle source failed and no
//	market.ErrUnknownProduct           cached series is young enough to stand in
//	rules.ErrInsufficientData,         Unavailable: the source answered too few or
//	rules.ErrBadClose                  impossible candles
//	*errNotToken                       FailedPrecondition (400): no code, or a 7702 account
//	chain.ErrUnavailable               Unavailable
//	errWhalesNotReady                  Unavailable: no completed whale scan yet
//	lanes.ErrConflict                  AlreadyExists: a close id stored differently
//	context.DeadlineExceeded           DeadlineExceeded
//	context.Canceled                   Canceled
//	an error that already is a status  unchanged
//	anything else                      Internal, with a fixed message
//
// Parameter errors carry a tollgatev1.Error detail naming the parameter and
// the accepted values (catalog.ParamError.GRPCStatus), which the gateway
// copies into the REST error body.
func grpcError(ctx context.Context, logger *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var pe *catalog.ParamError
	switch {
	case errors.As(err, &pe):
		return pe.GRPCStatus().Err()
	case errors.Is(err, market.ErrUnavailable), errors.Is(err, market.ErrUnknownProduct):
		logger.WarnContext(ctx, "candle source failed", "err", err)
		return status.Error(codes.Unavailable, "the candle source is unavailable; nothing was charged, try again later")
	case errors.Is(err, rules.ErrInsufficientData), errors.Is(err, rules.ErrBadClose):
		logger.WarnContext(ctx, "candles unusable", "err", err)
		return status.Error(codes.Unavailable, "the candle source returned too few or unusable candles; try again later")
	case errors.As(err, new(*errNotToken)):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, errNoChain):
		return status.Error(codes.Unimplemented, "no chain is configured on this server")
	case errors.Is(err, lanes.ErrConflict):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, errWhalesNotReady):
		return status.Error(codes.Unavailable, err.Error()+"; nothing was charged, try again shortly")
	case errors.Is(err, chain.ErrUnavailable):
		logger.WarnContext(ctx, "chain node failed", "err", err)
		return status.Error(codes.Unavailable, "the chain node is unavailable; nothing was charged, try again later")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	logger.ErrorContext(ctx, "internal error", "err", err)
	return status.Error(codes.Internal, internalMessage)
}
