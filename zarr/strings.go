package zarr

import (
	"bytes"
	"encoding/binary"
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
	var sb strings.Builder
	for i := 0; i < len(b); i += t.Size {
		e := b[i : i+t.Size]
		switch t.Kind {
		case Raw:
			out = append(out, string(e))
		case Bytes:
			out = append(out, string(bytes.TrimRight(e, "\x00")))
		case Unicode:
			sb.Reset()
			for j := 0; j < len(e); j += 4 {
				r := rune(binary.LittleEndian.Uint32(e[j:]))
				if !utf8.ValidRune(r) {
					return nil, fmt.Errorf("%w: element %d of %v holds %#x, no code point", ErrCorruptChunk, i/t.Size, t, uint32(r))
				}
				sb.WriteRune(r)
			}
			out = append(out, strings.TrimRight(sb.String(), "\x00"))
		}
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
		switch {
		case t.Kind != Unicode && len(s) <= t.Size:
			copy(e, s)
		case t.Kind == Unicode && !utf8.ValidString(s):
			return orig, fmt.Errorf("%w: string %d is not UTF-8", ErrInvalidRegion, i)
		case t.Kind == Unicode && utf8.RuneCountInString(s) <= t.Size/4:
			j := 0
			for _, r := range s {
				binary.LittleEndian.PutUint32(e[j:], uint32(r))
				j += 4
			}
		default:
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
