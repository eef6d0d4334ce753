package kronos

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// sampler is the reference's sample_from_logits for one sample path:
// divide the logits by the temperature, filter them with
// top_k_top_p_filtering, and draw from the softmax of what is left. Its
// scratch space is allocated once.
type sampler struct {
	temperature float32
	topK        int
	topP        float32
	rng         *rand.Rand
	order       []int
	keys        []uint64
	sorted      []float32
	probs       []float64
}

func newSampler(o Options, vocab int, stream uint64) *sampler {
	return &sampler{
		temperature: float32(o.Temperature),
		topK:        o.TopK,
		topP:        float32(o.TopP),
		rng:         rand.New(rand.NewPCG(o.Seed, stream)),
		order:       make([]int, vocab),
		keys:        make([]uint64, vocab),
		sorted:      make([]float32, vocab),
		probs:       make([]float64, vocab),
	}
}

// sample filters logits in place and draws a token id from them.
func (s *sampler) sample(logits []float32) int {
	s.filter(logits)
	m := float32(math.Inf(-1))
	for _, l := range logits {
		m = max(m, l)
	}
	var total float64
	for i, l := range logits {
		p := 0.0
		if !math.IsInf(float64(l), -1) {
			p = math.Exp(float64(l - m))
		}
		s.probs[i] = p
		total += p
	}
	u := s.rng.Float64() * total
	last := 0
	for i, p := range s.probs[:len(logits)] {
		if p == 0 {
			continue
		}
		last = i
		if u < p {
			return i
		}
		u -= p
	}
	return last // rounding left u just above the sum
}

// filter applies the temperature, then top_k_top_p_filtering: with top_k
// > 0 it keeps the tokens whose logit is at least the k-th largest and
// ignores top_p (the reference returns early); otherwise, with top_p < 1,
// it keeps the most likely tokens up to and including the first whose
// cumulative probability exceeds top_p. Removed tokens get -Inf.
func (s *sampler) filter(logits []float32) {
	if s.temperature != 1 {
		for i := range logits {
			logits[i] /= s.temperature
		}
	}
	n := len(logits)
	negInf := float32(math.Inf(-1))
	switch {
	case s.topK > 0:
		k := min(s.topK, n)
		var threshold float32
		if k == 1 {
			threshold = slices.Max(logits)
		} else {
			sorted := s.sorted[:n]
			copy(sorted, logits)
			slices.SortFunc(sorted, func(a, b float32) int { return cmp.Compare(b, a) })
			threshold = sorted[k-1]
		}
		for i, l := range logits {
			if l < threshold {
				logits[i] = negInf
			}
		}
	case s.topP < 1:
		order := s.order[:n]
		byFallingLogit(order, s.keys[:n], logits)
		// Softmax of the sorted logits in float32, then the cumulative sum
		// (PyTorch accumulates a float32 cumsum in double on the CPU).
		m := logits[order[0]]
		var sum float64
		for j, i := range order {
			e := float32(math.Exp(float64(logits[i] - m)))
			s.probs[j] = float64(e)
			sum += float64(e)
		}
		var cum float64
		remove := false // the token before this one pushed the sum past top_p
		for j, i := range order {
			if remove {
				logits[i] = negInf
			}
			cum += float64(float32(s.probs[j] / sum))
			remove = float32(cum) > s.topP
		}
	}
}

// byFallingLogit fills order with the token ids by falling logit, ties in
// id order, as a stable sort would: one sort of integer keys (in keys,
// scratch space of the same length), the logit's order-preserving bits
// above the id.
func byFallingLogit(order []int, keys []uint64, logits []float32) {
	for i, l := range logits {
		keys[i] = descendingKey(l)<<32 | uint64(i)
	}
	slices.Sort(keys)
	for j, k := range keys {
		order[j] = int(uint32(k))
	}
}

// descendingKey maps a logit to a key that sorts ascending as the logits
// sort descending: the float's bits made monotonic (negative values
// inverted, positive ones above them), then inverted. −0 counts as +0
// and NaN comes last, as cmp.Compare orders floats.
func descendingKey(l float32) uint64 {
	if l != l {
		return math.MaxUint32
	}
	b := math.Float32bits(l + 0) // −0 + 0 = +0
	if b&(1<<31) != 0 {
		b = ^b
	} else {
		b |= 1 << 31
	}
	return uint64(^b)
}
