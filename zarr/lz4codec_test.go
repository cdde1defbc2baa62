package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kvikgo/kvik/internal/liblz4"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// numcodecsLZ4 is numcodecs 0.11's LZ4(acceleration=1).encode of
// lz4Sample(): its size header, then LZ4_compress_fast's block.
const numcodecsLZ4 = "c402000012000100120301001206010012090100120c0100120f0100121201001215010012180100121b0100121e0100122101001224010012270100122a0100122d010012300100123301001236010012390100123c0100123f0100124201001245010012480100124b0100124e0100125101001254010012570100125a0100125d010012600100126301001266010012690100126c0100126f0100127201001275010012780100127b0100127e0100128101001284010012870100128a0100128d010012900100129301001296010012990100129c0100129f010012a2010012a5010012a8010012ab010012ae010012b1010012b4010012b7010012ba010012bd010012c0010012c3010012c6010012c9010012cc010012cf010012d2010012d5010012d8010012db010012de010012e1010012e4010012e7010012ea010012ed010012f0010012f3010012f6010012f9010012010100100401009f7a6172722d6c7a342009004b502d6c7a3420"

// lz4Sample is the input of numcodecsLZ4: runs of seven bytes, then a
// phrase repeated.
func lz4Sample() []byte {
	var b []byte
	for i := range 600 {
		b = append(b, byte((i/7)*3%251))
	}
	return append(b, bytes.Repeat([]byte("zarr-lz4 "), 12)...)
}

// lz4Impls returns pierrec/lz4 and, where it loads, liblz4.
func lz4Impls() []lz4Impl {
	if liblz4.Load() == nil {
		return []lz4Impl{goLZ4{}, nativeLZ4{}}
	}
	return []lz4Impl{goLZ4{}}
}

// TestLZ4Codec checks numcodecs' LZ4 framing: a chunk numcodecs wrote
// decodes, and kvik writes the same bytes at acceleration 1 (through
// pierrec/lz4 and liblz4 alike); chunks of random sizes (none, one byte,
// field data from an unaligned offset, random bytes) at several
// accelerations decode to their input, into a buffer of their size or
// a new one, and both implementations write the same chunk.
func TestLZ4Codec(t *testing.T) {
	want, _ := hex.DecodeString(numcodecsLZ4)
	src := lz4Sample()
	got, err := lz4Codec{}.decode(want, nil, len(src))
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("numcodecs' chunk: %v, %d bytes", err, len(got))
	}
	for _, l := range lz4Impls() {
		enc, err := lz4Codec{acceleration: 1, impl: l}.encode(src, nil)
		if err != nil || !bytes.Equal(enc, want) {
			t.Fatalf("%T: %v, %d bytes, not numcodecs' %d", l, err, len(enc), len(want))
		}
	}

	rng := rand.New(rand.NewPCG(31, 32))
	field := fielddata.Float32(256, 256, rng.Uint64())
	for i := range 30 {
		n := []int{0, 1, 4, 1 << 16}[min(i, 3)]
		if i >= 4 {
			n = rng.IntN(len(field) - 7)
		}
		src := bytes.Clone(field[i%7 : i%7+n])
		if i%5 == 4 {
			for j := range src {
				src[j] = byte(rng.Uint32())
			}
		}
		acc := []int{1, 3, 64, 0, -2}[i%5]
		var first []byte
		for _, l := range lz4Impls() {
			c := lz4Codec{acceleration: acc, impl: l}
			enc, err := c.encode(src, make([]byte, 0, 7))
			if err != nil {
				t.Fatalf("%T, %d bytes: %v", l, n, err)
			}
			if binary.LittleEndian.Uint32(enc) != uint32(n) {
				t.Fatalf("%T, %d bytes: header says %d", l, n, binary.LittleEndian.Uint32(enc))
			}
			for _, dst := range [][]byte{nil, make([]byte, 0, n)} {
				dec, err := c.decode(enc, dst, n)
				if err != nil || !bytes.Equal(dec, src) {
					t.Fatalf("%T, %d bytes, acceleration %d: decodes to %d other bytes (%v)", l, n, acc, len(dec), err)
				}
			}
			if first == nil {
				first = enc
			} else if !bytes.Equal(enc, first) {
				t.Errorf("%d bytes, acceleration %d: pierrec/lz4 and liblz4 write different chunks", n, acc)
			}
		}
	}
}

// TestLZ4CodecCorrupt decodes spoiled chunks: shorter than the header,
// a header past the limit (refused before anything is allocated for
// it), a header above or below the block's size, the block cut short,
// random bytes: each fails with ErrCorruptChunk. A flipped bit fails so
// too, or decodes to exactly the header's size (the format has no
// checksum); none panics.
func TestLZ4CodecCorrupt(t *testing.T) {
	src := lz4Sample()
	enc, err := lz4Codec{acceleration: 1}.encode(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	header := func(n uint32) []byte {
		b := bytes.Clone(enc)
		binary.LittleEndian.PutUint32(b, n)
		return b
	}
	junk := make([]byte, 300)
	rng := rand.New(rand.NewPCG(33, 34))
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	for name, b := range map[string][]byte{
		"empty": nil, "3 bytes": enc[:3], "header only": enc[:4], "cut short": enc[:len(enc)-5],
		"header 4 GiB": header(0xFFFFFFFF), "header one more": header(uint32(len(src) + 1)),
		"header one less": header(uint32(len(src) - 1)), "header zero": header(0), "random bytes": junk,
	} {
		if _, err := (lz4Codec{}).decode(b, nil, len(src)+64); !errors.Is(err, ErrCorruptChunk) {
			t.Errorf("%s: %v, want ErrCorruptChunk", name, err)
		}
	}
	huge := header(0xFFFFFFFF)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = lz4Codec{}.decode(huge, nil, 1<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorruptChunk) || after.TotalAlloc-before.TotalAlloc > 1<<30 {
		t.Errorf("a 4 GiB header against a 1 MiB limit: %v, %d bytes allocated", err, after.TotalAlloc-before.TotalAlloc)
	}
	for range 500 {
		b := bytes.Clone(enc)
		b[4+rng.IntN(len(b)-4)] ^= 1 << rng.IntN(8)
		dec, err := lz4Codec{}.decode(b, nil, len(src))
		if err != nil && !errors.Is(err, ErrCorruptChunk) || err == nil && len(dec) != len(src) {
			t.Fatalf("a flipped bit: %d bytes, %v", len(dec), err)
		}
	}
}

// TestLZ4CodecNames checks the codec's names: "lz4" in a v2 array's
// compressor and "numcodecs.lz4" in a v3 array's codecs each write and
// read back a region at an unaligned place; "lz4" in a v3 array fails
// with ErrUnsupportedCodec, and a non-numeric acceleration with
// ErrInvalidMetadata.
func TestLZ4CodecNames(t *testing.T) {
	s, _ := NewDirStore(t.TempDir())
	want := fielddata.Float32(1, 300, 35)
	acc := map[string]any{"acceleration": 2}
	for _, m := range []Metadata{
		{Shape: []int{300}, ChunkShape: []int{64}, DataType: DataType{Kind: Float, Size: 4}, Compressor: &Codec{Name: "lz4", Configuration: acc}, ZarrFormat: 2},
		{Shape: []int{300}, ChunkShape: []int{64}, DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"}, {Name: "numcodecs.lz4", Configuration: acc}}},
	} {
		name := "v3"
		if m.ZarrFormat == 2 {
			name = "v2"
		}
		a, err := Create(bg, s, name, m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := a.WriteRegion(bg, []int{0}, []int{300}, want); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := make([]byte, 4*101)
		if err := a.ReadRegion(bg, []int{37}, []int{138}, got); err != nil || !bytes.Equal(got, want[4*37:4*138]) {
			t.Fatalf("%s: read back %v", name, err)
		}
	}
	// zarr-python's own copy of the codec names it "lz4" in v3, as
	// numcodecs does in v2: the chunks are "numcodecs.lz4"'s.
	var stored [][]byte
	for _, name := range []string{"lz4", "numcodecs.lz4"} {
		v3 := Metadata{Shape: []int{8}, ChunkShape: []int{4}, DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"}, {Name: name}}}
		a, err := Create(bg, s, "v3-"+name, v3)
		if err != nil {
			t.Fatalf("v3 %q: %v", name, err)
		}
		if err := a.WriteRegion(bg, []int{0}, []int{8}, want[:32]); err != nil {
			t.Fatal(err)
		}
		b, _ := s.Get(bg, a.ChunkKey([]int{1}), nil)
		stored = append(stored, b)
	}
	if !bytes.Equal(stored[0], stored[1]) {
		t.Errorf("v3 \"lz4\" stored %x, \"numcodecs.lz4\" %x", stored[0], stored[1])
	}
	bad := Metadata{Shape: []int{8}, ChunkShape: []int{4}, DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"},
		{Name: "numcodecs.lz4", Configuration: map[string]any{"acceleration": "fast"}}}}
	if _, err := Create(bg, s, "bad", bad); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("acceleration \"fast\": %v, want ErrInvalidMetadata", err)
	}
}

// FuzzLZ4Codec decodes arbitrary bytes as numcodecs LZ4 chunks with a
// limit: nothing panics, nothing decodes past the limit, and what
// decodes encodes to a chunk that decodes to it again.
func FuzzLZ4Codec(f *testing.F) {
	enc, _ := lz4Codec{acceleration: 1}.encode(lz4Sample(), nil)
	f.Add(enc, uint16(len(lz4Sample())))
	f.Add([]byte{0, 0, 0, 0, 0}, uint16(0))
	f.Add([]byte{1, 0, 0, 0, 0x10, 'a'}, uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, limit uint16) {
		dec, err := lz4Codec{}.decode(b, nil, int(limit))
		if err != nil {
			if !errors.Is(err, ErrCorruptChunk) {
				t.Fatalf("%v, not ErrCorruptChunk", err)
			}
			return
		}
		if len(dec) > int(limit) {
			t.Fatalf("%d bytes decoded past the limit %d", len(dec), limit)
		}
		again, err := lz4Codec{acceleration: 1}.encode(dec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := (lz4Codec{}).decode(again, make([]byte, 0, len(dec)), len(dec)); err != nil || !bytes.Equal(back, dec) {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}
