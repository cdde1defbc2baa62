package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestTemporalTypes checks datetime64 and timedelta64: v2 type strings
// (units, scale factors, both byte orders, the generic unit, "μs") and
// v3 data_type objects parse, print back, and bad ones fail with
// ErrUnsupportedDataType; fill values (integers, "NaT") give the int64
// and render back as integers; a Delta of them is ErrUnsupportedCodec.
func TestTemporalTypes(t *testing.T) {
	for _, c := range []struct {
		s    string
		want DataType
		v2   string
	}{
		{"<M8[ns]", DataType{Kind: DateTime, Size: 8, Unit: "ns", Scale: 1}, "<M8[ns]"},
		{">m8[10us]", DataType{Kind: TimeDelta, Size: 8, Unit: "us", Scale: 10}, "<m8[10us]"},
		{"=M8[D]", DataType{Kind: DateTime, Size: 8, Unit: "D", Scale: 1}, "<M8[D]"},
		{"<M8[3μs]", DataType{Kind: DateTime, Size: 8, Unit: "us", Scale: 3}, "<M8[3us]"},
		{">m8", DataType{Kind: TimeDelta, Size: 8, Unit: "generic", Scale: 1}, "<m8"},
	} {
		dt, big, err := parseV2Type(c.s)
		if err != nil || dt != c.want || big != (c.s[0] == '>') || dt.NumPy() != c.v2 {
			t.Errorf("%s: %+v big %v %v (prints %s)", c.s, dt, big, err, dt.NumPy())
		}
	}
	for _, s := range []string{"|M8[ns]", "<M4[ns]", "<M16[ns]", "<M8[xs]", "<M8[0s]", "<M8[ns", "<M8[]", "<M8[generic]", "<M8[-5s]", "<M8[99999999999s]", "<M8ns"} {
		if _, _, err := parseV2Type(s); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%s: %v, want ErrUnsupportedDataType", s, err)
		}
	}
	for _, c := range []struct {
		doc  string
		want DataType
	}{
		{`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}}`, DataType{Kind: DateTime, Size: 8, Unit: "ns", Scale: 1}},
		{`{"name": "numpy.timedelta64", "configuration": {"unit": "μs", "scale_factor": 250}}`, DataType{Kind: TimeDelta, Size: 8, Unit: "us", Scale: 250}},
		{`{"name": "numpy.datetime64", "configuration": {"unit": "generic", "scale_factor": 1}}`, DataType{Kind: DateTime, Size: 8, Unit: "generic", Scale: 1}},
		{`"float32"`, DataType{Kind: Float, Size: 4}},
		{`{"name": "int16"}`, DataType{Kind: Int, Size: 2}},
		{`{"name": "uint8", "configuration": {}}`, DataType{Kind: Uint, Size: 1}},
	} {
		dt, err := parseV3Type(json.RawMessage(c.doc))
		if err != nil || dt != c.want {
			t.Errorf("%s: %+v %v", c.doc, dt, err)
			continue
		}
		back, _ := json.Marshal(dt.v3JSON())
		if again, err := parseV3Type(back); err != nil || again != dt {
			t.Errorf("%s prints as %s, which parses to %+v %v", c.doc, back, again, err)
		}
	}
	for _, doc := range []string{
		`{"name": "numpy.datetime64"}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "ns"}}`,
		`{"name": "numpy.datetime64", "configuration": {"scale_factor": 1}}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 0}}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 2147483648}}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1.5}}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1, "endian": "little"}}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "xs", "scale_factor": 1}}`,
		`{"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}, "extra": 1}`,
		`{"name": "float32", "configuration": {"x": 1}}`,
		`{"name": "datetime64"}`, `[1]`, `7`,
	} {
		if _, err := parseV3Type(json.RawMessage(doc)); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%s: %v, want ErrUnsupportedDataType", doc, err)
		}
	}
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dt := DataType{Kind: DateTime, Size: 8, Unit: "s", Scale: 1}
	for fill, want := range map[string]int64{`-9223372036854775808`: math.MinInt64, `"NaT"`: math.MinInt64, `1700000000`: 1700000000, `-3`: -3, `9223372036854775807`: math.MaxInt64} {
		got, err := fillBytes(dt, json.RawMessage(fill), false)
		if err != nil || int64(binary.LittleEndian.Uint64(got)) != want {
			t.Errorf("fill %s: %x %v, want %d", fill, got, err, want)
			continue
		}
		if back := fillJSON(dt, got); back != want {
			t.Errorf("fill %s renders as %v", fill, back)
		}
	}
	for _, bad := range []string{`1.5`, `"NaN"`, `"2020-01-01"`, `9223372036854775808`, `true`, `[1]`} {
		if _, err := fillBytes(dt, json.RawMessage(bad), false); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("fill %s: %v, want ErrInvalidMetadata", bad, err)
		}
	}
	if _, err := newDelta(map[string]any{"dtype": "<M8[ns]"}, dt); !errors.Is(err, ErrUnsupportedCodec) {
		t.Errorf("a Delta of datetime64: %v, want ErrUnsupportedCodec", err)
	}
	for _, bad := range []DataType{{Kind: DateTime, Size: 4, Unit: "s"}, {Kind: DateTime, Size: 8, Unit: "sec"}, {Kind: TimeDelta, Size: 8}, {Kind: DateTime, Size: 8, Unit: "s", Scale: -1}} {
		if _, err := Create(bg, s, "x", Metadata{Shape: []int{2}, ChunkShape: []int{2}, DataType: bad}); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("Create of %+v: %v, want ErrUnsupportedDataType", bad, err)
		}
	}
}

// TestTemporalRoundTrip creates datetime64 and timedelta64 arrays, v2
// and v3, little- and big-endian, compressed or not, with integer and
// "NaT" fill values (a Scale of 0 written as 1), writes random int64s
// (NaT among them) to all but one chunk, and checks the metadata
// documents (v2 dtype strings, v3 data_type objects), the values read
// back whole and in a region, the unwritten chunk's fill, and stored
// big-endian bytes (each element's reversed).
func TestTemporalRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	dir := t.TempDir()
	s, _ := NewDirStore(dir)
	big := []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "big"}}}
	for i, c := range []struct {
		m    Metadata
		want any // the stored data_type (v3) or dtype (v2)
	}{
		{Metadata{DataType: DataType{Kind: DateTime, Size: 8, Unit: "ns"}, FillValue: "NaT",
			Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}},
			map[string]any{"name": "numpy.datetime64", "configuration": map[string]any{"unit": "ns", "scale_factor": 1.0}}},
		{Metadata{DataType: DataType{Kind: TimeDelta, Size: 8, Unit: "us", Scale: 10}, FillValue: int64(-42), Codecs: big},
			map[string]any{"name": "numpy.timedelta64", "configuration": map[string]any{"unit": "us", "scale_factor": 10.0}}},
		{Metadata{ZarrFormat: 2, DataType: DataType{Kind: DateTime, Size: 8, Unit: "D"}, FillValue: 19000, BigEndian: true}, ">M8[D]"},
		{Metadata{ZarrFormat: 2, DataType: DataType{Kind: TimeDelta, Size: 8, Unit: "μs", Scale: 3}, FillValue: "NaT",
			Compressor: &Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}}, "<m8[3us]"},
	} {
		m := c.m
		m.Shape, m.ChunkShape = []int{40, 30}, []int{16, 16}
		name := string(rune('a' + i))
		a, err := Create(bg, s, name, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		docName := map[int]string{2: ".zarray", 3: "zarr.json"}[a.Metadata().ZarrFormat]
		doc, err := os.ReadFile(filepath.Join(dir, name, docName))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatal(err)
		}
		if got := v[map[int]string{2: "dtype", 3: "data_type"}[a.Metadata().ZarrFormat]]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s has type %v, want %v", name, docName, got, c.want)
		}
		n := 40 * 30
		want := make([]byte, 8*n)
		for j := range n {
			v := int64(rng.Uint64())
			if rng.IntN(40) == 0 {
				v = math.MinInt64
			}
			binary.LittleEndian.PutUint64(want[8*j:], uint64(v))
		}
		fill, err := fillBytes(a.Metadata().DataType, mustJSON(t, a.Metadata().FillValue), true)
		if err != nil {
			t.Fatal(err)
		}
		wantFill := map[bool]int64{true: math.MinInt64}[m.FillValue == "NaT"]
		if n, ok := m.FillValue.(int64); ok {
			wantFill = n
		} else if n, ok := m.FillValue.(int); ok {
			wantFill = int64(n)
		}
		if got := int64(binary.LittleEndian.Uint64(fill)); got != wantFill {
			t.Fatalf("%s: fill %v read back as %d", name, m.FillValue, got)
		}
		for r := 32; r < 40; r++ {
			for c := 16; c < 30; c++ {
				copy(want[(r*30+c)*8:], fill)
			}
		}
		whole := model{shape: []int{40, 30}, es: 8, buf: want}
		if err := a.WriteRegion(bg, []int{0, 0}, []int{32, 30}, want[:32*30*8]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := a.WriteRegion(bg, []int{32, 0}, []int{40, 16}, whole.region([]int{32, 0}, []int{40, 16})); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := Open(bg, s, name)
		if err != nil {
			t.Fatal(err)
		}
		if b.DataType() != a.DataType() || b.DataType().Unit != strings.ReplaceAll(m.DataType.Unit, "μs", "us") || b.DataType().Scale != max(m.DataType.Scale, 1) {
			t.Fatalf("%s: reopened as %+v, created %+v", name, b.DataType(), a.DataType())
		}
		got := make([]byte, len(want))
		if err := b.ReadRegion(bg, []int{0, 0}, []int{40, 30}, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back other values (%v)", name, err)
		}
		start, stop := []int{3, 7}, []int{37, 29}
		part := make([]byte, len(whole.region(start, stop)))
		if err := b.ReadRegion(bg, start, stop, part); err != nil || !bytes.Equal(part, whole.region(start, stop)) {
			t.Fatalf("%s: region read back other values (%v)", name, err)
		}
		if a.Metadata().Compressor == nil && (m.BigEndian || len(m.Codecs) == 1) { // stored as is, big-endian
			key := map[int]string{2: "/0.0", 3: "/c/0/0"}[a.Metadata().ZarrFormat]
			raw, err := s.Get(bg, name+key, nil)
			if err != nil {
				t.Fatal(err)
			}
			if binary.BigEndian.Uint64(raw) != binary.LittleEndian.Uint64(want) {
				t.Fatalf("%s: stored element 0 is %x, want %x big-endian", name, raw[:8], want[:8])
			}
		}
	}
}
