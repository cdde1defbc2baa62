package libzstd

import (
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// BenchmarkCompress and BenchmarkDecompress code 1 MiB of field data at
// level 3 on one core, into reused buffers: the binding's figures, to
// hold against the zstd command's (zstd -b3 on the same bytes).
func BenchmarkCompress(b *testing.B) {
	need(b)
	src := fielddata.Float32(512, 512, 1)
	bound, _ := CompressBound(len(src))
	dst := make([]byte, 0, bound)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Compress(dst, src, 3, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecompress(b *testing.B) {
	need(b)
	src := fielddata.Float32(512, 512, 1)
	frame, err := Compress(nil, src, 3, false)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Decompress(dst, frame); err != nil {
			b.Fatal(err)
		}
	}
}
