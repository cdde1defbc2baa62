// Package npy reads and writes NumPy's .npy format (versions 1.0, 2.0 and
// 3.0) between files and GPU or host memory through kvik.
//
// Every fixed-size numeric dtype and bool is supported, little- or
// big-endian, C or Fortran order. Bytes are moved as stored: a big-endian
// array arrives big-endian (Array.Dtype.Order() says so). Object, string,
// structured and other variable dtypes are errors matching
// ErrUnsupportedDtype (ErrObjectArray for object arrays).
package npy

import (
	"errors"
	"fmt"
	"strconv"
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
// types), a kind ('b' bool, 'i', 'u', 'f' or 'c') and the element size in
// bytes, like "<f4".
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

// Kind returns 'b' (bool), 'i', 'u', 'f' or 'c'; 0 for a malformed dtype.
func (d Dtype) Kind() byte {
	if len(d) < 3 {
		return 0
	}
	return d[1]
}

// Size returns the element size in bytes, or 0 for a malformed dtype.
func (d Dtype) Size() int {
	if len(d) < 3 {
		return 0
	}
	n, err := strconv.Atoi(string(d[2:]))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Valid reports whether d is a dtype this package reads and writes, in
// the spelling ParseDtype returns.
func (d Dtype) Valid() bool {
	p, err := ParseDtype(string(d))
	return err == nil && p == d
}

// BigEndian reports whether elements are stored most significant byte first.
func (d Dtype) BigEndian() bool { return d.Order() == '>' && d.Size() > 1 }

// MakeDtype returns the dtype of the given byte order, kind and size, as
// ParseDtype returns it (order '|' for one byte, '=' as '<'), or an error
// matching ErrUnsupportedDtype.
func MakeDtype(order, kind byte, size int) (Dtype, error) {
	return ParseDtype(string(order) + string(kind) + strconv.Itoa(size))
}

// ParseDtype parses a NumPy descr string such as "<f8", ">i2" or "|b1".
func ParseDtype(s string) (Dtype, error) {
	if s == "O" || (len(s) >= 2 && s[1] == 'O') {
		return "", fmt.Errorf("%w (descr %q)", ErrObjectArray, s)
	}
	if len(s) < 3 {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	order, kind := s[0], s[1]
	size, err := strconv.Atoi(s[2:])
	if err != nil || s[2] == '+' || s[2] == '-' {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
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
	}
	if !ok {
		return "", fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	if size == 1 {
		order = '|'
	} else if order == '|' {
		return "", fmt.Errorf("%w: descr %q lacks a byte order", ErrUnsupportedDtype, s)
	}
	return Dtype(string(order) + string(kind) + strconv.Itoa(size)), nil
}
