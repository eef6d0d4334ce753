package kronos

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// The safetensors format (https://huggingface.co/docs/safetensors): an
// 8-byte little-endian header length N, N bytes of JSON mapping each tensor
// name to {dtype, shape, data_offsets [begin, end)} (offsets relative to the
// end of the header), an optional "__metadata__" entry of strings, then the
// raw little-endian data.

// maxHeaderLen bounds the JSON header we are willing to parse.
const maxHeaderLen = 64 << 20

// tensor is one entry of a checkpoint, converted to what the forward pass
// uses: float32 values for floating tensors, int64 values for integer ones.
type tensor struct {
	name  string
	dtype string // as written in the file: F32, F16, BF16, I64, ...
	shape []int
	f32   []float32
	i64   []int64
}

// dtypeSize is the byte width of each dtype we read.
var dtypeSize = map[string]int{"F32": 4, "F16": 2, "BF16": 2, "I64": 8}

// readSafetensors reads every tensor of a safetensors file. Floating
// tensors (F32, F16, BF16) become float32; I64 stays int64; any other dtype
// is kept as a tensor without values so that validation can name it.
func readSafetensors(path string) (map[string]*tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(f, 1<<20)

	var lenBuf [8]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, formatError(path, "reading header length: %v", err)
	}
	hlen := binary.LittleEndian.Uint64(lenBuf[:])
	if hlen > maxHeaderLen || int64(hlen) > st.Size()-8 {
		return nil, formatError(path, "header length %d does not fit a %d-byte file", hlen, st.Size())
	}
	header := make([]byte, hlen)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, formatError(path, "reading header: %v", err)
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(header, &entries); err != nil {
		return nil, formatError(path, "header: %v", err)
	}
	dataLen := st.Size() - 8 - int64(hlen)

	type entry struct {
		DType   string  `json:"dtype"`
		Shape   []int   `json:"shape"`
		Offsets []int64 `json:"data_offsets"`
	}
	type placed struct {
		t          *tensor
		begin, end int64
	}
	var order []placed
	out := make(map[string]*tensor, len(entries))
	for name, raw := range entries {
		if name == "__metadata__" {
			continue
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, formatError(path, "tensor %q: %v", name, err)
		}
		if len(e.Offsets) != 2 || e.Offsets[0] < 0 || e.Offsets[1] < e.Offsets[0] || e.Offsets[1] > dataLen {
			return nil, formatError(path, "tensor %q: data_offsets %v outside the %d data bytes", name, e.Offsets, dataLen)
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 {
				return nil, formatError(path, "tensor %q: negative dimension in %v", name, e.Shape)
			}
			n *= int64(d)
		}
		t := &tensor{name: name, dtype: e.DType, shape: e.Shape}
		if size, ok := dtypeSize[e.DType]; ok && n*int64(size) != e.Offsets[1]-e.Offsets[0] {
			return nil, formatError(path, "tensor %q: %s%v needs %d bytes, data_offsets give %d",
				name, e.DType, e.Shape, n*int64(size), e.Offsets[1]-e.Offsets[0])
		}
		out[name] = t
		order = append(order, placed{t, e.Offsets[0], e.Offsets[1]})
	}

	// Read the data in file order, so the reader only moves forward.
	slices.SortFunc(order, func(a, b placed) int { return int(a.begin - b.begin) })
	var pos int64
	for _, p := range order {
		if p.begin < pos {
			return nil, formatError(path, "tensor %q overlaps the previous one", p.t.name)
		}
		if _, err := r.Discard(int(p.begin - pos)); err != nil {
			return nil, formatError(path, "seeking to tensor %q: %v", p.t.name, err)
		}
		if err := decodeTensor(r, p.t, p.end-p.begin); err != nil {
			return nil, formatError(path, "tensor %q: %v", p.t.name, err)
		}
		pos = p.end
	}
	return out, nil
}

// decodeTensor reads n bytes of t's data from r and converts them.
func decodeTensor(r io.Reader, t *tensor, n int64) error {
	size, ok := dtypeSize[t.dtype]
	if !ok {
		_, err := io.CopyN(io.Discard, r, n)
		return err
	}
	count := int(n) / size
	switch t.dtype {
	case "I64":
		t.i64 = make([]int64, count)
	default:
		t.f32 = make([]float32, count)
	}
	var buf [4096]byte
	for done := 0; done < count; {
		k := min(count-done, len(buf)/size)
		b := buf[:k*size]
		if _, err := io.ReadFull(r, b); err != nil {
			return err
		}
		for i := range k {
			switch t.dtype {
			case "F32":
				t.f32[done+i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			case "BF16":
				// bfloat16 is the high half of a float32.
				t.f32[done+i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
			case "F16":
				t.f32[done+i] = halfToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
			case "I64":
				t.i64[done+i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
			}
		}
		done += k
	}
	return nil
}

// halfToFloat32 converts an IEEE 754 binary16 value.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
	case frac == 0: // signed zero
		return math.Float32frombits(sign)
	default: // subnormal: value = frac * 2^-24
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
}

func formatError(path, format string, args ...any) error {
	return &CheckpointError{Path: path, Err: ErrFormat, Detail: fmt.Sprintf(format, args...)}
}
