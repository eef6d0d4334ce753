package gateway_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/market"
)

// fakeModel is a ForecastModelService that answers the last close plus
// one per step, or misbehaves as told.
type fakeModel struct {
	tollgatev1.UnimplementedForecastModelServiceServer
	mode string // "ok", "error", "slow", "short", "negative"
	seen *tollgatev1.PredictRequest
}

func (f *fakeModel) Predict(ctx context.Context, req *tollgatev1.PredictRequest) (*tollgatev1.PredictResponse, error) {
	f.seen = req
	last := req.GetCandles()[len(req.GetCandles())-1].GetClose()
	closes := make([]float64, req.GetPredLen())
	for i := range closes {
		closes[i] = last + float64(i+1)
	}
	switch f.mode {
	case "error":
		return nil, errors.New("GPU on fire")
	case "slow":
		<-ctx.Done()
		return nil, ctx.Err()
	case "short":
		closes = closes[:1]
	case "negative":
		closes[0] = -1
	}
	return &tollgatev1.PredictResponse{Closes: closes, Model: "fake-kronos"}, nil
}

func remoteModel(t *testing.T, f *fakeModel) *service.RemoteModel {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	tollgatev1.RegisterForecastModelServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///model",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return service.NewRemoteModel(tollgatev1.NewForecastModelServiceClient(conn), 200*time.Millisecond)
}

// TestRemoteModel: a working remote model serves /forecast under its own
// name with the candles it was sent; an erroring, slow, short or
// nonsensical one falls back to the embedded model, and the answer says
// so.
func TestRemoteModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mode, model string }{
		{"ok", "fake-kronos"}, {"error", forecast.ModelName}, {"slow", forecast.ModelName},
		{"short", forecast.ModelName}, {"negative", forecast.ModelName},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			cache, err := market.NewCache(market.NewDevnet(), market.DefaultCacheConfig())
			if err != nil {
				t.Fatal(err)
			}
			f := &fakeModel{mode: tc.mode}
			s := newStackWith(t, service.NewAnalytics(service.Sources{Candles: cache, Model: remoteModel(t, f)}), 5*time.Second)
			doc := loadServedDocument(t, s)
			r := s.do(t, "GET", "/forecast?product=ETH-USD&pred_len=3")
			doc.validateResponse(t, r)
			var b struct {
				LastClose float64
				Closes    []float64
				Model     string
			}
			decodeJSON(t, r, &b)
			if b.Model != tc.model || len(b.Closes) != 3 {
				t.Fatalf("%+v", b)
			}
			if tc.mode == "ok" && (b.Closes[0] != b.LastClose+1 || len(f.seen.GetCandles()) != 720 || f.seen.GetGranularitySeconds() != 3600 || f.seen.GetProduct() != "ETH-USD") {
				t.Errorf("remote answer %+v for request of %d candles", b, len(f.seen.GetCandles()))
			}
		})
	}
}
