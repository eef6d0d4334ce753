//go:build (amd64 || arm64) && !purego

package kronos

// The Go side of the assembly kernels (kernels_amd64.s, kernels_arm64.s):
// each runs the multiples of lanes in assembly and the rest one by one,
// and falls back to the portable kernel when the CPU lacks the
// instructions (useAsm) or the input is shorter than one vector.
//
// dot, dot4 and dot4x3 sum a product in one order, so x·w has the same
// bits whichever of them computes it: a row's result must not depend on
// how many rows run with it (the linear layers take rows four at a time
// and the leftovers one by one), or a forecast's first steps would
// differ in their last bits from a shorter forecast's. The tails round
// each product before adding it, as the portable kernels do.

//go:noescape
func dotAsm(a, b *float32, n int) float32

//go:noescape
func dot4Asm(w, x0, x1, x2, x3 *float32, n int) (s0, s1, s2, s3 float32)

//go:noescape
func weightedRowsAsm(out, v, p *float32, rows, stride, n int)

//go:noescape
func dot4x3Asm(w, x *float32, n int, res *[12]float32)

// dot returns a·b over len(a).
func dot(a, b []float32) float32 {
	n := len(a)
	if !useAsm || n < lanes {
		return dotGo(a, b)
	}
	b = b[:n]
	nv := n &^ (lanes - 1)
	s := dotAsm(&a[0], &b[0], nv)
	for i := nv; i < n; i++ {
		s += float32(a[i] * b[i])
	}
	return s
}

// dot4 returns w·x0, w·x1, w·x2, w·x3: one pass over w for four rows.
func dot4(w, x0, x1, x2, x3 []float32) (s0, s1, s2, s3 float32) {
	n := len(w)
	if !useAsm || n < lanes {
		return dot4Go(w, x0, x1, x2, x3)
	}
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	nv := n &^ (lanes - 1)
	s0, s1, s2, s3 = dot4Asm(&w[0], &x0[0], &x1[0], &x2[0], &x3[0], nv)
	for i := nv; i < n; i++ {
		a := w[i]
		s0 += float32(a * x0[i])
		s1 += float32(a * x1[i])
		s2 += float32(a * x2[i])
		s3 += float32(a * x3[i])
	}
	return s0, s1, s2, s3
}

// weightedRows adds Σ_j p[j]·v[j·stride : j·stride+len(out)] into out:
// blocks of columns held in registers across all rows.
func weightedRows(out, v, p []float32, stride int) {
	n, rows := len(out), len(p)
	if !useAsm || n < lanes || rows == 0 {
		weightedRowsGo(out, v, p, stride)
		return
	}
	_ = v[(rows-1)*stride+n-1]
	nv := n &^ (lanes - 1)
	weightedRowsAsm(&out[0], &v[0], &p[0], rows, stride, nv)
	for j, pj := range p {
		vj := v[j*stride+nv : j*stride+n]
		for i, x := range vj {
			out[nv+i] += float32(pj * x)
		}
	}
}

// dot4x3 sets res[3r+k] = x_r·w_k for the four rows x_r of x and the
// three rows w_k of w, each n long and consecutive: twelve accumulators
// in registers when n is a multiple of lanes, else three passes of dot4.
func dot4x3(w, x []float32, n int, res *[12]float32) {
	if !useAsm || n%lanes != 0 || n == 0 {
		dot4x3Rows(w, x, n, res)
		return
	}
	_, _ = w[3*n-1], x[4*n-1]
	dot4x3Asm(&w[0], &x[0], n, res)
}
