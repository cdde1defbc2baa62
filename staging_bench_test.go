package kvik_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// BenchmarkStagingVariants reads the benchmark file (KVIK_BENCH_SIZE
// bytes in KVIK_BENCH_DIR; use /dev/shm) into host memory and into device
// memory through each staging variant of KVIK_BENCH_VARIANTS (see
// SetStagingVariant; default pipeline,nozc,serial,parts4), the
// reads alternating round after round, at each worker count of
// KVIK_BENCH_THREADS (default 1,4,16,32). Each variant's median is
// reported in GB/s beside the host read's, so that every ratio comes from
// one process and one run:
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 go test -run '^$' -bench StagingVariants -benchtime 5x
func BenchmarkStagingVariants(b *testing.B) {
	path, size := benchFile(b)
	variants := strings.Split("pipeline,nozc,serial,parts4", ",")
	if v := os.Getenv("KVIK_BENCH_VARIANTS"); v != "" {
		variants = strings.Split(v, ",")
	}
	f := openBench(b, path, "r")
	reads := hostAndDeviceReads(b, f, 0, size)
	if reads["device"] == nil {
		b.Skip("no GPU: nothing to stage")
	}
	for _, threads := range threadList(b, []int{1, 4, 16, 32}) {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			setDefaults(b, func(d *kvik.Defaults) { d.NumThreads, d.CompatMode = threads, kvik.CompatOn })
			runs := []func() error{whole(reads["host"], size)}
			for _, v := range variants {
				dev := whole(reads["device"], size)
				runs = append(runs, func() error {
					restore, err := kvik.SetStagingVariant(v)
					defer restore()
					if err != nil {
						return err
					}
					return dev()
				})
			}
			secs := alternate(b, runs, nil)
			host := gbps(size, secs[0])
			b.ReportMetric(host, "host-GB/s")
			for i, v := range variants {
				dev := gbps(size, secs[i+1])
				b.ReportMetric(dev, v+"-GB/s")
				b.ReportMetric(dev/host, v+"/host")
			}
		})
	}
}

// whole turns a read into one that fails unless it moves n bytes.
func whole(read func() (int, error), n int) func() error {
	return func() error {
		if got, err := read(); got != n || err != nil {
			return fmt.Errorf("read %d of %d bytes: %v", got, n, err)
		}
		return nil
	}
}

// TestStagingVariantsRead reads random ranges of a file (random sizes,
// unaligned offsets, past the end) into device memory through every
// staging variant and compares with the file's bytes.
func TestStagingVariantsRead(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 21))
	dir := testDir(t)
	data := randomBytes(rng, 9<<20+rng.IntN(1<<20))
	path := filepath.Join(dir, "variants")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dev := devAlloc(t, ctx, len(data)+4096)
	for _, v := range []string{"pipeline", "nozc", "serial", "spread", "parts4", "zc4m+zcmin1m", "zcall+zc4m+zcmin1m", "zcall+serial+zc1m+zcmin1m", "blocksync", "serial+blocksync", "spinsync", "ramp256k", "ramp512k+parts4"} {
		for _, threads := range []int{1, 3, 16} {
			setDefaults(t, func(d *kvik.Defaults) { d.NumThreads, d.TaskSize = threads, 1<<20+rng.IntN(4)*4096 })
			restore, err := kvik.SetStagingVariant(v)
			if err != nil {
				t.Fatal(err)
			}
			for range 4 {
				off := int64(rng.IntN(len(data)))
				n := rng.IntN(len(data) - int(off) + 5000)
				devOff := int64(rng.IntN(4096))
				want := min(n, len(data)-int(off))
				got, err := f.ReadDevice(dev.Ptr(), n, off, devOff)
				if got != want || (want < n) != (err == io.EOF) || (want == n && err != nil) {
					t.Fatalf("%s, %d workers: read %d at %d: %d, %v (want %d)", v, threads, n, off, got, err, want)
				}
				if b := fromDevice(t, ctx, dev.Ptr()+cuda.DevicePtr(devOff), got); !bytes.Equal(b, data[off:off+int64(got)]) {
					t.Fatalf("%s, %d workers: read %d at %d: device bytes differ", v, threads, n, off)
				}
			}
			restore()
		}
	}
	if moved, refused := kvik.ZeroCopyLane(); refused {
		t.Logf("the driver refused to register file pages: lanes fell back to bounce buffers")
	} else if moved == 0 {
		t.Errorf("no zero-copy lane ran")
	}
	if _, err := kvik.SetStagingVariant("zc0"); err == nil {
		t.Error("lane pieces of 0 bytes accepted")
	}
}
