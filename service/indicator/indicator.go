// Package indicator holds pure functions over price series: EMA and Wilder
// RSI with TA-Lib's conventions, log returns, realized volatility and the
// median. No I/O, no time, no state: the same inputs give the same outputs
// on every machine, which is what makes Tollgate's market answers
// re-derivable by a third party.
//
// Series are oldest first. Functions that have a lookback return a slice as
// long as their input with NaN where the value is not yet defined, so that
// out[i] always belongs to in[i].
package indicator

import (
	"math"
	"slices"
)

// EMA returns the exponential moving average of x with period n, TA-Lib's
// default convention: k = 2/(n+1), seeded with the simple mean of the first
// n values, first defined at index n-1, then prev = (x-prev)*k + prev.
func EMA(x []float64, n int) []float64 {
	if n < 1 || len(x) < n {
		return nanSlice(len(x))
	}
	out := make([]float64, len(x))
	for i := range n - 1 {
		out[i] = math.NaN()
	}
	k := 2 / float64(n+1)
	var sum float64
	for _, v := range x[:n] {
		sum += v
	}
	prev := sum / float64(n)
	out[n-1] = prev
	// prev*(1-k) + x*k is TA-Lib's (x-prev)*k + prev rearranged so that only
	// one multiply-add sits on the loop-carried chain; the two agree to
	// about 1e-15 relative.
	a := 1 - k
	for i := n; i < len(x); i++ {
		prev = prev*a + x[i]*k
		out[i] = prev
	}
	return out
}

// RSI returns Wilder's relative strength index of x with period n,
// TA-Lib's convention: the first average gain and loss are the simple means
// of the first n changes, then avg = (avg*(n-1) + change)/n; RSI =
// 100*gain/(gain+loss), first defined at index n, and 0 (as TA-Lib) when
// gain+loss is 0, i.e. over a flat series.
func RSI(x []float64, n int) []float64 {
	if n < 1 || len(x) <= n {
		return nanSlice(len(x))
	}
	out := make([]float64, len(x))
	for i := range n {
		out[i] = math.NaN()
	}
	var gain, loss float64
	for i := 1; i <= n; i++ {
		d := x[i] - x[i-1]
		if d > 0 {
			gain += d
		} else {
			loss -= d
		}
	}
	gain /= float64(n)
	loss /= float64(n)
	out[n] = rsi(gain, loss)
	// (avg*(n-1) + change)/n as avg*a + change*b: the same smoothing with
	// the divisions off the loop-carried chain (agrees to about 1e-15).
	a, b := float64(n-1)/float64(n), 1/float64(n)
	for i := n + 1; i < len(x); i++ {
		// Gain and loss of the change without a branch: (d+|d|)/2 and
		// (|d|-d)/2 are exact, and price changes are a coin flip for the
		// branch predictor.
		d := x[i] - x[i-1]
		ad := math.Abs(d)
		gain = gain*a + (d+ad)*0.5*b
		loss = loss*a + (ad-d)*0.5*b
		out[i] = rsi(gain, loss)
	}
	return out
}

// EMATail returns the last k values of EMA(x, n) without building the
// whole series (NaN where EMA is not defined).
func EMATail(x []float64, n, k int) []float64 {
	out := nanSlice(k)
	if n < 1 || len(x) < n || k < 1 {
		return out
	}
	kk := 2 / float64(n+1)
	var sum float64
	for _, v := range x[:n] {
		sum += v
	}
	prev := sum / float64(n)
	put := func(i int, v float64) {
		if j := i - (len(x) - k); j >= 0 {
			out[j] = v
		}
	}
	put(n-1, prev)
	a := 1 - kk
	for i := n; i < len(x); i++ {
		prev = prev*a + x[i]*kk
		put(i, prev)
	}
	return out
}

// RSITail returns the last k values of RSI(x, n) without building the
// whole series (NaN where RSI is not defined).
func RSITail(x []float64, n, k int) []float64 {
	out := nanSlice(k)
	if n < 1 || len(x) <= n || k < 1 {
		return out
	}
	var gain, loss float64
	for i := 1; i <= n; i++ {
		d := x[i] - x[i-1]
		if d > 0 {
			gain += d
		} else {
			loss -= d
		}
	}
	gain /= float64(n)
	loss /= float64(n)
	first := len(x) - k
	if n >= first {
		out[n-first] = rsi(gain, loss)
	}
	a, b := float64(n-1)/float64(n), 1/float64(n)
	for i := n + 1; i < len(x); i++ {
		d := x[i] - x[i-1]
		ad := math.Abs(d)
		gain = gain*a + (d+ad)*0.5*b
		loss = loss*a + (ad-d)*0.5*b
		if i >= first {
			out[i-first] = rsi(gain, loss)
		}
	}
	return out
}

func rsi(gain, loss float64) float64 {
	if gain+loss == 0 {
		return 0
	}
	return 100 * gain / (gain + loss)
}

// LogReturns returns ln(x[i]/x[i-1]) for i >= 1 (one shorter than x),
// computed as ln(x[i]) - ln(x[i-1]) so each close takes one logarithm and
// no division (the two forms agree to about 1e-16 absolute).
func LogReturns(x []float64) []float64 {
	if len(x) < 2 {
		return nil
	}
	out := make([]float64, len(x)-1)
	prev := math.Log(x[0])
	for i := 1; i < len(x); i++ {
		cur := math.Log(x[i])
		out[i-1] = cur - prev
		prev = cur
	}
	return out
}

// RealizedVol returns the realized volatility of a run of log returns:
// sqrt(sum r^2), un-centred and not annualized (Andersen-Bollerslev). Over
// 24 hourly returns it is the realized volatility of one day.
func RealizedVol(returns []float64) float64 {
	var ss float64
	for _, r := range returns {
		ss += r * r
	}
	return math.Sqrt(ss)
}

// RollingRealizedVol returns RealizedVol of every run of w consecutive
// returns, the run ending at returns[i] at out[i-w+1]; nil when there are
// fewer than w returns.
func RollingRealizedVol(returns []float64, w int) []float64 {
	out := rollingSumSquares(returns, w)
	for i, v := range out {
		out[i] = math.Sqrt(v)
	}
	return out
}

// MedianRealizedVol returns Median(RollingRealizedVol(returns, w)) without
// taking a square root per run (the square root is monotonic, so the
// median can be selected among the sums of squares); NaN when there are
// fewer than w returns.
func MedianRealizedVol(returns []float64, w int) float64 {
	ss := rollingSumSquares(returns, w)
	n := len(ss)
	if n == 0 {
		return math.NaN()
	}
	hi := math.Sqrt(selectKth(ss, n/2))
	if n%2 == 1 {
		return hi
	}
	return (math.Sqrt(slices.Max(ss[:n/2])) + hi) / 2
}

// rollingSumSquares returns the sum of squares of every run of w returns,
// kept as a running sum, which agrees with summing each run afresh to
// about 1e-15 relative; nil when there are fewer than w returns.
func rollingSumSquares(returns []float64, w int) []float64 {
	if w < 1 || len(returns) < w {
		return nil
	}
	out := make([]float64, 0, len(returns)-w+1)
	var ss float64
	for i, r := range returns {
		ss += r * r
		if i >= w {
			old := returns[i-w]
			ss -= old * old
		}
		if i >= w-1 {
			if ss < 0 { // rounding of the running sum over a flat run
				ss = 0
			}
			out = append(out, ss)
		}
	}
	return out
}

// Median returns the median of x (the mean of the two middle values for
// an even count), NaN for an empty x. x is not modified.
func Median(x []float64) float64 {
	n := len(x)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	hi := selectKth(s, n/2)
	if n%2 == 1 {
		return hi
	}
	// After selection every value left of n/2 is <= hi; the lower middle is their maximum.
	return (slices.Max(s[:n/2]) + hi) / 2
}

// selectKth reorders s so that s[k] is the value a sort would put there,
// with no larger value before it (Hoare's quickselect, median-of-three).
func selectKth(s []float64, k int) float64 {
	lo, hi := 0, len(s)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s[mid] < s[lo] {
			s[mid], s[lo] = s[lo], s[mid]
		}
		if s[hi] < s[lo] {
			s[hi], s[lo] = s[lo], s[hi]
		}
		if s[hi] < s[mid] {
			s[hi], s[mid] = s[mid], s[hi]
		}
		pivot := s[mid]
		i, j := lo, hi
		for i <= j {
			for s[i] < pivot {
				i++
			}
			for s[j] > pivot {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return s[k]
		}
	}
	return s[k]
}

func nanSlice(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = math.NaN()
	}
	return out
}
