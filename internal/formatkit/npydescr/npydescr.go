// Package npydescr parses NumPy's type strings (a descr: "<f8", "|b1",
// "<M8[ns]", "|S10", "<U3"), which the npy and zarr packages both read,
// each into types and errors of its own.
package npydescr

import (
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/npytime"
)

// MaxString bounds the bytes of an S or V element and the code points of
// a U one.
const MaxString = 1 << 20

// Descr is a parsed type string, in NumPy's spelling.
type Descr struct {
	// Order is '<', '>' or '|': '=' (native) reads as '<', and one-byte
	// elements, S and V have '|'.
	Order byte
	// Kind is 'b', 'i', 'u', 'f', 'c', 'M' (datetime64), 'm'
	// (timedelta64), 'S', 'U' or 'V'.
	Kind byte
	// N is the number the string gives: bytes, or a U element's code
	// points.
	N int
	// Unit and Scale are a datetime64's or timedelta64's: NumPy's unit
	// name and its factor ("[10us]": "us", 10); "" and 1 for the
	// generic unit.
	Unit  string
	Scale int
}

// Size returns an element's size in bytes.
func (d Descr) Size() int {
	if d.Kind == 'U' {
		return 4 * d.N
	}
	return d.N
}

// String returns d as NumPy writes it.
func (d Descr) String() string {
	s := string(d.Order) + string(d.Kind) + strconv.Itoa(d.N)
	switch {
	case d.Unit == "":
	case d.Scale == 1:
		s += "[" + d.Unit + "]"
	default:
		s += "[" + strconv.Itoa(d.Scale) + d.Unit + "]"
	}
	return s
}

// Parse parses s, reporting whether it is a type string of a kind above,
// of a size NumPy has (strings of 1 to MaxString), with a byte order
// where its size needs one.
func Parse(s string) (Descr, bool) {
	if len(s) < 3 || !strings.ContainsRune("<>|=", rune(s[0])) {
		return Descr{}, false
	}
	d := Descr{Order: s[0], Kind: s[1], Scale: 1}
	rest := s[2:]
	if d.Kind == 'M' || d.Kind == 'm' {
		if i := strings.IndexByte(rest, '['); i >= 0 {
			var ok bool
			if d.Unit, d.Scale, ok = npytime.ParseBracket(rest[i:]); !ok {
				return Descr{}, false
			}
			rest = rest[:i]
		}
	}
	n, err := strconv.Atoi(rest)
	if err != nil || rest[0] == '+' || rest[0] == '-' {
		return Descr{}, false
	}
	d.N = n
	if d.Order == '=' {
		d.Order = '<' // native; every platform kvik runs on is little-endian
	}
	switch d.Kind {
	case 'S', 'V':
		d.Order = '|'
		return d, n >= 1 && n <= MaxString
	case 'U':
		if d.Order == '|' {
			d.Order = '<'
		}
		return d, n >= 1 && n <= MaxString
	}
	ok := false
	switch d.Kind {
	case 'b':
		ok = n == 1
	case 'i', 'u':
		ok = n == 1 || n == 2 || n == 4 || n == 8
	case 'f':
		ok = n == 2 || n == 4 || n == 8
	case 'c':
		ok = n == 8 || n == 16
	case 'M', 'm':
		ok = n == 8
	}
	switch {
	case !ok:
		return Descr{}, false
	case n == 1:
		d.Order = '|'
	case d.Order == '|':
		return Descr{}, false // a size that needs a byte order
	}
	return d, true
}
