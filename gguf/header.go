package gguf

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// MaxHeaderSize bounds a header (metadata and tensor descriptions): the
// data of a file starts within this many bytes of its beginning, so a
// hostile header never causes a larger allocation. Real headers, the
// tokenizer's vocabulary included, take tens of MB at most.
const MaxHeaderSize = 256 << 20

// DefaultAlignment is the alignment of the data area and of every
// tensor's offset in it when general.alignment is absent.
const DefaultAlignment = 32

// firstRead is the size of DecodeHeader's first, speculative read: most
// headers fit in it, so a remote file's header costs one request.
const firstRead = 1 << 20

// prealloc bounds what is allocated for a count before its entries are
// read.
const prealloc = 4096

// maxNesting bounds arrays of arrays, so that a hostile file cannot
// recurse deeply (llama.cpp reads no nested arrays at all).
const maxNesting = 8

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	Type Type
	// Shape is in ggml's order, as stored: Shape[0] is the number of
	// elements in a row (the fastest-varying dimension). Reversed, it is
	// the shape NumPy and PyTorch use.
	Shape []int64
	// Offset is where the tensor's data starts, relative to the start of
	// the data area.
	Offset int64
	size   int64
}

// Size returns the tensor's length in bytes. For a tensor of unknown type
// (see Options.AllowUnknownTypes), it spans to the next tensor's data or
// to the end of the file.
func (t *TensorInfo) Size() int64 { return t.size }

// NumElements returns the product of the shape (1 for a scalar).
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Header is a parsed and validated GGUF header.
type Header struct {
	Version  uint32
	Metadata Metadata
	// Tensors in file order.
	Tensors []TensorInfo
	// Alignment is general.alignment, or DefaultAlignment.
	Alignment int64
	// DataOffset is where the data area starts in the file.
	DataOffset int64
	byName     map[string]int
}

// Lookup returns the tensor called name.
func (h *Header) Lookup(name string) (*TensorInfo, bool) {
	return tensorload.Find(h.Tensors, h.byName, name)
}

// DecodeHeader reads and validates the header of a GGUF file of the given
// size from r, any io.ReaderAt (ReadHeader reads a path or URL); a tensor
// of a type this package does not know is ErrUnknownType. It reads the
// header only: first 1 MiB (or the whole file, if smaller), then, for a
// longer header, reads that double what it has.
func DecodeHeader(r io.ReaderAt, size int64) (*Header, error) {
	return readHeader(r, size, false)
}

func readHeader(r io.ReaderAt, size int64, allowUnknown bool) (*Header, error) {
	c := &cursor{r: r, size: size, end: min(size, MaxHeaderSize)}
	return c.header(allowUnknown)
}

// cursor reads a header front to back. buf holds the file's first
// len(buf) bytes; need reads more, never past the file or MaxHeaderSize,
// and fails before any read or allocation a hostile length asks for.
type cursor struct {
	r    io.ReaderAt
	size int64 // of the file
	end  int64 // where the header must end: min(size, MaxHeaderSize)
	buf  []byte
	pos  int64
}

func (c *cursor) bad(format string, a ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrInvalidHeader, c.pos, fmt.Sprintf(format, a...))
}

// left is how many bytes of the header can follow pos.
func (c *cursor) left() int64 { return c.end - c.pos }

// need makes buf hold the n bytes at pos.
func (c *cursor) need(n int64) error {
	if n < 0 || n > c.left() {
		if c.end < c.size {
			return c.bad("%d bytes needed: the header would run past MaxHeaderSize (%d)", n, MaxHeaderSize)
		}
		return c.bad("%d bytes needed, %d left in the file", n, c.left())
	}
	end := c.pos + n
	if end <= int64(len(c.buf)) {
		return nil
	}
	to := min(max(end, 2*int64(len(c.buf)), firstRead), c.end)
	from := int64(len(c.buf))
	c.buf = slices.Grow(c.buf, int(to-from))[:to]
	if k, err := c.r.ReadAt(c.buf[from:to], from); int64(k) != to-from {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.buf = c.buf[:from]
		return err
	}
	return nil
}

// bytes returns the n bytes at pos and moves past them.
func (c *cursor) bytes(n int64) ([]byte, error) {
	if err := c.need(n); err != nil {
		return nil, err
	}
	b := c.buf[c.pos : c.pos+n]
	c.pos += n
	return b, nil
}

func (c *cursor) u32() (uint32, error) {
	b, err := c.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (c *cursor) u64() (uint64, error) {
	b, err := c.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads an element count and bounds it by the bytes left: n
// elements of at least min bytes each must fit in the rest of the header.
func (c *cursor) count(what string, min int64) (int64, error) {
	n, err := c.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(c.left()/min) {
		return 0, c.bad("%d %s cannot fit in the %d bytes left", n, what, c.left())
	}
	return int64(n), nil
}

func (c *cursor) str() (string, error) {
	n, err := c.count("string bytes", 1)
	if err != nil {
		return "", err
	}
	b, err := c.bytes(n)
	return string(b), err
}

func (c *cursor) header(allowUnknown bool) (*Header, error) {
	if c.size < 24 {
		return nil, c.bad("a file of %d bytes is shorter than a GGUF header", c.size)
	}
	magic, err := c.bytes(4)
	if err != nil {
		return nil, err
	}
	switch string(magic) {
	case "GGUF":
	case "FUGG":
		return nil, fmt.Errorf("%w: magic %q", ErrBigEndian, magic)
	default:
		return nil, c.bad("magic %q is not GGUF", magic)
	}
	h := &Header{Alignment: DefaultAlignment}
	if h.Version, err = c.u32(); err != nil {
		return nil, err
	}
	if h.Version&0xffff == 0 && h.Version != 0 {
		// As llama.cpp and gguf-py detect a file written big-endian.
		return nil, fmt.Errorf("%w: version field %#08x is a byte-swapped %d", ErrBigEndian, h.Version, bits.ReverseBytes32(h.Version))
	}
	if h.Version != 2 && h.Version != 3 {
		return nil, fmt.Errorf("%w: version %d (2 and 3 are read)", ErrVersion, h.Version)
	}
	nt, err := c.u64()
	if err != nil {
		return nil, err
	}
	// A key/value pair takes at least 13 bytes, a tensor description 24.
	nkv, err := c.count("metadata pairs", 13)
	if err != nil {
		return nil, err
	}
	if nt > uint64((c.left()-13*nkv)/24) {
		return nil, c.bad("%d tensors cannot fit in the %d bytes left", nt, c.left())
	}
	if err := c.metadata(h, nkv); err != nil {
		return nil, err
	}
	if err := c.tensorInfos(h, int64(nt)); err != nil {
		return nil, err
	}
	h.DataOffset = alignUp(c.pos, h.Alignment)
	if nt > 0 && h.DataOffset > c.size {
		return nil, c.bad("data area at %d starts past the end of the file", h.DataOffset)
	}
	if err := checkData(h, c.size, allowUnknown); err != nil {
		return nil, err
	}
	return h, nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

func (c *cursor) metadata(h *Header, n int64) error {
	// Room grows as entries are read: a count is only bounded by the
	// bytes left, and entries can be several times their encoded size.
	seen := make(map[string]bool, min(n, prealloc))
	h.Metadata = make(Metadata, 0, min(n, prealloc))
	for range n {
		key, err := c.str()
		if err != nil {
			return err
		}
		if key == "" || seen[key] {
			return c.bad("empty or duplicate metadata key %q", key)
		}
		if !utf8.ValidString(key) { // as Save and gguf-py require
			return c.bad("metadata key %q is not valid UTF-8", key)
		}
		seen[key] = true
		t, err := c.u32()
		if err != nil {
			return err
		}
		v, err := c.value(ValueType(t), 0)
		if err != nil {
			return err
		}
		h.Metadata = append(h.Metadata, KV{key, v})
	}
	if v, ok := h.Metadata.Lookup("general.alignment"); ok {
		a, ok := v.v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return c.bad("general.alignment %v (%s) is not a UINT32 power of two", v, v.typ)
		}
		h.Alignment = int64(a)
	}
	return nil
}

// value reads a value of type t, inside depth arrays.
func (c *cursor) value(t ValueType, depth int) (Value, error) {
	switch t {
	case ValueString:
		s, err := c.str()
		return Value{typ: t, v: s}, err
	case ValueArray:
		return c.array(depth)
	}
	if !t.valid() {
		return Value{}, c.bad("value type %d", uint32(t))
	}
	b, err := c.bytes(t.size())
	if err != nil {
		return Value{}, err
	}
	return Value{typ: t, v: scalar(t, b)}, nil
}

// scalar decodes a fixed-size value.
func scalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return b[0]
	case ValueInt8:
		return int8(b[0])
	case ValueBool:
		return b[0] != 0 // as llama.cpp and NumPy read it
	case ValueUint16:
		return le.Uint16(b)
	case ValueInt16:
		return int16(le.Uint16(b))
	case ValueUint32:
		return le.Uint32(b)
	case ValueInt32:
		return int32(le.Uint32(b))
	case ValueFloat32:
		return math.Float32frombits(le.Uint32(b))
	case ValueUint64:
		return le.Uint64(b)
	case ValueInt64:
		return int64(le.Uint64(b))
	case ValueFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	panic("gguf: scalar of type " + t.String())
}

func (c *cursor) array(depth int) (Value, error) {
	if depth >= maxNesting {
		return Value{}, c.bad("arrays nested more than %d deep", maxNesting)
	}
	et, err := c.u32()
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, c.bad("array of value type %d", et)
	}
	n, err := c.count("array elements", elem.minSize())
	if err != nil {
		return Value{}, err
	}
	switch elem {
	case ValueString:
		a, err := c.strings(n)
		return array(elem, a), err
	case ValueArray:
		a := make([]Value, 0, min(n, prealloc))
		for range n {
			v, err := c.array(depth + 1)
			if err != nil {
				return Value{}, err
			}
			a = append(a, v)
		}
		return array(elem, a), nil
	}
	b, err := c.bytes(n * elem.size())
	if err != nil {
		return Value{}, err
	}
	return array(elem, scalars(elem, b, int(n))), nil
}

// strings reads n strings into one allocation: a vocabulary of 150,000
// tokens is one string, not 150,000.
func (c *cursor) strings(n int64) ([]string, error) {
	start := c.pos
	for range n {
		l, err := c.count("string bytes", 1)
		if err != nil {
			return nil, err
		}
		if err := c.need(l); err != nil {
			return nil, err
		}
		c.pos += l
	}
	all := string(c.buf[start:c.pos])
	out := make([]string, n)
	at := int64(0)
	for i := range out {
		l := int64(binary.LittleEndian.Uint64(c.buf[start+at:]))
		out[i] = all[at+8 : at+8+l]
		at += 8 + l
	}
	return out, nil
}

// scalars decodes n fixed-size values of type t.
func scalars(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case ValueUint8:
		return slices.Clone(b)
	case ValueInt8:
		return fill(n, func(i int) int8 { return int8(b[i]) })
	case ValueBool:
		return fill(n, func(i int) bool { return b[i] != 0 })
	case ValueUint16:
		return fill(n, func(i int) uint16 { return le.Uint16(b[2*i:]) })
	case ValueInt16:
		return fill(n, func(i int) int16 { return int16(le.Uint16(b[2*i:])) })
	case ValueUint32:
		return fill(n, func(i int) uint32 { return le.Uint32(b[4*i:]) })
	case ValueInt32:
		return fill(n, func(i int) int32 { return int32(le.Uint32(b[4*i:])) })
	case ValueFloat32:
		return fill(n, func(i int) float32 { return math.Float32frombits(le.Uint32(b[4*i:])) })
	case ValueUint64:
		return fill(n, func(i int) uint64 { return le.Uint64(b[8*i:]) })
	case ValueInt64:
		return fill(n, func(i int) int64 { return int64(le.Uint64(b[8*i:])) })
	case ValueFloat64:
		return fill(n, func(i int) float64 { return math.Float64frombits(le.Uint64(b[8*i:])) })
	}
	panic("gguf: array of " + t.String())
}

func fill[T any](n int, f func(int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func (c *cursor) tensorInfos(h *Header, n int64) error {
	h.Tensors = make([]TensorInfo, 0, min(n, prealloc))
	h.byName = make(map[string]int, min(n, prealloc))
	for i := range int(n) {
		h.Tensors = append(h.Tensors, TensorInfo{})
		t := &h.Tensors[i]
		var err error
		if t.Name, err = c.str(); err != nil {
			return err
		}
		if _, dup := h.byName[t.Name]; dup {
			return c.bad("duplicate tensor name %q", t.Name)
		}
		if !utf8.ValidString(t.Name) {
			return c.bad("tensor name %q is not valid UTF-8", t.Name)
		}
		h.byName[t.Name] = i
		nd, err := c.u32()
		if err != nil {
			return err
		}
		if nd > maxDims {
			return c.bad("tensor %q has %d dimensions, at most %d", t.Name, nd, maxDims)
		}
		t.Shape = make([]int64, nd)
		for j := range t.Shape {
			d, err := c.u64()
			if err != nil {
				return err
			}
			if d > math.MaxInt64 {
				return fmt.Errorf("%w: tensor %q: dimension %d is %d", ErrInvalidTensor, t.Name, j, d)
			}
			t.Shape[j] = int64(d)
		}
		typ, err := c.u32()
		if err != nil {
			return err
		}
		t.Type = Type(typ)
		off, err := c.u64()
		if err != nil {
			return err
		}
		if off > uint64(c.size) {
			return fmt.Errorf("%w: tensor %q: offset %d is past the end of a %d-byte file", ErrInvalidTensor, t.Name, off, c.size)
		}
		t.Offset = int64(off)
	}
	return nil
}

// checkData computes each tensor's size and checks its data is aligned,
// inside the file and overlaps no other tensor's (an empty tensor
// overlaps nothing). A tensor of unknown type is ErrUnknownType, or with
// allowUnknown spans to the next tensor's data (or the end of the file).
func checkData(h *Header, size int64, allowUnknown bool) error {
	dataSize := size - h.DataOffset
	order := make([]int, len(h.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(h.Tensors[a].Offset, h.Tensors[b].Offset) })
	var end int64        // of the data of the tensors checked so far
	var last *TensorInfo // the one that ends there
	for k, i := range order {
		t := &h.Tensors[i]
		if t.Offset%h.Alignment != 0 {
			return fmt.Errorf("%w: tensor %q at offset %d, not a multiple of the alignment %d", ErrInvalidTensor, t.Name, t.Offset, h.Alignment)
		}
		if t.Offset > dataSize {
			return fmt.Errorf("%w: tensor %q at offset %d, past the %d-byte data area", ErrInvalidTensor, t.Name, t.Offset, dataSize)
		}
		n, err := nbytes(t.Type, t.Shape)
		switch {
		case err == nil:
			t.size = n
		case allowUnknown && !t.Type.Known():
			t.size = dataSize - t.Offset
			for _, j := range order[k+1:] {
				if h.Tensors[j].Offset > t.Offset {
					t.size = h.Tensors[j].Offset - t.Offset
					break
				}
			}
		default:
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if t.size > dataSize-t.Offset {
			return fmt.Errorf("%w: tensor %q: %d bytes at offset %d run past the %d-byte data area", ErrInvalidTensor, t.Name, t.size, t.Offset, dataSize)
		}
		if t.size == 0 {
			continue
		}
		if t.Offset < end {
			return fmt.Errorf("%w: tensors %q and %q overlap", ErrInvalidTensor, last.Name, t.Name)
		}
		end, last = t.Offset+t.size, t
	}
	return nil
}
