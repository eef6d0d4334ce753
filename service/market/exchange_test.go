package market_test

import "time"

// hour is a fixed, hour-aligned "now" for the tests.
var hour = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

func hoursBefore(t time.Time, n int) time.Time { return t.Add(-time.Duration(n) * time.Hour) }
