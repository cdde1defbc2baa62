package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// MaxHeaderSize bounds the JSON header (as the reference library does), so
// a hostile length never causes a huge allocation.
const MaxHeaderSize = 100_000_000

// TensorInfo describes one tensor of a file: its dtype, shape and byte
// range [Begin, End) relative to the start of the data area.
type TensorInfo struct {
	Name       string
	Dtype      Dtype
	Shape      []int64
	Begin, End int64
}

// Size returns the tensor's size in bytes.
func (t *TensorInfo) Size() int64 { return t.End - t.Begin }

// NumElements returns the product of the shape (1 for a scalar).
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	// Tensors in file order (ascending Begin).
	Tensors []TensorInfo
	// Metadata is the optional __metadata__ map (nil when absent).
	Metadata map[string]string
	// DataOffset is where the data area starts in the file (8 + header length).
	DataOffset int64
	byName     map[string]int
}

// Lookup returns the tensor called name.
func (h *Header) Lookup(name string) (*TensorInfo, bool) {
	i, ok := h.byName[name]
	if !ok {
		return nil, false
	}
	return &h.Tensors[i], true
}

// headerProbe is how much DecodeHeader reads at first: the length and the
// JSON of all but the largest headers, in one request to a remote file.
const headerProbe = 1 << 20

// DecodeHeader reads and validates the header of a safetensors file of the
// given size from r, any io.ReaderAt (ReadHeader reads a path or URL). It
// reads the first MiB (or the whole file, if smaller), and the rest of
// the header only when it is longer.
func DecodeHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 8 {
		return nil, fmt.Errorf("%w: file of %d bytes is shorter than the 8-byte length", ErrInvalidHeader, size)
	}
	buf := make([]byte, min(size, headerProbe))
	if err := readFull(r, buf, 0); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(buf)
	if n < 2 || n > MaxHeaderSize {
		return nil, fmt.Errorf("%w: header length %d not in [2, %d]", ErrInvalidHeader, n, MaxHeaderSize)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("%w: header length %d runs past the end of a %d-byte file", ErrInvalidHeader, n, size)
	}
	if probed := len(buf); 8+int(n) > probed {
		buf = append(buf, make([]byte, 8+int(n)-probed)...)
		if err := readFull(r, buf[probed:], int64(probed)); err != nil {
			return nil, err
		}
	}
	return ParseHeader(buf[8:8+n], size-8-int64(n))
}

// readFull fills p from r at off: a file that ends first is
// io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	_, err := io.ReadFull(io.NewSectionReader(r, off, int64(len(p))), p)
	return err
}

// ParseHeader validates the JSON header b of a file whose data area holds
// dataSize bytes.
func ParseHeader(b []byte, dataSize int64) (*Header, error) {
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: header does not start with '{'", ErrInvalidHeader)
	}
	// encoding/json would map invalid UTF-8 to U+FFFD, making names up.
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: header is not valid UTF-8", ErrInvalidHeader)
	}
	entries, meta, err := topLevel(b)
	if err != nil {
		return nil, err
	}
	h := &Header{DataOffset: 8 + int64(len(b)), Metadata: meta, byName: make(map[string]int, len(entries))}
	h.Tensors = slices.Grow(h.Tensors, len(entries)) // nil for none, as before
	for _, e := range entries {
		t, err := parseTensor(e.key, &e.raw)
		if err != nil {
			return nil, err
		}
		h.Tensors = append(h.Tensors, t)
	}
	if err := checkLayout(h.Tensors, dataSize); err != nil {
		return nil, err
	}
	for i, t := range h.Tensors {
		h.byName[t.Name] = i
	}
	return h, nil
}

type entry struct {
	key string
	raw rawTensor
}

// topLevel decodes the header object's entries in order, in one pass of
// one strict decoder: each tensor's fields (none unknown) and the
// metadata (a map of strings). It rejects duplicate keys (which
// encoding/json would silently merge) and trailing bytes other than JSON
// white space (writers pad with spaces). The tensors' values are checked
// after, by parseTensor.
func topLevel(b []byte) ([]entry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidHeader, fmt.Sprintf(format, a...))
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, bad("not a JSON object")
	}
	var (
		out  []entry
		meta map[string]string
	)
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, bad("%v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, nil, bad("key is not a string")
		}
		if seen[key] {
			return nil, nil, bad("duplicate key %q", key)
		}
		seen[key] = true
		if key == "__metadata__" {
			if err := dec.Decode(&meta); err != nil {
				return nil, nil, bad("__metadata__ is not a map of strings: %v", err)
			}
			continue
		}
		out = append(out, entry{key: key})
		if err := dec.Decode(&out[len(out)-1].raw); err != nil {
			return nil, nil, bad("tensor %q: %v", key, err)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, nil, bad("unterminated object")
	}
	rest := b[dec.InputOffset():]
	if len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return nil, nil, bad("%d bytes after the JSON object", len(rest))
	}
	return out, meta, nil
}

type rawTensor struct {
	Dtype       *string   `json:"dtype"`
	Shape       *[]uint64 `json:"shape"`
	DataOffsets *[]uint64 `json:"data_offsets"`
}

// parseTensor checks the fields of tensor name and makes its TensorInfo.
func parseTensor(name string, r *rawTensor) (TensorInfo, error) {
	if r.Dtype == nil || r.Shape == nil || r.DataOffsets == nil {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q lacks dtype, shape or data_offsets", ErrInvalidHeader, name)
	}
	d := Dtype(*r.Dtype)
	if !d.Valid() {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has dtype %q", ErrUnknownDtype, name, *r.Dtype)
	}
	if len(*r.DataOffsets) != 2 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: data_offsets has %d values, want 2", ErrInvalidOffsets, name, len(*r.DataOffsets))
	}
	b, e := (*r.DataOffsets)[0], (*r.DataOffsets)[1]
	if b > e || e > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d]", ErrInvalidOffsets, name, b, e)
	}
	// Count bits with overflow checks: nelements * bits must fit.
	nbits := uint64(d.Bits())
	shape := make([]int64, len(*r.Shape))
	for i, s := range *r.Shape {
		hi, lo := bits.Mul64(nbits, s)
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, fmt.Errorf("%w: tensor %q: shape %v overflows", ErrInvalidOffsets, name, *r.Shape)
		}
		nbits = lo
		shape[i] = int64(s)
	}
	if nbits%8 != 0 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: %d bits is not a whole number of bytes", ErrInvalidOffsets, name, nbits)
	}
	if nbits/8 != e-b {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: shape %v of %s is %d bytes but data_offsets span %d", ErrInvalidOffsets, name, shape, d, nbits/8, e-b)
	}
	return TensorInfo{Name: name, Dtype: d, Shape: shape, Begin: int64(b), End: int64(e)}, nil
}

// checkLayout sorts ts by offset and checks they tile the data area
// exactly: the first starts at 0, each starts where the last ended, and
// the last ends at dataSize.
func checkLayout(ts []TensorInfo, dataSize int64) error {
	slices.SortStableFunc(ts, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return cmp.Compare(a.Begin, b.Begin)
		}
		return cmp.Compare(a.End, b.End)
	})
	var at int64
	for _, t := range ts {
		if t.Begin != at {
			return fmt.Errorf("%w: tensor %q starts at %d, want %d (overlap or gap)", ErrInvalidOffsets, t.Name, t.Begin, at)
		}
		at = t.End
	}
	if at != dataSize {
		return fmt.Errorf("%w: tensors end at %d but the data area holds %d bytes", ErrInvalidOffsets, at, dataSize)
	}
	return nil
}
