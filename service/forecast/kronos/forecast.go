package kronos

import (
	"context"
	"math"
	"runtime"
	"time"
)

// Candle is one K-line. Amount is the traded value; 0 means unknown, and
// is filled as Volume × mean(Open, High, Low, Close), as the reference
// predictor fills a frame without an amount column (a frame without volume
// is Volume 0, and then Amount 0).
type Candle struct {
	Time                                   time.Time
	Open, High, Low, Close, Volume, Amount float64
}

// DefaultMaxContext is the predictor's window: KronosPredictor's default
// max_context, and the context Kronos-small and -base were trained with.
const DefaultMaxContext = 512

// Options are the sampling settings of KronosPredictor.predict.
type Options struct {
	// Temperature divides the logits before filtering; it must be > 0.
	Temperature float64
	// TopK keeps the TopK most likely tokens (ties at the boundary too);
	// 0 turns it off. When TopK > 0, TopP is ignored, as in the reference.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (nucleus sampling); 1 turns it off. Within (0, 1].
	TopP float64
	// Samples is how many paths are drawn; their decoded candles are
	// averaged (in normalised units) into the forecast. At least 1.
	Samples int
	// Seed makes the draws reproducible: the same model, input, options
	// and seed give the same forecast.
	Seed uint64
	// MaxContext is the predictor's window in candles; 0 means
	// DefaultMaxContext. Longer inputs still go through the tokenizer
	// whole (it is causal), as in the reference.
	MaxContext int
	// Workers bounds the goroutines one call uses; 0 means GOMAXPROCS.
	Workers int

	trace     func(stepTrace) // tests only: observes each step
	recompute bool            // tests only: rebuild the window every step, as the reference does
}

// Greedy returns the options that make the forecast deterministic: at each
// step the most likely s1, then the most likely s2 (temperature 1, top-k 1,
// one sample). The reference fixtures are computed this way.
func Greedy() Options { return Options{Temperature: 1, TopK: 1, TopP: 1, Samples: 1} }

// DefaultOptions returns KronosPredictor.predict's defaults: temperature
// 1, no top-k, top-p 0.9, one sample.
func DefaultOptions() Options { return Options{Temperature: 1, TopP: 0.9, Samples: 1} }

func (o Options) check(predLen, maxCtx int) error {
	switch {
	case !(o.Temperature > 0) || math.IsInf(o.Temperature, 0):
		return invalidInput("temperature %v must be positive", o.Temperature)
	case o.TopK < 0:
		return invalidInput("top-k %d must not be negative", o.TopK)
	case !(o.TopP > 0 && o.TopP <= 1):
		return invalidInput("top-p %v must be within (0, 1]", o.TopP)
	case o.Samples < 1:
		return invalidInput("samples %d must be at least 1", o.Samples)
	case o.Workers < 0:
		return invalidInput("workers %d must not be negative", o.Workers)
	case maxCtx < 1 || maxCtx > ropeTableLen:
		return invalidInput("max context %d must be within 1..%d", maxCtx, ropeTableLen)
	case predLen > maxCtx:
		// The reference decodes the last max_context tokens and keeps the
		// last pred_len rows, so it cannot return more than a window.
		return invalidInput("%d future times exceed the %d-candle window", predLen, maxCtx)
	}
	return nil
}

// clipLimit is KronosPredictor's clip: normalised values are clipped to
// ±5 standard deviations.
const clipLimit = 5

// stdEps is added to the standard deviation before dividing by it (and
// multiplying back), as the reference does.
const stdEps = 1e-5

// Forecast predicts one candle for each of the future times from candles
// (oldest first), as KronosPredictor.predict does: it z-scores the six
// columns with the candles' own mean and population standard deviation,
// clips them at ±5, tokenizes them, generates len(future) tokens per
// sample path, decodes them, averages the paths and undoes the z-score.
// Time features are read in each time's own location. The returned
// candles carry the future times.
func (m *Model) Forecast(ctx context.Context, candles []Candle, future []time.Time, o Options) ([]Candle, error) {
	maxCtx := o.MaxContext
	if maxCtx == 0 {
		maxCtx = DefaultMaxContext
	}
	if len(candles) == 0 {
		return nil, invalidInput("no candles")
	}
	if len(future) == 0 {
		return nil, invalidInput("no future times")
	}
	if err := o.check(len(future), maxCtx); err != nil {
		return nil, err
	}
	workers := o.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	x, mean, std, err := normalize(candles)
	if err != nil {
		return nil, err
	}
	stamps := make([]stamp, 0, len(candles)+len(future))
	for _, c := range candles {
		stamps = append(stamps, timeFeatures(c.Time))
	}
	for _, t := range future {
		stamps = append(stamps, timeFeatures(t))
	}

	history := m.tok.encode(x, len(candles), workers)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	gen, err := m.pred.generate(ctx, history, stamps, len(future), maxCtx, o, workers)
	if err != nil {
		return nil, err
	}
	// Decode the last window of every path, as the reference does, and
	// keep the generated rows.
	start := max(0, len(candles)+len(future)-maxCtx)
	paths := m.tok.decode(history[start:], gen, workers)
	return denormalize(paths, mean, std, future), nil
}

// normalize builds the six float32 columns (open, high, low, close,
// volume, amount) and z-scores them as KronosPredictor.predict does:
// numpy's float32 mean and population std, (x - mean) / (std + 1e-5),
// clipped at ±5.
func normalize(candles []Candle) (x []float32, mean, std [numFeatures]float32, err error) {
	n := len(candles)
	x = make([]float32, n*numFeatures)
	for r, c := range candles {
		amount := c.Amount
		if amount == 0 {
			amount = c.Volume * ((c.Open + c.High + c.Low + c.Close) / 4)
		}
		row := [numFeatures]float64{c.Open, c.High, c.Low, c.Close, c.Volume, amount}
		for j, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, mean, std, invalidInput("candle %d (%s) has a non-finite value", r, c.Time.Format(time.RFC3339))
			}
			x[r*numFeatures+j] = float32(v)
		}
	}
	// numpy sums float32 pairwise, which is close to exact: accumulate in
	// float64 and round once. The deviations and their squares stay
	// float32, as numpy's are.
	for j := range numFeatures {
		var sum float64
		for r := range n {
			sum += float64(x[r*numFeatures+j])
		}
		mean[j] = float32(sum / float64(n))
		var sq float64
		for r := range n {
			dv := x[r*numFeatures+j] - mean[j]
			sq += float64(dv * dv)
		}
		std[j] = float32(math.Sqrt(float64(float32(sq / float64(n)))))
	}
	for r := range n {
		for j := range numFeatures {
			v := (x[r*numFeatures+j] - mean[j]) / (std[j] + stdEps)
			x[r*numFeatures+j] = max(-clipLimit, min(clipLimit, v))
		}
	}
	return x, mean, std, nil
}

// denormalize averages the paths and undoes the z-score, in float32 as
// the reference does.
func denormalize(paths [][]float32, mean, std [numFeatures]float32, future []time.Time) []Candle {
	out := make([]Candle, len(future))
	for i, t := range future {
		var v [numFeatures]float64
		for j := range numFeatures {
			var sum float32
			for _, p := range paths {
				sum += p[i*numFeatures+j]
			}
			avg := sum / float32(len(paths))
			v[j] = float64(avg*(std[j]+stdEps) + mean[j])
		}
		out[i] = Candle{Time: t, Open: v[0], High: v[1], Low: v[2], Close: v[3], Volume: v[4], Amount: v[5]}
	}
	return out
}

// timeFeatures is calc_time_stamps for one time.
func timeFeatures(t time.Time) stamp {
	wd := (int(t.Weekday()) + 6) % 7 // pandas: Monday 0 … Sunday 6
	return stamp{t.Minute(), t.Hour(), wd, t.Day(), int(t.Month())}
}
