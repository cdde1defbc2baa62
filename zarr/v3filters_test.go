package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// v3Filter is a numcodecs filter in its v2 form (checked against
// zarr-python 2 by TestLossyFiltersZarrPython, TestPackingFiltersZarrPython
// and the delta fixtures) and its two v3 forms: "numcodecs.<id>" with
// NumPy's type names, as numcodecs.zarr3 wrote it, and "<id>" with v3
// names, as zarr-python's own copies write it; values makes elements it
// takes.
type v3Filter struct {
	v2, v3 Codec
	dt     DataType
	fill   any
	values func(rng *rand.Rand, n int) []byte
}

func v3Filters() []v3Filter {
	f8, f4, i4 := DataType{Kind: Float, Size: 8}, DataType{Kind: Float, Size: 4}, DataType{Kind: Int, Size: 4}
	floats := func(dt DataType, lo, span float64) func(*rand.Rand, int) []byte {
		return func(rng *rand.Rand, n int) []byte {
			var b []byte
			for range n {
				b = append(b, element(dt, lo+span*rng.Float64())...)
			}
			return b
		}
	}
	return []v3Filter{
		{Codec{Name: "delta", Configuration: map[string]any{"dtype": "<i4", "astype": "<i2"}},
			Codec{Name: "delta", Configuration: map[string]any{"dtype": "int32", "astype": "int16"}}, i4, 5,
			func(rng *rand.Rand, n int) []byte {
				var b []byte
				v := int32(rng.IntN(1000))
				for range n {
					v += int32(rng.IntN(200)) - 100
					b = binary.LittleEndian.AppendUint32(b, uint32(v))
				}
				return b
			}},
		{Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"dtype": "<f8", "astype": "<u1", "scale": 10.0, "offset": 1000.0}},
			Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"dtype": "float64", "astype": "uint8", "scale": 10.0, "offset": 1000.0}}, f8, 1000.0,
			floats(f8, 1000, 25)},
		{Codec{Name: "quantize", Configuration: map[string]any{"digits": 3.0, "dtype": "<f8"}},
			Codec{Name: "quantize", Configuration: map[string]any{"digits": 3.0, "dtype": "float64"}}, f8, 0.5, floats(f8, -40, 80)},
		{Codec{Name: "bitround", Configuration: map[string]any{"keepbits": 7.0}},
			Codec{Name: "bitround", Configuration: map[string]any{"keepbits": 7.0}}, f4, 0.0, floats(f4, -3, 6)},
		{Codec{Name: "astype", Configuration: map[string]any{"encode_dtype": "<f4", "decode_dtype": "<f8"}},
			Codec{Name: "astype", Configuration: map[string]any{"encode_dtype": "float32", "decode_dtype": "float64"}}, f8, 1.5,
			func(rng *rand.Rand, n int) []byte {
				var b []byte
				for range n {
					b = append(b, element(f8, float64(float32(rng.NormFloat64())))...)
				}
				return b
			}},
		{Codec{Name: "packbits"}, Codec{Name: "packbits"}, DataType{Kind: Bool, Size: 1}, false,
			func(rng *rand.Rand, n int) []byte {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(rng.IntN(2))
				}
				return b
			}},
	}
}

// TestV3Filters writes the same regions to a v2 array with a numcodecs
// filter and zstd, and to v3 arrays of [filter, bytes, zstd] in both v3
// forms of the filter (and inside shards): every chunk the v3 arrays
// store is the v2 array's byte for byte, since zarr-python runs the same
// numcodecs codec on a chunk's elements before the little-endian bytes
// codec; and each reads back the v2 array's values, also after being
// opened again from its zarr.json.
func TestV3Filters(t *testing.T) {
	rng := rand.New(rand.NewPCG(60, 61))
	zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}
	for _, f := range v3Filters() {
		t.Run(f.v2.Name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			m := Metadata{Shape: []int{9, 14}, ChunkShape: []int{4, 6}, DataType: f.dt, FillValue: f.fill}
			m2 := m
			m2.ZarrFormat, m2.Separator, m2.Filters, m2.Compressor = 2, ".", []Codec{f.v2}, &zstd
			legacy := f.v3
			legacy.Name = "numcodecs." + f.v2.Name
			legacy.Configuration = f.v2.Configuration
			m3a, m3b, m3s := m, m, m
			m3a.Codecs = []Codec{legacy, {Name: "bytes", Configuration: map[string]any{"endian": "little"}}, zstd}
			m3b.Codecs = []Codec{f.v3, {Name: "bytes"}, zstd}
			m3s.ChunkShape = []int{8, 12}
			m3s.Codecs = shardCodecs([]int{4, 6}, false, m3b.Codecs)
			names := []string{"v2", "numcodecs.", "bare", "sharded"}
			var arrays []*Array
			for i, mm := range []Metadata{m2, m3a, m3b, m3s} {
				a, err := Create(bg, s, names[i], mm)
				if err != nil {
					t.Fatalf("%s: %v", names[i], err)
				}
				arrays = append(arrays, a)
			}
			for range 5 {
				start, stop := randRegion(rng, m.Shape)
				src := f.values(rng, boxBytes(start, stop, f.dt.Size)/f.dt.Size)
				for _, a := range arrays {
					if err := a.WriteRegion(bg, start, stop, src); err != nil {
						t.Fatalf("%s: %v", a.Path(), err)
					}
				}
			}
			want := make([]byte, 9*14*f.dt.Size)
			if err := arrays[0].ReadRegion(bg, []int{0, 0}, m.Shape, want); err != nil {
				t.Fatal(err)
			}
			for i, a := range arrays[1:] {
				b, err := Open(bg, s, a.Path())
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(want))
				if err := b.ReadRegion(bg, []int{0, 0}, m.Shape, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s reads otherwise than the v2 array", names[i+1])
				}
				if i == 2 {
					continue // shards: their own layout
				}
				for _, k := range chunkKeys(t, arrays[0]) {
					c, _ := arrays[0].chunkCoords(k)
					v2b, _ := s.Get(bg, k, nil)
					v3b, err := s.Get(bg, a.ChunkKey(c), nil)
					if err != nil || !bytes.Equal(v2b, v3b) {
						t.Errorf("%s: chunk %v is not the v2 array's (%v)", names[i+1], c, err)
					}
				}
				if got, want := len(chunkKeys(t, a)), len(chunkKeys(t, arrays[0])); got != want {
					t.Errorf("%s: %d chunks, the v2 array %d", names[i+1], got, want)
				}
			}
		})
	}
}

// TestV3FiltersRefuse: numcodecs filters where their input would not be
// the elements' little-endian bytes (a big-endian bytes codec, shards
// after them) or their order would change (delta and packbits with a
// transpose) are ErrUnsupportedCodec; after the bytes codec,
// ErrInvalidMetadata. An element-wise filter with a transpose reads
// back what was written.
func TestV3FiltersRefuse(t *testing.T) {
	i4 := DataType{Kind: Int, Size: 4}
	delta := Codec{Name: "numcodecs.delta", Configuration: map[string]any{"dtype": "<i4"}}
	fso := Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"dtype": "int32", "astype": "int16", "scale": 1.0, "offset": 0.0}}
	big := Codec{Name: "bytes", Configuration: map[string]any{"endian": "big"}}
	tr := Codec{Name: "transpose", Configuration: map[string]any{"order": []any{1.0, 0.0}}}
	b1 := DataType{Kind: Bool, Size: 1}
	for _, c := range []struct {
		codecs []Codec
		dt     DataType
		want   error
	}{
		{[]Codec{delta, big}, i4, ErrUnsupportedCodec},
		{[]Codec{fso, big}, i4, ErrUnsupportedCodec},
		{append([]Codec{delta}, shardCodecs([]int{2, 2}, false, []Codec{{Name: "bytes"}})...), i4, ErrUnsupportedCodec},
		{[]Codec{delta, tr, {Name: "bytes"}}, i4, ErrUnsupportedCodec},
		{[]Codec{tr, {Name: "packbits"}, {Name: "bytes"}}, b1, ErrUnsupportedCodec},
		{[]Codec{{Name: "bytes"}, delta}, i4, ErrInvalidMetadata},
		{[]Codec{{Name: "numcodecs.delta", Configuration: map[string]any{"dtype": "int128"}}, {Name: "bytes"}}, i4, ErrUnsupportedDataType},
	} {
		_, err := newPipelineV3(c.codecs, c.dt, make([]byte, c.dt.Size), []int{4, 4})
		if !errors.Is(err, c.want) {
			t.Errorf("%v: %v, want %v", c.codecs, err, c.want)
		}
	}
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "t", Metadata{Shape: []int{5, 7}, ChunkShape: []int{3, 4}, DataType: i4, FillValue: 0, Codecs: []Codec{tr, fso, {Name: "bytes"}}})
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 0, 35*4)
	for i := range 35 {
		src = binary.LittleEndian.AppendUint32(src, uint32(int32(i*37%200-100)))
	}
	if err := a.WriteRegion(bg, []int{0, 0}, []int{5, 7}, src); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := a.ReadRegion(bg, []int{0, 0}, []int{5, 7}, got); err != nil || !bytes.Equal(got, src) {
		t.Errorf("transposed fixedscaleoffset: %v, read back equal %v", err, bytes.Equal(got, src))
	}
}
