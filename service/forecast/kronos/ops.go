package kronos

import (
	"math"
	"sync"
)

// The arithmetic, in float32 as the reference runs it. Activations are
// row-major [rows][width] slices.

// rmsEps is RMSNorm's epsilon in the reference (module.py RMSNorm).
const rmsEps = 1e-5

// apply writes x[r] / sqrt(mean(x[r]^2) + eps) * w for each row.
func (n rmsNorm) apply(out, x []float32, rows int) {
	d := len(n.w)
	for r := range rows {
		xr, or := x[r*d:(r+1)*d], out[r*d:(r+1)*d]
		var ss float32
		for _, v := range xr {
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(float64(ss/float32(d)+rmsEps)))
		for i, v := range xr {
			or[i] = v * inv * n.w[i]
		}
	}
}

// apply computes out[r] = W x[r] + b for rows rows, spreading the output
// features over the workers.
func (l *linear) apply(out, x []float32, rows, workers int) {
	if rows*l.in*l.out < 1<<16 {
		workers = 1
	}
	parallel(workers, l.out, func(_, lo, hi int) { l.rangeOf(out, x, rows, lo, hi) })
}

// rangeOf computes output features [lo, hi) of every row. Rows go four at
// a time against three weight rows at a time, so each weight row is read
// once per four dot products and each input row once per three.
func (l *linear) rangeOf(out, x []float32, rows, lo, hi int) {
	in, nOut := l.in, l.out
	r := 0
	for ; r+4 <= rows; r += 4 {
		x0 := x[r*in : (r+1)*in]
		x1 := x[(r+1)*in : (r+2)*in]
		x2 := x[(r+2)*in : (r+3)*in]
		x3 := x[(r+3)*in : (r+4)*in]
		o := lo
		var res [12]float32
		for ; o+3 <= hi; o += 3 {
			dot4x3(l.w[o*in:(o+3)*in], x[r*in:(r+4)*in], in, &res)
			for k := range 3 {
				var b float32
				if l.b != nil {
					b = l.b[o+k]
				}
				out[r*nOut+o+k] = res[k] + b
				out[(r+1)*nOut+o+k] = res[3+k] + b
				out[(r+2)*nOut+o+k] = res[6+k] + b
				out[(r+3)*nOut+o+k] = res[9+k] + b
			}
		}
		for ; o < hi; o++ {
			s0, s1, s2, s3 := dot4(l.w[o*in:(o+1)*in], x0, x1, x2, x3)
			if l.b != nil {
				b := l.b[o]
				s0, s1, s2, s3 = s0+b, s1+b, s2+b, s3+b
			}
			out[r*nOut+o] = s0
			out[(r+1)*nOut+o] = s1
			out[(r+2)*nOut+o] = s2
			out[(r+3)*nOut+o] = s3
		}
	}
	// Leftover rows (a single row while generating): four weight rows at
	// a time against the same input row.
	for ; r < rows; r++ {
		xr := x[r*in : (r+1)*in]
		or := out[r*nOut : (r+1)*nOut]
		o := lo
		for ; o+4 <= hi; o += 4 {
			or[o], or[o+1], or[o+2], or[o+3] = dot4(xr, l.w[o*in:(o+1)*in], l.w[(o+1)*in:(o+2)*in], l.w[(o+2)*in:(o+3)*in], l.w[(o+3)*in:(o+4)*in])
		}
		for ; o < hi; o++ {
			or[o] = dot(l.w[o*in:(o+1)*in], xr)
		}
		if l.b != nil {
			addTo(or[lo:hi], l.b[lo:hi])
		}
	}
}

// dotGo returns a·b over len(a), in dot4Go's order (the even and the odd
// products in two running sums, a tail into the first): a product has the
// same bits whichever portable kernel computes it. Each product is
// rounded before it is added (the float32 conversion): Go may otherwise
// fuse a multiply-add here and not there (it does on arm64 and with
// GOAMD64=v3). The portable kernel, and the oracle of the assembly ones.
func dotGo(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s, t float32
	i := 0
	for ; i+2 <= n; i += 2 {
		s += float32(a[i] * b[i])
		t += float32(a[i+1] * b[i+1])
	}
	for ; i < n; i++ {
		s += float32(a[i] * b[i])
	}
	return s + t
}

// dot4Go returns w·x0, w·x1, w·x2, w·x3: one pass over w for four rows;
// the portable kernel, and the oracle of the assembly one.
func dot4Go(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	n := len(w)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	var t0, t1, t2, t3 float32
	i := 0
	for ; i+2 <= n; i += 2 {
		a, b := w[i], w[i+1]
		s0 += float32(a * x0[i])
		s1 += float32(a * x1[i])
		s2 += float32(a * x2[i])
		s3 += float32(a * x3[i])
		t0 += float32(b * x0[i+1])
		t1 += float32(b * x1[i+1])
		t2 += float32(b * x2[i+1])
		t3 += float32(b * x3[i+1])
	}
	for ; i < n; i++ {
		a := w[i]
		s0 += float32(a * x0[i])
		s1 += float32(a * x1[i])
		s2 += float32(a * x2[i])
		s3 += float32(a * x3[i])
	}
	return s0 + t0, s1 + t1, s2 + t2, s3 + t3
}

// dot4x3Rows sets res[3r+k] = x_r·w_k for the four rows x_r of x and the
// three rows w_k of w, each n long and consecutive, by three passes of
// dot4 (the build's): what the portable build runs, the assembly
// kernel's fallback on lengths it does not take, and its oracle.
func dot4x3Rows(w, x []float32, n int, res *[12]float32) {
	x0, x1, x2, x3 := x[:n], x[n:2*n], x[2*n:3*n], x[3*n:4*n]
	for k := range 3 {
		res[k], res[3+k], res[6+k], res[9+k] = dot4(w[k*n:(k+1)*n], x0, x1, x2, x3)
	}
}

// weightedRowsGo adds Σ_j p[j]·v[j·stride : j·stride+len(out)] into out,
// row by row: the portable kernel, and the oracle of the assembly one.
func weightedRowsGo(out, v, p []float32, stride int) {
	n := len(out)
	for j, pj := range p {
		vj := v[j*stride : j*stride+n]
		for i, x := range vj {
			out[i] += float32(pj * x)
		}
	}
}

// addTo adds y into x.
func addTo(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}

// swigluGo writes silu(a)·b into a: the portable kernel, and the oracle
// of the assembly one.
func swigluGo(a, b []float32) {
	b = b[:len(a)]
	for i, v := range a {
		a[i] = v / (1 + float32(math.Exp(float64(-v)))) * b[i]
	}
}

// expShiftGo replaces each x[i] with e^(x[i]−shift) and returns their
// sum: the portable kernel, and the oracle of the assembly one.
func expShiftGo(x []float32, shift float32) float32 {
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - shift)))
		x[i] = e
		sum += e
	}
	return sum
}

// ropeTableLen is how many positions the rotary tables hold up front: the
// predictor's window (up to 2048 for Kronos-mini). Longer tokenizer inputs
// extend a copy per call.
const ropeTableLen = 2048

// rope is RotaryPositionalEmbedding: for each head, the pair (x[i],
// x[i+half]) turns by pos*inv_freq[i].
type rope struct {
	invFreq  []float32
	half     int
	cos, sin []float32 // [pos][half]
}

func newRope(invFreq []float32, n int) *rope {
	h := len(invFreq)
	r := &rope{invFreq: invFreq, half: h, cos: make([]float32, n*h), sin: make([]float32, n*h)}
	for p := range n {
		for i, f := range invFreq {
			// The reference forms the angle as a float32 product (einsum of
			// float32 positions and inv_freq), then takes cos and sin.
			a := float64(float32(p) * f)
			r.cos[p*h+i] = float32(math.Cos(a))
			r.sin[p*h+i] = float32(math.Sin(a))
		}
	}
	return r
}

// positions is how many positions the tables cover.
func (r *rope) positions() int { return len(r.cos) / r.half }

// apply rotates every head of one row x (heads*2*half wide) to position pos.
func (r *rope) apply(x []float32, pos int) {
	h := r.half
	c, s := r.cos[pos*h:(pos+1)*h], r.sin[pos*h:(pos+1)*h]
	for off := 0; off < len(x); off += 2 * h {
		lo, hi := x[off:off+h], x[off+h:off+2*h]
		for i := range h {
			a, b := lo[i], hi[i]
			lo[i] = a*c[i] - b*s[i]
			hi[i] = b*c[i] + a*s[i]
		}
	}
}

// kvSeg is a run of cached keys and values, rows of width d.
type kvSeg struct {
	k, v []float32
	n    int
}

// attend computes one head (columns off..off+hd) of softmax(q·K/sqrt(hd))·V
// for one query over the rows of two segments, into out[off:off+hd].
// scores needs room for both segments' rows.
func attend(out, q []float32, segs [2]kvSeg, off, hd, d int, scores []float32) {
	scale := float32(1 / math.Sqrt(float64(hd)))
	qh := q[off : off+hd]
	n := 0
	maxScore := float32(math.Inf(-1))
	for _, sg := range segs {
		j := 0
		for ; j+4 <= sg.n; j += 4 {
			k := sg.k[j*d+off:]
			s0, s1, s2, s3 := dot4(qh, k[:hd], k[d:d+hd], k[2*d:2*d+hd], k[3*d:3*d+hd])
			scores[n], scores[n+1], scores[n+2], scores[n+3] = s0*scale, s1*scale, s2*scale, s3*scale
			n += 4
		}
		for ; j < sg.n; j++ {
			scores[n] = dot(qh, sg.k[j*d+off:j*d+off+hd]) * scale
			n++
		}
	}
	for _, s := range scores[:n] {
		maxScore = max(maxScore, s)
	}
	inv := 1 / expShift(scores[:n], maxScore)
	for j := range n {
		scores[j] *= inv
	}
	oh := out[off : off+hd]
	clear(oh)
	n = 0
	for _, sg := range segs {
		if sg.n > 0 {
			weightedRows(oh, sg.v[off:], scores[n:n+sg.n], d)
			n += sg.n
		}
	}
}

// parallel splits [0, n) into up to workers contiguous ranges and runs fn
// on each, the last one on the calling goroutine. worker numbers the range
// (0 ≤ worker < workers) so fn can pick its own scratch space.
func parallel(workers, n int, fn func(worker, lo, hi int)) {
	workers = min(workers, n)
	if workers <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, w*n/workers, (w+1)*n/workers)
		}()
	}
	fn(workers-1, (workers-1)*n/workers, n)
	wg.Wait()
}
