package kvik_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
)

// BenchmarkHostReadVsPread times kvik's ReadAt against the least a Go
// program can do for the same read: workers goroutines taking 4 MiB pread
// tasks from a counter, started per read. The two alternate in one
// process, into the same buffer, with a pause between reads as between a
// caller's operations; it reports the median of each and their ratio, so
// that the difference is kvik's per-operation cost. Sizes are 16 and 64
// MiB (files in KVIK_BENCH_DIR); KVIK_BENCH_THREADS lists worker counts;
// KVIK_BENCH_PAUSE sets the pause (default 1ms); KVIK_BENCH_CUDA=1 makes a
// CUDA context first, as kvik bench does.
//
//	KVIK_BENCH_DIR=/dev/shm go test -run '^$' -bench HostReadVsPread -benchtime 200x
func BenchmarkHostReadVsPread(b *testing.B) {
	pause := time.Millisecond
	if s := os.Getenv("KVIK_BENCH_PAUSE"); s != "" {
		var err error
		if pause, err = time.ParseDuration(s); err != nil {
			b.Fatalf("KVIK_BENCH_PAUSE: %v", err)
		}
	}
	if os.Getenv("KVIK_BENCH_CUDA") == "1" {
		needGPU(b)
	}
	for _, size := range []int{16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("size=%dMiB", size>>20), func(b *testing.B) {
			b.Setenv("KVIK_BENCH_SIZE", fmt.Sprint(size))
			path, _ := benchFile(b)
			loadPageCache(b, path)
			buf := hostBuffer(b, size)
			benchThreads(b, func(b *testing.B) {
				f := openBench(b, path, "r")
				d, _ := kvik.GetDefaults()
				fd := f.Fd()
				reads := []func() error{
					func() error { return full(f.ReadAt(buf, 0)) },
					func() error { return preadTasks(fd, buf, d.NumThreads, d.TaskSize) },
				}
				secs := alternate(b, reads, func(int, int) { time.Sleep(pause) })
				kv, pr := gbps(size, secs[0]), gbps(size, secs[1])
				b.ReportMetric(kv, "kvik-GB/s")
				b.ReportMetric(pr, "pread-GB/s")
				b.ReportMetric(kv/pr, "kvik/pread")
			})
		})
	}
}

func full(n int, err error) error { return err }

// preadTasks reads len(buf) bytes from fd in task-sized preads on
// workers goroutines.
func preadTasks(fd int, buf []byte, workers, task int) error {
	var next atomic.Int64
	return runWorkers(workers, func(int) error {
		for {
			off := int(next.Add(int64(task))) - task
			if off >= len(buf) {
				return nil
			}
			p := buf[off:min(off+task, len(buf))]
			for len(p) > 0 {
				n, err := unix.Pread(fd, p, int64(off))
				if err != nil || n == 0 {
					return fmt.Errorf("pread at %d: %d, %v", off, n, err)
				}
				p, off = p[n:], off+n
			}
		}
	})
}
