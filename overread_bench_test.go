package kvik_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik"
)

// BenchmarkColdOverread compares over-read on (KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD=1:
// the unaligned head and tail of a direct read go to the drive with
// O_DIRECT, through a staging page) with over-read off (head and tail
// read buffered, KvikIO's default), under the direct read policy, with
// the file's page cache dropped before every read. The two alternate read
// by read in one process (see BenchmarkColdUnaligned); it reports the
// median GB/s of each and their ratio. Workloads:
//
//   - whole: the file from an unaligned offset to its end
//     (KVIK_BENCH_OFFSET, default 70008), as a loader reads the data
//     after a safetensors header, into host memory and, with a GPU, into
//     device memory through the POSIX path;
//   - small: 512 reads of 64 KiB + 123 bytes at random unaligned offsets,
//     as many at once as there are workers, into host memory.
//
// The file is KVIK_BENCH_SIZE bytes in KVIK_BENCH_DIR, which must be on a
// disk (ext4, say; not tmpfs); KVIK_BENCH_THREADS lists the worker counts
// (default 16).
//
//	KVIK_BENCH_DIR=/root KVIK_BENCH_SIZE=2147483648 go test -run '^$' -bench ColdOverread -benchtime 5x
func BenchmarkColdOverread(b *testing.B) {
	path, size := benchFile(b)
	off := benchOffset(b, size)
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if !f.IsDirectIOSupported() {
		b.Skipf("%s: no O_DIRECT here, so nothing to over-read", path)
	}
	reads := hostAndDeviceReads(b, f, off, size-int(off))
	const smallN, smallLen = 512, 64<<10 + 123
	rng := rand.New(rand.NewPCG(5, 6))
	offs := make([]int64, smallN)
	for i := range offs {
		offs[i] = rng.Int64N(int64(size - smallLen))
	}
	small := hostBuffer(b, smallN*smallLen)
	workloads := []struct {
		name  string
		bytes int
		read  func(threads int) error
	}{
		{"whole/host", size - int(off), wholeRead(reads["host"], size-int(off))},
		{"whole/device", size - int(off), wholeRead(reads["device"], size-int(off))},
		{"small/host", smallN * smallLen, func(threads int) error {
			return runWorkers(threads, func(w int) error {
				for i := w; i < smallN; i += threads {
					p := small[i*smallLen : (i+1)*smallLen]
					if n, err := f.ReadAt(p, offs[i]); n != len(p) || err != nil {
						return fmt.Errorf("read %d of %d bytes at %d: %v", n, len(p), offs[i], err)
					}
				}
				return nil
			})
		}},
	}
	for _, wl := range workloads {
		for _, threads := range threadList(b, []int{16}) {
			b.Run(fmt.Sprintf("%s/threads=%d", wl.name, threads), func(b *testing.B) {
				if wl.name == "whole/device" && reads["device"] == nil {
					b.Skip("no GPU")
				}
				setDefaults(b, func(*kvik.Defaults) {}) // restores the settings after
				read := func() error { return wl.read(threads) }
				secs := alternate(b, []func() error{read, read}, func(_, j int) {
					if _, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
						d.NumThreads, d.AutoDirectIORead, d.DirectIOReadPolicy = threads, false, kvik.ReadPolicyDirect
						d.AutoDirectIOReadOverread = j == 0
					}); err != nil {
						b.Fatal(err)
					}
					if err := kvik.DropFilePageCache(path, 0, 0); err != nil {
						b.Fatal(err)
					}
				})
				on, off := gbps(wl.bytes, secs[0]), gbps(wl.bytes, secs[1])
				b.ReportMetric(on, "overread-GB/s")
				b.ReportMetric(off, "buffered-GB/s")
				b.ReportMetric(on/off, "overread/buffered")
			})
		}
	}
}

// wholeRead adapts a read of n bytes (nil where unavailable).
func wholeRead(read func() (int, error), n int) func(int) error {
	return func(int) error {
		if got, err := read(); got != n || err != nil {
			return fmt.Errorf("read %d of %d bytes: %v", got, n, err)
		}
		return nil
	}
}
