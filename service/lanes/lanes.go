// Package lanes owns the operator's trade tape behind /lanes: what a close
// is, its validation, and reading closes from JSONL and CSV files. It
// stores nothing; the store keeps the tape and the service reads it back.
package lanes

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Close is one close of a lane: an id (the idempotency key), the lane and
// when it closed.
type Close struct {
	ID       string    `json:"id"`
	Lane     string    `json:"lane"`
	ClosedAt time.Time `json:"closedAt"`
}

// Same reports whether two closes are the same close.
func (c Close) Same(o Close) bool {
	return c.ID == o.ID && c.Lane == o.Lane && c.ClosedAt.Equal(o.ClosedAt)
}

// ErrConflict marks a close whose id is stored with a different lane or
// time.
var ErrConflict = errors.New("close id already stored with a different lane or time")

// Lane is a lane's summary.
type Lane struct {
	Name      string
	Closes    int
	LastClose time.Time
}

var (
	laneName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	closeID  = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
)

// maxSkew is how far in the future a close may be (clock differences).
const maxSkew = 5 * time.Minute

// Check validates a close against now.
func (c Close) Check(now time.Time) error {
	switch {
	case !closeID.MatchString(c.ID):
		return fmt.Errorf("id %q: want 1 to 128 printable ASCII characters without spaces", c.ID)
	case !laneName.MatchString(c.Lane):
		return fmt.Errorf("lane %q: want 1 to 64 of a-z 0-9 . _ -, starting with a letter or digit", c.Lane)
	case c.ClosedAt.IsZero():
		return errors.New("closedAt is missing")
	case c.ClosedAt.After(now.Add(maxSkew)):
		return fmt.Errorf("closedAt %s is in the future", c.ClosedAt.Format(time.RFC3339))
	}
	return nil
}

// ParseTime reads an RFC 3339 time, as closes carry them.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, fmt.Errorf("closedAt %q: want RFC 3339, e.g. 2026-11-21T14:00:00Z", s)
	}
	return t.UTC(), nil
}

// LineError is a bad line of an import file.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Read reads every close of r in format "jsonl" or "csv" and checks each
// against now. The first bad line fails the whole read, with its number.
//
// JSONL: one object per line, {"id":"…","lane":"…","closedAt":"RFC 3339"};
// blank lines are skipped. CSV: a header naming id, lane and closed_at (in
// any order, other columns ignored), then one close per row.
func Read(r io.Reader, format string, now time.Time) ([]Close, error) {
	var closes []Close
	var lines []int
	var err error
	switch format {
	case "jsonl":
		closes, lines, err = readJSONL(r)
	case "csv":
		closes, lines, err = readCSV(r)
	default:
		return nil, fmt.Errorf("format %q: want jsonl or csv", format)
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]int{}
	for i, c := range closes {
		line := lines[i]
		if err := c.Check(now); err != nil {
			return nil, &LineError{Line: line, Err: err}
		}
		if prev, ok := seen[c.ID]; ok && !closes[prev].Same(c) {
			return nil, &LineError{Line: line, Err: fmt.Errorf("id %q repeats an earlier line with a different close", c.ID)}
		}
		seen[c.ID] = i
	}
	return closes, nil
}

// readJSONL and readCSV return the closes with their line numbers.
func readJSONL(r io.Reader) ([]Close, []int, error) {
	var out []Close
	var lines []int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var raw struct {
			ID       string `json:"id"`
			Lane     string `json:"lane"`
			ClosedAt string `json:"closedAt"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, &LineError{Line: n, Err: fmt.Errorf("not a close object: %v", err)}
		}
		t, err := ParseTime(raw.ClosedAt)
		if err != nil {
			return nil, nil, &LineError{Line: n, Err: err}
		}
		out, lines = append(out, Close{ID: raw.ID, Lane: raw.Lane, ClosedAt: t}), append(lines, n)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return out, lines, nil
}

func readCSV(r io.Reader) ([]Close, []int, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, nil, &LineError{Line: 1, Err: fmt.Errorf("no header: %v", err)}
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	for _, need := range []string{"id", "lane", "closed_at"} {
		if _, ok := col[need]; !ok {
			return nil, nil, &LineError{Line: 1, Err: fmt.Errorf("header %v lacks %q (want id, lane, closed_at)", header, need)}
		}
	}
	var out []Close
	var lines []int
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return out, lines, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, nil, &LineError{Line: pe.StartLine, Err: pe.Err}
			}
			return nil, nil, err
		}
		line, _ := cr.FieldPos(0)
		field := func(name string) string {
			if i := col[name]; i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		t, err := ParseTime(field("closed_at"))
		if err != nil {
			return nil, nil, &LineError{Line: line, Err: err}
		}
		out, lines = append(out, Close{ID: field("id"), Lane: field("lane"), ClosedAt: t}), append(lines, line)
	}
}
