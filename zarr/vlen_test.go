package zarr

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// randomText returns a random string for an element of kind k: empty,
// short or up to 3 KiB, of ASCII, two-, three- and four-byte UTF-8
// (VarString) or any bytes, NULs included (VarBytes).
func randomText(rng *rand.Rand, k Kind) string {
	n := []int{0, 1 + rng.IntN(8), rng.IntN(3 << 10)}[rng.IntN(3)]
	if k == VarBytes {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteRune([]rune{'a' + rune(rng.IntN(26)), 'é', 'ж', '中', '𝄞', 0}[rng.IntN(6)])
	}
	return sb.String()
}

// vlenSpecs are array specs of both kinds, formats and several codecs.
func vlenSpecs(rng *rand.Rand) []Metadata {
	var out []Metadata
	for _, k := range []Kind{VarString, VarBytes} {
		for _, comp := range []string{"", "zstd", "blosc", "gzip"} {
			for _, format := range []int{2, 3} {
				nd := 1 + rng.IntN(3)
				shape, chunks := make([]int, nd), make([]int, nd)
				for d := range shape {
					shape[d] = 1 + rng.IntN(13)
					chunks[d] = 1 + rng.IntN(6)
				}
				m := Metadata{ZarrFormat: format, Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: k}}
				if rng.IntN(2) == 0 {
					m.FillValue = "fill-é"
					if k == VarBytes {
						m.FillValue = []byte("\x00fill")
					}
				}
				if comp != "" {
					c := Codec{Name: comp, Configuration: map[string]any{}}
					if comp == "blosc" {
						c.Configuration = map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
						if format == 3 {
							c.Configuration = map[string]any{"cname": "zstd", "clevel": 3, "shuffle": "noshuffle", "typesize": 1, "blocksize": 0}
						}
					}
					if format == 2 {
						m.Compressor = &c
					} else {
						m.Codecs = []Codec{{Name: vlenName(k)}, c}
					}
				}
				out = append(out, m)
			}
		}
		// Elements reordered before the framing: v2's F order, a v3
		// transpose; and inner chunks of shards (index at either end).
		two := func() ([]int, []int) {
			return []int{2 + rng.IntN(9), 2 + rng.IntN(9)}, []int{1 + rng.IntN(3), 2 + rng.IntN(4)}
		}
		shape, chunks := two()
		out = append(out, Metadata{ZarrFormat: 2, Order: 'F', Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: k},
			Compressor: &Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}})
		shape, chunks = two()
		out = append(out, Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: k},
			Codecs: []Codec{{Name: "transpose", Configuration: map[string]any{"order": []any{1.0, 0.0}}}, {Name: vlenName(k)}, {Name: "gzip"}}})
		for _, start := range []bool{false, true} {
			shape, inner := two()
			out = append(out, Metadata{Shape: shape, ChunkShape: []int{inner[0] * 2, inner[1] * 3}, DataType: DataType{Kind: k}, FillValue: "",
				Codecs: shardCodecs(inner, start, []Codec{{Name: vlenName(k)}, {Name: "zstd"}})})
		}
	}
	return out
}

// modelFill is what a missing element of m reads as.
func modelFill(m Metadata) string {
	switch f := m.FillValue.(type) {
	case string:
		return f
	case []byte:
		return string(f)
	}
	return ""
}

// TestStringArraysRoundTrip writes random regions of random strings to
// arrays of variable-length strings and bytes (v2 and v3, with and
// without compressors), merging into chunks written before, and reads
// random regions back against a model of the whole array; missing
// chunks read as the fill value.
func TestStringArraysRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, uint64(os.Getpid())))
	for _, m := range vlenSpecs(rng) {
		name := fmt.Sprintf("v%d-%s-%v-%v", max(m.ZarrFormat, 3), m.DataType, m.Shape, m.ChunkShape)
		if m.ZarrFormat == 2 {
			name = fmt.Sprintf("v2-%s-%v-%v-%c", m.DataType, m.Shape, m.ChunkShape, max(m.Order, 'C'))
		}
		if m.Compressor != nil {
			name += "-" + m.Compressor.Name
		}
		for _, c := range m.Codecs {
			name += "-" + c.Name
		}
		t.Run(name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			a, err := Create(bg, s, "a", m)
			if err != nil {
				t.Fatal(err)
			}
			model := make([]string, numElements(m.Shape))
			for i := range model {
				model[i] = modelFill(m)
			}
			full := view{shape: m.Shape, es: 1}
			for round := range 4 {
				start, stop := randomBox(rng, m.Shape)
				count := make([]int, len(start))
				for d := range count {
					count[d] = stop[d] - start[d]
				}
				ss := make([]string, numElements(count))
				for i := range ss {
					ss[i] = randomText(rng, m.DataType.Kind)
				}
				if err := a.WriteStrings(bg, start, stop, ss); err != nil {
					t.Fatalf("round %d: WriteStrings %v-%v: %v", round, start, stop, err)
				}
				pairStrings(full.sub(start), view{shape: count, es: 1, start: make([]int, len(count))}, count, func(d, s int) { model[d] = ss[s] })
				b, err := Open(bg, s, "a")
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					start, stop := randomBox(rng, m.Shape)
					got, err := b.ReadStrings(bg, start, stop)
					if err != nil {
						t.Fatalf("ReadStrings %v-%v: %v", start, stop, err)
					}
					var want []string
					count := make([]int, len(start))
					for d := range count {
						count[d] = stop[d] - start[d]
					}
					full.sub(start).runs(count, func(off, n int) error { want = append(want, model[off:off+n]...); return nil })
					if len(count) == 0 {
						want = model[:1]
					}
					if !slices.Equal(got, want) {
						t.Fatalf("round %d: ReadStrings %v-%v differs from what was written", round, start, stop)
					}
				}
			}
		})
	}
}

// TestStringArraysRefuse checks what an array of variable-length
// elements refuses, with the typed error, writing nothing: byte reads
// and writes (host and chunk codecs), a count of strings other than the
// region's, a VarString that is not UTF-8, a region outside the array;
// and ReadStrings / WriteStrings of a numeric array.
func TestStringArraysRefuse(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "v", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: VarString}})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"ReadRegion":  a.ReadRegion(bg, []int{0}, []int{4}, make([]byte, 4)),
		"WriteRegion": a.WriteRegion(bg, []int{0}, []int{0}, nil),
		"DecodeChunk": a.DecodeChunk([]byte{0, 0, 0, 0}, nil),
		// Refused before any device memory is looked at: no GPU needed.
		"ReadRegionDevice":  a.ReadRegionDevice(bg, []int{0}, []int{4}, 0),
		"WriteRegionDevice": a.WriteRegionDevice(bg, []int{0}, []int{4}, 0),
	} {
		if !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("%s: %v, want ErrUnsupportedDataType", name, err)
		}
	}
	if _, err := a.EncodeChunk(nil); !errors.Is(err, ErrUnsupportedDataType) {
		t.Errorf("EncodeChunk: %v", err)
	}
	for name, c := range map[string]struct {
		start, stop []int
		ss          []string
	}{
		"count":   {[]int{0}, []int{3}, []string{"a", "b"}},
		"utf8":    {[]int{0}, []int{2}, []string{"a", "\xff"}},
		"outside": {[]int{2}, []int{5}, []string{"a", "b", "c"}},
		"rank":    {[]int{0, 0}, []int{1, 1}, []string{"a"}},
	} {
		if err := a.WriteStrings(bg, c.start, c.stop, c.ss); !errors.Is(err, ErrInvalidRegion) {
			t.Errorf("WriteStrings %s: %v, want ErrInvalidRegion", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "v", "c")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused writes stored chunks: %v", err)
	}
	f, err := Create(bg, s, "f", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Float, Size: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadStrings(bg, []int{0}, []int{4}); !errors.Is(err, ErrUnsupportedDataType) {
		t.Errorf("ReadStrings of float32: %v", err)
	}
	if err := f.WriteStrings(bg, []int{0}, []int{1}, []string{"1"}); !errors.Is(err, ErrUnsupportedDataType) {
		t.Errorf("WriteStrings of float32: %v", err)
	}
	// A 0-d array holds one string, in one chunk.
	z, err := Create(bg, s, "z", Metadata{Shape: []int{}, ChunkShape: []int{}, DataType: DataType{Kind: VarBytes}, FillValue: []byte("f")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := z.ReadStrings(bg, nil, nil); err != nil || !slices.Equal(got, []string{"f"}) {
		t.Errorf("0-d, unwritten: %q, %v", got, err)
	}
	if err := z.WriteStrings(bg, nil, nil, []string{"\x00one"}); err != nil {
		t.Fatal(err)
	}
	if got, err := z.ReadStrings(bg, nil, nil); err != nil || !slices.Equal(got, []string{"\x00one"}) {
		t.Errorf("0-d: %q, %v", got, err)
	}
	// Fixed-length strings go through the same calls.
	u, err := Create(bg, s, "u", Metadata{Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: Unicode, Size: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.WriteStrings(bg, []int{0}, []int{3}, []string{"ab", "é", ""}); err != nil {
		t.Fatal(err)
	}
	if got, err := u.ReadStrings(bg, []int{0}, []int{3}); err != nil || !slices.Equal(got, []string{"ab", "é", ""}) {
		t.Errorf("Unicode ReadStrings: %q, %v", got, err)
	}
	if err := u.WriteStrings(bg, []int{0}, []int{1}, []string{"abc"}); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("Unicode WriteStrings of 3 code points into 2: %v", err)
	}
}

// TestStringArraysMetadata checks the documents of variable-length
// arrays: what Create writes (v2 "|O" with the object codec first among
// the filters, v3 "string" and "variable_length_bytes" with their vlen
// codec), what Open reads, and what it refuses: an object dtype without
// an object codec or with another (pickle runs code: never read), a v3
// chain without the vlen codec or with sharding, a codec of the other
// kind, chunks too many to frame, F order.
func TestStringArraysMetadata(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m    Metadata
		key  string
		want []string
	}{
		{Metadata{ZarrFormat: 2, Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: VarString}}, ".zarray", []string{`"dtype": "|O"`, `"filters": [`, `"id": "vlen-utf8"`, `"fill_value": ""`}},
		{Metadata{ZarrFormat: 2, Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: VarBytes}, FillValue: []byte{0, 1}}, ".zarray", []string{`"dtype": "|O"`, `"id": "vlen-bytes"`, `"fill_value": "AAE="`}},
		{Metadata{Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: VarString}, FillValue: "x"}, "zarr.json", []string{`"data_type": "string"`, `"name": "vlen-utf8"`, `"fill_value": "x"`}},
		{Metadata{Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: VarBytes}}, "zarr.json", []string{`"data_type": "variable_length_bytes"`, `"name": "vlen-bytes"`}},
	} {
		path := fmt.Sprintf("a%d%c", c.m.ZarrFormat, c.m.DataType.Kind)
		a, err := Create(bg, s, path, c.m)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := s.Get(bg, path+"/"+c.key, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !bytes.Contains(doc, []byte(w)) {
				t.Errorf("%s: %s lacks %s:\n%s", path, c.key, w, doc)
			}
		}
		b, err := Open(bg, s, path)
		if err != nil {
			t.Fatal(err)
		}
		if b.DataType() != a.DataType() || b.DataType().NumPy() != "|O" || !b.DataType().Variable() {
			t.Errorf("%s: opened as %v", path, b.DataType())
		}
	}
	v2 := func(dtype, filters string) string {
		return `{"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "` + dtype + `", "compressor": null, "fill_value": null, "order": "C", "filters": ` + filters + `}`
	}
	for doc, want := range map[string]error{
		v2("|O", "null"):                                       ErrInvalidMetadata,
		v2("|O", `[{"id": "pickle"}]`):                         ErrUnsupportedCodec,
		v2("|O", `[{"id": "json2"}, {"id": "vlen-utf8"}]`):     ErrUnsupportedCodec,
		v2("|O", `[{"id": "vlen-array", "dtype": "<i4"}]`):     ErrUnsupportedCodec,
		v2("<f4", `[{"id": "vlen-utf8"}]`):                     ErrUnsupportedCodec,
		v2("|O", `[{"id": "vlen-utf8"}, {"id": "vlen-utf8"}]`): ErrUnsupportedCodec,
	} {
		m, err := ParseMetadataV2([]byte(doc), ".")
		if err == nil {
			_, err = newPipelineV2(m)
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", doc, err, want)
		}
	}
	str := DataType{Kind: VarString}
	for _, c := range []struct {
		codecs []Codec
		shape  []int
		want   error
	}{
		{[]Codec{{Name: "bytes"}}, []int{2}, ErrInvalidMetadata},
		{[]Codec{{Name: "vlen-bytes"}}, []int{2}, ErrInvalidMetadata},
		{[]Codec{{Name: "zstd"}}, []int{2}, ErrInvalidMetadata},
		{append(shardCodecs([]int{1}, false, []Codec{{Name: "bytes"}}), Codec{Name: "zstd"}), []int{2}, ErrInvalidMetadata},
		{append(shardCodecs([]int{1}, false, []Codec{{Name: "vlen-utf8"}}), Codec{Name: "zstd"}), []int{2}, ErrUnsupportedCodec},
		{shardCodecs([]int{1 << 10, 1}, false, []Codec{{Name: "vlen-utf8"}}), []int{1 << 16, 1 << 10}, ErrInvalidMetadata},
		{[]Codec{{Name: "vlen-utf8"}}, []int{1 << 16, 1 << 10}, ErrInvalidMetadata},
	} {
		if _, err := newPipelineV3(c.codecs, str, nil, c.shape); !errors.Is(err, c.want) {
			t.Errorf("%v of %v: %v, want %v", c.codecs, c.shape, err, c.want)
		}
	}
	if _, err := newPipelineV3([]Codec{{Name: "vlen-utf8"}, {Name: "zstd"}}, str, nil, []int{1 << 13, 1 << 10}); err != nil {
		t.Errorf("chunks of 8 Mi elements: %v", err)
	}
	for name, want := range map[string]Kind{"string": VarString, "variable_length_bytes": VarBytes, "bytes": VarBytes} {
		if dt, err := ParseDataType(name); err != nil || dt.Kind != want || dt.check() != nil {
			t.Errorf("ParseDataType(%q) = %v, %v", name, dt, err)
		}
	}
	if err := (DataType{Kind: VarString, Size: 4}).check(); !errors.Is(err, ErrUnsupportedDataType) {
		t.Errorf("VarString of Size 4: %v", err)
	}
	for raw, want := range map[string]string{`"é"`: "é", `""`: "", `0`: "0", `null`: ""} {
		got, err := fillBytes(str, json.RawMessage(raw), true)
		if err != nil || string(got) != want {
			t.Errorf("fill %s: %q, %v", raw, got, err)
		}
	}
	for _, raw := range []string{`true`, `[1]`, `"` + strings.Repeat("x", maxStringSize+1) + `"`} {
		if _, err := fillBytes(str, json.RawMessage(raw), true); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("fill %.20s: %v", raw, err)
		}
	}
	if _, err := fillBytes(DataType{Kind: VarBytes}, json.RawMessage(`"not base64!"`), false); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("VarBytes fill not base64: %v", err)
	}
}

// frame frames ss as numcodecs' VLenUTF8 does, written out here apart
// from appendFrame.
func frame(ss ...string) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(len(ss)))
	for _, s := range ss {
		binary.Write(&b, binary.LittleEndian, uint32(len(s)))
		b.WriteString(s)
	}
	return b.Bytes()
}

// TestStringChunksHostile reads chunks a hostile store could hold: a
// count other than the chunk's, a length past the end, bytes after the
// last element, an element that is not UTF-8, a count of 4 G elements in
// a few bytes, a zstd frame claiming 1 GiB and one that inflates past
// the bound without saying so: each fails with ErrCorruptChunk, naming
// the chunk, without taking the memory claimed.
func TestStringChunksHostile(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Create(bg, s, "p", Metadata{Shape: []int{3}, ChunkShape: []int{3}, DataType: DataType{Kind: VarString}})
	if err != nil {
		t.Fatal(err)
	}
	huge := binary.LittleEndian.AppendUint32(nil, 1<<32-1)
	past := frame("a", "b", "c")
	binary.LittleEndian.PutUint32(past[len(past)-5:], 1000)
	for name, chunk := range map[string][]byte{
		"short":    {1, 0},
		"count":    frame("a", "b"),
		"huge":     append(huge, 1, 0, 0, 0, 'x'),
		"past":     past,
		"trailing": append(frame("a", "b", "c"), 0),
		"utf8":     frame("a", "\xc3", "c"),
	} {
		if err := s.Set(bg, "p/c/0", chunk); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.ReadStrings(bg, []int{0}, []int{3}); !errors.Is(err, ErrCorruptChunk) || !strings.Contains(err.Error(), "p/c/0") {
			t.Errorf("%s: %v, want ErrCorruptChunk naming p/c/0", name, err)
		}
		if err := plain.WriteStrings(bg, []int{1}, []int{2}, []string{"z"}); !errors.Is(err, ErrCorruptChunk) {
			t.Errorf("%s: a write into the chunk: %v, want ErrCorruptChunk", name, err)
		}
	}
	if err := s.Set(bg, "p/c/0", frame("a", "", "\x00é")); err != nil {
		t.Fatal(err)
	}
	if got, err := plain.ReadStrings(bg, []int{0}, []int{3}); err != nil || !slices.Equal(got, []string{"a", "", "\x00é"}) {
		t.Errorf("a good chunk: %q, %v", got, err)
	}
	z, err := Create(bg, s, "z", Metadata{Shape: []int{3}, ChunkShape: []int{3}, DataType: DataType{Kind: VarBytes}, Codecs: []Codec{{Name: "vlen-bytes"}, {Name: "zstd"}}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	big := append(frame("a", "b"), make([]byte, maxVarChunk)...)
	binary.LittleEndian.PutUint32(big, 3)
	bomb := enc.EncodeAll(big, nil) // its frame says maxVarChunk and more
	if err := s.Set(bg, "z/c/0", bomb); err != nil {
		t.Fatal(err)
	}
	if _, err := z.ReadStrings(bg, []int{0}, []int{3}); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("a zstd chunk of %d bytes inflating to %d: %v, want ErrCorruptChunk", len(bomb), len(big), err)
	}
	var w bytes.Buffer
	zw, err := zstd.NewWriter(&w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(big) // streamed: no content size in the frame
	zw.Close()
	if err := s.Set(bg, "z/c/0", w.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := z.ReadStrings(bg, []int{0}, []int{3}); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("a streamed zstd chunk inflating to %d: %v, want ErrCorruptChunk", len(big), err)
	}
	// A write that would store more than a read takes fails, unwritten.
	if err := s.Delete(bg, "z/c/0"); err != nil {
		t.Fatal(err)
	}
	if err := z.WriteStrings(bg, []int{0}, []int{1}, []string{strings.Repeat("x", maxVarChunk)}); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("a chunk past the bound: %v, want ErrInvalidRegion", err)
	}
	if _, err := s.Get(bg, "z/c/0", nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused write stored the chunk: %v", err)
	}
}

// TestStringArraysConcurrentWrites writes every element of one chunk at
// once, one goroutine each (through two Arrays on the store): none is
// lost, as none of a numeric chunk is.
func TestStringArraysConcurrentWrites(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := Metadata{Shape: []int{4, 8}, ChunkShape: []int{4, 8}, DataType: DataType{Kind: VarString}, Codecs: []Codec{{Name: "vlen-utf8"}, {Name: "zstd"}}}
	a, err := Create(bg, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(bg, s, "a")
	if err != nil {
		t.Fatal(err)
	}
	writeEachString(t, []*Array{a, b}, m.Shape)
}

// writeEachString writes every element of a 2-d array at once, one
// goroutine each, through the arrays in turn, then reads them back: none
// may be lost.
func writeEachString(t *testing.T, arrays []*Array, shape []int) {
	t.Helper()
	text := func(i, j int) string { return fmt.Sprintf("%d·%d é", i, j) }
	var wg sync.WaitGroup
	errs := make(chan error, shape[0]*shape[1])
	for i := range shape[0] {
		for j := range shape[1] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- arrays[(i+j)%len(arrays)].WriteStrings(context.Background(), []int{i, j}, []int{i + 1, j + 1}, []string{text(i, j)})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := arrays[0].ReadStrings(bg, []int{0, 0}, shape)
	if err != nil {
		t.Fatal(err)
	}
	for k, s := range got {
		if want := text(k/shape[1], k%shape[1]); s != want {
			t.Errorf("element %d: %q, want %q", k, s, want)
		}
	}
}

// TestStringArraysZarrPython: zarr-python 2 writes arrays of str and
// bytes objects (vlen-utf8, vlen-bytes; Blosc, zstd, gzip, none; a fill
// value or none; chunks left missing) and kvik reads them; kvik writes
// v2 arrays of both kinds and zarr-python reads them; every element
// compared.
func TestStringArraysZarrPython(t *testing.T) {
	py := zarrPython(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(12, uint64(os.Getpid())))
	type entry struct {
		Path   string   `json:"path"`
		Kind   string   `json:"kind"` // "str" or "bytes"
		Shape  []int    `json:"shape"`
		Chunks []int    `json:"chunks"`
		Comp   string   `json:"compressor"`
		Order  string   `json:"order"`
		Fill   *string  `json:"fill"`   // base64 for bytes
		Values []string `json:"values"` // C order; base64 for bytes; written where not nil
		Nulls  []bool   `json:"nulls"`  // elements left unwritten
	}
	var entries []entry
	for i, comp := range []string{"none", "blosc", "zstd", "zlib", "blosc", "none"} {
		for _, kind := range []string{"str", "bytes"} {
			m := vlenSpecs(rng)[0]
			e := entry{Path: fmt.Sprintf("a%d%s", i, kind), Kind: kind, Shape: m.Shape, Chunks: m.ChunkShape, Comp: comp, Order: []string{"C", "F"}[i%2]}
			if e.Order == "F" {
				e.Shape, e.Chunks = []int{2 + rng.IntN(6), 2 + rng.IntN(6), 1 + rng.IntN(3)}, []int{1 + rng.IntN(4), 1 + rng.IntN(4), 1 + rng.IntN(3)}
			}
			k := VarString
			if kind == "bytes" {
				k = VarBytes
			}
			if i%2 == 0 && kind == "str" {
				f := "fill é"
				e.Fill = &f
			}
			for range numElements(e.Shape) {
				v := randomText(rng, k)
				unwritten := rng.IntN(4) == 0
				if k == VarBytes {
					v = base64.StdEncoding.EncodeToString([]byte(v))
				}
				e.Values = append(e.Values, v)
				e.Nulls = append(e.Nulls, unwritten)
			}
			entries = append(entries, e)
		}
	}
	manifest := filepath.Join(dir, "manifest.json")
	b, _ := json.Marshal(entries)
	if err := os.WriteFile(manifest, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "vlen_interop.py"))
	run := func(args ...string) []byte {
		t.Helper()
		out, err := execPython(py, script, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("write", filepath.Join(dir, "py.zarr"), manifest)
	s, err := NewDirStore(filepath.Join(dir, "py.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := NewDirStore(filepath.Join(dir, "kvik.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		a, err := Open(bg, s, e.Path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.ReadStrings(bg, make([]int, len(e.Shape)), e.Shape)
		if err != nil {
			t.Fatalf("%s: %v", e.Path, err)
		}
		// zarr-python reads an element it never wrote as the fill
		// value where a chunk holds it, as None (kvik: "" for null)
		// where the chunk is missing; the script reports which.
		want := expectedStrings(e.Kind, e.Values, e.Nulls, e.Fill)
		if !slices.Equal(got, want) {
			t.Errorf("%s (%s, %v in %v): kvik read %q, zarr-python wrote %q", e.Path, e.Comp, e.Shape, e.Chunks, clip(got), clip(want))
		}
		// kvik writes the same elements to an array of the same kind.
		m := a.Metadata()
		if m.Order != e.Order[0] {
			t.Fatalf("%s: order %c, zarr-python wrote %s", e.Path, m.Order, e.Order)
		}
		w, err := Create(bg, ks, e.Path, Metadata{ZarrFormat: 2, Shape: m.Shape, ChunkShape: m.ChunkShape, DataType: m.DataType, Compressor: m.Compressor, FillValue: m.FillValue, Order: m.Order})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteStrings(bg, make([]int, len(e.Shape)), e.Shape, want); err != nil {
			t.Fatal(err)
		}
	}
	var back []entry
	if err := json.Unmarshal(run("read", filepath.Join(dir, "kvik.zarr"), manifest), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != len(entries) {
		t.Fatalf("zarr-python read %d arrays of %d", len(back), len(entries))
	}
	for i, e := range entries {
		want := expectedStrings(e.Kind, e.Values, e.Nulls, e.Fill)
		got := expectedStrings(e.Kind, back[i].Values, nil, nil)
		if !slices.Equal(got, want) {
			t.Errorf("%s: zarr-python read %q of what kvik wrote, %q", e.Path, clip(got), clip(want))
		}
	}
}

// expectedStrings decodes a manifest's values (base64 for bytes) and
// puts fill (or "") where nulls says an element was left unwritten.
func expectedStrings(kind string, values []string, nulls []bool, fill *string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		if kind == "bytes" {
			b, _ := base64.StdEncoding.DecodeString(v)
			v = string(b)
		}
		if nulls != nil && nulls[i] {
			v = ""
			if fill != nil {
				v = *fill
			}
		}
		out[i] = v
	}
	return out
}

// clip shortens strings for a message.
func clip(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		if len(s) > 12 {
			s = s[:12] + "…"
		}
		if !utf8.ValidString(s) {
			s = fmt.Sprintf("%x", s)
		}
		out[i] = s
	}
	return out
}

// execPython runs script with args under the interpreter py and returns
// its stdout (what it printed before it failed, too).
func execPython(py, script string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %v\n%s", filepath.Base(script), args[0], err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// TestStringArraysRemote writes and reads arrays of variable-length
// elements on S3 (versitygw): through a store opened WithProcessLocks,
// every element of one chunk written at once (none lost), and through a
// plain one, random regions against the local reading of the same
// objects.
func TestStringArraysRemote(t *testing.T) {
	srv, locked := openS3(t, "vlen.zarr", WithProcessLocks())
	m := Metadata{Shape: []int{3, 5}, ChunkShape: []int{3, 5}, DataType: DataType{Kind: VarString}, FillValue: "-", Codecs: []Codec{{Name: "vlen-utf8"}, {Name: "zstd"}}}
	a, err := Create(bg, locked, "locked", m)
	if err != nil {
		t.Fatal(err)
	}
	writeEachString(t, []*Array{a}, m.Shape)
	plain, err := OpenURL(bg, srv.URLOf("vlen.zarr"), WithRemoteOptions(srv.Opts()...))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	rng := rand.New(rand.NewPCG(13, 14))
	m = Metadata{ZarrFormat: 2, Shape: []int{7, 6}, ChunkShape: []int{3, 4}, DataType: DataType{Kind: VarBytes}, Compressor: &Codec{Name: "gzip", Configuration: map[string]any{"level": 1}}}
	b, err := Create(bg, plain, "bytes", m)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		start, stop := randomBox(rng, m.Shape)
		n := (stop[0] - start[0]) * (stop[1] - start[1])
		ss := make([]string, n)
		for i := range ss {
			ss[i] = randomText(rng, VarBytes)
		}
		if err := b.WriteStrings(bg, start, stop, ss); err != nil {
			t.Fatal(err)
		}
		if got, err := b.ReadStrings(bg, start, stop); err != nil || !slices.Equal(got, ss) {
			t.Fatalf("ReadStrings %v-%v after its write: %v", start, stop, err)
		}
	}
	local, err := NewDirStore(filepath.Join(srv.Dir, s3test.Bucket, "vlen.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := Open(bg, local, "bytes")
	if err != nil {
		t.Fatal(err)
	}
	want, err := lb.ReadStrings(bg, []int{0, 0}, m.Shape)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadStrings(bg, []int{0, 0}, m.Shape); err != nil || !slices.Equal(got, want) {
		t.Errorf("the remote array reads otherwise than its objects locally: %v", err)
	}
}

// TestStringArraysConditional: through a RemoteStore opened
// WithProcessLocks, a write of whole chunks of strings is unconditional
// and one of part of a chunk is a conditional write on the version read
// (condBucket counts them); every condition refused fails it with
// ErrObjectChanged, the chunk left as it was.
func TestStringArraysConditional(t *testing.T) {
	old := maxWriteTries
	maxWriteTries = 3
	t.Cleanup(func() { maxWriteTries = old })
	bkt := newCondBucket(t)
	s, err := OpenURL(bg, "s3://bkt/s.zarr", s3Options(bkt.URL, WithProcessLocks())...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := Create(bg, s, "", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: VarString}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteStrings(bg, []int{0}, []int{4}, []string{"a", "bb", "ccc", "é"}); err != nil {
		t.Fatal(err)
	}
	if n := bkt.conditional.Load(); n != 0 {
		t.Fatalf("%d conditional writes of whole chunks", n)
	}
	if err := a.WriteStrings(bg, []int{1}, []int{2}, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if n := bkt.conditional.Load(); n != 1 {
		t.Fatalf("%d conditional writes for part of a chunk, want 1", n)
	}
	bkt.refuseAll.Store(true)
	if err := a.WriteStrings(bg, []int{2}, []int{3}, []string{"y"}); !errors.Is(err, kvik.ErrObjectChanged) {
		t.Fatalf("every condition refused: %v, want ErrObjectChanged", err)
	}
	bkt.refuseAll.Store(false)
	if got, err := a.ReadStrings(bg, []int{0}, []int{4}); err != nil || !slices.Equal(got, []string{"a", "x", "ccc", "é"}) {
		t.Errorf("after the refused write: %q, %v", got, err)
	}
}

// FuzzVLenFrame parses any bytes as a chunk of n variable-length
// elements: no panic, and what parses frames back to the same bytes.
func FuzzVLenFrame(f *testing.F) {
	f.Add(frame("a", "", "é"), uint8(3), true)
	f.Add(frame("\xff"), uint8(1), false)
	f.Add([]byte{255, 255, 255, 255, 1}, uint8(0), true)
	f.Fuzz(func(t *testing.T, b []byte, n uint8, utf bool) {
		ss, err := vlenCodec{utf8: utf}.parse(b, int(n))
		if err != nil {
			if !errors.Is(err, ErrCorruptChunk) {
				t.Fatalf("%v, not ErrCorruptChunk", err)
			}
			return
		}
		if len(ss) != int(n) || !bytes.Equal(appendFrame(nil, ss), b) || !bytes.Equal(frame(ss...), b) {
			t.Fatalf("%q parsed as %q, which frames otherwise", b, ss)
		}
	})
}

// TestStringShardsLayout checks shards of variable-length strings byte
// for byte against the sharding layout written out here: inner chunks
// in numcodecs' framing, an index of (offset, size) pairs with its
// CRC-32C, an inner chunk all of the fill value listed as missing; and
// reads a shard built by hand with its index first.
func TestStringShardsLayout(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m := Metadata{Shape: []int{5}, ChunkShape: []int{4}, DataType: DataType{Kind: VarString}, FillValue: "-",
		Codecs: shardCodecs([]int{2}, false, []Codec{{Name: "vlen-utf8"}})}
	a, err := Create(bg, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteStrings(bg, []int{0}, []int{5}, []string{"a", "bé", "", "d", "e"}); err != nil {
		t.Fatal(err)
	}
	index := func(entries ...uint64) []byte {
		var b []byte
		for _, e := range entries {
			b = binary.LittleEndian.AppendUint64(b, e)
		}
		return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	in0, in1 := frame("a", "bé"), frame("", "d")
	missing := uint64(math.MaxUint64)
	for key, want := range map[string][]byte{
		"a/c/0": slices.Concat(in0, in1, index(0, uint64(len(in0)), uint64(len(in0)), uint64(len(in1)))),
		// The last shard: "e" and the padding's fill, then an inner
		// chunk wholly past the array, all fill: missing.
		"a/c/1": slices.Concat(frame("e", "-"), index(0, uint64(len(frame("e", "-"))), missing, missing)),
	} {
		got, err := s.Get(bg, key, nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", key, got, err, want)
		}
	}
	// A shard with its index first, inner chunk 1 before 0.
	m.Codecs = shardCodecs([]int{2}, true, []Codec{{Name: "vlen-utf8"}})
	b, err := Create(bg, s, "b", m)
	if err != nil {
		t.Fatal(err)
	}
	first, second := frame("x", "y"), frame("zz", "")
	base := uint64(2*16 + 4)
	shard := slices.Concat(index(base+uint64(len(second)), uint64(len(first)), base, uint64(len(second))), second, first)
	if err := s.Set(bg, "b/c/0", shard); err != nil {
		t.Fatal(err)
	}
	if got, err := b.ReadStrings(bg, []int{0}, []int{5}); err != nil || !slices.Equal(got, []string{"x", "y", "zz", "", "-"}) {
		t.Errorf("a shard built by hand: %q, %v", got, err)
	}
	// An index entry past the shard: ErrCorruptChunk.
	bad := slices.Concat(index(base, 1<<20, missing, missing), first)
	if err := s.Set(bg, "b/c/0", bad); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadStrings(bg, []int{0}, []int{2}); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("an index entry past the shard: %v, want ErrCorruptChunk", err)
	}
}

// TestStringFixturesZarrPython3 reads what zarr-python 3 wrote (kept by
// zarrs, testdata/README.md): 47,868 city names as a v3 "string" array
// and as v2 "|O" with vlen-utf8, two of their 48 chunks present; and
// three byte strings as v3 "variable_length_bytes". The known names sit
// where the source CSV has them, both formats read alike, the missing
// chunks read as the fill value, and kvik writing the same elements
// stores the same chunks, byte for byte.
func TestStringFixturesZarrPython3(t *testing.T) {
	s, out := fixtureStores(t, "zarrs-strings")
	var cities [][]string
	for _, c := range []struct {
		path   string
		chunks []string
	}{
		{"cities_v3.zarr", []string{"c/0", "c/47"}},
		{"cities_v2.zarr", []string{"0", "47"}},
		{"v3_bytes.zarr", []string{"c/0"}},
	} {
		a, err := Open(bg, s, c.path)
		if err != nil {
			t.Fatal(err)
		}
		shape := a.Shape()
		got, err := a.ReadStrings(bg, []int{0}, shape)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if c.path == "v3_bytes.zarr" {
			if a.DataType().Kind != VarBytes || !slices.Equal(got, []string{"New York", "Los Angeles", "Chicago"}) {
				t.Errorf("%s: %v %q", c.path, a.DataType(), got)
			}
		} else {
			cities = append(cities, got)
			for i, want := range map[int]string{0: "Tokyo", 1: "Jakarta", 2: "Delhi", 998: "Ōta-ku", 999: "Gaalkacyo", 1000: "", 46999: "", 47000: "Bogdanci", 47867: "Charlotte Amalie"} {
				if len(got) != 47868 || got[i] != want {
					t.Errorf("%s: %d elements, [%d] = %q, want %q", c.path, len(got), i, got[min(i, len(got)-1)], want)
				}
			}
		}
		// The same elements, written by kvik under the same metadata.
		m := *a.Metadata()
		b, err := Create(bg, out, c.path, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range c.chunks {
			i, _ := strconv.Atoi(key[strings.LastIndexAny(key, "/")+1:])
			lo, hi := i*m.ChunkShape[0], min((i+1)*m.ChunkShape[0], shape[0])
			if err := b.WriteStrings(bg, []int{lo}, []int{hi}, got[lo:hi]); err != nil {
				t.Fatal(err)
			}
			want, err := s.Get(bg, c.path+"/"+key, nil)
			if err != nil {
				t.Fatal(err)
			}
			mine, err := out.Get(bg, c.path+"/"+key, nil)
			if err != nil || !bytes.Equal(mine, want) {
				t.Errorf("%s/%s: kvik stored %d bytes (%v), zarr-python %d, not the same", c.path, key, len(mine), err, len(want))
			}
		}
	}
	if len(cities) != 2 || !slices.Equal(cities[0], cities[1]) {
		t.Errorf("the v2 and v3 arrays read differently")
	}
}
