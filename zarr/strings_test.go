package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// utf32 returns s as NUL-padded little-endian UTF-32 of size bytes.
func utf32(s string, size int) []byte {
	b := make([]byte, size)
	i := 0
	for _, r := range s {
		binary.LittleEndian.PutUint32(b[i:], uint32(r))
		i += 4
	}
	return b
}

// TestStringTypes checks the fixed-length string kinds' v2 dtypes and v3
// data types both ways (NumPy counts a U's code points, Zarr v3 its
// bytes), and refuses what is no such type with ErrUnsupportedDataType.
func TestStringTypes(t *testing.T) {
	for _, c := range []struct {
		v2    string
		want  DataType
		big   bool
		numpy string
		str   string
	}{
		{"|S3", DataType{Kind: Bytes, Size: 3}, false, "|S3", "null_terminated_bytes[3]"},
		{"<S1", DataType{Kind: Bytes, Size: 1}, false, "|S1", "null_terminated_bytes[1]"},
		{"<U6", DataType{Kind: Unicode, Size: 24}, false, "<U6", "fixed_length_utf32[24]"},
		{">U2", DataType{Kind: Unicode, Size: 8}, true, "<U2", "fixed_length_utf32[8]"},
		{"=U1", DataType{Kind: Unicode, Size: 4}, false, "<U1", "fixed_length_utf32[4]"},
		{"|V5", DataType{Kind: Raw, Size: 5}, false, "|V5", "raw_bytes[5]"},
	} {
		got, big, err := parseV2Type(c.v2)
		if err != nil || got != c.want || big != c.big {
			t.Errorf("parseV2Type(%q) = %+v, %v, %v; want %+v, %v", c.v2, got, big, err, c.want, c.big)
			continue
		}
		if got.NumPy() != c.numpy || got.String() != c.str || got.check() != nil {
			t.Errorf("%q: NumPy %q, String %q, check %v", c.v2, got.NumPy(), got.String(), got.check())
		}
		doc, err := json.Marshal(got.v3JSON())
		if err != nil {
			t.Fatal(err)
		}
		if back, err := parseV3Type(doc); err != nil || back != got {
			t.Errorf("%s: v3 %s read back as %+v, %v", c.v2, doc, back, err)
		}
	}
	for _, s := range []string{"|S0", "<U0", "|S-1", "<U+3", "|S+3", "<U300000", "|S2000000", "|Sx", "|S", "|Z3"} {
		if _, _, err := parseV2Type(s); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("parseV2Type(%q): %v, want ErrUnsupportedDataType", s, err)
		}
	}
	for doc, want := range map[string]DataType{
		`"r24"`: {Kind: Raw, Size: 3}, `"r8"`: {Kind: Raw, Size: 1},
		`{"name": "fixed_length_utf32", "configuration": {"length_bytes": 12}}`:   {Kind: Unicode, Size: 12},
		`{"name": "null_terminated_bytes", "configuration": {"length_bytes": 7}}`: {Kind: Bytes, Size: 7},
		`{"name": "raw_bytes", "configuration": {"length_bytes": 2}}`:             {Kind: Raw, Size: 2},
	} {
		if got, err := parseV3Type(json.RawMessage(doc)); err != nil || got != want {
			t.Errorf("parseV3Type(%s) = %+v, %v; want %+v", doc, got, err, want)
		}
	}
	for _, doc := range []string{`"r0"`, `"r7"`, `"r08"`, `"r"`, `"r-8"`, `"r+8"`, `"r8388616"`, `"fixed_length_utf32"`,
		`{"name": "fixed_length_utf32", "configuration": {"length_bytes": 13}}`,
		`{"name": "null_terminated_bytes", "configuration": {"length_bytes": 0}}`,
		`{"name": "raw_bytes", "configuration": {"length_bytes": -2}}`,
		`{"name": "raw_bytes", "configuration": {"length_bytes": 1e30}}`,
		`{"name": "raw_bytes", "configuration": {"length_bytes": 2097152}}`,
		`{"name": "raw_bytes", "configuration": {}}`,
		`{"name": "raw_bytes"}`,
		`{"name": "raw_bytes", "configuration": {"length_bytes": 2, "x": 1}}`,
	} {
		if _, err := parseV3Type(json.RawMessage(doc)); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("parseV3Type(%s): %v, want ErrUnsupportedDataType", doc, err)
		}
	}
	for _, dt := range []DataType{{Kind: Bytes}, {Kind: Unicode, Size: 6}, {Kind: Raw, Size: maxStringSize + 1}, {Kind: Bytes, Size: 3, Unit: "ns"}} {
		if err := dt.check(); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%+v: check %v", dt, err)
		}
	}
}

// TestStringFills checks the string kinds' fill values: base64 for
// bytes (at most the type's size, NUL-padded), a string of at most its
// code points for Unicode (a number as its digits, as zarr-python 2
// writes 0 for a U array made without one), and what they print as.
func TestStringFills(t *testing.T) {
	for _, c := range []struct {
		t    DataType
		raw  string
		want []byte // nil: an error
		back any
	}{
		{DataType{Kind: Bytes, Size: 3}, `"eno="`, []byte("zz\x00"), "eno="},
		{DataType{Kind: Bytes, Size: 2}, `"eno="`, []byte("zz"), "eno="},
		{DataType{Kind: Bytes, Size: 3}, `""`, []byte{0, 0, 0}, ""},
		{DataType{Kind: Bytes, Size: 3}, `"MA=="`, []byte("0\x00\x00"), "MA=="},
		{DataType{Kind: Bytes, Size: 1}, `"eno="`, nil, nil},
		{DataType{Kind: Bytes, Size: 3}, `"e"`, nil, nil},
		{DataType{Kind: Bytes, Size: 3}, `0`, nil, nil},
		{DataType{Kind: Raw, Size: 3}, `"AQI="`, []byte{1, 2, 0}, "AQIA"},
		{DataType{Kind: Raw, Size: 2}, `[1, 2]`, nil, nil},
		{DataType{Kind: Unicode, Size: 12}, `"héé"`, utf32("héé", 12), "héé"},
		{DataType{Kind: Unicode, Size: 16}, `"𝄞a"`, utf32("𝄞a", 16), "𝄞a"},
		{DataType{Kind: Unicode, Size: 8}, `"héé"`, nil, nil},
		{DataType{Kind: Unicode, Size: 8}, `0`, utf32("0", 8), "0"},
		{DataType{Kind: Unicode, Size: 8}, `12`, utf32("12", 8), "12"},
		{DataType{Kind: Unicode, Size: 8}, `true`, nil, nil},
	} {
		got, err := fillBytes(c.t, json.RawMessage(c.raw), false)
		if c.want == nil {
			if !errors.Is(err, ErrInvalidMetadata) {
				t.Errorf("%v fill %s: %v, want ErrInvalidMetadata", c.t, c.raw, err)
			}
			continue
		}
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%v fill %s: %q, %v; want %q", c.t, c.raw, got, err, c.want)
			continue
		}
		if back := fillJSON(c.t, got); back != c.back {
			t.Errorf("%v fill %s prints as %v, want %v", c.t, c.raw, back, c.back)
		}
	}
	if got, err := fillBytes(DataType{Kind: Unicode, Size: 8}, json.RawMessage("null"), true); err != nil || !bytes.Equal(got, make([]byte, 8)) {
		t.Errorf("v2 null fill: %q, %v", got, err)
	}
}

// stringValues returns n random elements of t: any bytes for Bytes and
// Raw, code points of every plane (no surrogates) for Unicode, some
// shorter than the type, padded with NULs.
func stringValues(rng *rand.Rand, t DataType, n int) []byte {
	b := make([]byte, n*t.Size)
	for i := range n {
		e := b[i*t.Size : (i+1)*t.Size]
		k := rng.IntN(len(e) + 1)
		if t.Kind != Unicode {
			for j := range k {
				e[j] = byte(rng.Uint32())
			}
			continue
		}
		for j := 0; j < k/4; j++ {
			r := rune(rng.IntN(0x10F800))
			if r >= 0xD800 {
				r += 0x800 // past the surrogates
			}
			binary.LittleEndian.PutUint32(e[4*j:], uint32(r))
		}
	}
	return b
}

// TestStringRoundTrip writes random regions of string arrays in both
// formats, of every string kind, byte order and a few codecs, and reads
// them back whole and in parts; the stored type is NumPy's (v2) or
// zarr-python's (v3), and the fill value comes back as given.
func TestStringRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "big"}}}
	blosc := &Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}
	for i, c := range []struct {
		m    Metadata
		want any // the stored data_type (v3) or dtype (v2)
	}{
		{Metadata{DataType: DataType{Kind: Bytes, Size: 7}, FillValue: []byte("fill"),
			Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}},
			map[string]any{"name": "null_terminated_bytes", "configuration": map[string]any{"length_bytes": 7.0}}},
		{Metadata{DataType: DataType{Kind: Unicode, Size: 20}, FillValue: "ünï", Codecs: big},
			map[string]any{"name": "fixed_length_utf32", "configuration": map[string]any{"length_bytes": 20.0}}},
		{Metadata{DataType: DataType{Kind: Raw, Size: 3}, FillValue: []byte{9, 0, 8},
			Codecs: []Codec{{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 1, "shuffle": "bitshuffle", "typesize": 3}}}},
			map[string]any{"name": "raw_bytes", "configuration": map[string]any{"length_bytes": 3.0}}},
		{Metadata{DataType: DataType{Kind: Unicode, Size: 8}, Codecs: shardCodecs([]int{4, 5}, false, roundTripCodecs["gzip"])},
			map[string]any{"name": "fixed_length_utf32", "configuration": map[string]any{"length_bytes": 8.0}}},
		{Metadata{ZarrFormat: 2, DataType: DataType{Kind: Unicode, Size: 12}, FillValue: "ab", BigEndian: true, Compressor: blosc}, ">U3"},
		{Metadata{ZarrFormat: 2, DataType: DataType{Kind: Bytes, Size: 5}, Compressor: &Codec{Name: "zlib", Configuration: map[string]any{"level": 1}}, Order: 'F'}, "|S5"},
		{Metadata{ZarrFormat: 2, DataType: DataType{Kind: Raw, Size: 6}, FillValue: "AQIDBAUG", BigEndian: true, Compressor: blosc}, "|V6"},
	} {
		m := c.m
		m.Shape, m.ChunkShape = []int{23, 17}, []int{8, 10}
		name := string(rune('a' + i))
		a, err := Create(bg, s, name, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		format := a.Metadata().ZarrFormat
		docName := map[int]string{2: ".zarray", 3: "zarr.json"}[format]
		var v map[string]any
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, name, docName)), &v); err != nil {
			t.Fatal(err)
		}
		if got := v[map[int]string{2: "dtype", 3: "data_type"}[format]]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s has type %v, want %v", name, docName, got, c.want)
		}
		ref := model{shape: m.Shape, es: m.DataType.Size, buf: chunkFill(a.pipe.fill, m.Shape)}
		for range 3 {
			start, stop := randRegion(rng, m.Shape)
			src := stringValues(rng, m.DataType, numElements(boxCount(start, stop)))
			if err := a.WriteRegion(bg, start, stop, src); err != nil {
				t.Fatalf("%s: write %v-%v: %v", name, start, stop, err)
			}
			ref.write(start, stop, src)
		}
		b, err := Open(bg, s, name)
		if err != nil {
			t.Fatal(err)
		}
		if b.Metadata().DataType != m.DataType || !reflect.DeepEqual(b.Metadata().FillValue, a.Metadata().FillValue) {
			t.Errorf("%s: reopened as %v fill %#v, created %v fill %#v", name, b.Metadata().DataType, b.Metadata().FillValue, m.DataType, a.Metadata().FillValue)
		}
		for r := range 4 {
			start, stop := make([]int, 2), m.Shape
			if r > 0 {
				start, stop = randRegion(rng, m.Shape)
			}
			want := ref.region(start, stop)
			got := make([]byte, len(want))
			if err := b.ReadRegion(bg, start, stop, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: region %v-%v differs from what was written (%v)", name, start, stop, err)
			}
		}
	}
	// Big-endian storage swaps each code point of a Unicode array, and
	// nothing of bytes.
	a, err := Open(bg, s, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(bg, []int{0, 0}, []int{8, 10}, stringValues(rng, a.DataType(), 80)); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "b", "c", "0", "0"))
	if err != nil {
		t.Fatal(err)
	}
	le := make([]byte, len(raw))
	for i := 0; i+4 <= len(raw); i += 4 {
		binary.LittleEndian.PutUint32(le[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	got := make([]byte, 8*10*20)
	err = a.ReadRegion(bg, []int{0, 0}, []int{8, 10}, got)
	if err != nil || !bytes.Equal(got, le) || bytes.Equal(raw, le) {
		t.Errorf("a big-endian Unicode chunk's code points are not stored swapped (%v)", err)
	}
}

// boxCount returns the shape of [start, stop).
func boxCount(start, stop []int) []int {
	c := make([]int, len(start))
	for d := range start {
		c[d] = stop[d] - start[d]
	}
	return c
}

// TestDeviceStrings reads string arrays into device memory, whole and in
// random regions, and writes them from it, against host reads: UTF-32
// stored big-endian (swapped on the CPU), bytes byte-shuffled by Blosc
// (unshuffled on the GPU, 5-byte elements), raw bytes in shards.
func TestDeviceStrings(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(49, 50))
	for name, m := range map[string]Metadata{
		"unicode-v2-big": {ZarrFormat: 2, DataType: DataType{Kind: Unicode, Size: 12}, BigEndian: true, FillValue: "x",
			Compressor: &Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}},
		"bytes-blosc": {DataType: DataType{Kind: Bytes, Size: 5}, Codecs: []Codec{{Name: "bytes"},
			{Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 1, "shuffle": "shuffle", "typesize": 5}}}},
		"raw-sharded": {DataType: DataType{Kind: Raw, Size: 3}, Codecs: shardCodecs([]int{16, 8}, false, roundTripCodecs["zstd+crc"])},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			m.Shape, m.ChunkShape = []int{150, 70}, []int{32, 16}
			checkDeviceRegions(t, ctx, rng, s, m)
		})
	}
}

// TestStringsHelpers checks DataType.AppendStrings and Strings both ways
// on random strings of every kind, what NumPy drops (trailing NULs) and
// keeps (NULs inside), and their errors.
func TestStringsHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, dt := range []DataType{{Kind: Bytes, Size: 6}, {Kind: Unicode, Size: 20}, {Kind: Raw, Size: 3}} {
		var ss []string
		for range 50 {
			n := rng.IntN(dt.Size + 1)
			if dt.Kind == Unicode {
				n = rng.IntN(dt.Size/4 + 1)
			}
			var sb []rune
			var bs []byte
			for range n {
				r := rune(1 + rng.IntN(0x10F7FF))
				if r >= 0xD800 {
					r += 0x800
				}
				sb = append(sb, r)
				bs = append(bs, byte(1+rng.IntN(255)))
			}
			if dt.Kind == Unicode {
				ss = append(ss, string(sb))
			} else {
				ss = append(ss, string(bs))
			}
		}
		ss = append(ss, "", "a\x00b")
		prefix := []byte("keep")
		b, err := dt.AppendStrings(prefix, ss...)
		if err != nil || len(b) != len(prefix)+len(ss)*dt.Size || string(b[:4]) != "keep" {
			t.Fatalf("%v: AppendStrings: %d bytes, %v", dt, len(b), err)
		}
		got, err := dt.Strings(b[4:])
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range ss {
			want := s
			if dt.Kind == Raw {
				want = s + string(make([]byte, dt.Size-len(s)))
			}
			if got[i] != want {
				t.Fatalf("%v: string %d read back as %q, want %q", dt, i, got[i], want)
			}
		}
	}
	u := DataType{Kind: Unicode, Size: 8}
	for _, s := range []string{"abc", "\xff"} {
		if b, err := u.AppendStrings([]byte("x"), "ok", s); !errors.Is(err, ErrInvalidRegion) || string(b) != "x" {
			t.Errorf("AppendStrings(%q): %q, %v; want ErrInvalidRegion and dst as it was", s, b, err)
		}
	}
	if _, err := (DataType{Kind: Bytes, Size: 2}).AppendStrings(nil, "abc"); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("3 bytes into S2: %v", err)
	}
	if _, err := u.Strings([]byte{0, 0xd8, 0, 0, 0, 0, 0, 0}); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("a surrogate: %v, want ErrCorruptChunk", err)
	}
	if _, err := u.Strings(make([]byte, 12)); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("12 bytes of U2: %v, want ErrInvalidRegion", err)
	}
	for _, dt := range []DataType{{Kind: Float, Size: 4}, {Kind: Unicode, Size: 6}} {
		if _, err := dt.Strings(nil); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%v.Strings: %v", dt, err)
		}
		if _, err := dt.AppendStrings(nil, "a"); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%v.AppendStrings: %v", dt, err)
		}
	}
}
