package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Strings returns the elements of b, elements of the string type t as a
// region read returns them, as Go strings: a Bytes element without its
// trailing NULs and a Unicode element's code points without its
// trailing NUL ones (as NumPy reads them; NULs inside stay), a Raw
// element whole. A Unicode element holding a value that is no code
// point fails with ErrCorruptChunk; a type that is no string type with
// ErrUnsupportedDataType.
func (t DataType) Strings(b []byte) ([]string, error) {
	if err := t.checkStrings(len(b)); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(b)/t.Size)
	for i := 0; i < len(b); i += t.Size {
		str, bad, ok := t.elementString(b[i : i+t.Size])
		if !ok {
			return nil, fmt.Errorf("%w: element %d of %v holds %#x, no code point", ErrCorruptChunk, i/t.Size, t, bad)
		}
		out = append(out, str)
	}
	return out, nil
}

// AppendStrings appends ss to dst as elements of the string type t, for
// a region write: each padded with NULs to t.Size bytes, a Unicode one
// as UTF-32 code points, little-endian. A string longer than an element
// (in bytes, or code points for Unicode) or, for Unicode, not valid
// UTF-8 fails with ErrInvalidRegion, dst as it was; a type that is no
// string type with ErrUnsupportedDataType.
func (t DataType) AppendStrings(dst []byte, ss ...string) ([]byte, error) {
	if err := t.checkStrings(0); err != nil {
		return dst, err
	}
	orig := dst
	for i, s := range ss {
		e := make([]byte, t.Size)
		switch err := t.putString(e, s); {
		case errors.Is(err, errNotUTF8):
			return orig, fmt.Errorf("%w: string %d is not UTF-8", ErrInvalidRegion, i)
		case err != nil:
			return orig, fmt.Errorf("%w: string %d (%d bytes) does not fit a %v element", ErrInvalidRegion, i, len(s), t)
		}
		dst = append(dst, e...)
	}
	return dst, nil
}

// checkStrings reports a t that is no string type, or n bytes that are
// no whole number of its elements.
func (t DataType) checkStrings(n int) error {
	if !t.isString() || t.check() != nil {
		return fmt.Errorf("%w: %v holds no strings", ErrUnsupportedDataType, t)
	}
	if n%t.Size != 0 {
		return fmt.Errorf("%w: %d bytes are no whole number of %d-byte %v elements", ErrInvalidRegion, n, t.Size, t)
	}
	return nil
}

// Why putString cannot store a string.
var (
	errNotUTF8 = errors.New("not UTF-8")
	errTooLong = errors.New("longer than an element")
)

// putString writes s into e, one zeroed element of the string type t:
// its bytes, or for Unicode its code points as little-endian uint32s,
// the rest left NUL. It fails with errTooLong where s has more bytes
// (code points, for Unicode) than the element holds, and for Unicode
// with errNotUTF8 where s is not UTF-8.
func (t DataType) putString(e []byte, s string) error {
	if t.Kind != Unicode {
		if len(s) > len(e) {
			return errTooLong
		}
		copy(e, s)
		return nil
	}
	if !utf8.ValidString(s) {
		return errNotUTF8
	}
	if utf8.RuneCountInString(s) > len(e)/4 {
		return errTooLong
	}
	i := 0
	for _, r := range s {
		binary.LittleEndian.PutUint32(e[i:], uint32(r))
		i += 4
	}
	return nil
}

// elementString returns e, one element of the string type t, as NumPy
// reads it: a Bytes or Unicode element without its trailing NULs (NULs
// inside stay), a Raw element whole. A Unicode value that is no code
// point is written as U+FFFD, and the first is returned as bad with ok
// false.
func (t DataType) elementString(e []byte) (s string, bad uint32, ok bool) {
	switch t.Kind {
	case Raw:
		return string(e), 0, true
	case Bytes:
		return string(bytes.TrimRight(e, "\x00")), 0, true
	}
	var sb strings.Builder
	ok = true
	for j := 0; j+4 <= len(e); j += 4 {
		u := binary.LittleEndian.Uint32(e[j:])
		if r := rune(u); !utf8.ValidRune(r) && ok {
			bad, ok = u, false
		}
		sb.WriteRune(rune(u))
	}
	return strings.TrimRight(sb.String(), "\x00"), bad, ok
}
