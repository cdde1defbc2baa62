package kvik_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
)

// BenchmarkPreadBesideCopies measures what bounds a small device read from
// the page cache through bounce buffers. Workers goroutines pread their
// shares of a KVIK_BENCH_SIZE file (default 16 MiB, in KVIK_BENCH_DIR)
// into pinned memory in 1 MiB chunks (KVIK_BENCH_CHUNK): "alone", and
// "copies", where each chunk is queued to the device right after its
// read, as the staging pipeline does; "dma" times the copies alone. The
// three alternate in one process. It reports their medians, how much
// slower the preads ran beside the copies (pread-slowdown), and
// copies/(alone+dma): near 1 means that reads and copies add up instead
// of overlapping.
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_THREADS=4,16 go test -run '^$' -bench PreadBesideCopies -benchtime 100x
func BenchmarkPreadBesideCopies(b *testing.B) {
	ctx := needGPU(b)
	if os.Getenv("KVIK_BENCH_SIZE") == "" {
		b.Setenv("KVIK_BENCH_SIZE", strconv.Itoa(16<<20))
	}
	path, size := benchFile(b)
	loadPageCache(b, path)
	chunk := 1 << 20
	if s := os.Getenv("KVIK_BENCH_CHUNK"); s != "" {
		var err error
		if chunk, err = strconv.Atoi(s); err != nil || chunk <= 0 {
			b.Fatalf("KVIK_BENCH_CHUNK=%q: want a positive chunk size", s)
		}
	}
	f := openBench(b, path, "r")
	pinned := pinnedHost(b, ctx, size, cuda.MemHostAllocPortable)
	dev := devAlloc(b, ctx, size)
	for _, n := range threadList(b, []int{4, 16}) {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			streams := make([]cuda.Stream, n)
			for i := range streams {
				if err := cuda.WithContext(ctx, func() (err error) { streams[i], err = cuda.StreamCreate(0); return err }); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cuda.WithContext(ctx, func() error { return cuda.StreamDestroy(streams[i]) }) })
			}
			share := (size/n + chunk - 1) / chunk * chunk
			var preadNs [2]atomic.Int64 // pread time summed: alone, beside copies
			// run runs the workers over their shares: with read, pread each
			// chunk; with copy, queue it to the device.
			run := func(read, copy bool) error {
				return runWorkers(n, func(w int) error {
					return cuda.WithContext(ctx, func() error {
						for off := w * share; off < min((w+1)*share, size); off += chunk {
							p := pinned[off:min(off+chunk, size)]
							if read {
								start := time.Now()
								if err := full(unix.Pread(f.Fd(), p, int64(off))); err != nil {
									return err
								}
								preadNs[btoi(copy)].Add(int64(time.Since(start)))
							}
							if copy {
								if err := cuda.MemcpyHtoDAsync(dev.Ptr()+cuda.DevicePtr(off), p, streams[w]); err != nil {
									return err
								}
							}
						}
						return cuda.StreamSynchronize(streams[w])
					})
				})
			}
			reads := []func() error{
				func() error { return run(true, false) },
				func() error { return run(true, true) },
				func() error { return run(false, true) },
			}
			secs := alternate(b, reads, nil)
			med := func(j int) float64 { // µs, the upper median as gbps takes it
				s := slices.Sorted(slices.Values(secs[j]))
				return s[len(s)/2] * 1e6
			}
			alone, copies, dma := med(0), med(1), med(2)
			b.ReportMetric(alone, "alone-µs")
			b.ReportMetric(copies, "copies-µs")
			b.ReportMetric(dma, "dma-µs")
			b.ReportMetric(float64(preadNs[1].Load())/float64(max(preadNs[0].Load(), 1)), "pread-slowdown")
			b.ReportMetric(copies/(alone+dma), "copies/(alone+dma)")
		})
	}
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}
