// Package npytime parses the units of NumPy's datetime64 and timedelta64
// types, which the npy and zarr packages both read: "[ns]" in a descr
// such as "<M8[ns]", with a scale factor ("[10us]"), "μs" for "us".
package npytime

import (
	"strconv"
	"strings"
)

// MaxScale is the largest scale factor NumPy takes.
const MaxScale = 1<<31 - 1

var units = map[string]bool{"Y": true, "M": true, "W": true, "D": true, "h": true, "m": true, "s": true,
	"ms": true, "us": true, "ns": true, "ps": true, "fs": true, "as": true}

// Unit returns u as NumPy writes it ("μs" as "us") and whether it is one
// of NumPy's units (the generic unit, which has no name in a descr, is
// not).
func Unit(u string) (string, bool) {
	u = strings.ReplaceAll(u, "μs", "us")
	return u, units[u]
}

// ParseBracket parses the bracket that follows "M8" or "m8" in a descr,
// "[ns]" or "[10us]", into its unit and scale factor (1 where none is
// written), reporting whether it is well formed.
func ParseBracket(b string) (unit string, scale int, ok bool) {
	b, ok = strings.CutPrefix(b, "[")
	if !ok {
		return "", 0, false
	}
	if b, ok = strings.CutSuffix(b, "]"); !ok {
		return "", 0, false
	}
	digits := len(b) - len(strings.TrimLeft(b, "0123456789"))
	scale = 1
	if digits > 0 {
		n, err := strconv.Atoi(b[:digits])
		if err != nil || n < 1 || n > MaxScale {
			return "", 0, false
		}
		scale = n
	}
	unit, ok = Unit(b[digits:])
	return unit, scale, ok
}
