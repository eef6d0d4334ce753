package forecast

import (
	"fmt"
	"math"
)

// Report is a rolling-origin evaluation of a model against the random
// walk (tomorrow's price is today's).
type Report struct {
	Origins, Window, Horizon int
	// MAE of the horizon-step-ahead close, model and random walk.
	MAE, MAERandomWalk float64
	// MASE is MAE / MAERandomWalk: below 1 the model beats the random walk.
	MASE float64
	// DirectionalAccuracy is the share of origins where the model's sign of
	// change over the horizon matched the actual one (0.5 is a coin).
	DirectionalAccuracy float64
}

// Backtest fits the embedded model at every step-th origin on the window
// closes before it and scores its horizon-step-ahead close against the
// actual one.
func Backtest(closes []float64, window, horizon, step int) (Report, error) {
	if window < MinCloses {
		return Report{}, fmt.Errorf("backtest: a window of %d closes; the model needs %d", window, MinCloses)
	}
	return BacktestWith(closes, window, horizon, step, func(origin int) ([]float64, error) {
		out, _, err := Forecast(closes[origin-window:origin], horizon)
		return out, err
	})
}

// BacktestWith scores predict as Backtest scores the embedded model:
// predict(origin) forecasts at least horizon closes after closes[origin-1]
// from what comes before it (at most the window).
func BacktestWith(closes []float64, window, horizon, step int, predict func(origin int) ([]float64, error)) (Report, error) {
	if window < 1 || horizon < 1 || step < 1 || len(closes) < window+horizon {
		return Report{}, fmt.Errorf("backtest: %d closes for a window of %d and a horizon of %d", len(closes), window, horizon)
	}
	r := Report{Window: window, Horizon: horizon}
	var errModel, errWalk float64
	hits := 0
	for origin := window; origin+horizon <= len(closes); origin += step {
		out, err := predict(origin)
		if err != nil {
			return Report{}, err
		}
		if len(out) < horizon {
			return Report{}, fmt.Errorf("backtest: %d closes forecast at origin %d, want %d", len(out), origin, horizon)
		}
		last, actual, predicted := closes[origin-1], closes[origin+horizon-1], out[horizon-1]
		errModel += math.Abs(predicted - actual)
		errWalk += math.Abs(last - actual)
		if (predicted-last)*(actual-last) > 0 {
			hits++
		}
		r.Origins++
	}
	r.MAE, r.MAERandomWalk = errModel/float64(r.Origins), errWalk/float64(r.Origins)
	if r.MAERandomWalk > 0 {
		r.MASE = r.MAE / r.MAERandomWalk
	}
	r.DirectionalAccuracy = float64(hits) / float64(r.Origins)
	return r, nil
}
