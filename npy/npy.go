// Package npy reads and writes NumPy's .npy format (versions 1.0, 2.0 and
// 3.0) between files and GPU or host memory through kvik.
//
// Every fixed-size numeric dtype and bool is supported, little- or
// big-endian, C or Fortran order. Bytes are moved as stored: a big-endian
// array arrives big-endian (Array.Dtype.Order says so). Object, string,
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
	// ErrInvalidArgument reports a bad dtype, shape or buffer given to Save.
	ErrInvalidArgument = errors.New("npy: invalid argument")
)

// Dtype is a fixed-size element type: Kind is 'b' (bool), 'i', 'u', 'f'
// or 'c'; Size is the element size in bytes; Order is '<' (little), '>'
// (big) or '|' (not applicable, one byte).
type Dtype struct {
	Order byte
	Kind  byte
	Size  int
}

// Common dtypes, little-endian.
var (
	Bool       = Dtype{'|', 'b', 1}
	Int8       = Dtype{'|', 'i', 1}
	Uint8      = Dtype{'|', 'u', 1}
	Int16      = Dtype{'<', 'i', 2}
	Uint16     = Dtype{'<', 'u', 2}
	Int32      = Dtype{'<', 'i', 4}
	Uint32     = Dtype{'<', 'u', 4}
	Int64      = Dtype{'<', 'i', 8}
	Uint64     = Dtype{'<', 'u', 8}
	Float16    = Dtype{'<', 'f', 2}
	Float32    = Dtype{'<', 'f', 4}
	Float64    = Dtype{'<', 'f', 8}
	Complex64  = Dtype{'<', 'c', 8}
	Complex128 = Dtype{'<', 'c', 16}
)

// String returns the dtype as a NumPy descr, like "<f4".
func (d Dtype) String() string { return string(d.Order) + string(d.Kind) + strconv.Itoa(d.Size) }

// BigEndian reports whether elements are stored most significant byte first.
func (d Dtype) BigEndian() bool { return d.Order == '>' && d.Size > 1 }

// ParseDtype parses a NumPy descr string such as "<f8", ">i2" or "|b1".
func ParseDtype(s string) (Dtype, error) {
	if s == "O" || (len(s) >= 2 && s[1] == 'O') {
		return Dtype{}, fmt.Errorf("%w (descr %q)", ErrObjectArray, s)
	}
	if len(s) < 3 {
		return Dtype{}, fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	order, kind := s[0], s[1]
	size, err := strconv.Atoi(s[2:])
	if err != nil || s[2] == '+' || s[2] == '-' {
		return Dtype{}, fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	switch order {
	case '<', '>', '|':
	case '=':
		order = '<' // native; every platform kvik runs on is little-endian
	default:
		return Dtype{}, fmt.Errorf("%w: descr %q has byte order %q", ErrUnsupportedDtype, s, order)
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
		return Dtype{}, fmt.Errorf("%w: descr %q", ErrUnsupportedDtype, s)
	}
	if size == 1 {
		order = '|'
	} else if order == '|' {
		return Dtype{}, fmt.Errorf("%w: descr %q lacks a byte order", ErrUnsupportedDtype, s)
	}
	return Dtype{Order: order, Kind: kind, Size: size}, nil
}
