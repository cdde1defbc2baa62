package zarr

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// BenchmarkRemoteSharded reads an uncompressed float32 array from
// versitygw on loopback into host memory three ways: sharded (shards of
// 32 inner chunks of 1 MiB), unsharded (chunks of 1 MiB), and the same
// bytes as one object (RemoteHandle.ReadAt), the ceiling. The size is
// KVIK_BENCH_ZARR_MIB (default 256; the GPU figure of issue 29 is at
// 1024, see bench/zarr_remote_gpu.sh). x-raw is the variant's speed
// over the raw object's, measured in turns (issue 29's target for
// sharded arrays: >= 0.8).
func BenchmarkRemoteSharded(b *testing.B) {
	mib := 256
	if s := os.Getenv("KVIK_BENCH_ZARR_MIB"); s != "" {
		var err error
		if mib, err = strconv.Atoi(s); err != nil || mib < 32 || mib%32 != 0 {
			b.Fatalf("KVIK_BENCH_ZARR_MIB=%q: want a multiple of 32", s)
		}
	}
	srv := s3test.Start(b)
	const cols = 1024 // float32: 4 KiB rows, 256 rows per MiB
	shape, inner := []int{mib * 256, cols}, []int{256, cols}
	dt := DataType{Kind: Float, Size: 4}
	src := randValues(rand.New(rand.NewPCG(1, 2)), dt, numElements(shape))
	bytesLE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	variants := map[string]Metadata{
		"unsharded": {Shape: shape, ChunkShape: inner, DataType: dt},
		"sharded": {Shape: shape, ChunkShape: []int{32 * 256, cols}, DataType: dt, Codecs: []Codec{{Name: "sharding_indexed", Configuration: map[string]any{
			"chunk_shape": inner, "codecs": []Codec{bytesLE}, "index_codecs": []Codec{bytesLE, {Name: "crc32c"}},
		}}}},
	}
	arrays := map[string]*Array{}
	for name, m := range variants {
		local, err := NewDirStore(filepath.Join(srv.Dir, s3test.Bucket, name+".zarr"))
		if err != nil {
			b.Fatal(err)
		}
		a, err := Create(bg, local, "", m)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
			b.Fatal(err)
		}
		s, err := OpenURL(bg, srv.URLOf(name+".zarr"), WithRemoteOptions(srv.Opts()...))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if arrays[name], err = Open(bg, s, ""); err != nil {
			b.Fatal(err)
		}
	}
	obj, err := kvik.OpenRemote(bg, srv.Put(b, "raw.bin", src), srv.Opts()...)
	if err != nil {
		b.Fatal(err)
	}
	defer obj.Close()
	dst := make([]byte, len(src))
	rawRead := func() error { _, err := obj.ReadAt(dst, 0); return err }
	// Each iteration of the zarr variants also reads the raw object,
	// untimed, and x-raw reports the ratio of the two (interleaved, so
	// that a noisy machine shifts both alike).
	for _, name := range []string{"raw", "unsharded", "sharded"} {
		b.Run(name, func(b *testing.B) {
			clear(dst)
			b.SetBytes(int64(len(dst)))
			var tRaw, tZarr time.Duration
			for b.Loop() {
				if name == "raw" {
					if err := rawRead(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				b.StopTimer()
				t0 := time.Now()
				if err := rawRead(); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				b.StartTimer()
				if err := arrays[name].ReadRegion(bg, []int{0, 0}, shape, dst); err != nil {
					b.Fatal(err)
				}
				tRaw, tZarr = tRaw+t1.Sub(t0), tZarr+time.Since(t1)
			}
			if tZarr > 0 {
				b.ReportMetric(tRaw.Seconds()/tZarr.Seconds(), "x-raw")
			}
			if !bytes.Equal(dst, src) {
				b.Fatal("read back differs")
			}
		})
	}
}
