package zarr

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkReadRegionZstd reads a 64 MiB zstd-compressed float32 array
// into host memory with 1..8 decode workers (ratios against workers=1 are
// the figure to compare; see zarr/internal/zarrbench for device reads).
func BenchmarkReadRegionZstd(b *testing.B) {
	s, err := NewDirStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	shape := []int{1024, 16384}
	a, err := Create(bg, s, "z", Metadata{Shape: shape, ChunkShape: []int{64, 16384}, DataType: DataType{Float, 4},
		Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}})
	if err != nil {
		b.Fatal(err)
	}
	src := randValues(rand.New(rand.NewPCG(1, 1)), DataType{Float, 4}, numElements(shape))
	if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, len(src))
	for _, w := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			a.SetWorkers(w)
			b.SetBytes(int64(len(dst)))
			for i := 0; i < b.N; i++ {
				if err := a.ReadRegion(bg, []int{0, 0}, shape, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
