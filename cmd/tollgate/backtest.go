package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/tollgate/tollgate/admin"
	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/forecast"
	"github.com/tollgate/tollgate/service/forecast/kronos"
	"github.com/tollgate/tollgate/service/market"
)

// backtest runs `tollgate backtest`: a rolling-origin evaluation of the
// embedded forecaster, or of Kronos as the service runs it, against the
// random walk on the configured candle feed, printed as a table. The feed is chosen as serve chooses it
// (Coinbase Exchange when TOLLGATE_CHAIN_RPC says production, else the
// synthetic feed), except that a synthetic feed needs no permission: a
// backtest sells nothing. The first line names the feed, and a synthetic
// one is called out as such.
func backtest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backtest", flag.ContinueOnError)
	product := fs.String("product", "ETH-USD", "BTC-USD or ETH-USD")
	candlesURL := fs.String("candles-url", getenv("TOLLGATE_CANDLES_URL"), "Coinbase Exchange REST base URL, or \"synthetic\"; empty: "+
		coinbaseExchangeURL+" when TOLLGATE_CHAIN_RPC is set (as serve), else the synthetic feed")
	closes := fs.Int("closes", 1500, "hourly closes fetched (the newest)")
	window := fs.Int("window", 720, "closes each fit sees (as /forecast)")
	horizon := fs.Int("horizon", 24, "hours ahead scored")
	step := fs.Int("step", 12, "hours between origins")
	asOf := fs.String("as-of", "", "score the closes up to this time (RFC 3339, e.g. 2026-11-01T00:00:00Z) instead of now: the synthetic feed then gives the same numbers on every run")
	modelName := fs.String("model", "embedded", "the model scored: embedded (damped-trend smoothing) or kronos (as /forecast runs it: the last 512 − horizon candles of the window, the service's sampling; needs --kronos-model and --kronos-tokenizer)")
	kronosModel := fs.String("kronos-model", getenv("TOLLGATE_KRONOS_MODEL"), "with --model kronos: directory of the predictor checkpoint")
	kronosTok := fs.String("kronos-tokenizer", getenv("TOLLGATE_KRONOS_TOKENIZER"), "with --model kronos: directory of the tokenizer checkpoint")
	if err := parseFlags(fs, "backtest", args, stdout); err != nil {
		return err
	}
	var model service.Model // nil: the embedded model
	switch *modelName {
	case "embedded":
	case "kronos":
		if *kronosModel == "" || *kronosTok == "" {
			return errors.New("backtest: --model kronos needs --kronos-model and --kronos-tokenizer")
		}
		m, err := kronos.Load(*kronosModel, *kronosTok)
		if err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
		model = service.NewKronosModel(m, service.KronosSampling(), time.Hour, nil)
	default:
		return fmt.Errorf("backtest: --model %q: want embedded or kronos", *modelName)
	}
	if *product != "BTC-USD" && *product != "ETH-USD" {
		return fmt.Errorf("backtest: --product %q: want BTC-USD or ETH-USD", *product)
	}
	if *closes < *window+*horizon {
		return errors.New("backtest: --closes must cover --window plus --horizon")
	}
	cfg := &config{ChainRPC: getenv("TOLLGATE_CHAIN_RPC")}
	feed, err := resolveFeed("candles-url", *candlesURL, cfg.production(), true, coinbaseExchangeURL)
	if err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	cfg.candles = feed
	source, src, err := candleSource(cfg, admin.NewMetrics(admin.Build{}, nil)) // counted nowhere
	if err != nil {
		return err
	}
	cc := market.DefaultCacheConfig()
	if *asOf != "" {
		at, err := time.Parse(time.RFC3339, *asOf)
		if err != nil {
			return fmt.Errorf("backtest: --as-of %q: want RFC 3339 (2026-11-01T00:00:00Z)", *asOf)
		}
		cc.Now = func() time.Time { return at }
	}
	cache, err := market.NewCache(source, cc)
	if err != nil {
		return err
	}
	s, err := cache.Series(ctx, *product, time.Hour, *closes)
	if err != nil {
		return err
	}
	name := forecast.ModelName
	var r forecast.Report
	if model == nil {
		r, err = forecast.Backtest(s.Closes(), *window, *horizon, *step)
	} else {
		name = model.Name()
		origins, started := 0, time.Now()
		r, err = forecast.BacktestWith(s.Closes(), *window, *horizon, *step, func(origin int) ([]float64, error) {
			fit := s
			fit.Candles = s.Candles[origin-*window : origin]
			out, _, err := model.Predict(ctx, fit, *horizon)
			if origins++; origins%10 == 0 {
				fmt.Fprintf(stderr, "%d origins scored in %s\n", origins, time.Since(started).Round(time.Second))
			}
			return out, err
		})
	}
	if err != nil {
		return err
	}
	last := s.Candles[len(s.Candles)-1].Time.UTC().Format(time.RFC3339)
	fmt.Fprintf(stdout, "backtest of %s on %s (%s): %d hourly closes to %s, window %d, horizon %d h, %d origins every %d h\n",
		name, *product, src.Name, len(s.Closes()), last, r.Window, r.Horizon, r.Origins, *step)
	if src.Synthetic {
		fmt.Fprintf(stdout, "SYNTHETIC candles (%s): generated in process, not market data; this score says nothing about real markets (--candles-url %s for the real feed)\n",
			src.Name, coinbaseExchangeURL)
	} else {
		fmt.Fprintf(stdout, "market data: %s\n", src.Description)
	}
	fmt.Fprintf(stdout, "%-22s %14s %14s\n", "", "model", "random walk")
	fmt.Fprintf(stdout, "%-22s %14.4f %14.4f\n", "MAE (price)", r.MAE, r.MAERandomWalk)
	fmt.Fprintf(stdout, "%-22s %14.4f %14.4f\n", "MASE (vs random walk)", r.MASE, 1.0)
	fmt.Fprintf(stdout, "%-22s %13.1f%% %14s\n", "directional accuracy", 100*r.DirectionalAccuracy, "n/a")
	return nil
}
