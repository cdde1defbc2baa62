package kvik_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/kvikgo/kvik"
)

// BenchmarkColdUnaligned reads a file from an unaligned offset to its end
// with the page cache dropped before every read, as a loader reads the
// data after a safetensors or .npy header, and compares device-read task
// boundaries on page boundaries (the default, deviceTasks) with
// boundaries at offset+k*TaskSize, where every task has a partial page at
// each end. The two alternate read by read in one process, since a
// virtual disk drifts by more than the difference looked for; it reports
// the median GB/s of each and their ratio. Host reads, which split at
// offset+k*TaskSize either way, run the same alternation as a control:
// their ratio shows the noise. KVIK_BENCH_OFFSET (default 70008) is the offset; the file is
// KVIK_BENCH_SIZE bytes in KVIK_BENCH_DIR, which must be on a disk;
// KVIK_BENCH_THREADS lists the worker counts (default 16). With a GPU it
// also reads into device memory through the POSIX path.
//
//	KVIK_BENCH_DIR=/root KVIK_BENCH_SIZE=2147483648 go test -run '^$' -bench ColdUnaligned -benchtime 4x
func BenchmarkColdUnaligned(b *testing.B) {
	path, size := benchFile(b)
	off := benchOffset(b, size)
	n := size - int(off)
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	reads := hostAndDeviceReads(b, f, off, n)
	for _, mem := range []string{"host", "device"} {
		read := reads[mem]
		if read == nil {
			continue
		}
		for _, threads := range threadList(b, []int{16}) {
			b.Run(fmt.Sprintf("%s/threads=%d", mem, threads), func(b *testing.B) {
				setDefaults(b, func(d *kvik.Defaults) { d.NumThreads = threads })
				b.Cleanup(kvik.SetAlignTasks(true))
				// The same read twice: before sets which alignment it runs with.
				check := func() error {
					if got, err := read(); got != n || err != nil {
						return fmt.Errorf("read %d of %d bytes at %d: %v", got, n, off, err)
					}
					return nil
				}
				secs := alternate(b, []func() error{check, check}, func(_, j int) {
					kvik.SetAlignTasks(j == 0)
					if err := kvik.DropFilePageCache(path, 0, 0); err != nil {
						b.Fatal(err)
					}
				})
				aligned, unaligned := gbps(n, secs[0]), gbps(n, secs[1])
				b.ReportMetric(aligned, "aligned-GB/s")
				b.ReportMetric(unaligned, "unaligned-GB/s")
				b.ReportMetric(aligned/unaligned, "aligned/unaligned")
			})
		}
	}
}

// benchOffset returns KVIK_BENCH_OFFSET, an offset inside a file of size
// bytes, default 70008 (unaligned, as data after a safetensors header).
func benchOffset(b *testing.B, size int) int64 {
	s := os.Getenv("KVIK_BENCH_OFFSET")
	if s == "" {
		return 70008
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n >= int64(size) {
		b.Fatalf("KVIK_BENCH_OFFSET=%q: want an offset inside the %d-byte file", s, size)
	}
	return n
}
