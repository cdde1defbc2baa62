package safetensors

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSaveSharded saves 512 MiB of host tensors (KVIK_BENCH_SAVE_SIZE
// bytes) in 64 MiB shards to KVIK_TEST_DIR (or a temporary directory),
// one shard at a time and four at once.
func BenchmarkSaveSharded(b *testing.B) {
	total := int64(512 << 20)
	if v, err := fmt.Sscan(os.Getenv("KVIK_BENCH_SAVE_SIZE"), &total); err != nil || v != 1 {
		total = 512 << 20
	}
	var ts []SaveTensor
	for i := int64(0); i*(8<<20+6) < total; i++ {
		d := make([]byte, 8<<20+6)
		for j := 0; j < len(d); j += 4096 {
			d[j] = byte(i + int64(j))
		}
		ts = append(ts, SaveTensor{Name: fmt.Sprint("t", i), Dtype: U8, Shape: []int64{int64(len(d))}, Data: d})
	}
	dir := b.TempDir()
	if d := os.Getenv("KVIK_TEST_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "bench-"); err != nil {
			b.Fatal(err)
		}
		defer os.RemoveAll(dir)
	}
	for _, par := range []int{1, 4} {
		b.Run(fmt.Sprint("parallel=", par), func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				out := filepath.Join(dir, "ckpt")
				if _, err := SaveSharded(context.Background(), out, ts, nil, &ShardOptions{MaxShardSize: 64 << 20, Parallel: par}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(out)
				b.StartTimer()
			}
		})
	}
}
