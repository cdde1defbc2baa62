package npydescr

import "testing"

// TestParse checks type strings NumPy writes and reads against their
// parsed fields and NumPy's spelling, and ones it refuses.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		s, want string
		size    int
	}{
		{"<f8", "<f8", 8}, {">i2", ">i2", 2}, {"|b1", "|b1", 1}, {"<u1", "|u1", 1}, {">i1", "|i1", 1},
		{"=f4", "<f4", 4}, {"<c16", "<c16", 16}, {">f2", ">f2", 2},
		{"<M8[ns]", "<M8[ns]", 8}, {">m8[10us]", ">m8[10us]", 8}, {"<M8", "<M8", 8}, {"<M8[μs]", "<M8[us]", 8},
		{"|S10", "|S10", 10}, {"<S3", "|S3", 3}, {"<U3", "<U3", 12}, {">U2", ">U2", 8}, {"|U1", "<U1", 4}, {"=V4", "|V4", 4},
	} {
		d, ok := Parse(c.s)
		if !ok || d.String() != c.want || d.Size() != c.size {
			t.Errorf("Parse(%q) = %+v (%q, %d bytes), %v; want %q, %d bytes", c.s, d, d.String(), d.Size(), ok, c.want, c.size)
		}
	}
	for _, s := range []string{"", "<f", "f8", "<f3", "|f8", "<i16", "<b2", "<M4", "|M8", "<M8[xs]", "<M8[ns", "<S0", "<S+1", "<i+4", "<i-4",
		"<U1048577", "<O8", "<x4", "<c4", "*f8", "<f8 "} {
		if d, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %+v, want refused", s, d)
		}
	}
}

// FuzzParse: what Parse takes, it spells so that Parse takes that
// spelling back unchanged, of the same size; it never panics.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"<f8", "|S10", "<M8[10us]", ">U2", "=i4", "<m8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := Parse(s)
		if !ok {
			return
		}
		e, ok := Parse(d.String())
		if !ok || e != d || d.Size() <= 0 {
			t.Fatalf("Parse(%q) = %+v, but Parse(%q) = %+v, %v", s, d, d.String(), e, ok)
		}
	})
}
