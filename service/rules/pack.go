package rules

import (
	"github.com/tollgate/tollgate/service/indicator"
)

// VolFlag is the volatility flag of the signal pack.
type VolFlag int

// Volatility flags.
const (
	VolUnknown VolFlag = iota + 1
	VolHigh
	VolNormal
	VolLow
)

func (f VolFlag) String() string {
	switch f {
	case VolHigh:
		return "HIGH"
	case VolNormal:
		return "NORMAL"
	case VolLow:
		return "LOW"
	}
	return "UNKNOWN"
}

// Volatility compares the realized volatility of the last 24 hours with
// its median over the window. Absent values (JSON null) are nil.
type Volatility struct {
	Flag              VolFlag
	Realized24hPct    *float64
	BaselineMedianPct *float64
	Ratio             *float64
}

// VolatilityOf applies the volatility rule to hourly closes:
//
//	r                = log returns of consecutive closes
//	realized24hPct   = sqrt(sum of the last 24 r^2) * 100
//	baselineMedianPct = median of the same measure over every run of 24
//	                   consecutive returns in the window * 100
//	ratio            = realized24hPct / baselineMedianPct
//	HIGH if ratio >= 1.5, LOW if ratio <= 0.67, else NORMAL
//
// It is UNKNOWN, with the values it cannot compute left null, when there
// are fewer than 24 returns, fewer than 168 runs for the baseline, or a
// zero baseline.
func VolatilityOf(closes []float64) Volatility {
	v := Volatility{Flag: VolUnknown}
	r := indicator.LogReturns(closes)
	if len(r) < VolWindowHours {
		return v
	}
	realized := indicator.RealizedVol(r[len(r)-VolWindowHours:]) * 100
	v.Realized24hPct = &realized
	if len(r)-VolWindowHours+1 < MinBaselineRuns {
		return v
	}
	baseline := indicator.MedianRealizedVol(r, VolWindowHours) * 100
	v.BaselineMedianPct = &baseline
	if baseline == 0 {
		return v
	}
	ratio := realized / baseline
	v.Ratio = &ratio
	switch {
	case ratio >= VolHighRatio:
		v.Flag = VolHigh
	case ratio <= VolLowRatio:
		v.Flag = VolLow
	default:
		v.Flag = VolNormal
	}
	return v
}

// Confidence counts the components that agree with a regime call.
type Confidence struct {
	Score    int
	Max      int
	Agree    []string
	Disagree []string
}

// Component names, in the order they are scored.
const (
	ComponentEMAGap      = "emaGap"
	ComponentEMASlope    = "emaSlope"
	ComponentRSI         = "rsi"
	ComponentRSIMomentum = "rsiMomentum"
)

// Components is the number of confidence components.
const Components = 4

// direction is where a component points.
type direction int

const (
	down direction = iota - 1
	flat
	up
)

func dir(v, upAt, downAt float64) direction {
	switch {
	case v >= upAt:
		return up
	case v <= downAt:
		return down
	}
	return flat
}

// ConfidenceOf is the confidence rule: each component points up, down or
// nowhere (flat), and agrees when it points where the call does (up for
// TREND-UP, down for TREND-DOWN, nowhere for RANGE and CHOP):
//
//	emaGap       up if gap >= +0.5%,   down if <= -0.5%
//	emaSlope     up if slope >= +0.02, down if <= -0.02 (points/bar)
//	rsi          up if RSI >= 55,      down if <= 45
//	rsiMomentum  up if delta3 >= +2,   down if <= -2 (RSI points)
func ConfidenceOf(s Snapshot, call Regime) Confidence {
	want := flat
	switch call {
	case TrendUp:
		want = up
	case TrendDown:
		want = down
	}
	c := Confidence{Max: Components, Agree: []string{}, Disagree: []string{}}
	for _, comp := range []struct {
		name string
		d    direction
	}{
		{ComponentEMAGap, dir(s.GapPct, TrendGapPct, -TrendGapPct)},
		{ComponentEMASlope, dir(s.SlopePct, SlopeFlatPct, -SlopeFlatPct)},
		{ComponentRSI, dir(s.RSI, RSIUp, RSIDown)},
		{ComponentRSIMomentum, dir(s.RSIDelta3, MomentumFlatPts, -MomentumFlatPts)},
	} {
		if comp.d == want {
			c.Score++
			c.Agree = append(c.Agree, comp.name)
		} else {
			c.Disagree = append(c.Disagree, comp.name)
		}
	}
	return c
}

// Pack is the signal pack of a close series.
type Pack struct {
	Snapshot
	Regime     Regime
	Volatility Volatility
	Confidence Confidence
}

// SignalPack computes the whole signal pack of hourly closes.
func SignalPack(closes []float64) (Pack, error) {
	s, err := Analyze(closes)
	if err != nil {
		return Pack{}, err
	}
	call := Classify(s)
	return Pack{
		Snapshot:   s,
		Regime:     call,
		Volatility: VolatilityOf(closes),
		Confidence: ConfidenceOf(s, call),
	}, nil
}
