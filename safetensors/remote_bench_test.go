package safetensors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// benchSize is KVIK_BENCH_SIZE in bytes, or def.
func benchSize(tb testing.TB, def int64) int64 {
	s := os.Getenv("KVIK_BENCH_SIZE")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1<<20 {
		tb.Fatalf("KVIK_BENCH_SIZE=%q: want a byte count of at least 1 MiB", s)
	}
	return n
}

// writeCheckpoint writes a transformer-like checkpoint of about size
// bytes at path: 64 bf16 tensors of whole rows of 4096 elements, random
// bytes, so the data area is one aligned run.
func writeCheckpoint(tb testing.TB, path string, size int64) {
	tb.Helper()
	const row = 4096 * 2
	rows := max(size/64/row, 1)
	data := make([]byte, 64*rows*row)
	rng := rand.New(rand.NewPCG(uint64(size), 7))
	for i := 0; i+8 <= len(data); i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			data[i+k] = byte(v >> (8 * k))
		}
	}
	ts := make([]SaveTensor, 64)
	for i := range ts {
		ts[i] = SaveTensor{Name: fmt.Sprintf("layers.%02d.weight", i), Dtype: BF16, Shape: []int64{rows, 4096},
			Data: data[int64(i)*rows*row : int64(i+1)*rows*row]}
	}
	if err := Save(context.Background(), path, ts, map[string]string{"format": "pt"}); err != nil {
		tb.Fatal(err)
	}
}

// TestWriteBenchCheckpoint writes the checkpoint of BenchmarkS3Load at
// KVIK_ST_BENCH_FILE (KVIK_BENCH_SIZE bytes, default 2 GiB), for
// bench/formats_remote_gpu.sh's kvik bench --url.
func TestWriteBenchCheckpoint(t *testing.T) {
	path := os.Getenv("KVIK_ST_BENCH_FILE")
	if path == "" {
		t.Skip("KVIK_ST_BENCH_FILE not set")
	}
	writeCheckpoint(t, path, benchSize(t, 2<<30))
}

// BenchmarkS3Load loads a checkpoint (KVIK_BENCH_SIZE bytes, default 256
// MiB) from S3 (versitygw on loopback) onto GPU 0 with Load, and reads
// the same object whole into a new allocation with
// RemoteHandle.ReadDevice, taking turns; both include opening and
// allocating. It reports each one's median seconds and load/read, the
// ratio of their throughputs (1 is as fast as the plain read).
func BenchmarkS3Load(b *testing.B) {
	gputest.Need(b)
	size := benchSize(b, 256<<20)
	v := s3test.Start(b)
	writeCheckpoint(b, filepath.Join(v.Dir, s3test.Bucket, "model.safetensors"), size)
	url := v.URLOf("model.safetensors")
	ctx := gputest.Primary(b, 0) // kept for the whole benchmark
	load := func() error {
		m, err := Load(context.Background(), url, nil, v.Opts()...)
		if err != nil {
			return err
		}
		return m.Close()
	}
	read := func() error {
		h, err := kvik.OpenRemote(context.Background(), url, v.Opts()...)
		if err != nil {
			return err
		}
		defer h.Close()
		n, _ := h.Size()
		var buf *cuda.DeviceBuffer
		if err := cuda.WithContext(ctx, func() (err error) { buf, err = cuda.MemAlloc(int(n)); return err }); err != nil {
			return err
		}
		defer buf.Close()
		got, err := h.ReadDevice(buf.Ptr(), int(n), 0, 0)
		if err == nil && int64(got) != n {
			err = fmt.Errorf("read %d of %d bytes", got, n)
		}
		return err
	}
	runs := []func() error{read, load}
	secs := make([][]float64, 2)
	for i := 0; b.Loop(); i++ {
		for k := range runs {
			j := (k + i) % 2 // each round starts with the other one
			t0 := time.Now()
			if err := runs[j](); err != nil {
				b.Fatal(err)
			}
			secs[j] = append(secs[j], time.Since(t0).Seconds())
		}
	}
	readMed, loadMed := medianOf(secs[0]), medianOf(secs[1])
	b.ReportMetric(readMed, "read-s")
	b.ReportMetric(loadMed, "load-s")
	b.ReportMetric(readMed/loadMed, "load/read")
	b.ReportMetric(float64(size)/loadMed/1e9, "load-GB/s")
}

func medianOf(x []float64) float64 {
	s := slices.Sorted(slices.Values(x))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}
