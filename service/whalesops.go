package service

import (
	"context"
	"errors"
	"time"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/whales"
)

// Whales is what /whales needs: the last completed scan (nil before the
// first). *whales.Scanner provides it.
type Whales interface {
	Snapshot() *whales.Snapshot
}

// errWhalesNotReady: the scanner has not completed its first pass.
var errWhalesNotReady = errors.New("the whale scan has not completed its first pass")

// whaleAnswer is the response built for one snapshot, reused until the
// scanner publishes the next.
type whaleAnswer struct {
	snap *whales.Snapshot
	resp *tollgatev1.GetWhalesResponse
}

// GetWhales implements tollgatev1.AnalyticsServiceServer: it answers from
// the last completed snapshot and never reads the chain.
func (a *Analytics) GetWhales(ctx context.Context, _ *tollgatev1.GetWhalesRequest) (*tollgatev1.GetWhalesResponse, error) {
	if a.whales == nil {
		return nil, errNoChain
	}
	snap := a.whales.Snapshot()
	if snap == nil {
		return nil, errWhalesNotReady
	}
	if cached := a.answered.Load(); cached != nil && cached.snap == snap {
		return cached.resp, nil
	}
	resp := whalesResponse(snap)
	a.answered.Store(&whaleAnswer{snap: snap, resp: resp})
	return resp, nil
}

func whalesResponse(s *whales.Snapshot) *tollgatev1.GetWhalesResponse {
	resp := &tollgatev1.GetWhalesResponse{
		AsOf:          s.AsOf.UTC().Format(time.RFC3339),
		TokensScanned: uint32(s.TokensScanned),
		Wallets:       make([]*tollgatev1.WhaleWallet, 0, len(s.Wallets)),
	}
	for _, w := range s.Wallets {
		ww := &tollgatev1.WhaleWallet{
			Address: w.Address.Hex(), Score: w.Score, SmartEntries: uint32(w.SmartEntries),
			TokensCrossed: uint32(w.TokensCrossed), EarlyRate: w.EarlyRate, DodgeRate: w.DodgeRate,
		}
		for _, t := range w.EvidenceTokens {
			ww.EvidenceTokens = append(ww.EvidenceTokens, t.Hex())
		}
		resp.Wallets = append(resp.Wallets, ww)
	}
	return resp
}
