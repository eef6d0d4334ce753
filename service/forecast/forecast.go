// Package forecast owns the embedded forecasting model behind /forecast: a
// damped-trend exponential smoothing (Holt, damped) of log closes whose
// smoothing parameters are estimated per fit by the least one-step-ahead
// squared error over a fixed grid, so the same closes always give the same
// forecast. It also owns the forecast cache (cache.go).
package forecast

import (
	"errors"
	"math"
)

// ModelName names the embedded model in answers.
const ModelName = "embedded-damped-holt"

// MinCloses is the fewest closes a fit accepts.
const MinCloses = 48

// ErrTooFewCloses: the series is too short (or holds non-positive closes).
var ErrTooFewCloses = errors.New("forecast: too few usable closes")

// Params are the smoothing parameters of one fit.
type Params struct {
	Alpha, Beta, Phi float64
	// SSE is the one-step-ahead squared error of the fit on log closes.
	SSE float64
}

// The estimation grid (documented in docs/rules.md).
var (
	alphas = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95}
	betas  = []float64{0.01, 0.05, 0.1, 0.2, 0.3}
	phis   = []float64{0.80, 0.90, 0.95, 0.98, 1.0}
)

// Forecast fits the model on closes (oldest first) and returns steps
// forecast closes, next step first, with the fitted parameters.
func Forecast(closes []float64, steps int) ([]float64, Params, error) {
	if len(closes) < MinCloses || steps < 1 {
		return nil, Params{}, ErrTooFewCloses
	}
	y := make([]float64, len(closes))
	for i, c := range closes {
		if !(c > 0) || math.IsInf(c, 0) {
			return nil, Params{}, ErrTooFewCloses
		}
		y[i] = math.Log(c)
	}
	best := Params{SSE: math.Inf(1)}
	for _, a := range alphas {
		for _, b := range betas {
			for _, p := range phis {
				if _, _, sse := run(y, a, b, p, best.SSE); sse < best.SSE {
					best = Params{Alpha: a, Beta: b, Phi: p, SSE: sse}
				}
			}
		}
	}
	level, trend, _ := run(y, best.Alpha, best.Beta, best.Phi, math.Inf(1))
	out := make([]float64, steps)
	damp := 0.0
	for h := range steps {
		damp += math.Pow(best.Phi, float64(h+1))
		out[h] = math.Exp(level + damp*trend)
	}
	return out, best, nil
}

// run smooths y with the given parameters and returns the final level and
// trend and the one-step-ahead squared error; it stops early (returning
// +Inf) once the error passes limit.
func run(y []float64, alpha, beta, phi, limit float64) (level, trend, sse float64) {
	level = y[0]
	// The first trend is the mean step of the first ten closes.
	n := min(10, len(y)-1)
	trend = (y[n] - y[0]) / float64(n)
	for _, v := range y[1:] {
		pred := level + phi*trend
		e := v - pred
		sse += e * e
		if sse > limit {
			return level, trend, math.Inf(1)
		}
		prev := level
		level = alpha*v + (1-alpha)*pred
		trend = beta*(level-prev) + (1-beta)*phi*trend
	}
	return level, trend, sse
}
