package service

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/rules"
)

// Forecast choices (docs/rules.md).
const (
	// forecastCloses is the hourly history a fit sees.
	forecastCloses = 720
	// forecastTTL is how long a forecast is served from the cache (SPEC §8).
	forecastTTL = 900 * time.Second
	// forecastEntries bounds the cache: 7 products × 48 horizons fit.
	forecastEntries = 7 * 48
)

// GetForecast implements tollgatev1.AnalyticsServiceServer with the
// embedded model, cached per product and horizon.
func (a *Analytics) GetForecast(ctx context.Context, req *tollgatev1.GetForecastRequest) (*tollgatev1.GetForecastResponse, error) {
	product, steps := req.GetProduct(), int(req.GetPredLen())
	if strings.HasSuffix(product, ".NS") || a.candles == nil {
		return nil, status.Errorf(codes.Unimplemented, "no hourly candles for %s on this server yet; nothing was charged", product)
	}
	r, cached, err := a.forecasts.Get(ctx, product, steps, func(ctx context.Context) (forecast.Result, error) {
		s, err := a.candles.Series(ctx, product, time.Hour, forecastCloses)
		if err != nil {
			return forecast.Result{}, err
		}
		closes := s.Closes()
		out, _, err := forecast.Forecast(closes, steps)
		if err != nil {
			return forecast.Result{}, fmt.Errorf("%w: %v", rules.ErrInsufficientData, err)
		}
		last := closes[len(closes)-1]
		return forecast.Result{
			Product: product, LastClose: last, Closes: out, Model: forecast.ModelName,
			ExpectedReturnPct: (out[len(out)-1]/last - 1) * 100, At: time.Now().UTC(),
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetForecastResponse{
		Product: r.Product, LastClose: r.LastClose, Closes: r.Closes, ExpectedReturnPct: r.ExpectedReturnPct,
		PredLen: int32(len(r.Closes)), Cached: cached, AsOf: r.At.Format(time.RFC3339), Model: r.Model,
	}, nil
}
