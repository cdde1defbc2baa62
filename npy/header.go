package npy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/pylit"
)

// MaxHeaderSize bounds the header dictionary, so a hostile length never
// causes a huge allocation.
const MaxHeaderSize = 1 << 20

var magic = []byte("\x93NUMPY")

// Header is a parsed .npy header.
type Header struct {
	Major, Minor int
	Dtype        Dtype
	FortranOrder bool
	Shape        []int64
	// DataOffset is where the array's bytes start in the file.
	DataOffset int64
}

// NumElements returns the product of the shape (1 for a 0-d array).
func (h *Header) NumElements() int64 {
	n := int64(1)
	for _, d := range h.Shape {
		n *= d
	}
	return n
}

// Size returns the array's size in bytes.
func (h *Header) Size() int64 { return h.NumElements() * int64(h.Dtype.Size()) }

// headerProbe is how much DecodeHeader reads at first: the whole header of
// any usual file, in one request to a remote file.
const headerProbe = 64 << 10

// DecodeHeader reads and validates the header of a .npy file of the given
// size from r, any io.ReaderAt (ReadHeader reads a path or URL); the data
// must fill the rest of the file exactly. It reads the first 64 KiB (or
// the whole file, if smaller), and the rest of the header only when it is
// longer.
func DecodeHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 10 {
		return nil, fmt.Errorf("%w: %d-byte file is too short", ErrInvalidHeader, size)
	}
	buf := make([]byte, min(size, headerProbe))
	if err := readFull(r, buf, 0); err != nil {
		return nil, err
	}
	if !bytes.Equal(buf[:6], magic) {
		return nil, fmt.Errorf("%w: bad magic", ErrInvalidHeader)
	}
	h := &Header{Major: int(buf[6]), Minor: int(buf[7])}
	var n, start int64
	switch {
	case h.Major == 1 && h.Minor == 0:
		n, start = int64(binary.LittleEndian.Uint16(buf[8:10])), 10
	case (h.Major == 2 || h.Major == 3) && h.Minor == 0:
		if size < 12 {
			return nil, fmt.Errorf("%w: truncated", ErrInvalidHeader)
		}
		n, start = int64(binary.LittleEndian.Uint32(buf[8:12])), 12
	default:
		return nil, fmt.Errorf("%w: version %d.%d", ErrInvalidHeader, h.Major, h.Minor)
	}
	if n > MaxHeaderSize || n > size-start {
		return nil, fmt.Errorf("%w: header length %d does not fit a %d-byte file", ErrInvalidHeader, n, size)
	}
	if probed := int64(len(buf)); start+n > probed {
		buf = append(buf, make([]byte, start+n-probed)...)
		if err := readFull(r, buf[probed:], probed); err != nil {
			return nil, err
		}
	}
	buf = buf[start : start+n]
	if err := h.parseDict(buf); err != nil {
		return nil, err
	}
	h.DataOffset = start + n
	// Overflow-checked size.
	total := uint64(h.Dtype.Size())
	for _, d := range h.Shape {
		hi, lo := bits.Mul64(total, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return nil, fmt.Errorf("%w: shape %v overflows", ErrInvalidHeader, h.Shape)
		}
		total = lo
	}
	if int64(total) != size-h.DataOffset {
		return nil, fmt.Errorf("%w: shape %v of %s needs %d bytes, the file holds %d", ErrInvalidHeader, h.Shape, h.Dtype, total, size-h.DataOffset)
	}
	return h, nil
}

// readFull fills p from r at off: a file that ends first is
// io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	_, err := io.ReadFull(io.NewSectionReader(r, off, int64(len(p))), p)
	return err
}

// parseDict parses the header's Python dict literal, e.g.
// {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }.
func (h *Header) parseDict(b []byte) error {
	v, err := pylit.Parse(strings.TrimRight(string(b), " \n\x00"))
	if err != nil {
		return fmt.Errorf("%w: header dict %v", ErrInvalidHeader, err)
	}
	d, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: header is not a dict", ErrInvalidHeader)
	}
	if len(d) != 3 {
		return fmt.Errorf("%w: header has keys %q, want descr, fortran_order, shape", ErrInvalidHeader, keys(d))
	}
	switch descr := d["descr"].(type) {
	case string:
		if h.Dtype, err = ParseDtype(descr); err != nil {
			return err
		}
	case []any:
		st, err := structOf(pylit.Plain(descr).([]any))
		if err != nil {
			return err
		}
		h.Dtype = Dtype(st.Repr())
	default:
		return fmt.Errorf("%w: descr is missing or not a string", ErrInvalidHeader)
	}
	fo, ok := d["fortran_order"].(bool)
	if !ok {
		return fmt.Errorf("%w: fortran_order is missing or not a bool", ErrInvalidHeader)
	}
	h.FortranOrder = fo
	shape, ok := d["shape"].(pylit.Tuple)
	if !ok {
		return fmt.Errorf("%w: shape is missing or not a tuple", ErrInvalidHeader)
	}
	h.Shape = make([]int64, len(shape))
	for i, x := range shape {
		n, ok := x.(int64)
		if !ok || n < 0 {
			return fmt.Errorf("%w: shape's dimension %d is %#v, not a non-negative integer", ErrInvalidHeader, i, x)
		}
		h.Shape[i] = n
	}
	return nil
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// encodeHeader returns the magic, version, length and padded dict for an
// array, in the version NumPy itself would pick (1.0 unless the header
// needs more than 65535 bytes).
func encodeHeader(d Dtype, shape []int64, fortran bool) []byte {
	var sb strings.Builder
	descr := "'" + string(d) + "'"
	if d.structured() {
		descr = string(d) // a list, not a string
	}
	fmt.Fprintf(&sb, "{'descr': %s, 'fortran_order': %s, 'shape': (", descr, pyBool(fortran))
	for i, s := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(s, 10))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	dict := sb.String()
	for _, v := range []struct {
		major, pre int
	}{{1, 10}, {2, 12}} {
		total := alignUp(v.pre+len(dict)+1, 64)
		n := total - v.pre
		if v.major == 1 && n > math.MaxUint16 {
			continue
		}
		out := make([]byte, 0, total)
		out = append(out, magic...)
		out = append(out, byte(v.major), 0)
		if v.major == 1 {
			out = binary.LittleEndian.AppendUint16(out, uint16(n))
		} else {
			out = binary.LittleEndian.AppendUint32(out, uint32(n))
		}
		out = append(out, dict...)
		for len(out) < total-1 {
			out = append(out, ' ')
		}
		return append(out, '\n')
	}
	panic("unreachable")
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
