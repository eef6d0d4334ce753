// Package service implements Tollgate's gRPC services. Analytics answers the
// paid operations: the market ones (/candles, /regime, /signal-pack) from a
// candle store by the published rules of service/rules, the chain ones
// (/rugcheck, /token) from a chain reader by service/rugcheck; the others
// come with their issues and until then answer Unimplemented (REST 501). Discovery
// answers the free operations: catalogs, health, the OpenAPI document, demo
// samples and counters, all derived from the catalog the protos declare.
//
// Requests are checked against the catalog's rules in one interceptor
// (interceptor.go) and domain errors become gRPC codes in one place
// (errors.go). The service knows nothing of HTTP or payments.
package service

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"google.golang.org/protobuf/types/known/wrapperspb"

	tollgatev1 "github.com/tollgate/tollgate/gen/tollgate/v1"
	"github.com/tollgate/tollgate/service/bytecode"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/market"
	"github.com/tollgate/tollgate/service/rules"
)

// Market analytics choices (docs/rules.md).
const (
	// candlesReturned is how many candles /candles returns; its indicators
	// are computed over exactly these, so anyone can re-derive them.
	candlesReturned = 100
	// regimeProduct is the market of /regime and /signal-pack.
	regimeProduct = "ETH-USD"
	// signalWindow is the number of hourly closes behind /regime and
	// /signal-pack (SPEC §8: 720).
	signalWindow = 720

	packDisclaimer = "Computed by fixed published rules (docs/rules.md) from public hourly candles. Not financial advice; no performance is implied."
)

// Candles is what the market analytics need: the last n closed candles of
// a product at a granularity. *market.Cache provides it.
type Candles interface {
	Series(ctx context.Context, product string, g time.Duration, n int) (market.Series, error)
}

// Analytics implements tollgatev1.AnalyticsServiceServer.
type Analytics struct {
	tollgatev1.UnimplementedAnalyticsServiceServer
	candles Candles
	chain   Chain
	scans   *scans
	whales  Whales
	tape    Tape
	model   Model
	log     *slog.Logger
	// equities feed /forecast for the .NS symbols.
	equities EquityBars
	// forecasts caches /forecast answers per product and horizon.
	forecasts   *forecast.Cache
	cacheLookup func(cache string, hit bool)
	// answered is the /whales response of the current snapshot.
	answered atomic.Pointer[whaleAnswer]
}

// The analytics' own caches, as CacheLookup names them.
const (
	CacheForecasts = "forecasts"
	CacheBytecode  = "bytecode"
)

// Caches lists the analytics' own caches.
func Caches() []string { return []string{CacheForecasts, CacheBytecode} }

// Sources are what the analytics read; a nil one makes its operations
// answer Unimplemented, except Model (nil: the embedded model only) and
// Log (nil: discarded).
type Sources struct {
	Candles Candles
	Chain   Chain
	Whales  Whales
	Tape    Tape
	Model   Model
	// Equities are the hourly session bars of the NSE symbols.
	Equities EquityBars
	Log      *slog.Logger
	// CacheLookup is told of each lookup of the analytics' own caches
	// (Caches); nil: nobody.
	CacheLookup func(cache string, hit bool)
}

// EquityBars is the equity feed; *market.Yahoo and *market.DevnetEquities
// provide it.
type EquityBars interface {
	Bars(ctx context.Context, symbol string, n int) (market.Series, error)
}

// Model is a forecasting model besides the embedded one; *KronosModel
// (Kronos in process) and *RemoteModel provide it.
type Model interface {
	// Predict forecasts steps closes after s, next first, and names the
	// model that answered.
	Predict(ctx context.Context, s market.Series, steps int) (closes []float64, name string, err error)
	// Name names the model in logs and fallbacks.
	Name() string
}

// NewAnalytics returns the analytics service over its sources.
func NewAnalytics(src Sources) *Analytics {
	if src.Log == nil {
		src.Log = slog.New(slog.DiscardHandler)
	}
	if src.CacheLookup == nil {
		src.CacheLookup = func(string, bool) {}
	}
	return &Analytics{model: src.Model, log: src.Log, equities: src.Equities, candles: src.Candles, chain: src.Chain, whales: src.Whales, tape: src.Tape,
		scans: &scans{m: map[common.Hash]bytecode.Scan{}, lookup: src.CacheLookup}, forecasts: forecast.NewCache(forecastTTL, fallbackTTL, forecastEntries, nil),
		cacheLookup: src.CacheLookup}
}

// GetCandles implements tollgatev1.AnalyticsServiceServer.
func (a *Analytics) GetCandles(ctx context.Context, req *tollgatev1.GetCandlesRequest) (*tollgatev1.GetCandlesResponse, error) {
	g := time.Duration(req.GetGranularity()) * time.Second
	s, err := a.candles.Series(ctx, req.GetProduct(), g, candlesReturned)
	if err != nil {
		return nil, err
	}
	snap, err := rules.Analyze(s.Closes())
	if err != nil {
		return nil, err
	}
	resp := &tollgatev1.GetCandlesResponse{
		Product:     s.Product,
		Granularity: req.GetGranularity(),
		Count:       int32(len(s.Candles)),
		Candles:     make([]*tollgatev1.Candle, len(s.Candles)),
		Indicators: &tollgatev1.CandleIndicators{
			Regime: candleLabel(rules.Classify(snap)),
			Rsi:    snap.RSI,
			Ema10:  snap.EMAFast,
			Ema30:  snap.EMASlow,
		},
		AsOf:   asOf(s.FetchedAt),
		Source: s.Source,
	}
	for i, c := range s.Candles {
		resp.Candles[i] = &tollgatev1.Candle{
			T: uint32(c.Time.Unix()), Open: c.Open, High: c.High, Low: c.Low, Close: c.Close, Volume: c.Volume,
		}
	}
	return resp, nil
}

// GetRegime implements tollgatev1.AnalyticsServiceServer.
func (a *Analytics) GetRegime(ctx context.Context, _ *tollgatev1.GetRegimeRequest) (*tollgatev1.GetRegimeResponse, error) {
	s, err := a.candles.Series(ctx, regimeProduct, time.Hour, signalWindow)
	if err != nil {
		return nil, err
	}
	snap, err := rules.Analyze(s.Closes())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetRegimeResponse{
		Regime: regime(rules.Classify(snap)),
		Price:  snap.Close,
		Ema10:  snap.EMAFast,
		Ema30:  snap.EMASlow,
		Rsi14:  snap.RSI,
		AsOf:   asOf(s.FetchedAt),
		Source: s.Source,
	}, nil
}

// GetSignalPack implements tollgatev1.AnalyticsServiceServer.
func (a *Analytics) GetSignalPack(ctx context.Context, _ *tollgatev1.GetSignalPackRequest) (*tollgatev1.GetSignalPackResponse, error) {
	s, err := a.candles.Series(ctx, regimeProduct, time.Hour, signalWindow)
	if err != nil {
		return nil, err
	}
	p, err := rules.SignalPack(s.Closes())
	if err != nil {
		return nil, err
	}
	return &tollgatev1.GetSignalPackResponse{
		Product:    s.Product,
		Close:      p.Close,
		Components: rules.Components,
		Regime:     regime(p.Regime),
		Rsi:        &tollgatev1.RsiBlock{Value: p.RSI, Delta3: p.RSIDelta3, Period: rules.RSIPeriod},
		EmaGap:     &tollgatev1.EmaGapBlock{Pct: p.GapPct, SlopePct: p.SlopePct, Ema10: p.EMAFast, Ema30: p.EMASlow},
		Volatility: &tollgatev1.VolatilityBlock{
			Flag:                volFlag(p.Volatility.Flag),
			Realized_24HPct:     double(p.Volatility.Realized24hPct),
			BaselineMedianPct:   double(p.Volatility.BaselineMedianPct),
			Ratio:               double(p.Volatility.Ratio),
			BaselineWindowHours: rules.BaselineWindowHours,
		},
		Confidence: &tollgatev1.ConfidenceBlock{
			Score:    int32(p.Confidence.Score),
			Max:      int32(p.Confidence.Max),
			Agree:    p.Confidence.Agree,
			Disagree: p.Confidence.Disagree,
		},
		Inputs: &tollgatev1.SignalPackInputs{
			Source:      s.Source,
			Synthetic:   s.Synthetic,
			Product:     s.Product,
			Granularity: int32(s.Granularity / time.Second),
			WindowHours: signalWindow,
			Closes:      int32(len(s.Candles)),
			FirstCandle: asOf(s.Candles[0].Time),
			LastCandle:  asOf(s.Candles[len(s.Candles)-1].Time),
			Thresholds:  rules.Thresholds(),
		},
		AsOf:       asOf(s.FetchedAt),
		Disclaimer: packDisclaimer,
	}, nil
}

func asOf(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func double(p *float64) *wrapperspb.DoubleValue {
	if p == nil {
		return nil
	}
	return wrapperspb.Double(*p)
}

func regime(r rules.Regime) tollgatev1.Regime {
	switch r {
	case rules.TrendUp:
		return tollgatev1.Regime_REGIME_TREND_UP
	case rules.TrendDown:
		return tollgatev1.Regime_REGIME_TREND_DOWN
	case rules.Range:
		return tollgatev1.Regime_REGIME_RANGE
	case rules.Chop:
		return tollgatev1.Regime_REGIME_CHOP
	}
	return tollgatev1.Regime_REGIME_UNSPECIFIED
}

func candleLabel(r rules.Regime) tollgatev1.CandleRegime {
	switch r.Label() {
	case "trend":
		return tollgatev1.CandleRegime_CANDLE_REGIME_TREND
	case "range":
		return tollgatev1.CandleRegime_CANDLE_REGIME_RANGE
	}
	return tollgatev1.CandleRegime_CANDLE_REGIME_CHOP
}

func volFlag(f rules.VolFlag) tollgatev1.VolatilityFlag {
	switch f {
	case rules.VolHigh:
		return tollgatev1.VolatilityFlag_VOLATILITY_FLAG_HIGH
	case rules.VolNormal:
		return tollgatev1.VolatilityFlag_VOLATILITY_FLAG_NORMAL
	case rules.VolLow:
		return tollgatev1.VolatilityFlag_VOLATILITY_FLAG_LOW
	}
	return tollgatev1.VolatilityFlag_VOLATILITY_FLAG_UNKNOWN
}
