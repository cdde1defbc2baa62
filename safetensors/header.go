package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
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
	return tensorload.Find(h.Tensors, h.byName, name)
}

// headerProbe is how much DecodeHeader reads at first: the length and the
// JSON of all but the largest headers, in one request to a remote file.
const headerProbe = 1 << 20

// probes are DecodeHeader's first-read buffers, kept for the next header:
// the parse copies what it keeps, so each load of a checkpoint would
// otherwise leave a MiB of garbage behind.
var probes = sync.Pool{New: func() any { return new([headerProbe]byte) }}

// DecodeHeader reads and validates the header of a safetensors file of the
// given size from r, any io.ReaderAt (ReadHeader reads a path or URL). It
// reads the first MiB (or the whole file, if smaller), and the rest of
// the header only when it is longer.
func DecodeHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 8 {
		return nil, fmt.Errorf("%w: file of %d bytes is shorter than the 8-byte length", ErrInvalidHeader, size)
	}
	var buf []byte
	if size >= headerProbe {
		p := probes.Get().(*[headerProbe]byte)
		defer probes.Put(p)
		buf = p[:]
	} else {
		buf = make([]byte, size)
	}
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
	ts, meta, err := topLevel(b)
	if err != nil {
		return nil, err
	}
	h := &Header{Tensors: ts, DataOffset: 8 + int64(len(b)), Metadata: meta, byName: make(map[string]int, len(ts))}
	if err := checkLayout(h.Tensors, dataSize); err != nil {
		return nil, err
	}
	for i, t := range h.Tensors {
		h.byName[t.Name] = i
	}
	return h, nil
}

// topLevel decodes the header object's entries in order, token by token
// (jsontext, encoding/json/v2's tokenizer, three times faster here than
// encoding/json's Decoder): each tensor's fields (none unknown), checked
// by parseTensor, and the metadata (a map of strings). The tokenizer
// refuses duplicate names (which encoding/json would silently merge) and
// invalid UTF-8 (which it would turn into U+FFFD, making names up);
// topLevel refuses trailing bytes other than JSON white space (writers
// pad with spaces).
func topLevel(b []byte) ([]TensorInfo, map[string]string, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(b))
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidHeader, fmt.Sprintf(format, a...))
	}
	if err := expect(dec, jsontext.KindBeginObject); err != nil {
		return nil, nil, bad("not a JSON object: %v", err)
	}
	var (
		out  []TensorInfo
		meta map[string]string
	)
	for dec.PeekKind() == jsontext.KindString {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, bad("%v", err) // a duplicate name among them
		}
		key := tok.String()
		if key == "__metadata__" {
			if meta, err = readMetadata(dec); err != nil {
				return nil, nil, bad("__metadata__ is not a map of strings: %v", err)
			}
			continue
		}
		var raw rawTensor
		if err := raw.read(dec); err != nil {
			return nil, nil, bad("tensor %q: %v", key, err)
		}
		t, err := parseTensor(key, &raw)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, t)
	}
	if err := expect(dec, jsontext.KindEndObject); err != nil {
		return nil, nil, bad("unterminated object: %v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, nil, bad("bytes after the JSON object at offset %d", dec.InputOffset())
	}
	return out, meta, nil
}

// expect reads the next token, which must be of kind k.
func expect(dec *jsontext.Decoder, k jsontext.Kind) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != k {
		return fmt.Errorf("found %s, want %s", kindName(tok.Kind()), kindName(k))
	}
	return nil
}

// kindName names a token kind in an error.
func kindName(k jsontext.Kind) string {
	switch k {
	case jsontext.KindBeginObject:
		return "an object"
	case jsontext.KindEndObject:
		return "the object's end"
	case jsontext.KindBeginArray:
		return "an array"
	case jsontext.KindEndArray:
		return "the array's end"
	case jsontext.KindString:
		return "a string"
	}
	return k.String() // number, true, false, null
}

// readMetadata reads the __metadata__ value: null, or an object whose
// values are all strings.
func readMetadata(dec *jsontext.Decoder) (map[string]string, error) {
	if dec.PeekKind() == jsontext.KindNull {
		_, err := dec.ReadToken()
		return nil, err
	}
	if err := expect(dec, jsontext.KindBeginObject); err != nil {
		return nil, err
	}
	meta := map[string]string{}
	for dec.PeekKind() == jsontext.KindString {
		k, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		key := k.String() // before the next read voids k
		v, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if v.Kind() != jsontext.KindString {
			return nil, fmt.Errorf("value of %q is %s, want a string", key, kindName(v.Kind()))
		}
		meta[key] = v.String()
	}
	return meta, expect(dec, jsontext.KindEndObject)
}

// rawTensor is a tensor's entry as the file has it. shape and
// dataOffsets are nil until read (readUints never returns nil).
type rawTensor struct {
	dtype              string
	hasDtype           bool
	shape, dataOffsets []uint64
}

// read reads one tensor's object: "dtype" (a string), "shape" and
// "data_offsets" (arrays of unsigned integers), nothing else.
func (r *rawTensor) read(dec *jsontext.Decoder) error {
	if err := expect(dec, jsontext.KindBeginObject); err != nil {
		return err
	}
	for dec.PeekKind() == jsontext.KindString {
		name, err := dec.ReadToken()
		if err != nil {
			return err
		}
		var field string // a constant: name.String() would allocate
		switch name.String() {
		case "dtype":
			field, err = "dtype", r.readDtype(dec)
		case "shape":
			field = "shape"
			r.shape, err = readUints(dec)
		case "data_offsets":
			field = "data_offsets"
			r.dataOffsets, err = readUints(dec)
		default:
			return fmt.Errorf("unknown field %q", name.String())
		}
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return expect(dec, jsontext.KindEndObject)
}

func (r *rawTensor) readDtype(dec *jsontext.Decoder) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != jsontext.KindString {
		return fmt.Errorf("found %s, want a string", kindName(tok.Kind()))
	}
	r.dtype, r.hasDtype = tok.String(), true
	return nil
}

// readUints reads an array of unsigned integers (no sign, fraction or
// exponent, at most 2^64-1).
func readUints(dec *jsontext.Decoder) ([]uint64, error) {
	if err := expect(dec, jsontext.KindBeginArray); err != nil {
		return nil, err
	}
	dst := []uint64{} // never nil: [] is a scalar's shape
	for dec.PeekKind() != jsontext.KindEndArray {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if tok.Kind() != jsontext.KindNumber {
			return nil, fmt.Errorf("found %s, want an unsigned integer", kindName(tok.Kind()))
		}
		v, err := tok.Uint()
		if err != nil {
			return nil, fmt.Errorf("%s is not an unsigned integer of 64 bits", tok.String())
		}
		dst = append(dst, v)
	}
	return dst, expect(dec, jsontext.KindEndArray)
}

// parseTensor checks the fields of tensor name and makes its TensorInfo.
func parseTensor(name string, r *rawTensor) (TensorInfo, error) {
	if !r.hasDtype || r.shape == nil || r.dataOffsets == nil {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q lacks dtype, shape or data_offsets", ErrInvalidHeader, name)
	}
	d := Dtype(r.dtype)
	if !d.Valid() {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q has dtype %q", ErrUnknownDtype, name, r.dtype)
	}
	if len(r.dataOffsets) != 2 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: data_offsets has %d values, want 2", ErrInvalidOffsets, name, len(r.dataOffsets))
	}
	b, e := r.dataOffsets[0], r.dataOffsets[1]
	if b > e || e > math.MaxInt64 {
		return TensorInfo{}, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d]", ErrInvalidOffsets, name, b, e)
	}
	// Count bits with overflow checks: nelements * bits must fit.
	nbits := uint64(d.Bits())
	shape := make([]int64, len(r.shape))
	for i, s := range r.shape {
		hi, lo := bits.Mul64(nbits, s)
		if hi != 0 || lo > math.MaxInt64 {
			return TensorInfo{}, fmt.Errorf("%w: tensor %q: shape %v overflows", ErrInvalidOffsets, name, r.shape)
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
