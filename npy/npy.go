// Package npy reads and writes NumPy's .npy format (versions 1.0, 2.0 and
// 3.0) between files and GPU or host memory through kvik.
//
// Every fixed-size numeric dtype and bool is supported, and datetime64
// and timedelta64 (int64s), little- or big-endian, C or Fortran order. Bytes are moved as stored: a big-endian
// array arrives big-endian (Array.Dtype.Order() says so). Object, string,
// structured and other variable dtypes are errors matching
// ErrUnsupportedDtype (ErrObjectArray for object arrays).
package npy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/npytime"
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
	if len(d) < 3 {
		return 0
	}
	return d[0]
}

// Kind returns 'b' (bool), 'i', 'u', 'f', 'c', 'M' (datetime64) or 'm'
// (timedelta64); 0 for a malformed dtype.
func (d Dtype) Kind() byte {
	if len(d) < 3 {
		return 0
	}
	return d[1]
}

// Size returns the element size in bytes (a U string's code points
// times 4), or 0 for a malformed dtype.
func (d Dtype) Size() int {
	if len(d) < 3 {
		return 0
	}
	size, _, _ := strings.Cut(string(d[2:]), "[") // a unit follows
	n, err := strconv.Atoi(size)
	if err != nil || n < 0 || n > maxStringSize {
		return 0
	}
	if d.Kind() == 'U' {
		return 4 * n
	}
	return n
}

// maxStringSize bounds the size of an S or V dtype and the code points
// of a U one.
const maxStringSize = 1 << 20

// parseTimeUnit checks the unit of a datetime64 or timedelta64 descr,
// "[ns]", "[10us]" or "" (generic), and returns it as NumPy writes it.
func parseTimeUnit(u string) (string, bool) {
	if u == "" {
		return "", true
	}
	unit, scale, ok := npytime.ParseBracket(u)
	switch {
	case !ok:
		return "", false
	case scale == 1:
		return "[" + unit + "]", true
	}
	return "[" + strconv.Itoa(scale) + unit + "]", true
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

// parseString checks a fixed-length string descr of kind S (bytes), U
// (UTF-32 code points, in the order given) or V (raw bytes) and size
// (code points for U) and returns it as NumPy writes it: "|S5", "<U3".
func parseString(s string, order, kind byte, size int) (Dtype, error) {
	if size < 1 || size > maxStringSize || !strings.ContainsRune("<>|=", rune(order)) {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	switch {
	case kind != 'U':
		order = '|'
	case order != '>':
		order = '<'
	}
	return Dtype(string(order) + string(kind) + strconv.Itoa(size)), nil
}

// ParseDtype parses a NumPy descr string such as "<f8", ">i2", "|b1",
// "<M8[ns]", "|S10" or "<U3".
func ParseDtype(s string) (Dtype, error) {
	if s == "O" || (len(s) >= 2 && s[1] == 'O') {
		return "", fmt.Errorf("%w (descr %q)", ErrObjectArray, s)
	}
	if len(s) < 3 {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	order, kind := s[0], s[1]
	rest, unit := s[2:], ""
	if kind == 'M' || kind == 'm' {
		if i := strings.IndexByte(rest, '['); i >= 0 {
			rest, unit = rest[:i], rest[i:]
		}
		var ok bool
		if unit, ok = parseTimeUnit(unit); !ok {
			return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
		}
	}
	size, err := strconv.Atoi(rest)
	if err != nil || rest == "" || rest[0] == '+' || rest[0] == '-' {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	if kind == 'S' || kind == 'U' || kind == 'V' {
		return parseString(s, order, kind, size)
	}
	switch order {
	case '<', '>', '|':
	case '=':
		order = '<' // native; every platform kvik runs on is little-endian
	default:
		return "", fmt.Errorf("%w: descr %q has byte order %q", ErrUnsupportedDtype, s, order)
	}
	ok := false
	switch kind {
	case 'b':
		ok = size == 1
	case 'i', 'u':
		ok = size == 1 || size == 2 || size == 4 || size == 8
	case 'f':
		ok = size == 2 || size == 4 || size == 8
	case 'c':
		ok = size == 8 || size == 16
	case 'M', 'm':
		ok = size == 8
	}
	if !ok {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	if size == 1 {
		order = '|'
	} else if order == '|' {
		return "", fmt.Errorf("%w: descr %q lacks a byte order", ErrUnsupportedDtype, s)
	}
	return Dtype(string(order) + string(kind) + strconv.Itoa(size) + unit), nil
}
