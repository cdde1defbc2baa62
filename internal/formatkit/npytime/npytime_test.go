package npytime

import "testing"

// TestParseBracket checks units, scale factors and "μs", and refuses
// malformed brackets, unknown units and scales out of NumPy's range.
func TestParseBracket(t *testing.T) {
	for b, want := range map[string]struct {
		unit  string
		scale int
	}{"[ns]": {"ns", 1}, "[10us]": {"us", 10}, "[3μs]": {"us", 3}, "[1D]": {"D", 1}, "[2147483647as]": {"as", MaxScale}} {
		unit, scale, ok := ParseBracket(b)
		if !ok || unit != want.unit || scale != want.scale {
			t.Errorf("%s: %q %d %v, want %q %d", b, unit, scale, ok, want.unit, want.scale)
		}
	}
	for _, b := range []string{"", "ns", "[ns", "ns]", "[]", "[0s]", "[-1s]", "[2147483648s]", "[xs]", "[generic]", "[10]"} {
		if _, _, ok := ParseBracket(b); ok {
			t.Errorf("%q parsed", b)
		}
	}
}
