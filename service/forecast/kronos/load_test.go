package kronos

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoadRefuses rewrites a copy of the tiny checkpoint in each way Load
// must refuse, and checks the error names the problem.
func TestLoadRefuses(t *testing.T) {
	md, td := checkpointDirs(t, "tiny")
	model, err := readSafetensors(filepath.Join(md, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := readSafetensors(filepath.Join(td, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(md, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tokCfg, err := os.ReadFile(filepath.Join(td, "config.json"))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		editModel   func(map[string]*tensor)
		editTok     func(map[string]*tensor)
		config      func(string) string // rewrites the model's config.json
		tokConfig   func(string) string
		wantErr     error
		wantMention []string
	}{
		{
			name:        "missing tensor",
			editModel:   func(ts map[string]*tensor) { delete(ts, "transformer.1.ffn.w3.weight") },
			wantErr:     ErrMissingTensor,
			wantMention: []string{"transformer.1.ffn.w3.weight", "missing tensor", "[128 64]"},
		},
		{
			name:        "wrong shape",
			editModel:   func(ts map[string]*tensor) { ts["head.proj_s2.weight"].shape = []int{512, 128} },
			wantErr:     ErrShape,
			wantMention: []string{"head.proj_s2.weight", "got [512 128], want [1024 64]"},
		},
		{
			name:        "wrong dtype",
			editModel:   func(ts map[string]*tensor) { ts["norm.weight"].dtype = "F64" },
			wantErr:     ErrDType,
			wantMention: []string{"norm.weight", "got F64"},
		},
		{
			name: "integer weight",
			editTok: func(ts map[string]*tensor) {
				e := ts["embed.bias"]
				e.dtype, e.i64, e.f32 = "I64", make([]int64, len(e.f32)), nil
			},
			wantErr:     ErrDType,
			wantMention: []string{"embed.bias", "got I64"},
		},
		{
			name: "float buffer",
			editTok: func(ts map[string]*tensor) {
				b := ts["tokenizer.bsq.basis"]
				b.dtype, b.f32, b.i64 = "F32", make([]float32, len(b.i64)), nil
			},
			wantErr:     ErrDType,
			wantMention: []string{"tokenizer.bsq.basis", "want I64"},
		},
		{
			name: "unexpected tensor",
			editModel: func(ts map[string]*tensor) {
				ts["transformer.2.norm1.weight"] = &tensor{dtype: "F32", shape: []int{64}, f32: make([]float32, 64)}
			},
			wantErr:     ErrUnexpectedTensor,
			wantMention: []string{"transformer.2.norm1.weight"},
		},
		{
			name:        "config implies more layers",
			config:      func(s string) string { return strings.Replace(s, `"n_layers": 2`, `"n_layers": 3`, 1) },
			wantErr:     ErrMissingTensor,
			wantMention: []string{"transformer.2."},
		},
		{
			name:        "heads do not divide d_model",
			config:      func(s string) string { return strings.Replace(s, `"n_heads": 4`, `"n_heads": 5`, 1) },
			wantErr:     ErrConfig,
			wantMention: []string{"config.json", "5 heads"},
		},
		{
			name:        "config field missing",
			config:      func(s string) string { return strings.Replace(s, `"ff_dim": 128,`, ``, 1) },
			wantErr:     ErrConfig,
			wantMention: []string{`"ff_dim" is missing`},
		},
		{
			name:        "config not JSON",
			config:      func(s string) string { return s[:len(s)/2] },
			wantErr:     ErrConfig,
			wantMention: []string{"config.json"},
		},
		{
			name: "tokenizer of another vocabulary",
			tokConfig: func(s string) string {
				return strings.NewReplacer(`"s1_bits": 10`, `"s1_bits": 8`, `"s2_bits": 10`, `"s2_bits": 8`).Replace(s)
			},
			wantErr:     ErrMismatch,
			wantMention: []string{"8/8", "10/10"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			m, tk := copyTensors(model), copyTensors(tok)
			c, tcfg := string(cfg), string(tokCfg)
			if tc.editModel != nil {
				tc.editModel(m)
			}
			if tc.editTok != nil {
				tc.editTok(tk)
			}
			if tc.config != nil {
				c = tc.config(c)
			}
			if tc.tokConfig != nil {
				tcfg = tc.tokConfig(tcfg)
				if tc.wantErr == ErrMismatch {
					// Shapes follow the config, so only the cross-check fails.
					tokc := TokenizerConfig{DIn: 6, DModel: 64, NHeads: 4, FFDim: 128, NEncLayers: 3, NDecLayers: 3, S1Bits: 8, S2Bits: 8, GroupSize: 4}
					tk = randomTensors(tokenizerSpecs(tokc), 3)
				}
			}
			writeDir(t, filepath.Join(root, "model"), c, m)
			writeDir(t, filepath.Join(root, "tokenizer"), tcfg, tk)
			_, err := Load(filepath.Join(root, "model"), filepath.Join(root, "tokenizer"))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Load: %v, want %v", err, tc.wantErr)
			}
			var ce *CheckpointError
			if !errors.As(err, &ce) {
				t.Fatalf("Load: %T, want *CheckpointError", err)
			}
			for _, s := range tc.wantMention {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func writeDir(t *testing.T, dir, config string, ts map[string]*tensor) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeSafetensors(filepath.Join(dir, "model.safetensors"), ts); err != nil {
		t.Fatal(err)
	}
}

// TestLoadMalformed feeds files that are not safetensors.
func TestLoadMalformed(t *testing.T) {
	md, td := checkpointDirs(t, "tiny")
	good, err := os.ReadFile(filepath.Join(md, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(md, "config.json"))
	for name, data := range map[string][]byte{
		"empty":          nil,
		"huge header":    append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, good[8:]...),
		"truncated":      good[:len(good)/2],
		"header garbage": append(append([]byte(nil), good[:8]...), []byte(strings.Repeat("x", 100))...),
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			os.WriteFile(filepath.Join(root, "config.json"), cfg, 0o644)
			os.WriteFile(filepath.Join(root, "model.safetensors"), data, 0o644)
			_, err := Load(root, td)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("Load: %v, want ErrFormat", err)
			}
		})
	}
}

// TestLoadHalfPrecision: BF16 and F16 checkpoints load, widened to float32,
// and forecast close to the F32 one.
func TestLoadHalfPrecision(t *testing.T) {
	md, td := checkpointDirs(t, "tiny")
	ref := fixtureModel(t, "tiny")
	c := loadCase(t, "tiny-ctx100-pred8")
	want, err := ref.Forecast(context.Background(), c.candles, c.future[:2], Greedy())
	if err != nil {
		t.Fatal(err)
	}
	model, err := readSafetensors(filepath.Join(md, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(md, "config.json"))
	for _, dtype := range []string{"BF16", "F16"} {
		t.Run(dtype, func(t *testing.T) {
			m := copyTensors(model)
			for _, ts := range m {
				if ts.dtype == "F32" {
					ts.dtype = dtype
				}
			}
			root := t.TempDir()
			writeDir(t, root, string(cfg), m)
			half, err := Load(root, td)
			if err != nil {
				t.Fatal(err)
			}
			got, err := half.Forecast(context.Background(), c.candles, c.future[:2], Greedy())
			if err != nil {
				t.Fatal(err)
			}
			// Rounded weights may pick other tokens; the forecast stays in
			// the same range.
			for i := range got {
				if math.Abs(got[i].Close-want[i].Close) > 0.2*want[i].Close {
					t.Errorf("close %d: %v, F32 checkpoint %v", i, got[i].Close, want[i].Close)
				}
			}
		})
	}
}

// TestPublishedShapes builds random checkpoints of the published shapes
// (PublishedShape, WriteRandom: the writer independent of the loader),
// and checks that Load accepts them, names them, counts the model zoo's
// parameters, and that a short forecast runs.
func TestPublishedShapes(t *testing.T) {
	tests := []struct {
		name   string
		params int // the model zoo's parameter count, rounded to 0.1M
		slow   bool
	}{
		{"Kronos-mini", 4_100_000, false},
		{"Kronos-small", 24_700_000, false},
		{"Kronos-base", 102_300_000, true},
	}
	if _, _, ok := PublishedShape("Kronos-large"); ok {
		t.Error("PublishedShape knows Kronos-large, which is not released")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.slow && testing.Short() {
				t.Skip("Kronos-base writes a 400 MB checkpoint; skipped with -short")
			}
			mc, tok, ok := PublishedShape(tc.name)
			if !ok {
				t.Fatalf("PublishedShape(%q) unknown", tc.name)
			}
			md, td, err := WriteRandom(t.TempDir(), mc, tok, 1)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Load(md, td)
			if err != nil {
				t.Fatal(err)
			}
			info := m.Info()
			if info.Name != tc.name {
				t.Errorf("name %q, want %q", info.Name, tc.name)
			}
			if math.Abs(float64(info.Params-tc.params)) > 50_000 {
				t.Errorf("%d parameters, want about %d", info.Params, tc.params)
			}
			candles, future := syntheticCandles(32, 2)
			got, err := m.Forecast(context.Background(), candles, future, Greedy())
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range got {
				for _, v := range []float64{c.Open, c.High, c.Low, c.Close, c.Volume, c.Amount} {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("forecast %+v is not finite", c)
					}
				}
			}
		})
	}
}

// syntheticCandles returns n hourly candles of a noisy walk and the next
// steps times.
func syntheticCandles(n, steps int) ([]Candle, []time.Time) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	price := 100.0
	out := make([]Candle, n)
	for i := range out {
		o := price
		price *= 1 + 0.01*math.Sin(float64(i)*0.7) + 0.003*math.Cos(float64(i)*2.3)
		out[i] = Candle{Time: t0.Add(time.Duration(i) * time.Hour), Open: o, Close: price,
			High: math.Max(o, price) * 1.002, Low: math.Min(o, price) * 0.998, Volume: 50 + 10*math.Sin(float64(i))}
	}
	future := make([]time.Time, steps)
	for i := range future {
		future[i] = t0.Add(time.Duration(n+i) * time.Hour)
	}
	return out, future
}

// copyTensors returns a deep-enough copy for rewriting one entry.
func copyTensors(ts map[string]*tensor) map[string]*tensor {
	out := make(map[string]*tensor, len(ts))
	for n, t := range ts {
		c := *t
		c.shape = slices.Clone(t.shape)
		out[n] = &c
	}
	return out
}
