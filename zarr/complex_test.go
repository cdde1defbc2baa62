package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestComplexTypes checks complex64 and complex128: their v3 names and
// v2 type strings (both byte orders) parse and print back; fill values
// [re, im] (numbers, "NaN", "Infinity", "-Infinity", "0x" bit patterns)
// and a lone real part give the parts as written and render back; bad
// ones fail with ErrInvalidMetadata; a Delta of complex numbers is
// ErrUnsupportedCodec.
func TestComplexTypes(t *testing.T) {
	for name, want := range map[string]DataType{"complex64": {Kind: Complex, Size: 8}, "complex128": {Kind: Complex, Size: 16}} {
		got, err := ParseDataType(name)
		if err != nil || got != want || got.Name() != name {
			t.Errorf("%s: %v %v (%s)", name, got, err, got.Name())
		}
	}
	for _, s := range []string{"<c8", ">c8", "<c16", ">c16"} {
		dt, big, err := parseV2Type(s)
		if err != nil || dt.Kind != Complex || big != (s[0] == '>') || dt.NumPy() != "<"+s[1:] {
			t.Errorf("%s: %v big %v %v", s, dt, big, err)
		}
	}
	for _, s := range []string{"<c4", "<c32", "|c8"} {
		if _, _, err := parseV2Type(s); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%s: %v, want ErrUnsupportedDataType", s, err)
		}
	}
	c64, c128 := DataType{Kind: Complex, Size: 8}, DataType{Kind: Complex, Size: 16}
	f32 := func(re, im float32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(re)), math.Float32bits(im))
	}
	f64 := func(re, im float64) []byte {
		return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(re)), math.Float64bits(im))
	}
	for _, c := range []struct {
		dt   DataType
		fill string
		want []byte
	}{
		{c64, `[1.5, -2]`, f32(1.5, -2)},
		{c64, `["NaN", "Infinity"]`, f32(float32(math.NaN()), float32(math.Inf(1)))},
		{c64, `["0x3fc00000", "-Infinity"]`, f32(1.5, float32(math.Inf(-1)))},
		{c64, `2.25`, f32(2.25, 0)},
		{c128, `[1e300, -0.5]`, f64(1e300, -0.5)},
		{c128, `["0x7ff8000000000001", 0]`, binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 0x7ff8000000000001), 0)},
	} {
		got, err := fillBytes(c.dt, json.RawMessage(c.fill), false)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%v fill %s: %x %v, want %x", c.dt, c.fill, got, err, c.want)
			continue
		}
		back, _ := json.Marshal(fillJSON(c.dt, got))
		again, err := fillBytes(c.dt, back, false)
		if err != nil || !bytes.Equal(again, got) && !(c.fill == `["0x7ff8000000000001", 0]`) {
			t.Errorf("%v fill %s renders as %s, which parses to %x (%v)", c.dt, c.fill, back, again, err)
		}
	}
	for _, bad := range []string{`[1]`, `[1, 2, 3]`, `["x", 1]`, `[1, true]`, `true`, `{"re": 1}`, `["0x3fc0", 0]`} {
		if _, err := fillBytes(c64, json.RawMessage(bad), false); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("fill %s: %v, want ErrInvalidMetadata", bad, err)
		}
	}
	if got, err := fillBytes(c128, json.RawMessage(`null`), true); err != nil || !bytes.Equal(got, make([]byte, 16)) {
		t.Errorf("v2 null fill: %x %v", got, err)
	}
	if _, err := newDelta(map[string]any{"dtype": "<c8"}, c64); !errors.Is(err, ErrUnsupportedCodec) {
		t.Errorf("a Delta of complex64: %v, want ErrUnsupportedCodec", err)
	}
}

// TestComplexRoundTrip writes random complex arrays (NaN and infinite
// parts among them) in v3 with the bytes codec big-endian and a codec
// after it, and in v2 stored big-endian with Blosc over 16-byte
// elements, reads them back whole and in a region, and reads a chunk
// never written as the [re, im] fill value (one given as a Go
// complex128). Big-endian storage must
// reverse each part's bytes, not the element's: the stored bytes are
// checked against that.
func TestComplexRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	s, _ := NewDirStore(t.TempDir())
	for i, m := range []Metadata{
		{Shape: []int{40, 30}, ChunkShape: []int{16, 16}, DataType: DataType{Kind: Complex, Size: 8}, FillValue: []any{"NaN", 1.5},
			Codecs: []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "big"}}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}},
		{Shape: []int{40, 30}, ChunkShape: []int{16, 16}, DataType: DataType{Kind: Complex, Size: 16}, FillValue: []any{-1.25, "Infinity"}, BigEndian: true, ZarrFormat: 2,
			Compressor: &Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}},
		{Shape: []int{40, 30}, ChunkShape: []int{16, 16}, DataType: DataType{Kind: Complex, Size: 8}, FillValue: complex(math.Inf(1), -2), BigEndian: true, ZarrFormat: 2},
	} {
		name := string(rune('a' + i))
		a, err := Create(bg, s, name, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		half := m.DataType.Size / 2
		n := 40 * 30
		want := make([]byte, n*m.DataType.Size)
		for j := range 2 * n {
			f := rng.NormFloat64() * 1e3
			switch rng.IntN(50) {
			case 0:
				f = math.NaN()
			case 1:
				f = math.Inf(1 - 2*rng.IntN(2))
			}
			putFloat(want[j*half:(j+1)*half], f)
		}
		// Rows 32-39, columns 16-29 stay unwritten: one chunk, the fill.
		fill, _ := fillBytes(m.DataType, mustJSON(t, a.Metadata().FillValue), true)
		if c, ok := m.FillValue.(complex128); ok {
			re, im := math.Float32frombits(binary.LittleEndian.Uint32(fill)), math.Float32frombits(binary.LittleEndian.Uint32(fill[4:]))
			if complex(float64(re), float64(im)) != c {
				t.Fatalf("%s: fill %v is %v + %vi", name, c, re, im)
			}
		}
		for r := 32; r < 40; r++ {
			for c := 16; c < 30; c++ {
				copy(want[(r*30+c)*m.DataType.Size:], fill)
			}
		}
		top := want[:32*30*m.DataType.Size]
		if err := a.WriteRegion(bg, []int{0, 0}, []int{32, 30}, top); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := a.WriteRegion(bg, []int{32, 0}, []int{40, 16}, model{shape: []int{40, 30}, es: m.DataType.Size, buf: want}.region([]int{32, 0}, []int{40, 16})); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]byte, len(want))
		if err := a.ReadRegion(bg, []int{0, 0}, []int{40, 30}, got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ok, why := sameValues(m.DataType, got, want); !ok {
			t.Fatalf("%s: %s", name, why)
		}
		start, stop := []int{3, 7}, []int{37, 29}
		part := make([]byte, len(model{shape: []int{40, 30}, es: m.DataType.Size, buf: want}.region(start, stop)))
		if err := a.ReadRegion(bg, start, stop, part); err != nil {
			t.Fatalf("%s region: %v", name, err)
		}
		if ok, why := sameValues(m.DataType, part, model{shape: []int{40, 30}, es: m.DataType.Size, buf: want}.region(start, stop)); !ok {
			t.Fatalf("%s region: %s", name, why)
		}
		if m.Compressor == nil && m.ZarrFormat == 2 { // stored as is: each part's bytes reversed
			raw, err := s.Get(bg, name+"/0.0", nil)
			if err != nil {
				t.Fatal(err)
			}
			first := want[:m.DataType.Size]
			for p := 0; p < 2; p++ {
				for b := range half {
					if raw[p*half+b] != first[p*half+half-1-b] {
						t.Fatalf("%s: stored element 0 is %x, want each part of %x byte-reversed", name, raw[:m.DataType.Size], first)
					}
				}
			}
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
