package kronos

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fixtures: testdata/ holds copies of the tiny checkpoint, every case
// and filters.json from the reference run described in testdata/README.md.
// The mini checkpoint (31 MB) is not copied; cases that need it run when
// the shared fixtures directory is present (beside the repository, or
// named by TOLLGATE_KRONOS_FIXTURES) and are skipped otherwise.
const sharedFixtures = "../../../../shared/kronos"

// Tolerances for a float32 port (testdata/README.md).
const (
	logitTol = 1e-3 // absolute, logits
	normTol  = 1e-4 // absolute, normalised values and decoded rows
	relTol   = 1e-4 // relative, forecast candles
)

// checkpointDirs returns the model and tokenizer directories of a fixture
// config, skipping the test when they are not available.
func checkpointDirs(t testing.TB, config string) (model, tok string) {
	t.Helper()
	for _, root := range []string{"testdata", os.Getenv("TOLLGATE_KRONOS_FIXTURES"), sharedFixtures} {
		if root == "" {
			continue
		}
		dir := filepath.Join(root, config)
		if _, err := os.Stat(filepath.Join(dir, "model", "model.safetensors")); err == nil {
			return filepath.Join(dir, "model"), filepath.Join(dir, "tokenizer")
		}
	}
	t.Skipf("capability kronos-reference not tested: Kronos against the reference's outputs for the %s checkpoint (in neither testdata nor %s); to test it: TOLLGATE_KRONOS_FIXTURES=DIR, the reference's seeded checkpoints", config, sharedFixtures)
	return "", ""
}

var (
	modelsMu sync.Mutex
	models   = map[string]*Model{}
)

// fixtureModel loads a fixture checkpoint once per test binary.
func fixtureModel(t testing.TB, config string) *Model {
	t.Helper()
	md, td := checkpointDirs(t, config)
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if m, ok := models[config]; ok {
		return m
	}
	m, err := Load(md, td)
	if err != nil {
		t.Fatalf("Load(%s): %v", config, err)
	}
	models[config] = m
	return m
}

type expected struct {
	Config       string      `json:"config"`
	ContextLen   int         `json:"contextLen"`
	PredLen      int         `json:"predLen"`
	MaxContext   int         `json:"maxContext"`
	Mean         []float64   `json:"mean"`
	Std          []float64   `json:"std"`
	NormFirst3   [][]float64 `json:"normalizedFirst3"`
	NormLast3    [][]float64 `json:"normalizedLast3"`
	StampFirst3  [][]float64 `json:"stampFirst3"`
	S1           []int       `json:"s1"`
	S2           []int       `json:"s2"`
	DecodeFirst3 [][]float64 `json:"tokenizerDecodeFirst3"`
	DecodeLast3  [][]float64 `json:"tokenizerDecodeLast3"`
	WindowStart  int         `json:"windowStart"`
	S1Logits     []float64   `json:"s1LogitsLast"`
	ArgmaxS1     int         `json:"argmaxS1Last"`
	S2Logits     []float64   `json:"s2LogitsLastGivenArgmaxS1"`
	Steps        []struct {
		S1, S2 int
		S1Top5 struct {
			IDs    []int     `json:"ids"`
			Logits []float64 `json:"logits"`
		} `json:"s1Top5"`
		S2Top5 struct {
			IDs    []int     `json:"ids"`
			Logits []float64 `json:"logits"`
		} `json:"s2Top5"`
	} `json:"greedySteps"`
}

type fixtureCase struct {
	name    string
	exp     expected
	candles []Candle
	future  []time.Time
	want    []Candle // greedy_forecast.csv
}

func loadCase(t testing.TB, name string) fixtureCase {
	t.Helper()
	dir := filepath.Join("testdata", "cases", name)
	c := fixtureCase{name: name}
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &c.exp); err != nil {
		t.Fatal(err)
	}
	c.candles = readCandles(t, filepath.Join(dir, "input.csv"))
	c.want = readCandles(t, filepath.Join(dir, "greedy_forecast.csv"))
	for _, w := range c.want {
		c.future = append(c.future, w.Time)
	}
	return c
}

// readCandles reads a fixture CSV: timestamp, open, high, low, close,
// volume[, amount].
func readCandles(t testing.TB, path string) []Candle {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []Candle
	for _, r := range recs[1:] {
		ts, err := time.Parse(time.RFC3339, r[0])
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, 6)
		for j := 1; j < len(r); j++ {
			if v[j-1], err = strconv.ParseFloat(r[j], 64); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, Candle{Time: ts, Open: v[0], High: v[1], Low: v[2], Close: v[3], Volume: v[4], Amount: v[5]})
	}
	return out
}

func caseNames(t testing.TB) []string {
	entries, err := os.ReadDir(filepath.Join("testdata", "cases"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestReferenceCases compares every intermediate the reference recorded, and
// the forecast, for every case.
func TestReferenceCases(t *testing.T) {
	for _, name := range caseNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := loadCase(t, name)
			m := fixtureModel(t, c.exp.Config)
			n := len(c.candles)
			if n != c.exp.ContextLen || len(c.future) != c.exp.PredLen {
				t.Fatalf("case has %d candles and %d future times, expected.json says %d and %d", n, len(c.future), c.exp.ContextLen, c.exp.PredLen)
			}

			x, mean, std, err := normalize(c.candles)
			if err != nil {
				t.Fatal(err)
			}
			for j := range numFeatures {
				if !closeRel(float64(mean[j]), c.exp.Mean[j], 3e-7) || !closeRel(float64(std[j]), c.exp.Std[j], 3e-7) {
					t.Errorf("column %d: mean %v std %v, want %v %v", j, mean[j], std[j], c.exp.Mean[j], c.exp.Std[j])
				}
			}
			checkRows(t, "normalised first rows", x[:3*numFeatures], c.exp.NormFirst3, normTol)
			checkRows(t, "normalised last rows", x[(n-3)*numFeatures:], c.exp.NormLast3, normTol)
			for r, row := range c.exp.StampFirst3 {
				got := timeFeatures(c.candles[r].Time)
				for j, v := range row {
					if float64(got[j]) != v {
						t.Errorf("time features of row %d: %v, want %v", r, got, row)
						break
					}
				}
			}

			toks := m.tok.encode(x, n, 2)
			for i, tk := range toks {
				if int(tk.s1) != c.exp.S1[i] || int(tk.s2) != c.exp.S2[i] {
					t.Fatalf("token %d: s1 %d s2 %d, want %d %d", i, tk.s1, tk.s2, c.exp.S1[i], c.exp.S2[i])
				}
			}
			dec := m.tok.decode(nil, [][]token{toks}, 2)[0]
			checkRows(t, "decoded first rows", dec[:3*numFeatures], c.exp.DecodeFirst3, normTol)
			checkRows(t, "decoded last rows", dec[(n-3)*numFeatures:], c.exp.DecodeLast3, normTol)

			o := Greedy()
			var steps []stepTrace
			o.trace = func(s stepTrace) { steps = append(steps, s) }
			got, err := m.Forecast(context.Background(), c.candles, c.future, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) != c.exp.PredLen {
				t.Fatalf("%d steps traced, want %d", len(steps), c.exp.PredLen)
			}
			if steps[0].windowStart != c.exp.WindowStart {
				t.Errorf("window start %d, want %d", steps[0].windowStart, c.exp.WindowStart)
			}
			// Past 512 tokens the window slides and is recomputed whole.
			for i, s := range steps {
				start := max(0, n+i-c.exp.MaxContext)
				rows := 1
				if i == 0 || start > 0 {
					rows = n + i - start
				}
				if s.windowStart != start || s.rowsRun != rows {
					t.Errorf("step %d: window from %d, %d rows run; want %d, %d", i, s.windowStart, s.rowsRun, start, rows)
				}
			}
			checkVec(t, "s1 logits at the last context row", steps[0].s1Logits, c.exp.S1Logits, logitTol)
			if steps[0].s1 != c.exp.ArgmaxS1 {
				t.Errorf("argmax s1 %d, want %d", steps[0].s1, c.exp.ArgmaxS1)
			}
			checkVec(t, "s2 logits given argmax s1", steps[0].s2Logits, c.exp.S2Logits, logitTol)
			for i, want := range c.exp.Steps {
				s := steps[i]
				if s.s1 != want.S1 || s.s2 != want.S2 {
					t.Fatalf("step %d: s1 %d s2 %d, want %d %d", i, s.s1, s.s2, want.S1, want.S2)
				}
				for k, id := range want.S1Top5.IDs {
					if d := math.Abs(float64(s.s1Logits[id]) - want.S1Top5.Logits[k]); d > logitTol {
						t.Errorf("step %d: s1 logit of %d is %v, want %v", i, id, s.s1Logits[id], want.S1Top5.Logits[k])
					}
				}
				for k, id := range want.S2Top5.IDs {
					if d := math.Abs(float64(s.s2Logits[id]) - want.S2Top5.Logits[k]); d > logitTol {
						t.Errorf("step %d: s2 logit of %d is %v, want %v", i, id, s.s2Logits[id], want.S2Top5.Logits[k])
					}
				}
			}
			worstRel := 0.0
			defer func() { t.Logf("forecast: worst relative diff %.3g", worstRel) }()
			for i, w := range c.want {
				g := got[i]
				if !g.Time.Equal(w.Time) {
					t.Errorf("forecast %d at %v, want %v", i, g.Time, w.Time)
				}
				gv := []float64{g.Open, g.High, g.Low, g.Close, g.Volume, g.Amount}
				wv := []float64{w.Open, w.High, w.Low, w.Close, w.Volume, w.Amount}
				for j := range gv {
					worstRel = math.Max(worstRel, math.Abs(gv[j]-wv[j])/math.Abs(wv[j]))
					if !closeRel(gv[j], wv[j], relTol) {
						t.Errorf("forecast %d column %d: %v, want %v", i, j, gv[j], wv[j])
					}
				}
			}
		})
	}
}

func closeRel(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), 1e-12)
}

func checkRows(t *testing.T, what string, got []float32, want [][]float64, tol float64) {
	t.Helper()
	for r, row := range want {
		checkVec(t, what+" row "+strconv.Itoa(r), got[r*numFeatures:(r+1)*numFeatures], row, tol)
	}
}

func checkVec(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	if testing.Verbose() {
		t.Logf("%s: worst |diff| %.3g", what, worst)
	}
	if worst > tol || math.IsNaN(worst) {
		t.Errorf("%s: value %d is %v, want %v (|diff| %.3g > %g)", what, at, got[at], want[at], worst, tol)
	}
}

// TestFilters checks the kept token sets of top_k_top_p_filtering against
// the reference's, exactly.
func TestFilters(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "filters.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		T      float64   `json:"T"`
		TopK   int       `json:"top_k"`
		TopP   float64   `json:"top_p"`
		Logits []float32 `json:"logits"`
		Kept   []int     `json:"kept"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		name := strings.NewReplacer(".", "_").Replace("T" + strconv.FormatFloat(r.T, 'g', -1, 64) + "-k" + strconv.Itoa(r.TopK) + "-p" + strconv.FormatFloat(r.TopP, 'g', -1, 64))
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSampler(Options{Temperature: r.T, TopK: r.TopK, TopP: r.TopP, Samples: 1}, len(r.Logits), 0)
			logits := append([]float32(nil), r.Logits...)
			s.filter(logits)
			want := map[int]bool{}
			for _, id := range r.Kept {
				want[id] = true
			}
			kept := 0
			for i, l := range logits {
				finite := !math.IsInf(float64(l), -1)
				if finite {
					kept++
				}
				if finite != want[i] {
					t.Errorf("token %d (logit %v): kept %v, want %v", i, r.Logits[i], finite, want[i])
				}
			}
			if kept != len(r.Kept) {
				t.Errorf("kept %d tokens, want %d", kept, len(r.Kept))
			}
		})
	}
}
