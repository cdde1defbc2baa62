package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Binary and decimal size units.
const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
	tiB = 1 << 40
)

// sizeUnits maps a lower-case size suffix to its multiplier: the binary
// units (KiB, MiB, GiB, TiB) and their one-letter forms (k, M, G, T) are
// powers of 1024, the SI forms (KB, MB, GB, TB) powers of 1000.
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": kiB, "kib": kiB, "kb": 1e3,
	"m": miB, "mib": miB, "mb": 1e6,
	"g": giB, "gib": giB, "gb": 1e9,
	"t": tiB, "tib": tiB, "tb": 1e12,
}

// parseSize parses a byte count such as "4096", "4k", "256MiB", "1.5G" or
// "2GB". Units are case-insensitive; see sizeUnits.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && !isNumChar(t[i-1]) {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if !ok || num == "" || strings.Count(num, ".") > 1 || strings.Trim(num, "0123456789.") != "" {
		return 0, fmt.Errorf("invalid size %q (want a number with an optional unit: k, M, G, KiB, MiB, GiB, KB, MB, GB)", s)
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil && mult == 1 {
		if n < 0 {
			return 0, fmt.Errorf("invalid size %q: negative", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	v := math.Round(f * mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return int64(v), nil
}

func isNumChar(c byte) bool { return c >= '0' && c <= '9' || c == '.' }

// formatSize renders n bytes with a binary unit: "256 MiB", "1.5 GiB",
// "4096 B".
func formatSize(n int64) string {
	units := []struct {
		name string
		v    int64
	}{{"TiB", tiB}, {"GiB", giB}, {"MiB", miB}, {"KiB", kiB}}
	for _, u := range units {
		if n >= u.v {
			x := math.Round(float64(n)/float64(u.v)*100) / 100
			return strconv.FormatFloat(x, 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}

// parseIntList parses a comma-separated list of positive integers, such
// as "1,4,16", dropping repeats and keeping the order.
func parseIntList(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("invalid list %q: %q is not a positive integer", s, f)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// sizeFlag is a flag.Value holding a byte count parsed by parseSize; set
// reports whether the flag was given.
type sizeFlag struct {
	n   int64
	set bool
}

func (f *sizeFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return formatSize(f.n)
}

func (f *sizeFlag) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	f.n, f.set = n, true
	return nil
}

// optBool is a boolean flag that also knows whether it was given, for
// settings whose default belongs to the library.
type optBool struct {
	v, set bool
}

func (b *optBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.v)
}

func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("invalid boolean %q", s)
	}
	b.v, b.set = v, true
	return nil
}

// IsBoolFlag lets the flag appear without a value (--direct).
func (b *optBool) IsBoolFlag() bool { return true }

// gbps returns bytes per second in GB/s (10^9 bytes).
func gbps(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / seconds / 1e9
}

// shortenTried replaces the list of paths in a library load error,
// "cannot load libcufile.so.0 (tried a: ...; b: ...)", with a pointer to
// --json, which keeps the full text, so that the message fits a line.
func shortenTried(s string) string {
	i := strings.Index(s, " (tried ")
	if i < 0 {
		return s
	}
	depth := 0
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return s[:i] + " (not found)" + shortenTried(s[j+1:])
			}
		}
	}
	return s[:i] + " (not found)"
}

// count writes n with unit, in the plural unless n is 1: "1 tensor",
// "3 tensors", "0 bytes".
func count[T ~int | ~int64](n T, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.FormatInt(int64(n), 10) + " " + unit + "s"
}
