package kronos

// kvCache holds, for each layer of a stack of blocks, the keys (already
// rotated) and values of the rows of one window run so far. Its rows
// follow those of prefix, when there is one: a window's context rows are
// the same for every sample, so they are computed once into a shared cache
// and each sample's cache holds only its generated rows.
type kvCache struct {
	k, v   [][]float32 // [layer][row*d]
	n      int         // rows held
	d      int
	prefix *kvCache
}

func newKVCache(layers, rows, d int) *kvCache {
	c := &kvCache{k: make([][]float32, layers), v: make([][]float32, layers), d: d}
	for l := range layers {
		c.k[l] = make([]float32, rows*d)
		c.v[l] = make([]float32, rows*d)
	}
	return c
}

// start is the window position of the cache's first row.
func (c *kvCache) start() int {
	if c.prefix == nil {
		return 0
	}
	return c.prefix.n
}

// segs are layer l's keys and values: all of the prefix, then the cache's
// own first upto rows.
func (c *kvCache) segs(l, upto int) [2]kvSeg {
	var s [2]kvSeg
	if c.prefix != nil {
		s[0] = kvSeg{k: c.prefix.k[l], v: c.prefix.v[l], n: c.prefix.n}
	}
	s[1] = kvSeg{k: c.k[l], v: c.v[l], n: upto}
	return s
}

// scratch is the working memory of one forward pass, allocated once per
// Forecast call so that nothing is allocated per token.
type scratch struct {
	x, xb, q, k, v, att, tmp []float32 // [rows][d]
	h1, h3                   []float32 // [rows][ff]
	scores                   [][]float32
}

func newScratch(rows, d, ff, window, workers int) *scratch {
	f := func(n int) []float32 { return make([]float32, n) }
	s := &scratch{
		x: f(rows * d), xb: f(rows * d), q: f(rows * d), k: f(rows * d), v: f(rows * d),
		att: f(rows * d), tmp: f(rows * d), h1: f(rows * ff), h3: f(rows * ff),
	}
	for range workers {
		s.scores = append(s.scores, f(window))
	}
	return s
}

// runBlocks runs a stack of TransformerBlocks (pre-norm, causal
// self-attention with RoPE, SwiGLU) over x in place. x holds len(caches)
// groups of rowsPer rows; group g continues the window held by caches[g],
// at window positions caches[g].start()+caches[g].n onwards, and its keys
// and values are appended to caches[g].
func runBlocks(blocks []block, x []float32, rowsPer int, caches []*kvCache, s *scratch, workers int) {
	if len(blocks) == 0 || rowsPer == 0 {
		return
	}
	d := blocks[0].attn.q.in
	ff := blocks[0].ffn.w1.out
	groups := len(caches)
	rows := groups * rowsPer
	xb, q, k, v, att, tmp := s.xb[:rows*d], s.q[:rows*d], s.k[:rows*d], s.v[:rows*d], s.att[:rows*d], s.tmp[:rows*d]
	h1, h3 := s.h1[:rows*ff], s.h3[:rows*ff]
	for l := range blocks {
		b := &blocks[l]
		a := &b.attn
		hd := d / a.heads

		b.norm1.apply(xb, x, rows)
		a.q.apply(q, xb, rows, workers)
		a.k.apply(k, xb, rows, workers)
		a.v.apply(v, xb, rows, workers)
		for g, c := range caches {
			pos := c.start() + c.n
			for r := range rowsPer {
				row := (g*rowsPer + r) * d
				a.rope.apply(q[row:row+d], pos+r)
				a.rope.apply(k[row:row+d], pos+r)
			}
			copy(c.k[l][c.n*d:], k[(g*rowsPer)*d:(g+1)*rowsPer*d])
			copy(c.v[l][c.n*d:], v[(g*rowsPer)*d:(g+1)*rowsPer*d])
		}
		// One task per (group, head); each query row sees every earlier row
		// of its window and itself (is_causal=True). Tasks go head by head,
		// so the groups that share a prefix read its keys and values of one
		// head while they are still in the core's cache.
		parallel(workers, groups*a.heads, func(w, lo, hi int) {
			for t := lo; t < hi; t++ {
				g, h := t%groups, t/groups
				c := caches[g]
				for r := range rowsPer {
					row := (g*rowsPer + r) * d
					attend(att[row:row+d], q[row:row+d], c.segs(l, c.n+r+1), h*hd, hd, d, s.scores[w])
				}
			}
		})
		a.out.apply(tmp, att, rows, workers)
		addTo(x[:rows*d], tmp)

		b.norm2.apply(xb, x, rows)
		b.ffn.w1.apply(h1, xb, rows, workers)
		b.ffn.w3.apply(h3, xb, rows, workers)
		swigluWorkers := workers
		if rows*ff < 1<<14 {
			swigluWorkers = 1
		}
		parallel(swigluWorkers, rows, func(_, lo, hi int) { swiglu(h1[lo*ff:hi*ff], h3[lo*ff:hi*ff]) })
		b.ffn.w2.apply(tmp, h1, rows, workers)
		addTo(x[:rows*d], tmp)
	}
	for _, c := range caches {
		c.n += rowsPer
	}
}
