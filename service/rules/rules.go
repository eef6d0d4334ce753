// Package rules holds Tollgate's published market rules: the regime
// classifier (/regime, /signal-pack), the trend/range/chop label of
// /candles, the volatility flag and the confidence score of /signal-pack.
// Each rule is implemented once, here, as a pure function of a close series
// (oldest first), and each threshold is a named constant that
// docs/rules.md quotes: anyone holding the same candles can re-derive every
// answer.
package rules

import (
	"errors"
	"fmt"
	"math"

	"github.com/tollgate/tollgate/service/indicator"
)

// Periods and thresholds. docs/rules.md is their prose; Thresholds() lists
// them by the names the signal pack's inputs use.
const (
	EMAFast   = 10 // bars
	EMASlow   = 30 // bars
	RSIPeriod = 14 // bars
	SlopeBars = 3  // bars over which the EMA-gap slope and the RSI delta are taken

	TrendGapPct  = 0.5 // |EMA gap| >= 0.5% is a trend gap
	RangeRSILow  = 40  // RANGE needs RSI within [40, 60]
	RangeRSIHigh = 60
	TrendRSIMid  = 50 // TREND-UP needs RSI >= 50, TREND-DOWN <= 50

	// A trend's gap must not be closing faster than this (points per bar):
	// a steady trend has a steady gap, whose slope wobbles around zero.
	TrendSlopeTolPct = 0.02

	SlopeFlatPct    = 0.02 // confidence: |slope| < 0.02 points/bar has no direction
	RSIUp           = 55   // confidence: RSI >= 55 points up
	RSIDown         = 45   // confidence: RSI <= 45 points down
	MomentumFlatPts = 2    // confidence: |RSI delta3| < 2 points has no direction

	VolWindowHours      = 24   // realized volatility over the last 24 hourly returns
	BaselineWindowHours = 720  // baseline: median over the 720-close window
	MinBaselineRuns     = 168  // at least 7 days of 24h runs, else UNKNOWN
	VolHighRatio        = 1.5  // realized/baseline >= 1.5 is HIGH
	VolLowRatio         = 0.67 // realized/baseline <= 0.67 is LOW
)

// MinCloses is the fewest closes Analyze accepts: the slow EMA is first
// defined at index EMASlow-1 and the slope looks SlopeBars further back.
const MinCloses = EMASlow + SlopeBars

// Errors of Analyze.
var (
	// ErrInsufficientData means the series is too short for the rules.
	ErrInsufficientData = errors.New("rules: not enough closes")
	// ErrBadClose means a close is not a positive finite number.
	ErrBadClose = errors.New("rules: close is not a positive finite number")
)

// Regime is the market regime call.
type Regime int

// Regimes.
const (
	TrendUp Regime = iota + 1
	TrendDown
	Range
	Chop
)

func (r Regime) String() string {
	switch r {
	case TrendUp:
		return "TREND-UP"
	case TrendDown:
		return "TREND-DOWN"
	case Range:
		return "RANGE"
	case Chop:
		return "CHOP"
	}
	return fmt.Sprintf("Regime(%d)", int(r))
}

// Label is the /candles label of a regime: "trend" for either trend,
// "range", or "chop".
func (r Regime) Label() string {
	switch r {
	case TrendUp, TrendDown:
		return "trend"
	case Range:
		return "range"
	}
	return "chop"
}

// Snapshot is the indicator state at the last close.
type Snapshot struct {
	Close     float64
	EMAFast   float64 // EMA(10)
	EMASlow   float64 // EMA(30)
	GapPct    float64 // (EMA10 - EMA30) / EMA30 * 100
	SlopePct  float64 // (gap now - gap 3 bars ago) / 3, points per bar
	RSI       float64 // Wilder RSI(14)
	RSIDelta3 float64 // RSI now - RSI 3 bars ago
}

// Analyze computes the snapshot of closes.
func Analyze(closes []float64) (Snapshot, error) {
	n := len(closes)
	if n < MinCloses {
		return Snapshot{}, fmt.Errorf("%w: %d, need %d", ErrInsufficientData, n, MinCloses)
	}
	for i, c := range closes {
		if !(c > 0) || math.IsInf(c, 0) {
			return Snapshot{}, fmt.Errorf("%w: closes[%d] = %v", ErrBadClose, i, c)
		}
	}
	// Only the last SlopeBars+1 values of each indicator are needed.
	fast := indicator.EMATail(closes, EMAFast, SlopeBars+1)
	slow := indicator.EMATail(closes, EMASlow, SlopeBars+1)
	rsi := indicator.RSITail(closes, RSIPeriod, SlopeBars+1)
	gap := func(i int) float64 { return (fast[i] - slow[i]) / slow[i] * 100 }
	// The tails hold bars n-1-SlopeBars .. n-1: index SlopeBars of a tail
	// is the last close, index 0 the one SlopeBars before it. The close
	// itself comes from the series, whose last element is that same bar.
	last, prev := SlopeBars, 0
	return Snapshot{
		Close:     closes[n-1],
		EMAFast:   fast[last],
		EMASlow:   slow[last],
		GapPct:    gap(last),
		SlopePct:  (gap(last) - gap(prev)) / SlopeBars,
		RSI:       rsi[last],
		RSIDelta3: rsi[last] - rsi[prev],
	}, nil
}

// Classify is the regime rule:
//
//	TREND-UP    gap >= +0.5%  and slope > -0.02  and RSI >= 50
//	TREND-DOWN  gap <= -0.5%  and slope < +0.02  and RSI <= 50
//	RANGE       |gap| < 0.5%  and 40 <= RSI <= 60
//	CHOP        anything else: gap, slope and RSI disagree
func Classify(s Snapshot) Regime {
	switch {
	case s.GapPct >= TrendGapPct && s.SlopePct > -TrendSlopeTolPct && s.RSI >= TrendRSIMid:
		return TrendUp
	case s.GapPct <= -TrendGapPct && s.SlopePct < TrendSlopeTolPct && s.RSI <= TrendRSIMid:
		return TrendDown
	case math.Abs(s.GapPct) < TrendGapPct && s.RSI >= RangeRSILow && s.RSI <= RangeRSIHigh:
		return Range
	}
	return Chop
}

// Thresholds returns every threshold of the rules by name, as the signal
// pack's inputs publish them.
func Thresholds() map[string]float64 {
	return map[string]float64{
		"emaFast":             EMAFast,
		"emaSlow":             EMASlow,
		"rsiPeriod":           RSIPeriod,
		"slopeBars":           SlopeBars,
		"trendGapPct":         TrendGapPct,
		"rangeRsiLow":         RangeRSILow,
		"rangeRsiHigh":        RangeRSIHigh,
		"trendRsiMid":         TrendRSIMid,
		"trendSlopeTolPct":    TrendSlopeTolPct,
		"slopeFlatPct":        SlopeFlatPct,
		"rsiUp":               RSIUp,
		"rsiDown":             RSIDown,
		"momentumFlatPts":     MomentumFlatPts,
		"volWindowHours":      VolWindowHours,
		"baselineWindowHours": BaselineWindowHours,
		"minBaselineRuns":     MinBaselineRuns,
		"volHighRatio":        VolHighRatio,
		"volLowRatio":         VolLowRatio,
	}
}
