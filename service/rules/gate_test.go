package rules

import "testing"

// TestGate is the golden table of the /signal rule.
func TestGate(t *testing.T) {
	t.Parallel()
	ret := func(v float64) *float64 { return &v }
	tests := []struct {
		name   string
		regime Regime
		ret    *float64
		rsi    float64
		want   bool
	}{
		{"trend up, model agrees, not overbought", TrendUp, ret(0.5), 60, true},
		{"return exactly at the floor", TrendUp, ret(GateMinReturnPct), 60, true},
		{"RSI exactly at the ceiling", TrendUp, ret(1), GateRSICeiling, true},
		{"return below the floor", TrendUp, ret(0.19), 60, false},
		{"negative return", TrendUp, ret(-1), 60, false},
		{"no model answer", TrendUp, nil, 60, false},
		{"overbought", TrendUp, ret(1), 70.01, false},
		{"range", Range, ret(1), 50, false},
		{"chop", Chop, ret(1), 50, false},
		{"trend down", TrendDown, ret(3), 30, false},
	}
	for _, tt := range tests {
		if got := Gate(tt.regime, tt.ret, tt.rsi); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
