package lanes_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/service/lanes"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// TestReadGoodFiles: the JSONL and CSV samples hold the same three closes
// (times normalized to UTC, blank lines and extra columns ignored).
func TestReadGoodFiles(t *testing.T) {
	t.Parallel()
	want := []lanes.Close{
		{ID: "c-001", Lane: "eth-trend", ClosedAt: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)},
		{ID: "c-002", Lane: "btc-range", ClosedAt: time.Date(2026, 11, 1, 10, 30, 0, 0, time.UTC)},
		{ID: "c-003", Lane: "eth-trend", ClosedAt: time.Date(2026, 11, 2, 9, 15, 0, 500_000_000, time.UTC)},
	}
	for _, f := range []struct{ path, format string }{{"testdata/good.jsonl", "jsonl"}, {"testdata/good.csv", "csv"}} {
		r, err := os.Open(f.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := lanes.Read(r, f.format, now)
		r.Close()
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %v %v", f.path, got, err)
		}
		for i := range want {
			if !got[i].Same(want[i]) {
				t.Errorf("%s #%d: %+v, want %+v", f.path, i, got[i], want[i])
			}
		}
	}
}

// TestReadBadLines: the first bad line fails the read with its number.
func TestReadBadLines(t *testing.T) {
	t.Parallel()
	good := `{"id":"a","lane":"x","closedAt":"2026-11-01T00:00:00Z"}` + "\n"
	tests := []struct {
		name, format, body string
		line               int
		msg                string
	}{
		{"not json", "jsonl", good + "{nope\n", 2, "not a close object"},
		{"unknown field", "jsonl", good + `{"id":"b","lane":"x","closedAt":"2026-11-01T00:00:00Z","pnl":3}` + "\n", 2, "unknown field"},
		{"bad time", "jsonl", good + "\n" + `{"id":"b","lane":"x","closedAt":"yesterday"}` + "\n", 3, "RFC 3339"},
		{"bad lane", "jsonl", good + `{"id":"b","lane":"ETH Trend","closedAt":"2026-11-01T00:00:00Z"}` + "\n", 2, "lane"},
		{"empty id", "jsonl", `{"id":"","lane":"x","closedAt":"2026-11-01T00:00:00Z"}` + "\n", 1, "id"},
		{"future", "jsonl", good + `{"id":"b","lane":"x","closedAt":"2026-11-22T00:00:00Z"}` + "\n", 2, "future"},
		{"repeated id, other close", "jsonl", good + `{"id":"a","lane":"y","closedAt":"2026-11-01T00:00:00Z"}` + "\n", 2, "repeats"},
		{"csv header", "csv", "id,lane\na,x\n", 1, "closed_at"},
		{"csv bad time", "csv", "id,lane,closed_at\na,x,2026-11-01T00:00:00Z\nb,x,2026-13-01\n", 3, "RFC 3339"},
		{"csv bad quote", "csv", "id,lane,closed_at\na,x,2026-11-01T00:00:00Z\n\"b,x,2026-11-01T00:00:00Z\n", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lanes.Read(strings.NewReader(tt.body), tt.format, now)
			var le *lanes.LineError
			if !errors.As(err, &le) || le.Line != tt.line || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err %v, want line %d with %q", err, tt.line, tt.msg)
			}
		})
	}
	if _, err := lanes.Read(strings.NewReader(good), "xml", now); err == nil {
		t.Error("format xml accepted")
	}
	// The same close twice is fine (idempotent files).
	if got, err := lanes.Read(strings.NewReader(good+good), "jsonl", now); err != nil || len(got) != 2 {
		t.Errorf("repeated identical close: %v %v", got, err)
	}
}
