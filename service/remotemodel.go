package service

import (
	"context"
	"fmt"
	"math"
	"time"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/market"
)

// RemoteModel asks a forecasting model served over
// tollgatev1.ForecastModelService; it implements Model.
type RemoteModel struct {
	client  tollgatev1.ForecastModelServiceClient
	timeout time.Duration
}

// NewRemoteModel returns a remote model over a client connection; every
// prediction gets timeout. It does no I/O.
func NewRemoteModel(client tollgatev1.ForecastModelServiceClient, timeout time.Duration) *RemoteModel {
	return &RemoteModel{client: client, timeout: timeout}
}

// Name names the remote model before it names itself.
func (r *RemoteModel) Name() string { return "remote model" }

// Predict sends the series and checks the answer: exactly steps finite,
// positive closes.
func (r *RemoteModel) Predict(ctx context.Context, s market.Series, steps int) ([]float64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	req := &tollgatev1.PredictRequest{Product: s.Product, GranularitySeconds: int64(s.Granularity / time.Second), PredLen: int32(steps)}
	for _, c := range s.Candles {
		req.Candles = append(req.Candles, &tollgatev1.ModelCandle{Time: c.Time.Unix(), Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume})
	}
	resp, err := r.client.Predict(ctx, req)
	if err != nil {
		return nil, "", fmt.Errorf("remote model: %w", err)
	}
	if len(resp.GetCloses()) != steps {
		return nil, "", fmt.Errorf("remote model: %d closes for %d steps", len(resp.GetCloses()), steps)
	}
	for i, c := range resp.GetCloses() {
		if !(c > 0) || math.IsInf(c, 0) {
			return nil, "", fmt.Errorf("remote model: closes[%d] = %v", i, c)
		}
	}
	name := resp.GetModel()
	if name == "" {
		name = "remote"
	}
	return resp.GetCloses(), name, nil
}
