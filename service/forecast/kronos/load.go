package kronos

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
)

// The weights, one struct per module of the reference, each field named as
// the tensor it holds (model/module.py, model/kronos.py). Matrices are
// row-major [out][in] as PyTorch stores nn.Linear weights.

type linear struct {
	w       []float32 // [out][in]
	b       []float32 // [out], nil for Linear(bias=False)
	in, out int
}

type embedding struct {
	w    []float32 // [n][dim]
	dim  int
	rows int
}

func (e embedding) row(i int) []float32 { return e.w[i*e.dim : (i+1)*e.dim] }

type rmsNorm struct{ w []float32 }

// attention is MultiHeadAttentionWithRoPE (and, in the predictor's
// dependency layer, MultiHeadCrossAttentionWithRoPE).
type attention struct {
	q, k, v, out linear
	heads        int
	rope         *rope
}

// feedForward is the SwiGLU FeedForward: w2(silu(w1 x) * w3 x), no biases.
type feedForward struct{ w1, w2, w3 linear }

// block is a pre-norm TransformerBlock.
type block struct {
	norm1 rmsNorm
	attn  attention
	norm2 rmsNorm
	ffn   feedForward
}

// predictor is class Kronos.
type predictor struct {
	cfg          ModelConfig
	embS1, embS2 embedding    // embedding.emb_s1, embedding.emb_s2
	fusion       linear       // embedding.fusion_proj
	timeEmb      [5]embedding // time_emb: minute, hour, weekday, day, month
	blocks       []block      // transformer.N
	norm         rmsNorm      // norm
	depAttn      attention    // dep_layer.cross_attn
	depNorm      rmsNorm      // dep_layer.norm
	projS1       linear       // head.proj_s1
	projS2       linear       // head.proj_s2
}

// tokenizer is class KronosTokenizer.
type tokenizer struct {
	cfg               TokenizerConfig
	embed             linear  // embed
	encoder           []block // encoder.N
	quantEmbed        linear  // quant_embed
	postQuantEmbedPre linear  // post_quant_embed_pre: only the training loss uses it
	postQuantEmbed    linear  // post_quant_embed
	decoder           []block // decoder.N
	head              linear  // head
}

// Model is a loaded Kronos predictor with its tokenizer. It is read-only
// after Load, so one Model serves concurrent Forecast calls.
type Model struct {
	pred predictor
	tok  tokenizer
	info Info
}

// Info describes a loaded model.
type Info struct {
	// Name is the published name the shapes match ("Kronos-mini",
	// "Kronos-small", "Kronos-base"), or "Kronos (custom)".
	Name string
	// Params and TokenizerParams count the learned parameters (buffers
	// excluded), as the reference's model zoo does.
	Params, TokenizerParams int
	Model                   ModelConfig
	Tokenizer               TokenizerConfig
}

// Info returns the model's name, size and configs.
func (m *Model) Info() Info { return m.info }

// Load reads a predictor checkpoint from modelDir and a tokenizer
// checkpoint from tokenizerDir, each in the Hugging Face layout the
// reference's save_pretrained writes (config.json and model.safetensors).
// Every tensor's name, shape and dtype is checked against what the config
// implies; the first mismatch is returned as a *CheckpointError. Reading
// these four files is the package's only I/O.
func Load(modelDir, tokenizerDir string) (*Model, error) {
	m := &Model{}
	if err := m.pred.load(modelDir); err != nil {
		return nil, err
	}
	if err := m.tok.load(tokenizerDir); err != nil {
		return nil, err
	}
	if m.pred.cfg.S1Bits != m.tok.cfg.S1Bits || m.pred.cfg.S2Bits != m.tok.cfg.S2Bits {
		return nil, &CheckpointError{Path: filepath.Join(tokenizerDir, "config.json"), Err: ErrMismatch,
			Detail: fmt.Sprintf("tokenizer s1_bits/s2_bits %d/%d, model %d/%d",
				m.tok.cfg.S1Bits, m.tok.cfg.S2Bits, m.pred.cfg.S1Bits, m.pred.cfg.S2Bits)}
	}
	m.info = Info{
		Name:            publishedName(m.pred.cfg),
		Params:          m.pred.params(),
		TokenizerParams: m.tok.params(),
		Model:           m.pred.cfg,
		Tokenizer:       m.tok.cfg,
	}
	return m, nil
}

func publishedName(c ModelConfig) string {
	switch {
	case c.DModel == 256 && c.NLayers == 4 && c.NHeads == 4 && c.FFDim == 512:
		return "Kronos-mini"
	case c.DModel == 512 && c.NLayers == 8 && c.NHeads == 8 && c.FFDim == 1024:
		return "Kronos-small"
	case c.DModel == 832 && c.NLayers == 12 && c.NHeads == 16 && c.FFDim == 2048:
		return "Kronos-base"
	}
	return "Kronos (custom)"
}

func (p *predictor) load(dir string) error {
	err := readConfig(dir, &p.cfg, []string{"s1_bits", "s2_bits", "n_layers", "d_model", "n_heads", "ff_dim", "learn_te"})
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := p.cfg.validate(); err != nil {
		return &CheckpointError{Path: cfgPath, Err: ErrConfig, Detail: err.Error()}
	}
	b, err := newBinder(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	c := p.cfg
	d := c.DModel
	v1, v2 := 1<<c.S1Bits, 1<<c.S2Bits
	p.embS1 = b.embedding("embedding.emb_s1.weight", v1, d)
	p.embS2 = b.embedding("embedding.emb_s2.weight", v2, d)
	p.fusion = b.linear("embedding.fusion_proj", 2*d, d, true)
	// Learned temporal embeddings are nn.Embedding tables; fixed ones are
	// FixedEmbedding, whose sinusoid table is a parameter one level down.
	suffix := ".weight"
	if !c.LearnTE {
		suffix = ".emb.weight"
	}
	for i, t := range []struct {
		name string
		size int
	}{{"minute", 60}, {"hour", 24}, {"weekday", 7}, {"day", 32}, {"month", 13}} {
		p.timeEmb[i] = b.embedding("time_emb."+t.name+"_embed"+suffix, t.size, d)
	}
	p.blocks = make([]block, c.NLayers)
	for i := range p.blocks {
		p.blocks[i] = b.block(fmt.Sprintf("transformer.%d", i), d, c.NHeads, c.FFDim)
	}
	p.norm = b.rmsNorm("norm", d)
	p.depAttn = b.attention("dep_layer.cross_attn", d, depHeads)
	p.depNorm = b.rmsNorm("dep_layer.norm", d)
	p.projS1 = b.linear("head.proj_s1", d, v1, true)
	p.projS2 = b.linear("head.proj_s2", d, v2, true)
	return b.finish()
}

func (t *tokenizer) load(dir string) error {
	err := readConfig(dir, &t.cfg, []string{"d_in", "d_model", "n_heads", "ff_dim", "n_enc_layers", "n_dec_layers", "s1_bits", "s2_bits", "group_size"})
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := t.cfg.validate(); err != nil {
		return &CheckpointError{Path: cfgPath, Err: ErrConfig, Detail: err.Error()}
	}
	// indices_to_bits(half=True) splits the codebook into two halves of
	// codebook_dim/2 bits, so the reference only decodes s1_bits == s2_bits.
	if t.cfg.S1Bits != t.cfg.S2Bits {
		return &CheckpointError{Path: cfgPath, Err: ErrConfig,
			Detail: fmt.Sprintf("s1_bits %d != s2_bits %d: the reference decodes equal halves only", t.cfg.S1Bits, t.cfg.S2Bits)}
	}
	b, err := newBinder(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	c := t.cfg
	d, cb := c.DModel, c.S1Bits+c.S2Bits
	t.embed = b.linear("embed", c.DIn, d, true)
	t.encoder = make([]block, c.NEncLayers-1)
	for i := range t.encoder {
		t.encoder[i] = b.block(fmt.Sprintf("encoder.%d", i), d, c.NHeads, c.FFDim)
	}
	t.decoder = make([]block, c.NDecLayers-1)
	for i := range t.decoder {
		t.decoder[i] = b.block(fmt.Sprintf("decoder.%d", i), d, c.NHeads, c.FFDim)
	}
	t.quantEmbed = b.linear("quant_embed", d, cb, true)
	t.postQuantEmbedPre = b.linear("post_quant_embed_pre", c.S1Bits, d, true)
	t.postQuantEmbed = b.linear("post_quant_embed", cb, d, true)
	t.head = b.linear("head", d, c.DIn, true)
	// The quantiser's buffers: bit weights of the whole code and of one
	// group. The forward pass derives indices from bit positions directly.
	b.ints("tokenizer.bsq.basis", cb)
	b.ints("tokenizer.bsq.group_basis", c.GroupSize)
	return b.finish()
}

// binder hands out a checkpoint's tensors by name and shape, remembering
// the first mismatch and which tensors were taken.
type binder struct {
	path    string
	tensors map[string]*tensor
	used    map[string]bool
	ropes   []*rope
	err     error
}

func newBinder(path string) (*binder, error) {
	ts, err := readSafetensors(path)
	if err != nil {
		if _, ok := err.(*CheckpointError); ok {
			return nil, err
		}
		return nil, &CheckpointError{Path: path, Err: ErrFormat, Detail: err.Error()}
	}
	return &binder{path: path, tensors: ts, used: map[string]bool{}}, nil
}

func (b *binder) fail(name string, kind error, format string, args ...any) {
	if b.err == nil {
		b.err = &CheckpointError{Path: b.path, Tensor: name, Err: kind, Detail: fmt.Sprintf(format, args...)}
	}
}

func (b *binder) get(name string, shape []int) *tensor {
	if b.err != nil {
		return nil
	}
	t, ok := b.tensors[name]
	if !ok {
		b.fail(name, ErrMissingTensor, "want shape %v", shape)
		return nil
	}
	b.used[name] = true
	if !slices.Equal(t.shape, shape) {
		b.fail(name, ErrShape, "got %v, want %v", t.shape, shape)
		return nil
	}
	return t
}

// floats returns a floating tensor's values (F32, or F16/BF16 widened).
func (b *binder) floats(name string, shape ...int) []float32 {
	t := b.get(name, shape)
	if t == nil {
		return nil
	}
	if t.f32 == nil {
		b.fail(name, ErrDType, "got %s, want F32 (or F16, BF16)", t.dtype)
		return nil
	}
	return t.f32
}

// ints checks an integer buffer.
func (b *binder) ints(name string, shape ...int) []int64 {
	t := b.get(name, shape)
	if t == nil {
		return nil
	}
	if t.i64 == nil {
		b.fail(name, ErrDType, "got %s, want I64", t.dtype)
		return nil
	}
	return t.i64
}

func (b *binder) linear(prefix string, in, out int, bias bool) linear {
	l := linear{in: in, out: out, w: b.floats(prefix+".weight", out, in)}
	if bias {
		l.b = b.floats(prefix+".bias", out)
	}
	return l
}

func (b *binder) embedding(name string, rows, dim int) embedding {
	return embedding{w: b.floats(name, rows, dim), rows: rows, dim: dim}
}

func (b *binder) rmsNorm(prefix string, d int) rmsNorm {
	return rmsNorm{w: b.floats(prefix+".weight", d)}
}

func (b *binder) attention(prefix string, d, heads int) attention {
	a := attention{
		q:     b.linear(prefix+".q_proj", d, d, true),
		k:     b.linear(prefix+".k_proj", d, d, true),
		v:     b.linear(prefix+".v_proj", d, d, true),
		out:   b.linear(prefix+".out_proj", d, d, true),
		heads: heads,
	}
	invFreq := b.floats(prefix+".rotary.inv_freq", d/heads/2)
	if invFreq != nil {
		a.rope = b.rope(invFreq)
	}
	return a
}

func (b *binder) block(prefix string, d, heads, ff int) block {
	return block{
		norm1: b.rmsNorm(prefix+".norm1", d),
		attn:  b.attention(prefix+".self_attn", d, heads),
		norm2: b.rmsNorm(prefix+".norm2", d),
		ffn: feedForward{
			w1: b.linear(prefix+".ffn.w1", d, ff, false),
			w2: b.linear(prefix+".ffn.w2", ff, d, false),
			w3: b.linear(prefix+".ffn.w3", d, ff, false),
		},
	}
}

// rope returns the rotary table for invFreq, shared by every attention
// whose buffer holds the same frequencies.
func (b *binder) rope(invFreq []float32) *rope {
	for _, r := range b.ropes {
		if slices.Equal(r.invFreq, invFreq) {
			return r
		}
	}
	r := newRope(invFreq, ropeTableLen)
	b.ropes = append(b.ropes, r)
	return r
}

// finish reports the first mismatch, or else the first tensor (by name)
// that nothing took.
func (b *binder) finish() error {
	if b.err != nil {
		return b.err
	}
	var extra []string
	for name := range b.tensors {
		if !b.used[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		t := b.tensors[extra[0]]
		return &CheckpointError{Path: b.path, Tensor: extra[0], Err: ErrUnexpectedTensor,
			Detail: fmt.Sprintf("%s%v, %d unexpected in all", t.dtype, t.shape, len(extra))}
	}
	return nil
}

func (p *predictor) params() int {
	n := len(p.embS1.w) + len(p.embS2.w) + p.fusion.params() + len(p.norm.w) + len(p.depNorm.w) +
		p.depAttn.params() + p.projS1.params() + p.projS2.params()
	for _, t := range p.timeEmb {
		n += len(t.w)
	}
	for _, b := range p.blocks {
		n += b.params()
	}
	return n
}

func (t *tokenizer) params() int {
	n := t.embed.params() + t.quantEmbed.params() + t.postQuantEmbedPre.params() + t.postQuantEmbed.params() + t.head.params()
	for _, b := range t.encoder {
		n += b.params()
	}
	for _, b := range t.decoder {
		n += b.params()
	}
	return n
}

func (l linear) params() int    { return len(l.w) + len(l.b) }
func (a attention) params() int { return a.q.params() + a.k.params() + a.v.params() + a.out.params() }
func (b block) params() int {
	return len(b.norm1.w) + len(b.norm2.w) + b.attn.params() + b.ffn.w1.params() + b.ffn.w2.params() + b.ffn.w3.params()
}
