package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// model is an in-memory reference array: C order, little-endian.
type model struct {
	shape []int
	es    int
	buf   []byte
}

func (m model) region(start, stop []int) []byte {
	count := make([]int, len(start))
	for i := range start {
		count[i] = stop[i] - start[i]
	}
	out := make([]byte, numElements(count)*m.es)
	copyBox(view{buf: out, shape: count, es: m.es, start: make([]int, len(count))}, view{buf: m.buf, shape: m.shape, es: m.es, start: start}, count)
	return out
}

func (m model) write(start, stop []int, src []byte) {
	count := make([]int, len(start))
	for i := range start {
		count[i] = stop[i] - start[i]
	}
	copyBox(view{buf: m.buf, shape: m.shape, es: m.es, start: start}, view{buf: src, shape: count, es: m.es, start: make([]int, len(count))}, count)
}

func randRegion(rng *rand.Rand, shape []int) ([]int, []int) {
	start, stop := make([]int, len(shape)), make([]int, len(shape))
	for d, n := range shape {
		a, b := rng.IntN(n+1), rng.IntN(n+1)
		start[d], stop[d] = min(a, b), max(a, b)
	}
	return start, stop
}

// randValues returns n elements of t, never all zero.
func randValues(rng *rand.Rand, t DataType, n int) []byte {
	if t.Struct != "" {
		return randRecords(rng, t.Size, n)
	}
	if t.isString() {
		return stringValues(rng, t, n)
	}
	b := make([]byte, n*t.Size)
	for i := 0; i < n; i++ {
		e := b[i*t.Size : (i+1)*t.Size]
		switch t.Kind {
		case Bool:
			e[0] = byte(rng.IntN(2))
		case Float:
			putFloat(e, float64(rng.IntN(2000)-1000)/8)
		default:
			putUint(e, rng.Uint64())
		}
	}
	return b
}

var roundTripCodecs = map[string][]Codec{
	"bytes":      nil,
	"big":        {{Name: "bytes", Configuration: map[string]any{"endian": "big"}}},
	"transpose":  {{Name: "transpose", Configuration: map[string]any{"order": "F"}}, {Name: "bytes"}},
	"gzip":       {{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 5}}},
	"zstd+crc":   {{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3, "checksum": true}}, {Name: "crc32c"}},
	"blosc-lz4":  {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 64}}},
	"blosc-hc":   {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4hc", "clevel": 9, "shuffle": "bitshuffle"}}},
	"blosc-zstd": {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 1, "shuffle": "bitshuffle", "blocksize": 40}}},
	"blosc-zlib": {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zlib", "clevel": 1, "shuffle": "noshuffle"}}},
}

func shardCodecs(inner []int, start bool, innerCodecs []Codec) []Codec {
	loc := "end"
	if start {
		loc = "start"
	}
	return []Codec{{Name: "sharding_indexed", Configuration: map[string]any{
		"chunk_shape": inner, "codecs": innerCodecs, "index_location": loc,
		"index_codecs": []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}, {Name: "crc32c"}},
	}}}
}

// TestRoundTrip writes random regions of arrays of every supported codec
// chain, data type and format, then checks whole and random region reads
// against an in-memory model, and reopens the array from its metadata.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	types := []DataType{{Kind: Bool, Size: 1}, {Kind: Int, Size: 1}, {Kind: Uint, Size: 2}, {Kind: Int, Size: 4}, {Kind: Uint, Size: 8}, {Kind: Float, Size: 2}, {Kind: Float, Size: 4}, {Kind: Float, Size: 8}}
	type cfg struct {
		name string
		m    Metadata
	}
	var cfgs []cfg
	for name, codecs := range roundTripCodecs {
		cfgs = append(cfgs, cfg{"v3/" + name, Metadata{Codecs: codecs}})
	}
	for _, start := range []bool{false, true} {
		cfgs = append(cfgs, cfg{fmt.Sprintf("v3/shard-start=%v", start), Metadata{Codecs: shardCodecs([]int{2, 3}, start, roundTripCodecs["zstd+crc"])}})
	}
	cfgs = append(cfgs, cfg{"v3/shard-nested", Metadata{Codecs: shardCodecs([]int{2, 3}, false, shardCodecs([]int{1, 3}, true, roundTripCodecs["gzip"]))}})
	cfgs = append(cfgs, cfg{"v3/key-v2", Metadata{ChunkKeyEncoding: "v2"}})
	for _, comp := range []*Codec{nil, {Name: "zlib", Configuration: map[string]any{"level": 1}}, {Name: "gzip", Configuration: map[string]any{"level": 1}},
		{Name: "zstd", Configuration: map[string]any{"level": 1}}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 2}}} {
		for _, order := range []byte{'C', 'F'} {
			name := "null"
			if comp != nil {
				name = comp.Name
			}
			cfgs = append(cfgs, cfg{fmt.Sprintf("v2/%s/%c", name, order), Metadata{ZarrFormat: 2, Order: order, Compressor: comp, BigEndian: order == 'F', Separator: map[byte]string{'C': ".", 'F': "/"}[order]}})
		}
	}
	cfgs = append(cfgs, cfg{"v2/delta", Metadata{ZarrFormat: 2, Filters: []Codec{{Name: "delta", Configuration: map[string]any{"dtype": "<i4"}}}, Compressor: &Codec{Name: "zstd"}}})
	for _, c := range cfgs {
		t.Run(c.name, func(t *testing.T) {
			for trial := 0; trial < 3; trial++ {
				dt := types[rng.IntN(len(types))]
				if strings.Contains(c.name, "delta") {
					dt = DataType{Kind: Int, Size: 4}
				}
				shape := []int{1 + rng.IntN(9), 1 + rng.IntN(13)}
				chunks := []int{1 + rng.IntN(5), 1 + rng.IntN(7)}
				if strings.Contains(c.name, "shard") {
					chunks = []int{4, 6}
				}
				if trial == 2 && !strings.Contains(c.name, "shard") && !strings.Contains(c.name, "transpose") {
					shape = append(shape, 1+rng.IntN(5))
					chunks = append(chunks, 1+rng.IntN(3))
				}
				m := c.m
				m.Shape, m.ChunkShape, m.DataType = shape, chunks, dt
				if dt.Kind == Float {
					m.FillValue = "NaN"
				} else if dt.Kind != Bool {
					m.FillValue = 7
				}
				roundTrip(t, rng, m)
			}
		})
	}
}

func roundTrip(t *testing.T, rng *rand.Rand, m Metadata) {
	t.Helper()
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roundTripIn(t, rng, s, m)
}

// roundTripIn creates g/arr in s, writes random regions and checks
// reads of the reopened array against a model.
func roundTripIn(t *testing.T, rng *rand.Rand, s Store, m Metadata) {
	t.Helper()
	a, err := Create(bg, s, "g/arr", m)
	if err != nil {
		t.Fatalf("%+v: %v", m, err)
	}
	ref := model{shape: m.Shape, es: m.DataType.Size, buf: chunkFill(a.pipe.fill, m.Shape)}
	a.SetWorkers(1 + rng.IntN(4))
	for w := 0; w < 4; w++ {
		start, stop := randRegion(rng, m.Shape)
		n := 1
		for d := range start {
			n *= stop[d] - start[d]
		}
		src := randValues(rng, m.DataType, n)
		if err := a.WriteRegion(bg, start, stop, src); err != nil {
			t.Fatalf("write %v-%v: %v", start, stop, err)
		}
		ref.write(start, stop, src)
	}
	b, err := Open(bg, s, "g/arr")
	if err != nil {
		t.Fatal(err)
	}
	if b.meta.ZarrFormat != a.meta.ZarrFormat || b.meta.DataType != a.meta.DataType || fmt.Sprint(b.meta.FillValue) != fmt.Sprint(a.meta.FillValue) {
		t.Fatalf("reopened metadata %+v, created %+v", b.meta, a.meta)
	}
	for r := 0; r < 6; r++ {
		start, stop := make([]int, len(m.Shape)), m.Shape
		if r > 0 {
			start, stop = randRegion(rng, m.Shape)
		}
		want := ref.region(start, stop)
		got := make([]byte, len(want))
		if err := b.ReadRegion(bg, start, stop, got); err != nil {
			t.Fatalf("read %v-%v: %v", start, stop, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%v: region %v-%v differs from the model", m.Codecs, start, stop)
		}
	}
}

func TestStore(t *testing.T) {
	s, err := NewDirStore(t.TempDir(), WithNormalizeKeys(true))
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
	val := randValues(rand.New(rand.NewPCG(3, 4)), DataType{Kind: Uint, Size: 1}, 100)
	if err := s.Set(bg, "A/B/C.0", val); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(bg, "a/b/c.0", nil)
	if err != nil || !bytes.Equal(got, val) {
		t.Fatalf("normalized get: %v", err)
	}
	if err := s.Delete(bg, "a/b/c.0"); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(s.Root(), "a", "b", "*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// testStore checks the Store contract on an empty store s: whole and
// ranged reads against the bytes written, missing keys, bad keys,
// listing and deletion.
func testStore(t *testing.T, s Store) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1000 + 337
	val := randValues(rng, DataType{Kind: Uint, Size: 1}, n)
	if err := s.Set(bg, "a/b/c.0", val); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(bg, "a/z", val[:10]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, n)
	got, err := s.Get(bg, "a/b/c.0", buf)
	if err != nil || !bytes.Equal(got, val) || &got[0] != &buf[:1][0] {
		t.Fatalf("get into a buffer that fits: %v", err)
	}
	got, err = s.Get(bg, "a/b/c.0", make([]byte, 0, 10))
	if err != nil || !bytes.Equal(got, val) {
		t.Fatalf("get into a small buffer: %v", err)
	}
	for _, r := range [][2]int64{{0, n}, {17, 33}, {n - 1, 1}, {-10, 10}, {-10, 3}, {500, n - 500}} {
		p := make([]byte, r[1])
		size, err := s.ReadRange(bg, "a/b/c.0", r[0], p)
		off := r[0]
		if off < 0 {
			off += n
		}
		if err != nil || size != n || !bytes.Equal(p, val[off:off+r[1]]) {
			t.Fatalf("range %v: size %d, %v", r, size, err)
		}
	}
	for _, r := range [][2]int64{{n - 10, 20}, {n + 5, 1}, {-n - 1, n + 1}} {
		if _, err := s.ReadRange(bg, "a/b/c.0", r[0], make([]byte, r[1])); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("range %v past the end: %v", r, err)
		}
	}
	if _, err := s.Get(bg, "a/none", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing key: %v", err)
	}
	if _, err := s.ReadRange(bg, "a/none", -4, make([]byte, 4)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("range of a missing key: %v", err)
	}
	keys, err := s.List(bg, "a/")
	if err != nil || !slices.Equal(keys, []string{"a/b/c.0", "a/z"}) {
		t.Fatalf("list: %v, %v", keys, err)
	}
	for _, k := range []string{"", "/abs", "a/../b", "a//b", "./a"} {
		if err := s.Set(bg, k, val); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("key %q: %v", k, err)
		}
	}
	for range 2 { // deleting a missing key is no error
		if err := s.Delete(bg, "a/b/c.0"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(bg, "a/b/c.0", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after delete: %v", err)
	}
	if keys, err := s.List(bg, ""); err != nil || !slices.Equal(keys, []string{"a/z"}) {
		t.Fatalf("list after delete: %v, %v", keys, err)
	}
	if err := s.Delete(bg, "a/z"); err != nil {
		t.Fatal(err)
	}
}

func TestBadInput(t *testing.T) {
	s, _ := NewDirStore(t.TempDir())
	cases := map[string]error{
		`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"float8_e4m3fn","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}]}`:        ErrUnsupportedDataType,
		`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"string","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"","codecs":[{"name":"bytes"}]}`:              ErrInvalidMetadata,
		`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"},{"name":"lzma"}]}`: ErrUnsupportedCodec,
		`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[0]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}]}`:                 ErrInvalidMetadata,
		`{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"int8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"NaN","codecs":[{"name":"bytes"}]}`:             ErrInvalidMetadata,
	}
	for doc, want := range cases {
		os.WriteFile(filepath.Join(s.Root(), "zarr.json"), []byte(doc), 0o644)
		if _, err := Open(bg, s, ""); !errors.Is(err, want) {
			t.Errorf("%s: got %v, want %v", doc, err, want)
		}
	}
	// The broken root array is no parent group for x.
	os.Remove(filepath.Join(s.Root(), "zarr.json"))
	a, err := Create(bg, s, "x", Metadata{Shape: []int{10}, ChunkShape: []int{4}, DataType: DataType{Kind: Float, Size: 4}, Codecs: roundTripCodecs["zstd+crc"]})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ReadRegion(bg, []int{3}, []int{11}, make([]byte, 32)); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("region past the end: %v", err)
	}
	if err := a.ReadRegion(bg, []int{3}, []int{5}, make([]byte, 7)); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("short buffer: %v", err)
	}
	if err := a.WriteRegion(bg, []int{0}, []int{4}, randValues(rand.New(rand.NewPCG(5, 6)), DataType{Kind: Float, Size: 4}, 4)); err != nil {
		t.Fatal(err)
	}
	// Flip a byte of the stored chunk: crc32c must catch it.
	p := filepath.Join(s.Root(), "x", "c", "0")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 0x40
	os.WriteFile(p, b, 0o644)
	if err := a.ReadRegion(bg, []int{0}, []int{4}, make([]byte, 16)); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("corrupt chunk: %v", err)
	}
	// A blosc chunk claiming snappy is refused by name.
	enc, _ := bloscCodec{cname: "lz4", clevel: 5, typesize: 4}.encode(bytes.Repeat([]byte("abcdefgh"), 100), nil)
	enc[2] = enc[2]&^0xe0 | 2<<5
	if _, err := (bloscCodec{}).decode(enc, nil, 1<<20); !errors.Is(err, ErrUnsupportedCodec) || !strings.Contains(err.Error(), "snappy") {
		t.Errorf("snappy blosc: %v", err)
	}
}

// TestFloat16 checks the conversions on every half value.
func TestFloat16(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat64(uint16(h))
		back := Float16FromFloat64(f)
		if f == f && back != uint16(h) {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
	if Float16FromFloat64(1.0/3) != 0x3555 || Float16FromFloat64(65520) != 0x7c00 {
		t.Fatal("rounding")
	}
}

// TestRawLongRows covers uncompressed chunks read row by row (rows of at
// least hostRunMin bytes) and read whole (short rows), with v2 and v3.
func TestRawLongRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, m := range []Metadata{
		{Shape: []int{9, 50000}, ChunkShape: []int{4, 50000}, DataType: DataType{Kind: Uint, Size: 2}},
		{ZarrFormat: 2, Shape: []int{9, 50000}, ChunkShape: []int{4, 20000}, DataType: DataType{Kind: Float, Size: 4}},
	} {
		roundTrip(t, rng, m)
	}
}

// TestZstdStreamFrames decodes zstd frames without a content size (as
// streaming encoders write them) and enforces the output limit on them.
func TestZstdStreamFrames(t *testing.T) {
	data := randValues(rand.New(rand.NewPCG(13, 14)), DataType{Kind: Uint, Size: 1}, 300000)
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	var h zstd.Header
	if err := h.Decode(buf.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("want a frame without content size: %v %+v", err, h)
	}
	got, err := zstdCodec{}.decode(buf.Bytes(), nil, len(data))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("decode: %v", err)
	}
	if _, err := (zstdCodec{}).decode(buf.Bytes(), nil, len(data)-1); !errors.Is(err, ErrCorruptChunk) {
		t.Fatalf("limit: %v", err)
	}
}

// TestZstdFramesBounded decodes a hostile zstd chunk: a frame declaring
// 11 bytes followed by one of 256 MiB of zeros (28 KB in all). The decode
// fails with ErrCorruptChunk without allocating the second frame's size.
func TestZstdFramesBounded(t *testing.T) {
	c := zstdCodec{level: 3}
	small, err := c.encode([]byte("hello world"), nil)
	if err != nil {
		t.Fatal(err)
	}
	big, err := c.encode(make([]byte, 256<<20), nil)
	if err != nil {
		t.Fatal(err)
	}
	src := append(small, big...)
	for _, dst := range [][]byte{nil, make([]byte, 0, 64<<10)} {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		out, err := c.decode(src, dst, 1<<20)
		runtime.ReadMemStats(&m1)
		if !errors.Is(err, ErrCorruptChunk) {
			t.Errorf("dst cap %d: %d bytes, %v; want ErrCorruptChunk", cap(dst), len(out), err)
		}
		if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 8<<20 {
			t.Errorf("dst cap %d: %d bytes allocated for a chunk limited to 1 MiB", cap(dst), grew)
		}
	}
	// The first frame alone still decodes.
	if out, err := c.decode(small, nil, 1<<20); err != nil || string(out) != "hello world" {
		t.Fatalf("the first frame alone: %q, %v", out, err)
	}
}

// TestZstdWindowBounded decodes 13-byte zstd chunks without a content
// size that declare windows of 1 MiB to 512 MiB for 4 bytes of content:
// windows within max(limit, 8 MiB) decode, larger ones fail with
// ErrCorruptChunk, and none allocates its declared window past that.
func TestZstdWindowBounded(t *testing.T) {
	for _, log := range []byte{20, 23, 27, 29} {
		bh := uint32(1 | 4<<3) // the last block, raw, 4 bytes
		src := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (log - 10) << 3, byte(bh), byte(bh >> 8), byte(bh >> 16), 'a', 'b', 'c', 'd'}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		out, err := zstdCodec{}.decode(src, nil, 1<<20)
		runtime.ReadMemStats(&m1)
		if log <= 23 && (err != nil || string(out) != "abcd") {
			t.Errorf("window 2^%d: %q, %v; want abcd", log, out, err)
		}
		if log > 23 && !errors.Is(err, ErrCorruptChunk) {
			t.Errorf("window 2^%d: %q, %v; want ErrCorruptChunk", log, out, err)
		}
		if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 10<<20 {
			t.Errorf("window 2^%d: %d bytes allocated", log, grew)
		}
	}
}

// TestZstdStreamsReused decodes one 25-byte frame without a content size,
// declaring an 8 MiB window, 256 times, as a shard whose inner chunks all
// point at it does: the streaming decoders are reused, so the heap does
// not grow by a window per chunk (2 GB before; not checked under the
// race detector, where sync.Pool drops decoders on purpose).
func TestZstdStreamsReused(t *testing.T) {
	bh := uint32(1 | 16<<3)
	src := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3, byte(bh), byte(bh >> 8), byte(bh >> 16)}, "abcdefghijklmnop"...)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := range 256 {
		out, err := zstdCodec{}.decode(src, nil, 1024)
		if err != nil || string(out) != "abcdefghijklmnop" {
			t.Fatalf("decode %d: %q, %v", i, out, err)
		}
	}
	runtime.ReadMemStats(&m1)
	grew := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("256 decodes: %d bytes of heap", grew)
	if !raceEnabled && grew > 64<<20 {
		t.Errorf("256 decodes of a 25-byte frame allocated %d bytes", grew)
	}
}

// TestDeflateReadersReused decodes gzip and zlib chunks of random sizes,
// with corrupt ones (truncated, a flipped checksum byte, over the limit)
// between them: the pooled readers, reset for each chunk, give every
// valid chunk back exactly and every corrupt one ErrCorruptChunk.
func TestDeflateReadersReused(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 29))
	for _, c := range []interface {
		encode(src, dst []byte) ([]byte, error)
		decode(src, dst []byte, limit int) ([]byte, error)
	}{gzipCodec{level: 5}, zlibCodec{level: 5}} {
		for i := range 200 {
			data := make([]byte, 1+rng.IntN(5000))
			for j := range data {
				data[j] = byte(rng.IntN(7)) // compressible, never all zero
			}
			enc, err := c.encode(data, nil)
			if err != nil {
				t.Fatal(err)
			}
			bad := slices.Clone(enc)
			switch i % 3 {
			case 0:
				bad = bad[:len(bad)/2]
			case 1:
				bad[len(bad)-1] ^= 0xff // the checksum (gzip: the size)
			}
			limit := len(data)
			if i%3 == 2 {
				limit = len(data) - 1
			}
			if _, err := c.decode(bad, nil, limit); !errors.Is(err, ErrCorruptChunk) {
				t.Fatalf("%T chunk %d, corrupt (%d): %v", c, i, i%3, err)
			}
			if got, err := c.decode(enc, make([]byte, 0, rng.IntN(2*len(data))), len(data)); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%T chunk %d: %d bytes, %v; want %d", c, i, len(got), err, len(data))
			}
		}
	}
}

// manySplits returns a Blosc chunk of n 16-byte blocks (not split) of
// compressor format, every block's offset pointing at the one split.
func manySplits(format byte, split []byte, n int) []byte {
	src := make([]byte, 16, 16+4*n+4+len(split))
	src[0], src[1], src[2], src[3] = 2, 1, format<<5|0x10, 1
	at := uint32(16 + 4*n)
	for range n {
		src = binary.LittleEndian.AppendUint32(src, at)
	}
	src = binary.LittleEndian.AppendUint32(src, uint32(len(split)))
	src = append(src, split...)
	binary.LittleEndian.PutUint32(src[4:], uint32(16*n))
	binary.LittleEndian.PutUint32(src[8:], 16)
	binary.LittleEndian.PutUint32(src[12:], uint32(len(src)))
	return src
}

// TestBloscManySplitsBounded decodes hostile Blosc chunks of 65536 blocks
// that all point at one compressed split (262 KB each): zlib and zstd
// splits with a content size decode, with a few MB of heap in all (a
// zlib reader per split took 2.3 GB and a second); a zstd split without a
// content size, which Blosc never writes, fails with ErrCorruptChunk (a
// streaming decoder per split took a minute and 541 GB).
func TestBloscManySplitsBounded(t *testing.T) {
	const n = 1 << 16
	block := []byte("abcdefghijklmnop")
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	zw.Write(block)
	zw.Close()
	raw := func(desc byte, fcs []byte) []byte { // one frame: a raw block of the 16 bytes
		bh := uint32(1 | 16<<3)
		f := append([]byte{0x28, 0xb5, 0x2f, 0xfd, desc, 13 << 3}, fcs...)
		return append(append(f, byte(bh), byte(bh>>8), byte(bh>>16)), block...)
	}
	for _, c := range []struct {
		name   string
		format byte
		split  []byte
		ok     bool
	}{
		{"zlib", 3, zb.Bytes(), true},
		{"zstd with its size (8 MiB window)", 4, raw(0x80, []byte{16, 0, 0, 0}), true},
		{"zstd without its size", 4, raw(0x00, nil), false},
	} {
		src := manySplits(c.format, c.split, n)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		out, err := bloscCodec{}.decode(src, nil, 16*n)
		runtime.ReadMemStats(&m1)
		switch {
		case c.ok && (err != nil || !bytes.Equal(out, bytes.Repeat(block, n))):
			t.Errorf("%s: %d bytes, %v; want the block %d times", c.name, len(out), err, n)
		case !c.ok && !errors.Is(err, ErrCorruptChunk):
			t.Errorf("%s: %v; want ErrCorruptChunk", c.name, err)
		}
		if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 32<<20 {
			t.Errorf("%s: %d bytes allocated for a %d-byte chunk", c.name, grew, len(src))
		}
	}
}

// TestCreateMetadataDocs checks the documents Create writes spell what
// other readers need: the v2 type string as is, an explicit endian.
func TestCreateMetadataDocs(t *testing.T) {
	s, _ := NewDirStore(t.TempDir())
	if _, err := Create(bg, s, "v3", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Float, Size: 4}, FillValue: "-Infinity",
		Codecs: []Codec{{Name: "bytes"}, {Name: "crc32c"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(bg, s, "v2", Metadata{ZarrFormat: 2, BigEndian: true, Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 2}, FillValue: -5}); err != nil {
		t.Fatal(err)
	}
	v3, _ := s.Get(bg, "v3/zarr.json", nil)
	v2, _ := s.Get(bg, "v2/.zarray", nil)
	for _, want := range []string{`"endian": "little"`, `"fill_value": "-Infinity"`, `"name": "crc32c"`, `"node_type": "array"`} {
		if !strings.Contains(string(v3), want) {
			t.Errorf("zarr.json lacks %s:\n%s", want, v3)
		}
	}
	for _, want := range []string{`"dtype": ">i2"`, `"fill_value": -5`, `"order": "C"`, `"dimension_separator": "."`} {
		if !strings.Contains(string(v2), want) {
			t.Errorf(".zarray lacks %s:\n%s", want, v2)
		}
	}
}

// TestBlosclzFarMatch decodes a hand-made BloscLZ stream with a match
// beyond the 13-bit distance (the 16-bit form, counted from 8191), a long
// match length and a run, per c-blosc's decoder.
func TestBlosclzFarMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	lit := randValues(rng, DataType{Kind: Uint, Size: 1}, 10000)
	var in []byte
	for i := 0; i < len(lit); i += 32 {
		n := min(32, len(lit)-i)
		in = append(in, byte(n-1))
		in = append(in, lit[i:i+n]...)
	}
	want := append([]byte(nil), lit...)
	// Far match: 20 bytes from position 100 (distance 9900 > 8191).
	op, from, n := len(want), 100, 20
	far := op - from - 1 - 8191
	in = append(in, 7<<5|31, byte(n-3-6), 255, byte(far>>8), byte(far))
	want = append(want, want[from:from+n]...)
	// Near match: a run of 40 copies of the last byte (distance 0).
	in = append(in, 7<<5, byte(40-3-6), 0) // distance's high bits 0
	for i := 0; i < 40; i++ {
		want = append(want, want[len(want)-1])
	}
	in = append(in, 2, 'x', 'y', 'z')
	want = append(want, 'x', 'y', 'z')
	in[0] &= 31
	out := make([]byte, len(want))
	got, err := blosclzDecompress(in, out)
	if err != nil || got != len(want) || !bytes.Equal(out, want) {
		t.Fatalf("decoded %d of %d bytes, %v; equal %v", got, len(want), err, bytes.Equal(out, want))
	}
}

// TestBloscScratchReset decodes a hostile shuffled Blosc chunk whose
// block size is not a multiple of its type size, so that its four splits
// leave the last bytes of the block unset, after pooled scratch of that
// size was filled with two different patterns: the output must not
// depend on what the pool held (the unset bytes read as zero).
func TestBloscScratchReset(t *testing.T) {
	const ts, neblock = 4, 2 * bloscMinBuffer
	bs := ts*neblock + 3
	src := make([]byte, bloscHeader+4)
	src[0], src[1], src[2], src[3] = 2, 1, bloscShuffle|1<<5, ts
	binary.LittleEndian.PutUint32(src[4:], uint32(bs))
	binary.LittleEndian.PutUint32(src[8:], uint32(bs))
	binary.LittleEndian.PutUint32(src[bloscHeader:], uint32(len(src)))
	for s := range ts { // each split stored raw (its size equals neblock)
		src = binary.LittleEndian.AppendUint32(src, neblock)
		for i := range neblock {
			src = append(src, byte(s*neblock+i)|1)
		}
	}
	binary.LittleEndian.PutUint32(src[12:], uint32(len(src)))
	var outs [][]byte
	for _, fill := range []byte{0xaa, 0x55} {
		p := getBuf(bs)
		for i := range *p {
			(*p)[i] = fill
		}
		putBuf(p)
		out, err := bloscCodec{}.decode(src, nil, bs)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("the decoded block depends on the pooled scratch's old bytes")
	}
}
