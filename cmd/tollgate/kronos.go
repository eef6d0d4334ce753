package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/service"
	"github.com/tollgate/tollgate/service/forecast/kronos"
)

// kronosCmd runs `tollgate kronos`: Kronos forecasts a CSV of candles and
// prints the forecast as CSV with the same columns, at the input's
// interval after its last candle.
func kronosCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kronos", flag.ContinueOnError)
	modelDir := fs.String("kronos-model", getenv("TOLLGATE_KRONOS_MODEL"), "directory of the predictor checkpoint (config.json + model.safetensors), e.g. NeoQuasar/Kronos-small")
	tokDir := fs.String("kronos-tokenizer", getenv("TOLLGATE_KRONOS_TOKENIZER"), "directory of its tokenizer checkpoint, e.g. NeoQuasar/Kronos-Tokenizer-base")
	predLen := fs.Int("pred-len", 0, "candles to forecast (required)")
	greedy := fs.Bool("greedy", false, "deterministic: temperature 1, top-k 1, one sample (the reference's regression tests)")
	temperature := fs.Float64("temperature", 1.0, "sampling temperature (the reference predictor's default 1.0)")
	topP := fs.Float64("top-p", 0.9, "nucleus sampling: the smallest set of tokens reaching this probability (the reference's default); 1: off")
	topK := fs.Int("top-k", 0, "sample among the k most likely tokens; 0: off (when set, --top-p is ignored, as in the reference)")
	samples := fs.Int("samples", 1, "sample paths averaged into the forecast")
	seed := fs.Uint64("seed", 0, "seed of the sampling: the same input, settings and seed give the same forecast")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: tollgate kronos --kronos-model DIR --kronos-tokenizer DIR --pred-len N [--greedy | --temperature T --top-p P --top-k K --samples S --seed X] FILE.csv\n\n"+
			"Forecasts the candles of FILE.csv (\"-\": standard input; columns timestamp in RFC 3339, open, high, low, close,\n"+
			"optional volume and amount, oldest first, at one interval) with Kronos in process, and prints the next N\n"+
			"candles as CSV: timestamp,open,high,low,close,volume,amount. Inputs longer than 512 candles are read as the\n"+
			"reference reads them (its window slides).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, "kronos", args, stdout); err != nil {
		return err
	}
	var errs []error
	if fs.NArg() != 1 {
		errs = append(errs, errors.New("one CSV file expected"))
	}
	if *modelDir == "" || *tokDir == "" {
		errs = append(errs, errors.New("--kronos-model and --kronos-tokenizer are required"))
	}
	if *predLen < 1 {
		errs = append(errs, fmt.Errorf("--pred-len %d: want at least 1", *predLen))
	}
	o := kronos.Options{Temperature: *temperature, TopP: *topP, TopK: *topK, Samples: *samples, Seed: *seed}
	if *greedy {
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "temperature", "top-p", "top-k", "samples":
				errs = append(errs, fmt.Errorf("--greedy sets the sampling: --%s does not go with it", f.Name))
			}
		})
		o = kronos.Greedy()
	}
	if len(errs) > 0 {
		fs.Usage()
		return fmt.Errorf("kronos: %w", errors.Join(errs...))
	}
	in, err := openInput(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("kronos: %w", err)
	}
	defer in.Close()
	candles, interval, err := readCandles(in)
	if err != nil {
		return fmt.Errorf("kronos: %s: %w", fs.Arg(0), err)
	}
	start := time.Now()
	m, err := kronos.Load(*modelDir, *tokDir)
	if err != nil {
		return fmt.Errorf("kronos: %w", err)
	}
	loaded := time.Since(start)
	last := candles[len(candles)-1].Time
	future := make([]time.Time, *predLen)
	for i := range future {
		future[i] = last.Add(time.Duration(i+1) * interval)
	}
	start = time.Now()
	out, err := m.Forecast(ctx, candles, future, o)
	if err != nil {
		return fmt.Errorf("kronos: %w", err)
	}
	fmt.Fprintf(stderr, "%s (%d parameters): %d candles at %s, %d forecast in %s (loaded in %s)\n",
		service.KronosName(m.Info()), m.Info().Params, len(candles), interval, len(out), time.Since(start).Round(time.Millisecond), loaded.Round(time.Millisecond))
	return writeCandles(stdout, out)
}

func openInput(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(name)
}

// readCandles reads a CSV of candles by its header's column names and
// returns them with their interval; they must be in time order at one
// interval.
func readCandles(r io.Reader) ([]kronos.Candle, time.Duration, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, 0, err
	}
	if len(rows) < 3 {
		return nil, 0, errors.New("a header and at least two candles are needed (the interval is read from them)")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[strings.ToLower(strings.TrimSpace(name))] = i
	}
	for _, need := range []string{"timestamp", "open", "high", "low", "close"} {
		if _, ok := col[need]; !ok {
			return nil, 0, fmt.Errorf("no %q column (the header has %s)", need, strings.Join(rows[0], ","))
		}
	}
	value := func(row []string, line int, name string) (float64, error) {
		i, ok := col[name]
		if !ok {
			return 0, nil // optional volume or amount
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(row[i]), 64)
		if err != nil || math.Abs(v) > math.MaxFloat32 { // the model computes in float32
			return 0, fmt.Errorf("line %d: %s %q is not a number within float32's range", line, name, row[i])
		}
		return v, nil
	}
	var out []kronos.Candle
	var interval time.Duration
	for n, row := range rows[1:] {
		line := n + 2
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(row[col["timestamp"]]))
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: timestamp %q is not RFC 3339 (2026-01-05T00:00:00Z)", line, row[col["timestamp"]])
		}
		c := kronos.Candle{Time: t}
		for _, f := range []struct {
			name string
			to   *float64
		}{{"open", &c.Open}, {"high", &c.High}, {"low", &c.Low}, {"close", &c.Close}, {"volume", &c.Volume}, {"amount", &c.Amount}} {
			if *f.to, err = value(row, line, f.name); err != nil {
				return nil, 0, err
			}
		}
		if len(out) > 0 {
			step := t.Sub(out[len(out)-1].Time)
			switch {
			case step <= 0:
				return nil, 0, fmt.Errorf("line %d: %s is not after the candle before it", line, t.Format(time.RFC3339))
			case interval == 0:
				interval = step
			case step != interval:
				return nil, 0, fmt.Errorf("line %d: an interval of %s after %s before; the candles must be at one interval", line, step, interval)
			}
		}
		out = append(out, c)
	}
	return out, interval, nil
}

// writeCandles writes candles as CSV: timestamp (RFC 3339) and the six
// values.
func writeCandles(w io.Writer, candles []kronos.Candle) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"timestamp", "open", "high", "low", "close", "volume", "amount"})
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 32) } // the model computes in float32
	for _, c := range candles {
		_ = cw.Write([]string{c.Time.Format(time.RFC3339), num(c.Open), num(c.High), num(c.Low), num(c.Close), num(c.Volume), num(c.Amount)})
	}
	cw.Flush()
	return cw.Error()
}
