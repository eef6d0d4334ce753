package kronos

import "math"

// token is one candle's pair of sub-tokens: s1 (coarse) and s2 (fine),
// each the index of a half of the binary code.
type token struct{ s1, s2 int32 }

// encode is KronosTokenizer.encode(x, half=True): embed the n normalised
// candles (rows of numFeatures), run the encoder blocks (causal, over all
// n rows), project to the codebook and read each coordinate's sign as a
// bit: bit j of s1 is coordinate j > 0, bit j of s2 coordinate s1_bits+j.
// (BSQ's L2 normalisation and 1/sqrt(dim) scale do not change signs.)
func (t *tokenizer) encode(x []float32, n, workers int) []token {
	c := t.cfg
	d, cb := c.DModel, c.S1Bits+c.S2Bits
	blocks := blocksFor(t.encoder, n)
	s := newScratch(n, d, c.FFDim, n, workers)
	h := s.x[:n*d]
	t.embed.apply(h, x, n, workers)
	runBlocks(blocks, h, n, []*kvCache{newKVCache(len(blocks), n, d)}, s, workers)
	z := make([]float32, n*cb)
	t.quantEmbed.apply(z, h, n, workers)
	toks := make([]token, n)
	for r := range n {
		zr := z[r*cb : (r+1)*cb]
		for j := range c.S1Bits {
			if zr[j] > 0 {
				toks[r].s1 |= 1 << j
			}
		}
		for j := range c.S2Bits {
			if zr[c.S1Bits+j] > 0 {
				toks[r].s2 |= 1 << j
			}
		}
	}
	return toks
}

// decode is KronosTokenizer.decode(indices, half=True) over one window
// per sample: the window's first rows are prefix (the same for every
// sample, computed once), then the sample's own rows tails[g] (all tails
// the same length). It returns, for each sample, the decoded rows of its
// tail, numFeatures values each, in normalised units.
func (t *tokenizer) decode(prefix []token, tails [][]token, workers int) [][]float32 {
	c := t.cfg
	d := c.DModel
	tail := len(tails[0])
	window := len(prefix) + tail
	blocks := blocksFor(t.decoder, window)
	rows := max(len(prefix), len(tails)*tail)
	s := newScratch(rows, d, c.FFDim, window, workers)

	shared := newKVCache(len(blocks), len(prefix), d)
	if len(prefix) > 0 {
		h := s.x[:len(prefix)*d]
		t.embedCodes(h, prefix, workers)
		runBlocks(blocks, h, len(prefix), []*kvCache{shared}, s, workers)
	}
	caches := make([]*kvCache, len(tails))
	all := make([]token, 0, len(tails)*tail)
	for g, tl := range tails {
		caches[g] = newKVCache(len(blocks), tail, d)
		caches[g].prefix = shared
		all = append(all, tl...)
	}
	h := s.x[:len(all)*d]
	t.embedCodes(h, all, workers)
	runBlocks(blocks, h, tail, caches, s, workers)
	out := make([]float32, len(all)*numFeatures)
	t.head.apply(out, h, len(all), workers)
	res := make([][]float32, len(tails))
	for g := range tails {
		res[g] = out[g*tail*numFeatures : (g+1)*tail*numFeatures]
	}
	return res
}

// embedCodes writes post_quant_embed of each token's code: bit j of s1,
// then bit j of s2, each as ±1/sqrt(codebook_dim) (indices_to_bits).
func (t *tokenizer) embedCodes(h []float32, toks []token, workers int) {
	c := t.cfg
	cb := c.S1Bits + c.S2Bits
	scale := float32(1 / math.Sqrt(float64(cb)))
	codes := make([]float32, len(toks)*cb)
	for r, tk := range toks {
		code := codes[r*cb : (r+1)*cb]
		for j := range c.S1Bits {
			code[j] = bitValue(tk.s1, j, scale)
		}
		for j := range c.S2Bits {
			code[c.S1Bits+j] = bitValue(tk.s2, j, scale)
		}
	}
	t.postQuantEmbed.apply(h, codes, len(toks), workers)
}

func bitValue(idx int32, j int, scale float32) float32 {
	if idx>>j&1 == 1 {
		return scale
	}
	return -scale
}

// blocksFor returns blocks whose rotary tables cover n positions: blocks
// itself, or copies with longer tables for inputs beyond ropeTableLen.
func blocksFor(blocks []block, n int) []block {
	if len(blocks) == 0 || blocks[0].attn.rope.positions() >= n {
		return blocks
	}
	longer := map[*rope]*rope{}
	out := make([]block, len(blocks))
	for i, b := range blocks {
		r, ok := longer[b.attn.rope]
		if !ok {
			r = newRope(b.attn.rope.invFreq, n)
			longer[b.attn.rope] = r
		}
		b.attn.rope = r
		out[i] = b
	}
	return out
}
