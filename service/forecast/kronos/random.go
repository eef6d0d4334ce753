package kronos

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
)

// Checkpoints of any Kronos shape with seeded random weights, and the
// small safetensors writer they need: written independently of the
// loader, from the reference's state_dict, so the tests check the loader
// against a second reading of the format; and what speed measurements
// load when the released weights are not at hand (bench/kronos).

// writeSafetensors writes tensors (F32 values in f32, I64 values in i64;
// F16, BF16 and F64 are encoded from f32) in name order.
func writeSafetensors(path string, tensors map[string]*tensor) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	sizes := map[string]int64{}
	for _, n := range names {
		t := tensors[n]
		var size int64
		switch t.dtype {
		case "F32":
			size = 4 * int64(len(t.f32))
		case "F16", "BF16":
			size = 2 * int64(len(t.f32))
		case "F64":
			size = 8 * int64(len(t.f32))
		case "I64":
			size = 8 * int64(len(t.i64))
		default:
			return fmt.Errorf("cannot write dtype %s", t.dtype)
		}
		header[n] = map[string]any{"dtype": t.dtype, "shape": t.shape, "data_offsets": []int64{off, off + size}}
		sizes[n] = size
		off += size
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b8 [8]byte
	binary.LittleEndian.PutUint64(b8[:], uint64(len(h)))
	w.Write(b8[:])
	w.Write(h)
	for _, n := range names {
		t := tensors[n]
		switch t.dtype {
		case "F32":
			for _, v := range t.f32 {
				binary.LittleEndian.PutUint32(b8[:4], math.Float32bits(v))
				w.Write(b8[:4])
			}
		case "BF16":
			for _, v := range t.f32 {
				binary.LittleEndian.PutUint16(b8[:2], uint16(math.Float32bits(v)>>16))
				w.Write(b8[:2])
			}
		case "F16":
			for _, v := range t.f32 {
				binary.LittleEndian.PutUint16(b8[:2], float32ToHalf(v))
				w.Write(b8[:2])
			}
		case "F64":
			for _, v := range t.f32 {
				binary.LittleEndian.PutUint64(b8[:], math.Float64bits(float64(v)))
				w.Write(b8[:])
			}
		case "I64":
			for _, v := range t.i64 {
				binary.LittleEndian.PutUint64(b8[:], uint64(v))
				w.Write(b8[:])
			}
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// float32ToHalf rounds toward zero; good enough for test values in range.
func float32ToHalf(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	frac := uint16(b>>13) & 0x3ff
	switch {
	case exp <= 0:
		return sign
	case exp >= 0x1f:
		return sign | 0x7c00
	}
	return sign | uint16(exp)<<10 | frac
}

// tensorSpec is one tensor the reference's state_dict holds.
type tensorSpec struct {
	name  string
	shape []int
	kind  string // "linear" (fan-in scaled), "bias", "norm", "embed", "invfreq", "basis"
}

func blockSpecs(prefix string, d, heads, ff int) []tensorSpec {
	s := []tensorSpec{
		{prefix + ".norm1.weight", []int{d}, "norm"},
		{prefix + ".norm2.weight", []int{d}, "norm"},
		{prefix + ".ffn.w1.weight", []int{ff, d}, "linear"},
		{prefix + ".ffn.w2.weight", []int{d, ff}, "linear"},
		{prefix + ".ffn.w3.weight", []int{ff, d}, "linear"},
	}
	return append(s, attentionSpecs(prefix+".self_attn", d, heads)...)
}

func attentionSpecs(prefix string, d, heads int) []tensorSpec {
	var s []tensorSpec
	for _, p := range []string{"q_proj", "k_proj", "v_proj", "out_proj"} {
		s = append(s, tensorSpec{prefix + "." + p + ".weight", []int{d, d}, "linear"}, tensorSpec{prefix + "." + p + ".bias", []int{d}, "bias"})
	}
	return append(s, tensorSpec{prefix + ".rotary.inv_freq", []int{d / heads / 2}, "invfreq"})
}

func modelSpecs(c ModelConfig) []tensorSpec {
	d := c.DModel
	v1, v2 := 1<<c.S1Bits, 1<<c.S2Bits
	s := []tensorSpec{
		{"embedding.emb_s1.weight", []int{v1, d}, "embed"},
		{"embedding.emb_s2.weight", []int{v2, d}, "embed"},
		{"embedding.fusion_proj.weight", []int{d, 2 * d}, "linear"},
		{"embedding.fusion_proj.bias", []int{d}, "bias"},
		{"norm.weight", []int{d}, "norm"},
		{"dep_layer.norm.weight", []int{d}, "norm"},
		{"head.proj_s1.weight", []int{v1, d}, "linear"},
		{"head.proj_s1.bias", []int{v1}, "bias"},
		{"head.proj_s2.weight", []int{v2, d}, "linear"},
		{"head.proj_s2.bias", []int{v2}, "bias"},
	}
	for _, te := range []struct {
		n    string
		size int
	}{{"minute", 60}, {"hour", 24}, {"weekday", 7}, {"day", 32}, {"month", 13}} {
		s = append(s, tensorSpec{"time_emb." + te.n + "_embed.weight", []int{te.size, d}, "embed"})
	}
	for i := range c.NLayers {
		s = append(s, blockSpecs(fmt.Sprintf("transformer.%d", i), d, c.NHeads, c.FFDim)...)
	}
	return append(s, attentionSpecs("dep_layer.cross_attn", d, 4)...)
}

func tokenizerSpecs(c TokenizerConfig) []tensorSpec {
	d, cb := c.DModel, c.S1Bits+c.S2Bits
	s := []tensorSpec{
		{"embed.weight", []int{d, c.DIn}, "linear"},
		{"embed.bias", []int{d}, "bias"},
		{"head.weight", []int{c.DIn, d}, "linear"},
		{"head.bias", []int{c.DIn}, "bias"},
		{"quant_embed.weight", []int{cb, d}, "linear"},
		{"quant_embed.bias", []int{cb}, "bias"},
		{"post_quant_embed_pre.weight", []int{d, c.S1Bits}, "linear"},
		{"post_quant_embed_pre.bias", []int{d}, "bias"},
		{"post_quant_embed.weight", []int{d, cb}, "linear"},
		{"post_quant_embed.bias", []int{d}, "bias"},
		{"tokenizer.bsq.basis", []int{cb}, "basis"},
		{"tokenizer.bsq.group_basis", []int{c.GroupSize}, "basis"},
	}
	for i := range c.NEncLayers - 1 {
		s = append(s, blockSpecs(fmt.Sprintf("encoder.%d", i), d, c.NHeads, c.FFDim)...)
	}
	for i := range c.NDecLayers - 1 {
		s = append(s, blockSpecs(fmt.Sprintf("decoder.%d", i), d, c.NHeads, c.FFDim)...)
	}
	return s
}

// randomTensors fills specs with seeded random values.
func randomTensors(specs []tensorSpec, seed uint64) map[string]*tensor {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := map[string]*tensor{}
	for _, sp := range specs {
		n := 1
		for _, d := range sp.shape {
			n *= d
		}
		t := &tensor{name: sp.name, dtype: "F32", shape: sp.shape}
		switch sp.kind {
		case "basis":
			t.dtype = "I64"
			t.i64 = make([]int64, n)
			for i := range n {
				t.i64[i] = 1 << (n - 1 - i)
			}
		case "invfreq":
			t.f32 = make([]float32, n)
			for i := range n {
				t.f32[i] = float32(1 / math.Pow(10000, float64(2*i)/float64(2*n)))
			}
		default:
			t.f32 = make([]float32, n)
			scale := 1.0
			switch sp.kind {
			case "linear":
				scale = 1 / math.Sqrt(float64(sp.shape[1]))
			case "bias":
				scale = 0.02
			case "embed":
				scale = 1 / math.Sqrt(float64(sp.shape[1]))
			}
			for i := range t.f32 {
				if sp.kind == "norm" {
					t.f32[i] = float32(1 + 0.1*rng.NormFloat64())
				} else {
					t.f32[i] = float32(scale * rng.NormFloat64())
				}
			}
		}
		out[sp.name] = t
	}
	return out
}

// writeCheckpoint writes config.json and model.safetensors into dir.
func writeCheckpoint(dir string, config any, tensors map[string]*tensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		return err
	}
	return writeSafetensors(filepath.Join(dir, "model.safetensors"), tensors)
}

// PublishedShape returns the shapes of a released predictor and of the
// tokenizer it ships with: "Kronos-mini" (with Kronos-Tokenizer-2k, whose
// shape is Kronos-Tokenizer-base's), "Kronos-small" or "Kronos-base"
// (Hugging Face NeoQuasar config.json files).
func PublishedShape(name string) (ModelConfig, TokenizerConfig, bool) {
	for _, c := range []ModelConfig{kronosMini, kronosSmall, kronosBase} {
		if publishedName(c) == name {
			return c, tokenizerBase, true
		}
	}
	return ModelConfig{}, TokenizerConfig{}, false
}

// Published shapes (Hugging Face NeoQuasar config.json files).
var (
	tokenizerBase = TokenizerConfig{DIn: 6, DModel: 256, NHeads: 4, FFDim: 512, NEncLayers: 4, NDecLayers: 4, S1Bits: 10, S2Bits: 10, GroupSize: 4}
	kronosMini    = ModelConfig{S1Bits: 10, S2Bits: 10, NLayers: 4, DModel: 256, NHeads: 4, FFDim: 512, LearnTE: true}
	kronosSmall   = ModelConfig{S1Bits: 10, S2Bits: 10, NLayers: 8, DModel: 512, NHeads: 8, FFDim: 1024, LearnTE: true}
	kronosBase    = ModelConfig{S1Bits: 10, S2Bits: 10, NLayers: 12, DModel: 832, NHeads: 16, FFDim: 2048, LearnTE: true}
)

// WriteRandom writes a predictor and a tokenizer checkpoint of the given
// shapes, filled with random weights drawn from seed, into root/model and
// root/tokenizer, and returns those directories. The weights are scaled
// like a trained model's (linear layers by 1/sqrt(fan-in)), so a forecast
// runs the same arithmetic, and takes the same time, as with the released
// weights; its numbers mean nothing.
func WriteRandom(root string, mc ModelConfig, tc TokenizerConfig, seed uint64) (modelDir, tokenizerDir string, err error) {
	md, td := filepath.Join(root, "model"), filepath.Join(root, "tokenizer")
	if err := writeCheckpoint(md, mc, randomTensors(modelSpecs(mc), seed)); err != nil {
		return "", "", err
	}
	if err := writeCheckpoint(td, tc, randomTensors(tokenizerSpecs(tc), seed+1)); err != nil {
		return "", "", err
	}
	return md, td, nil
}
