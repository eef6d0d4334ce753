package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/rules"
)

// Forecast choices (docs/rules.md).
const (
	// forecastCloses is the hourly history a fit sees.
	forecastCloses = 720
	// forecastTTL is how long a forecast is served from the cache (SPEC §8).
	forecastTTL = 900 * time.Second
	// fallbackTTL is how long the embedded model's answer in place of a
	// failed model is served: the configured model is asked again after.
	fallbackTTL = 60 * time.Second
	// forecastEntries bounds the cache: one entry a product (7), with
	// room to spare.
	forecastEntries = 64
	// forecastHorizon is the longest pred_len (the catalog clamps to
	// 1–48): every horizon is cut from one forecast this long.
	forecastHorizon = 48
)

// GetForecast implements tollgatev1.AnalyticsServiceServer with the
// embedded model, cached per product and horizon.
func (a *Analytics) GetForecast(ctx context.Context, req *tollgatev1.GetForecastRequest) (*tollgatev1.GetForecastResponse, error) {
	product, steps := req.GetProduct(), int(req.GetPredLen())
	if (market.IsEquity(product) && a.equities == nil) || (!market.IsEquity(product) && a.candles == nil) {
		return nil, status.Errorf(codes.Unimplemented, "no hourly candles for %s on this server; nothing was charged", product)
	}
	r, cached, err := a.forecast(ctx, product, steps)
	if err != nil {
		return nil, err
	}
	a.cacheLookup(CacheForecasts, cached)
	return &tollgatev1.GetForecastResponse{
		Product: r.Product, LastClose: r.LastClose, Closes: r.Closes, ExpectedReturnPct: r.ExpectedReturnPct,
		PredLen: int32(len(r.Closes)), Cached: cached, AsOf: r.At.Format(time.RFC3339), Model: r.Model,
		Source: r.Source, Synthetic: r.Synthetic, Fallback: r.Fallback,
	}, nil
}

// forecast is the forecast of product over steps hours: the first steps
// hours of its forecastHorizon-hour forecast, computed once per product
// and cache life for every horizon (docs/rules.md, "Forecasts"). The
// models forecast an hour from the ones before it and the same input, so
// a shorter horizon's answer is the longer one's beginning: Kronos reads
// the same window (512 − 48 candles) with the same seed for every
// horizon, each sample path drawing from a stream of its own; the
// embedded model's step h depends on h alone. A burst of distinct cold
// requests costs one inference a product, not one a product and horizon.
func (a *Analytics) forecast(ctx context.Context, product string, steps int) (forecast.Result, bool, error) {
	r, cached, err := a.longest(ctx, product)
	if err != nil || steps >= len(r.Closes) {
		return r, cached, err
	}
	r.Closes = r.Closes[:steps:steps]
	r.ExpectedReturnPct = (r.Closes[steps-1]/r.LastClose - 1) * 100
	return r, cached, nil
}

// longest is product's forecastHorizon-hour forecast, through the cache.
func (a *Analytics) longest(ctx context.Context, product string) (forecast.Result, bool, error) {
	steps := forecastHorizon
	return a.forecasts.Get(ctx, product, steps, func(ctx context.Context) (forecast.Result, error) {
		var s market.Series
		var err error
		if market.IsEquity(product) {
			s, err = a.equities.Bars(ctx, product, forecastCloses)
		} else {
			s, err = a.candles.Series(ctx, product, time.Hour, forecastCloses)
		}
		if err != nil {
			return forecast.Result{}, err
		}
		closes := s.Closes()
		if len(closes) == 0 {
			return forecast.Result{}, rules.ErrInsufficientData
		}
		out, model, fallback, err := a.predict(ctx, s, steps)
		if err != nil {
			return forecast.Result{}, err
		}
		last := closes[len(closes)-1]
		return forecast.Result{
			Product: product, LastClose: last, Closes: out, Model: model, Source: s.Source, Synthetic: s.Synthetic,
			ExpectedReturnPct: (out[len(out)-1]/last - 1) * 100, At: time.Now().UTC(), Fallback: fallback,
		}, nil
	})
}

// predict asks the configured model (Kronos in process, or a remote one)
// and falls back to the embedded one when it fails, saying why.
func (a *Analytics) predict(ctx context.Context, s market.Series, steps int) (closes []float64, model, fallback string, err error) {
	if a.model != nil {
		out, name, err := a.model.Predict(ctx, s, steps)
		if err == nil {
			return out, name, "", nil
		}
		a.log.WarnContext(ctx, "forecast model failed; the embedded model answers", "model", a.model.Name(), "product", s.Product, "err", err)
		fallback = a.model.Name() + ": " + fallbackReason(err)
	}
	out, _, err := forecast.Forecast(s.Closes(), steps)
	if err != nil {
		return nil, "", "", fmt.Errorf("%w: %v", rules.ErrInsufficientData, err)
	}
	return out, forecast.ModelName, fallback, nil
}

// fallbackReason is what an answer says of a model's failure: its
// deadline, or "failed" (the details are in the log, not the answer).
func fallbackReason(err error) string {
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		return "deadline exceeded"
	}
	return "failed"
}

// signalHorizon is the model horizon the signal reads: 24 hours.
const signalHorizon = 24

// GetSignal implements tollgatev1.AnalyticsServiceServer: the regime and
// RSI of the last 720 hourly ETH closes, the model's 24h expected return
// (null when the model has no answer) and the gate rule over them.
func (a *Analytics) GetSignal(ctx context.Context, req *tollgatev1.GetSignalRequest) (*tollgatev1.GetSignalResponse, error) {
	if a.candles == nil {
		return nil, status.Error(codes.Unimplemented, "no candle source on this server")
	}
	s, err := a.candles.Series(ctx, regimeProduct, time.Hour, signalWindow)
	if err != nil {
		return nil, err
	}
	snap, err := rules.Analyze(s.Closes())
	if err != nil {
		return nil, err
	}
	reg := rules.Classify(snap)
	var expected *float64
	if f, _, err := a.forecast(ctx, req.GetProduct(), signalHorizon); err == nil {
		expected = &f.ExpectedReturnPct
	}
	resp := &tollgatev1.GetSignalResponse{
		Product: req.GetProduct(), Gate: tollgatev1.Gate_GATE_NO_GO, Regime: regime(reg),
		Rsi: snap.RSI, EmaGapPct: snap.GapPct, AsOf: asOf(s.FetchedAt), Source: s.Source, Synthetic: s.Synthetic,
	}
	if rules.Gate(reg, expected, snap.RSI) {
		resp.Gate = tollgatev1.Gate_GATE_GO
	}
	if expected != nil {
		resp.ExpectedReturnPct = wrapperspb.Double(*expected)
	}
	if resp.Provenance, err = a.provenance(ctx); err != nil {
		return nil, err
	}
	return resp, nil
}

// provenance is the tape's close counts, nil when there is no tape or it
// is empty.
func (a *Analytics) provenance(ctx context.Context) (*tollgatev1.SignalProvenance, error) {
	if a.tape == nil {
		return nil, nil
	}
	ls, err := a.tape.Lanes(ctx)
	if err != nil || len(ls) == 0 {
		return nil, err
	}
	p := &tollgatev1.SignalProvenance{Lanes: map[string]uint32{}}
	for _, l := range ls {
		p.Lanes[l.Name] = uint32(l.Closes)
		p.TotalCloses += uint32(l.Closes)
	}
	return p, nil
}
