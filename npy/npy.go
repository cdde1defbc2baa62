// Package npy reads and writes NumPy's .npy format (versions 1.0, 2.0 and
// 3.0) between files and GPU or host memory through kvik, and .npz
// archives of them (LoadNpz, SaveNpz).
//
// Every fixed-size numeric dtype and bool is supported, and datetime64
// and timedelta64 (int64s), fixed-length strings and raw bytes, and
// structured dtypes (records of named fields) of these, little- or
// big-endian, C or Fortran order. Bytes are moved as stored: a big-endian
// array arrives big-endian (Array.Dtype.Order() says so), a record as
// NumPy holds it. Object and other variable dtypes are errors matching
// ErrUnsupportedDtype (ErrObjectArray for object arrays).
package npy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/npydescr"
)

// Errors returned (wrapped, with context) by this package; test with errors.Is.
var (
	// ErrInvalidHeader reports a file that is not a well-formed .npy file:
	// bad magic, version, header length or dictionary, or a data size that
	// does not match the shape.
	ErrInvalidHeader = errors.New("npy: invalid header")
	// ErrUnsupportedDtype reports a descr this package does not load.
	ErrUnsupportedDtype = errors.New("npy: unsupported dtype")
	// ErrObjectArray reports an array of Python objects (descr 'O'), which
	// holds pickles rather than numbers. It also matches ErrUnsupportedDtype.
	ErrObjectArray = fmt.Errorf("%w: object array", ErrUnsupportedDtype)
	// ErrInvalidArgument reports a bad dtype, shape or buffer given to
	// Save, or bad Options.
	ErrInvalidArgument = errors.New("npy: invalid argument")
)

// Dtype is a fixed-size element type, as a NumPy descr in the spelling
// ParseDtype returns: a byte order ('<' little, '>' big, '|' for one-byte
// types and bytes), a kind ('b' bool, 'i', 'u', 'f', 'c', 'M' datetime64
// and 'm' timedelta64, 'S' bytes, 'U' UTF-32 code points and 'V' raw
// bytes) and the element size in bytes (code points for 'U'), like
// "<f4", "|S10" or "<U3"; a datetime64 or timedelta64 then its unit, as
// NumPy writes it: "<M8[ns]", ">m8[10us]", or "<M8" for the generic unit.
// A structured dtype is NumPy's descr list of its fields, as a .npy
// header holds it, "[('x', '<f4'), ('n', '<i2', (3,))]": its kind is 'V'
// and its order '|' (see Fields).
type Dtype string

// Common dtypes, little-endian.
const (
	Bool       Dtype = "|b1"
	Int8       Dtype = "|i1"
	Uint8      Dtype = "|u1"
	Int16      Dtype = "<i2"
	Uint16     Dtype = "<u2"
	Int32      Dtype = "<i4"
	Uint32     Dtype = "<u4"
	Int64      Dtype = "<i8"
	Uint64     Dtype = "<u8"
	Float16    Dtype = "<f2"
	Float32    Dtype = "<f4"
	Float64    Dtype = "<f8"
	Complex64  Dtype = "<c8"
	Complex128 Dtype = "<c16"
)

// String returns the dtype as a NumPy descr, like "<f4".
func (d Dtype) String() string { return string(d) }

// Order returns the byte order: '<' (little), '>' (big) or '|' (not
// applicable, one byte); 0 for a malformed dtype.
func (d Dtype) Order() byte {
	if d.structured() {
		return '|'
	}
	if len(d) < 3 {
		return 0
	}
	return d[0]
}

// Kind returns 'b' (bool), 'i', 'u', 'f', 'c', 'M' (datetime64) or 'm'
// (timedelta64); 0 for a malformed dtype.
func (d Dtype) Kind() byte {
	if d.structured() {
		return 'V'
	}
	if len(d) < 3 {
		return 0
	}
	return d[1]
}

// Size returns the element size in bytes (a U string's code points
// times 4), or 0 for a malformed dtype.
func (d Dtype) Size() int {
	if d.structured() {
		s, err := parseStruct(string(d))
		if err != nil {
			return 0
		}
		return s.Size
	}
	p, ok := npydescr.Parse(string(d))
	if !ok {
		return 0
	}
	return p.Size()
}

// Valid reports whether d is a dtype this package reads and writes, in
// the spelling ParseDtype returns.
func (d Dtype) Valid() bool {
	p, err := ParseDtype(string(d))
	return err == nil && p == d
}

// BigEndian reports whether elements are stored most significant byte first.
func (d Dtype) BigEndian() bool { return d.Order() == '>' && d.Size() > 1 }

// MakeDtype returns the dtype of the given byte order, kind and size in
// bytes (a U string's: 4 per code point), as ParseDtype returns it (order
// '|' for one byte and for S and V, '=' as '<'), or an error matching
// ErrUnsupportedDtype.
func MakeDtype(order, kind byte, size int) (Dtype, error) {
	if kind == 'U' {
		if size%4 != 0 {
			return "", fmt.Errorf("%w: U of %d bytes", ErrUnsupportedDtype, size)
		}
		size /= 4
	}
	return ParseDtype(string(order) + string(kind) + strconv.Itoa(size))
}

// ParseDtype parses a NumPy descr string such as "<f8", ">i2", "|b1",
// "<M8[ns]", "|S10" or "<U3", or a structured dtype's descr list as a
// .npy header holds it: "[('x', '<f4'), ('n', '<i2', (3,))]".
func ParseDtype(s string) (Dtype, error) {
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		st, err := parseStruct(s)
		if err != nil {
			return "", err
		}
		return Dtype(st.Repr()), nil
	}
	if s == "O" || (len(s) >= 2 && s[1] == 'O') {
		return "", fmt.Errorf("%w (descr %q)", ErrObjectArray, s)
	}
	d, ok := npydescr.Parse(s)
	if !ok {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	return Dtype(d.String()), nil
}

// structured reports whether d is a structured dtype's descr list.
func (d Dtype) structured() bool { return strings.HasPrefix(string(d), "[") }

// Field is a field of a structured dtype (Dtype.Fields).
type Field struct {
	Name string // "" for padding (Dtype "|Vn")
	// Dtype is the field's element type: a plain dtype, or a nested
	// structured one.
	Dtype Dtype
	Shape []int // a subarray field's shape; nil for one element
	// Offset is where the field starts in a record, Size its bytes (the
	// subarray's included).
	Offset, Size int
}

// Fields returns the fields of a structured dtype, in order, with their
// offsets in a record; nil for another dtype (or a malformed one).
func (d Dtype) Fields() []Field {
	if !d.structured() {
		return nil
	}
	s, err := parseStruct(string(d))
	if err != nil {
		return nil
	}
	fields := make([]Field, len(s.Fields))
	for i, f := range s.Fields {
		fields[i] = Field{Name: f.Name, Dtype: Dtype(f.Type), Shape: f.Shape, Offset: f.Offset, Size: f.Size}
		if f.Struct != nil {
			fields[i].Dtype = Dtype(f.Struct.Repr())
		}
	}
	return fields
}

// parseStruct parses a structured dtype's descr list, a Python literal.
func parseStruct(s string) (npydescr.Struct, error) {
	return checkStruct(npydescr.ParseRepr(s))
}

// structOf parses a structured dtype's descr list, decoded.
func structOf(list []any) (npydescr.Struct, error) {
	return checkStruct(npydescr.ParseStruct(list))
}

// checkStruct returns st, or err as this package's error.
func checkStruct(st npydescr.Struct, err error) (npydescr.Struct, error) {
	switch {
	case errors.Is(err, npydescr.ErrObject):
		return st, fmt.Errorf("%w: structured dtype: %v", ErrObjectArray, err)
	case err != nil:
		return st, fmt.Errorf("%w: structured dtype: %v", ErrUnsupportedDtype, err)
	}
	return st, nil
}
