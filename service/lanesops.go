package service

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/lanes"
)

// Tape is the operator's trade tape; *store.DB provides it.
type Tape interface {
	Lanes(ctx context.Context) ([]lanes.Lane, error)
	ImportCloses(ctx context.Context, closes []lanes.Close) (inserted, duplicates int, err error)
}

// lanesChain is the chain the lanes trade on (CAIP-2).
const lanesChain = "eip155:8453"

// lanesDisclaimer is said with every /lanes answer.
const lanesDisclaimer = "Close counts of the operator's own trade tape: activity, not a track record. " +
	"No win rate, no P&L, not investment advice."

// GetLanes implements tollgatev1.AnalyticsServiceServer.
func (a *Analytics) GetLanes(ctx context.Context, _ *tollgatev1.GetLanesRequest) (*tollgatev1.GetLanesResponse, error) {
	if a.tape == nil {
		return nil, status.Error(codes.Unimplemented, "no lanes tape is configured on this server")
	}
	ls, err := a.tape.Lanes(ctx)
	if err != nil {
		return nil, err
	}
	resp := &tollgatev1.GetLanesResponse{
		Lanes: map[string]*tollgatev1.LaneRecord{}, Chain: lanesChain, Disclaimer: lanesDisclaimer,
		AsOf: time.Now().UTC().Format(time.RFC3339),
	}
	for _, l := range ls {
		resp.Lanes[l.Name] = &tollgatev1.LaneRecord{Closes: uint32(l.Closes), LastClose: wrapperspb.String(l.LastClose.UTC().Format(time.RFC3339))}
		resp.TotalCloses += uint32(l.Closes)
	}
	return resp, nil
}

// LaneServer implements tollgatev1.LaneServiceServer: ingestion of closes,
// registered on the private gRPC listener only.
type LaneServer struct {
	tollgatev1.UnimplementedLaneServiceServer
	tape Tape
}

// NewLaneServer returns the ingestion service over a tape.
func NewLaneServer(tape Tape) *LaneServer { return &LaneServer{tape: tape} }

// maxImport bounds the closes of one ImportCloses request.
const maxImport = 10_000

// ImportCloses implements tollgatev1.LaneServiceServer: every close is
// checked first; one bad close refuses the request with its index.
func (s *LaneServer) ImportCloses(ctx context.Context, req *tollgatev1.ImportClosesRequest) (*tollgatev1.ImportClosesResponse, error) {
	if n := len(req.GetCloses()); n == 0 || n > maxImport {
		return nil, status.Errorf(codes.InvalidArgument, "closes: %d given, want 1 to %d", n, maxImport)
	}
	now := time.Now()
	closes := make([]lanes.Close, 0, len(req.GetCloses()))
	for i, pc := range req.GetCloses() {
		t, err := lanes.ParseTime(pc.GetClosedAt())
		c := lanes.Close{ID: pc.GetId(), Lane: pc.GetLane(), ClosedAt: t}
		if err == nil {
			err = c.Check(now)
		}
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "closes[%d]: %v", i, err)
		}
		closes = append(closes, c)
	}
	inserted, dups, err := s.tape.ImportCloses(ctx, closes)
	if err != nil {
		return nil, err
	}
	return &tollgatev1.ImportClosesResponse{Received: uint32(len(closes)), Inserted: uint32(inserted), Duplicates: uint32(dups)}, nil
}
