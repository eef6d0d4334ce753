package rules

// Thresholds of the /signal gate (docs/rules.md).
const (
	// GateMinReturnPct is the least model 24h expected return for GO.
	GateMinReturnPct = 0.20
	// GateRSICeiling is the RSI(14) above which the gate stays shut
	// (overbought).
	GateRSICeiling = 70.0
)

// Gate fuses the regime, the model's 24h expected return (nil without a
// model answer) and RSI(14) into GO (true) or NO-GO: GO only in TREND-UP,
// with an expected return of at least GateMinReturnPct and RSI at most
// GateRSICeiling.
func Gate(r Regime, expectedReturnPct *float64, rsi float64) bool {
	return r == TrendUp && expectedReturnPct != nil && *expectedReturnPct >= GateMinReturnPct && rsi <= GateRSICeiling
}
