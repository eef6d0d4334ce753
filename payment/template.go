package payment

import "bytes"

// template is a pre-encoded JSON document with slots: the parts between
// its marks, and which value goes in each gap.
type template struct {
	parts [][]byte
	slots []int // slots[i] is the value between parts[i] and parts[i+1]
}

// newTemplate cuts b at every occurrence of marks (JSON strings, quotes
// included); a mark's index is its value's.
func newTemplate(b []byte, marks []string) template {
	var t template
	for {
		at, which := -1, -1
		for i, m := range marks {
			if j := bytes.Index(b, []byte(m)); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			t.parts = append(t.parts, b)
			return t
		}
		t.parts = append(t.parts, b[:at])
		t.slots = append(t.slots, which)
		b = b[at+len(marks[which]):]
	}
}

// count is how many gaps take value i.
func (t template) count(i int) int {
	n := 0
	for _, s := range t.slots {
		if s == i {
			n++
		}
	}
	return n
}

// render writes the document with values in its gaps.
func (t template) render(values [][]byte) []byte {
	n := 0
	for _, p := range t.parts {
		n += len(p)
	}
	for _, s := range t.slots {
		n += len(values[s])
	}
	out := make([]byte, 0, n)
	for i, p := range t.parts {
		out = append(out, p...)
		if i < len(t.slots) {
			out = append(out, values[t.slots[i]]...)
		}
	}
	return out
}
