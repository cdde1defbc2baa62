package zarr

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// TestDecodeEncodeChunk decodes each stored chunk of arrays of the
// benchmark codecs (sharded included) with DecodeChunk and compares it
// with a region read of the chunk, encodes it again with EncodeChunk and
// decodes that back; buffers of the wrong size fail with
// ErrInvalidRegion.
func TestDecodeEncodeChunk(t *testing.T) {
	shape := []int{128, 80}
	src := fielddata.Float32(shape[0], shape[1], 3)
	for _, c := range benchCodecs {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			chunks := []int{32, 40}
			if c.name == "sharded-zstd" {
				chunks = []int{64, 80} // shards of 2 x 2 inner chunks of 32 x 40
				c.codecs = shardCodecs([]int{32, 40}, false, c.codecs[0].Configuration["codecs"].([]Codec))
			}
			a, err := Create(bg, s, "a", Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: Float, Size: 4}, Codecs: c.codecs})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
				t.Fatal(err)
			}
			n := chunks[0] * chunks[1] * 4
			stored, err := s.Get(bg, a.ChunkKey([]int{1, 0}), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, n)
			if err := a.ReadRegion(bg, []int{chunks[0], 0}, []int{2 * chunks[0], chunks[1]}, want); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := a.DecodeChunk(stored, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("DecodeChunk: %v, or the chunk differs from a read of it", err)
			}
			enc, err := a.EncodeChunk(got)
			if err != nil {
				t.Fatal(err)
			}
			back := make([]byte, n)
			if err := a.DecodeChunk(enc, back); err != nil || !bytes.Equal(back, want) {
				t.Fatalf("DecodeChunk of EncodeChunk's bytes: %v, or they differ", err)
			}
			if len(enc) > 0 && &enc[0] == &got[0] {
				t.Errorf("EncodeChunk returned the chunk itself")
			}
			checkAppendEncoded(t, a, got, enc)
			if err := a.DecodeChunk(stored, got[1:]); !errors.Is(err, ErrInvalidRegion) {
				t.Errorf("DecodeChunk into a short buffer: %v", err)
			}
			if _, err := a.EncodeChunk(got[1:]); !errors.Is(err, ErrInvalidRegion) {
				t.Errorf("EncodeChunk of a short buffer: %v", err)
			}
		})
	}
}

// checkAppendEncoded checks AppendEncodedChunk of chunk (whose
// EncodeChunk is enc) after a random prefix, into a buffer with room for
// it and into one without; with room it must allocate at least half the
// encoded size less than EncodeChunk (it encodes in place); a short
// chunk leaves the buffer as it was.
func checkAppendEncoded(t *testing.T, a *Array, chunk, enc []byte) {
	t.Helper()
	prefix := make([]byte, 1+rand.IntN(100))
	for i := range prefix {
		prefix[i] = byte(rand.Uint32())
	}
	for _, room := range []int{0, 2*len(chunk) + 1024} {
		dst := append(make([]byte, 0, len(prefix)+room), prefix...)
		out, err := a.AppendEncodedChunk(dst, chunk)
		if err != nil {
			t.Fatalf("AppendEncodedChunk (room %d): %v", room, err)
		}
		if !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], enc) {
			t.Fatalf("AppendEncodedChunk (room %d): the prefix or the encoded bytes differ", room)
		}
		if room > 0 && !raceEnabled {
			without := heapGrowth(func() { a.EncodeChunk(chunk) })
			with := heapGrowth(func() { a.AppendEncodedChunk(dst, chunk) })
			if with+uint64(len(enc))/2 > without {
				t.Errorf("AppendEncodedChunk with room allocated %d bytes, %d without: not in place", with, without)
			}
		}
		if got, err := a.AppendEncodedChunk(dst, chunk[1:]); !errors.Is(err, ErrInvalidRegion) || len(got) != len(dst) || &got[0] != &dst[0] {
			t.Errorf("AppendEncodedChunk of a short chunk: %v, or dst changed", err)
		}
	}
}

// heapGrowth returns the fewest bytes the heap grew by over 5 calls of f.
func heapGrowth(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 5 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		least = min(least, m1.TotalAlloc-m0.TotalAlloc)
	}
	return least
}
