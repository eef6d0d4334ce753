package kronos

import (
	"context"
	"math"
)

// stamp is one candle's time features: minute, hour, weekday (Monday 0),
// day of month, month (calc_time_stamps).
type stamp [5]int

// predState is what one sample path keeps between steps: the transformer's
// keys and values, and the dependency layer's keys and values, of the
// window rows run so far.
type predState struct {
	blocks, dep *kvCache
}

func (p *predictor) newState(rows int) *predState {
	d := p.cfg.DModel
	return &predState{blocks: newKVCache(len(p.blocks), rows, d), dep: newKVCache(1, rows, d)}
}

func (s *predState) reset() { s.blocks.n, s.dep.n = 0, 0 }

// decodeS1 is Kronos.decode_s1 for new window rows: the hierarchical token
// embedding plus the temporal embedding, the transformer blocks, and the
// final norm, whose output (the "context") it leaves in sc.x. It also
// appends to each state the dependency layer's keys and values of those
// rows, which decode_s2 attends over. toks and stamps hold len(states)
// groups of rowsPer rows.
func (p *predictor) decodeS1(toks []token, stamps []stamp, rowsPer int, states []*predState, sc *scratch, workers int) {
	d := p.cfg.DModel
	rows := len(states) * rowsPer
	x := sc.x[:rows*d]

	// HierarchicalEmbedding: fusion_proj(cat(emb_s1*sqrt(d), emb_s2*sqrt(d))).
	scale := float32(math.Sqrt(float64(d)))
	cat := sc.h1[:rows*2*d]
	for r, tk := range toks[:rows] {
		e1, e2 := p.embS1.row(int(tk.s1)), p.embS2.row(int(tk.s2))
		c := cat[r*2*d : (r+1)*2*d]
		for i := range d {
			c[i] = e1[i] * scale
			c[d+i] = e2[i] * scale
		}
	}
	p.fusion.apply(x, cat, rows, workers)
	// TemporalEmbedding: hour + weekday + day + month + minute, in that order.
	for r, st := range stamps[:rows] {
		xr := x[r*d : (r+1)*d]
		mi, ho, wd, dy, mo := p.timeEmb[0].row(st[0]), p.timeEmb[1].row(st[1]), p.timeEmb[2].row(st[2]), p.timeEmb[3].row(st[3]), p.timeEmb[4].row(st[4])
		for i := range xr {
			xr[i] += ho[i] + wd[i] + dy[i] + mo[i] + mi[i]
		}
	}

	blockCaches := make([]*kvCache, len(states))
	depCaches := make([]*kvCache, len(states))
	for g, st := range states {
		blockCaches[g], depCaches[g] = st.blocks, st.dep
	}
	runBlocks(p.blocks, x, rowsPer, blockCaches, sc, workers)
	p.norm.apply(x, x, rows)

	// The dependency layer's keys and values. Its rotary embedding is
	// built for the query's length, which is 1 at inference, so every
	// key is "rotated" to position 0: left as it is.
	k, v := sc.k[:rows*d], sc.v[:rows*d]
	p.depAttn.k.apply(k, x, rows, workers)
	p.depAttn.v.apply(v, x, rows, workers)
	for g, c := range depCaches {
		copy(c.k[0][c.n*d:], k[g*rowsPer*d:(g+1)*rowsPer*d])
		copy(c.v[0][c.n*d:], v[g*rowsPer*d:(g+1)*rowsPer*d])
		c.n += rowsPer
	}
}

// decodeS2 is Kronos.decode_s2 at the last window row of each sample:
// the embedding of the chosen s1 (emb_s1, unscaled) queries every row's
// context through the dependency layer (cross-attention, not causal at
// inference), the result is added to the last row's context and
// normalised, and head.proj_s2 gives the s2 logits. last holds each
// sample's last context row, logits receives [samples][vocab_s2].
func (p *predictor) decodeS2(last []float32, s1 []int, states []*predState, logits []float32, sc *scratch, workers int) {
	d := p.cfg.DModel
	n := len(states)
	q, att, x2 := sc.q[:n*d], sc.att[:n*d], sc.xb[:n*d]
	for g, id := range s1 {
		copy(x2[g*d:(g+1)*d], p.embS1.row(id))
	}
	a := &p.depAttn
	a.q.apply(q, x2, n, workers)
	hd := d / a.heads
	parallel(workers, n*a.heads, func(w, lo, hi int) {
		for t := lo; t < hi; t++ {
			g, h := t%n, t/n // head by head, as in runBlocks
			c := states[g].dep
			attend(att[g*d:(g+1)*d], q[g*d:(g+1)*d], c.segs(0, c.n), h*hd, hd, d, sc.scores[w])
		}
	})
	a.out.apply(x2, att, n, workers)
	addTo(x2, last[:n*d])
	p.depNorm.apply(x2, x2, n)
	p.projS2.apply(logits, x2, n, workers)
}

// stepTrace is what one generation step computed for sample 0; tests
// compare it with the reference's.
type stepTrace struct {
	step        int
	s1Logits    []float32 // before filtering
	s2Logits    []float32 // given the chosen s1, before filtering
	s1, s2      int
	windowStart int
	rowsRun     int // window rows run this step: 1, or the whole window when it slid
}

// generate is the loop of auto_regressive_inference: for each of predLen
// steps, every sample path predicts s1 at its window's last row, samples
// it, predicts s2 given it, samples that, and appends the pair. The window
// is the last maxCtx tokens. While it does not slide, each step runs only
// the one new row per sample against the cached keys and values (the
// positions of the earlier rows do not change, so this is the same
// arithmetic as recomputing). Once it slides, every position shifts and,
// like the reference, each step recomputes the window: its context part
// once for all samples, then each sample's generated part.
func (p *predictor) generate(ctx context.Context, history []token, stamps []stamp, predLen, maxCtx int, o Options, workers int) ([][]token, error) {
	n0 := len(history)
	d := p.cfg.DModel
	samples := o.Samples
	v1, v2 := p.projS1.out, p.projS2.out

	shared := p.newState(min(n0, maxCtx))
	states := make([]*predState, samples)
	samplers := make([]*sampler, samples)
	gen := make([][]token, samples)
	for g := range states {
		states[g] = p.newState(predLen)
		states[g].blocks.prefix, states[g].dep.prefix = shared.blocks, shared.dep
		samplers[g] = newSampler(o, max(v1, v2), uint64(g))
		gen[g] = make([]token, 0, predLen)
	}
	rows := max(min(n0, maxCtx), samples*predLen)
	sc := newScratch(rows, d, max(p.cfg.FFDim, 2*d), maxCtx, workers)
	toks := make([]token, rows)
	stps := make([]stamp, rows)
	last := make([]float32, samples*d)
	logits1 := make([]float32, samples*v1)
	logits2 := make([]float32, samples*v2)
	s1 := make([]int, samples)

	prevStart := -1
	for i := range predLen {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cur := n0 + i // tokens known to every path
		start := max(0, cur-maxCtx)
		rowsRun := 1
		if start != prevStart || o.recompute {
			// (Re)build the window [start, cur): its context part is shared.
			shared.reset()
			for _, st := range states {
				st.reset()
			}
			if start < n0 {
				m := n0 - start
				p.decodeS1(history[start:n0], stamps[start:n0], m, []*predState{shared}, sc, workers)
				for g := range samples {
					copy(last[g*d:(g+1)*d], sc.x[(m-1)*d:m*d])
				}
			}
			genFrom := max(start, n0) - n0 // first generated token in the window
			if t := i - genFrom; t > 0 {
				for g := range samples {
					copy(toks[g*t:(g+1)*t], gen[g][genFrom:i])
					copy(stps[g*t:(g+1)*t], stamps[n0+genFrom:n0+i])
				}
				p.decodeS1(toks, stps, t, states, sc, workers)
				for g := range samples {
					copy(last[g*d:(g+1)*d], sc.x[((g+1)*t-1)*d:(g+1)*t*d])
				}
			}
			rowsRun = cur - start
			prevStart = start
		} else {
			// One new row per path: the token it generated last step.
			for g := range samples {
				toks[g] = gen[g][i-1]
				stps[g] = stamps[cur-1]
			}
			p.decodeS1(toks, stps, 1, states, sc, workers)
			copy(last, sc.x[:samples*d])
		}

		p.projS1.apply(logits1, last, samples, workers)
		var trace stepTrace
		if o.trace != nil {
			trace = stepTrace{step: i, s1Logits: append([]float32(nil), logits1[:v1]...), windowStart: start, rowsRun: rowsRun}
		}
		for g := range samples {
			s1[g] = samplers[g].sample(logits1[g*v1 : (g+1)*v1])
		}
		p.decodeS2(last, s1, states, logits2, sc, workers)
		if o.trace != nil {
			trace.s2Logits = append([]float32(nil), logits2[:v2]...)
		}
		for g := range samples {
			s2 := samplers[g].sample(logits2[g*v2 : (g+1)*v2])
			gen[g] = append(gen[g], token{int32(s1[g]), int32(s2)})
		}
		if o.trace != nil {
			trace.s1, trace.s2 = int(gen[0][i].s1), int(gen[0][i].s2)
			o.trace(trace)
		}
	}
	return gen, nil
}
