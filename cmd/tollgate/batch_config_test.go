package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestBatchConfig: --batch-claim-threshold 0 means no threshold, and a
// --batch-claim-interval is refused when two claims and a 5-minute margin
// do not fit in the withdraw delay, with an error naming both flags and
// the longest interval allowed.
func TestBatchConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		want []string // in the error; none: valid
	}{
		{name: "the defaults"},
		{name: "threshold 0: none", args: []string{"--batch-claim-threshold", "0"}},
		{name: "threshold 0.00: none", args: []string{"--batch-claim-threshold", "0.00"}},
		{name: "a negative threshold", args: []string{"--batch-claim-threshold", "-1"}, want: []string{"--batch-claim-threshold"}},
		{name: "a threshold that is no number", args: []string{"--batch-claim-threshold", "five"}, want: []string{"--batch-claim-threshold"}},
		{name: "the longest interval of an hour's delay", args: []string{"--batch-claim-interval", "27m30s"}},
		{name: "an interval too long for an hour's delay", args: []string{"--batch-claim-interval", "28m"},
			want: []string{"--batch-claim-interval 28m0s", "at most 27m30s", "--batch-withdraw-delay 1h0m0s"}},
		{name: "an interval longer than the delay", args: []string{"--batch-claim-interval", "2h"},
			want: []string{"--batch-claim-interval 2h0m0s", "at most 27m30s", "--batch-withdraw-delay"}},
		{name: "the shortest delay", args: []string{"--batch-withdraw-delay", "15m", "--batch-claim-interval", "5m"}},
		{name: "the default interval with the shortest delay", args: []string{"--batch-withdraw-delay", "15m"},
			want: []string{"--batch-claim-interval 10m0s", "at most 5m0s", "--batch-withdraw-delay 15m0s"}},
		{name: "an hour's interval with a longer delay", args: []string{"--batch-withdraw-delay", "3h", "--batch-claim-interval", "1h"}},
		{name: "a delay out of range is reported alone", args: []string{"--batch-withdraw-delay", "10m", "--batch-claim-interval", "1h"},
			want: []string{"--batch-withdraw-delay 10m0s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fs, cfg := newServeFlags(envOf(nil))
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := cfg.validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("valid")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(tt.name, "alone") && strings.Contains(err.Error(), "--batch-claim-interval") {
				t.Errorf("error %q judges the interval against a delay out of range", err)
			}
		})
	}
}

func TestClaimThreshold(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		usd     string
		want    int64 // -1: none
		invalid bool
	}{
		{usd: "0", want: -1},
		{usd: "0.000", want: -1},
		{usd: "00.0", want: -1},
		{usd: "5.00", want: 5_000_000},
		{usd: "0.000001", want: 1},
		{usd: "0.0000001", invalid: true},
		{usd: "-0", invalid: true},
		{usd: ".5", invalid: true},
		{usd: "", invalid: true},
	} {
		got, err := claimThreshold(tt.usd, usdcDecimals)
		switch {
		case tt.invalid:
			if err == nil {
				t.Errorf("%q: %v, want an error", tt.usd, got)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.usd, err)
		case tt.want < 0 && got != nil, tt.want >= 0 && (got == nil || got.Int64() != tt.want):
			t.Errorf("%q: %v, want %d", tt.usd, got, tt.want)
		}
	}
}

// TestBatchSideSharedDevnet: servers sharing a devnet (--devnet-url) each
// with its own SQLite store are offered batch-settlement (each serves
// only the channels it opened), with a line saying so; with a shared
// --database nothing is said (here each goes on to the next check: this
// facilitator does not support the scheme).
func TestBatchSideSharedDevnet(t *testing.T) {
	t.Parallel()
	const unsupported = "level=WARN msg=\"batch-settlement is not offered: the facilitator does not support it\""
	for _, tt := range []struct {
		name string
		cfg  config
		logs []string // what each line logged says, in order
	}{
		{name: "batch-settlement off", cfg: config{DevnetURL: "http://127.0.0.1:8545"}},
		{name: "a shared devnet, each its own store", cfg: config{BatchSettlement: true, DevnetURL: "http://127.0.0.1:8545"},
			logs: []string{"level=INFO msg=\"batch-settlement books are this server's own (--data-dir): channels opened at another server on this chain are refused here", unsupported}},
		{name: "a shared devnet and a shared store", cfg: config{BatchSettlement: true, DevnetURL: "http://127.0.0.1:8545", Database: "postgres://db/tollgate"},
			logs: []string{unsupported}},
		{name: "an in-process devnet", cfg: config{BatchSettlement: true}, logs: []string{unsupported}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			side, err := newBatchSide(&tt.cfg, &payments{mode: "devnet"}, nil, nil, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil || side != nil {
				t.Fatalf("newBatchSide: %+v, %v; want nothing offered", side, err)
			}
			lines := strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
			if logs.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tt.logs) {
				t.Fatalf("logged %q; want %d lines", lines, len(tt.logs))
			}
			for i, want := range tt.logs {
				if !strings.Contains(lines[i], want) {
					t.Errorf("line %d: %s; want it to say %s", i, lines[i], want)
				}
			}
		})
	}
}
