package zarr

import (
	"bytes"
	"errors"
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
			a, err := Create(bg, s, "a", Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Float, 4}, Codecs: c.codecs})
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
			if err := a.DecodeChunk(stored, got[1:]); !errors.Is(err, ErrInvalidRegion) {
				t.Errorf("DecodeChunk into a short buffer: %v", err)
			}
			if _, err := a.EncodeChunk(got[1:]); !errors.Is(err, ErrInvalidRegion) {
				t.Errorf("EncodeChunk of a short buffer: %v", err)
			}
		})
	}
}
