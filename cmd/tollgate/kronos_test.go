package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/devnet"
	"github.com/tollgate/tollgate/payment"
	"github.com/tollgate/tollgate/payment/exact"
)

const kronosFixtures = "../../service/forecast/kronos/testdata"

// TestKronosCommand: `tollgate kronos --greedy` prints, for each reference
// case of the tiny checkpoint (one within the 512-candle window, one past
// it), the forecast the reference predictor printed: the same timestamps
// and every value within 1e-4 relative; bad input is refused with what is
// wrong.
func TestKronosCommand(t *testing.T) {
	t.Parallel()
	model, tok := filepath.Join(kronosFixtures, "tiny", "model"), filepath.Join(kronosFixtures, "tiny", "tokenizer")
	for _, c := range []struct{ name, predLen string }{{"tiny-ctx100-pred8", "8"}, {"tiny-ctx500-pred24", "24"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(kronosFixtures, "cases", c.name)
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"kronos", "--kronos-model", model, "--kronos-tokenizer", tok, "--pred-len", c.predLen, "--greedy",
				filepath.Join(dir, "input.csv")}, envOf(nil), &out, &errOut)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			got := readCSV(t, out.Bytes())
			want := readCSV(t, mustRead(t, filepath.Join(dir, "greedy_forecast.csv")))
			if len(got) != len(want) || strings.Join(got[0], ",") != "timestamp,open,high,low,close,volume,amount" {
				t.Fatalf("%d rows, header %v; want %d rows", len(got), got[0], len(want))
			}
			for i := 1; i < len(want); i++ {
				if got[i][0] != want[i][0] {
					t.Fatalf("row %d: timestamp %s, want %s", i, got[i][0], want[i][0])
				}
				for j := 1; j < len(want[i]); j++ {
					g, _ := strconv.ParseFloat(got[i][j], 64)
					w, _ := strconv.ParseFloat(want[i][j], 64)
					if math.Abs(g-w) > 1e-4*math.Abs(w) {
						t.Errorf("row %d, %s: %v, the reference %v", i, want[0][j], g, w)
					}
				}
			}
		})
	}

	bad := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(bad, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := filepath.Join(kronosFixtures, "cases", "tiny-ctx100-pred8", "input.csv")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no pred-len", []string{"--kronos-model", model, "--kronos-tokenizer", tok, good}, "--pred-len 0"},
		{"no tokenizer", []string{"--kronos-model", model, "--pred-len", "4", good}, "--kronos-tokenizer are required"},
		{"greedy and a temperature", []string{"--kronos-model", model, "--kronos-tokenizer", tok, "--pred-len", "4", "--greedy", "--temperature", "0.5", good}, "--temperature does not go with it"},
		{"bad timestamp", []string{"--kronos-model", model, "--kronos-tokenizer", tok, "--pred-len", "4",
			write("ts.csv", "timestamp,open,high,low,close\nyesterday,1,2,0.5,1.5\n2026-01-01T01:00:00Z,1,2,0.5,1.5\n")}, "line 2: timestamp \"yesterday\" is not RFC 3339"},
		{"no close", []string{"--kronos-model", model, "--kronos-tokenizer", tok, "--pred-len", "4",
			write("cols.csv", "timestamp,open,high,low\n2026-01-01T00:00:00Z,1,2,0.5\n2026-01-01T01:00:00Z,1,2,0.5\n")}, "no \"close\" column"},
		{"uneven interval", []string{"--kronos-model", model, "--kronos-tokenizer", tok, "--pred-len", "4",
			write("gap.csv", "timestamp,open,high,low,close\n2026-01-01T00:00:00Z,1,2,0.5,1\n2026-01-01T01:00:00Z,1,2,0.5,1\n2026-01-01T03:00:00Z,1,2,0.5,1\n")}, "line 4: an interval of 2h0m0s after 1h0m0s"},
		{"beyond float32", []string{"--kronos-model", model, "--kronos-tokenizer", tok, "--pred-len", "4",
			write("big.csv", "timestamp,open,high,low,close\n2026-01-01T00:00:00Z,1,2,0.5,1e40\n2026-01-01T01:00:00Z,1,2,0.5,1\n")}, "line 2: close \"1e40\" is not a number within float32's range"},
		{"not a checkpoint", []string{"--kronos-model", bad, "--kronos-tokenizer", tok, "--pred-len", "4", good}, "config.json"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append([]string{"kronos"}, tt.args...), envOf(nil), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %s", tt.name, err, tt.want)
		}
	}
}

func readCSV(t *testing.T, b []byte) [][]string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBacktestKronos: `tollgate backtest --model kronos` scores Kronos as
// the service runs it (here the tiny reference checkpoint), reproducibly
// at a fixed --as-of, and differently from the embedded model; without a
// checkpoint it says what is missing.
func TestBacktestKronos(t *testing.T) {
	t.Parallel()
	model, tok := filepath.Join(kronosFixtures, "tiny", "model"), filepath.Join(kronosFixtures, "tiny", "tokenizer")
	score := func(extra ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"backtest", "--product", "ETH-USD", "--closes", "800", "--window", "200", "--step", "96", "--as-of", "2026-11-01T00:00:00Z"}, extra...)
		if err := run(context.Background(), args, envOf(nil), &out, &errOut); err != nil {
			t.Fatalf("backtest %v: %v %s", extra, err, errOut.String())
		}
		return out.String()
	}
	k := score("--model", "kronos", "--kronos-model", model, "--kronos-tokenizer", tok)
	if !strings.Contains(k, "backtest of kronos-custom on ETH-USD") || !strings.Contains(k, "7 origins") || !strings.Contains(k, "MASE (vs random walk)") {
		t.Errorf("kronos backtest:\n%s", k)
	}
	if again := score("--model", "kronos", "--kronos-model", model, "--kronos-tokenizer", tok); again != k {
		t.Errorf("two runs, two scores:\n%s\n%s", k, again)
	}
	embedded := score()
	mase := func(s string) string { _, after, _ := strings.Cut(s, "MASE"); return after }
	if mase(embedded) == mase(k) {
		t.Errorf("the embedded model and Kronos score alike:\n%s\n%s", embedded, k)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"backtest", "--model", "kronos"}, envOf(nil), &out, &errOut); err == nil || !strings.Contains(err.Error(), "--kronos-model and --kronos-tokenizer") {
		t.Errorf("kronos without checkpoints: %v", err)
	}
}

// TestServeKronos: `serve --kronos-model --kronos-tokenizer` answers a paid
// /forecast from Kronos, names it in the answer and in /tollgate's
// sources, and counts the inference in the metrics; the flags go
// together and exclude a remote model.
func TestServeKronos(t *testing.T) {
	t.Parallel()
	model, tok := filepath.Join(kronosFixtures, "tiny", "model"), filepath.Join(kronosFixtures, "tiny", "tokenizer")
	s, err := serveFor(t, []string{"--data-dir", t.TempDir(), "--kronos-model", model, "--kronos-tokenizer", tok}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := devnet.DeriveKey(devnet.Mnemonic, devnet.PayerAccount)
	p := &payment.Payer{Version: 2, Schemes: []payment.SchemeClient{exact.Payer{Key: key}}}
	res, err := p.Get(context.Background(), s.base+"/forecast?product=ETH-USD&pred_len=6")
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("paid /forecast: %v %+v", err, res)
	}
	var f struct {
		Model, Fallback string
		Closes          []float64
	}
	if err := json.Unmarshal(res.Body, &f); err != nil || f.Model != "kronos-custom" || f.Fallback != "" || len(f.Closes) != 6 {
		t.Fatalf("/forecast: %s", res.Body)
	}
	resp, err := http.Get(s.base + "/tollgate")
	if err != nil {
		t.Fatal(err)
	}
	project, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(project, []byte(`"kind":"model","name":"kronos-custom"`)) {
		t.Errorf("/tollgate does not say Kronos serves: %s", project)
	}
	var facts struct {
		Sources []struct {
			Kind string
			Cost *struct {
				Checkpoint                                          string
				Parameters                                          string // int64 in JSON
				WarmupSeconds, LastInferenceSeconds, TimeoutSeconds float64
				LastInferenceAt                                     string
			}
		}
	}
	json.Unmarshal(project, &facts)
	for _, src := range facts.Sources {
		if src.Kind != "model" {
			continue
		}
		if c := src.Cost; c == nil || c.Checkpoint != "kronos-custom" || c.Parameters == "" || c.Parameters == "0" || c.WarmupSeconds <= 0 ||
			c.LastInferenceSeconds <= 0 || c.LastInferenceAt == "" || c.TimeoutSeconds != 20 {
			t.Errorf("/tollgate's model entry says of its cost %+v; want the checkpoint, its parameters, the warm-up, the last inference and the timeout", c)
		}
	}
	fams := scrape(t, s.admin)
	if v, ok := sample(fams["tollgate_forecast_inferences_total"].GetMetric(), "model", "kronos-custom", "outcome", "ok"); !ok || v != 1 {
		t.Errorf("tollgate_forecast_inferences_total{outcome=ok} = %v (%v), want 1", v, ok)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--kronos-model", model}, "go together"},
		{[]string{"--kronos-model", model, "--kronos-tokenizer", tok, "--forecast-model", "grpc://127.0.0.1:1"}, "choose one"},
	} {
		fs, cfg := newServeFlags(envOf(nil))
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestKronosWarmUp: serve logs the time of a warm-up inference at start,
// and warns when --forecast-timeout is too short for it to hold.
func TestKronosWarmUp(t *testing.T) {
	t.Parallel()
	model, tok := filepath.Join(kronosFixtures, "tiny", "model"), filepath.Join(kronosFixtures, "tiny", "tokenizer")
	for _, tc := range []struct {
		timeout, want string
	}{
		{"20s", `level=INFO msg="kronos warm-up inference" took=`},
		{"1ms", "level=WARN msg=\"kronos warm-up inference failed"},
	} {
		t.Run(tc.timeout, func(t *testing.T) {
			t.Parallel()
			addrs := freeAddrs(t, 4)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var log syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", "--data-dir", t.TempDir(), "--http", addrs[0], "--grpc", addrs[1], "--admin", addrs[2],
					"--devnet-rpc", addrs[3], "--public-url", "http://" + addrs[0], "--kronos-model", model, "--kronos-tokenizer", tok,
					"--forecast-timeout", tc.timeout}, envOf(nil), &log, &log)
			}()
			waitHealthy(t, "http://"+addrs[0], done)
			cancel()
			<-done
			if !strings.Contains(log.String(), tc.want) {
				t.Errorf("--forecast-timeout %s: the log lacks %q:\n%s", tc.timeout, tc.want, log.String())
			}
		})
	}
}
