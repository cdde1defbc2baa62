package kvik_test

import (
	"bytes"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// BenchmarkZeroCopyOneShot asks whether a one-shot device read of a file
// in the page cache could skip the bounce buffers: workers goroutines take
// 64 MiB chunks of a read-only mapping and, per chunk, fault the pages in
// (MADV_POPULATE_READ), register them (cuMemHostRegister, read-only), copy
// them to the device and unregister them. It alternates with kvik's
// ReadDevice (bounce buffers) of the same file with the same workers and
// reports both, their ratio, and the share of the zero-copy time spent in
// registering and unregistering (summed over workers). KVIK_BENCH_SIZE,
// KVIK_BENCH_DIR and KVIK_BENCH_THREADS as for the other benchmarks.
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 go test -run '^$' -bench ZeroCopyOneShot -benchtime 4x
func BenchmarkZeroCopyOneShot(b *testing.B) {
	ctx := needGPU(b)
	path, size := benchFile(b)
	loadPageCache(b, path)
	dev := devAlloc(b, ctx, size)
	file, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { file.Close() })
	benchThreads(b, func(b *testing.B) {
		f := openBench(b, path, "r")
		d, _ := kvik.GetDefaults()
		var regNs atomic.Int64
		zero := func() error { return zeroCopyRead(ctx, int(file.Fd()), size, dev.Ptr(), d.NumThreads, &regNs) }
		bounce := func() error {
			_, err := f.ReadDevice(dev.Ptr(), size, 0, 0)
			return err
		}
		secs := alternate(b, []func() error{zero, bounce}, func(round, j int) {
			if round == 0 && j == 1 { // the first round's zero-copy read just ran
				checkDeviceWindows(b, ctx, file, dev.Ptr(), size)
			}
		})
		zc, bb := gbps(size, secs[0]), gbps(size, secs[1])
		b.ReportMetric(zc, "zerocopy-GB/s")
		b.ReportMetric(bb, "bounce-GB/s")
		b.ReportMetric(zc/bb, "zerocopy/bounce")
		total := 0.0
		for _, s := range secs[0] {
			total += s
		}
		b.ReportMetric(float64(regNs.Load())/1e9/total/float64(d.NumThreads), "reg-share")
	})
}

// zeroCopyRead is the one-shot zero-copy read of BenchmarkZeroCopyOneShot.
func zeroCopyRead(ctx cuda.Context, fd, size int, dst cuda.DevicePtr, workers int, regNs *atomic.Int64) error {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	const chunk = 64 << 20
	var next atomic.Int64
	return runWorkers(workers, func(int) error {
		return cuda.WithContext(ctx, func() error {
			s, err := cuda.StreamCreate(1)
			if err != nil {
				return err
			}
			defer cuda.StreamDestroy(s)
			for {
				off := int(next.Add(chunk)) - chunk
				if off >= size {
					return nil
				}
				p := mem[off:min(off+chunk, size)]
				if err := unix.Madvise(p, unix.MADV_POPULATE_READ); err != nil {
					return fmt.Errorf("populate: %w", err)
				}
				t0 := time.Now()
				if err := cuda.MemHostRegister(p, cuda.MemHostRegisterReadOnly); err != nil {
					return fmt.Errorf("register: %w", err)
				}
				regNs.Add(int64(time.Since(t0)))
				err := cuda.MemcpyHtoDAsync(dst+cuda.DevicePtr(off), p, s)
				if err == nil {
					err = cuda.StreamSynchronize(s)
				}
				t0 = time.Now()
				if uerr := cuda.MemHostUnregister(p); err == nil {
					err = uerr
				}
				regNs.Add(int64(time.Since(t0)))
				if err != nil {
					return err
				}
			}
		})
	})
}

// checkDeviceWindows compares a few 1 MiB windows of the device buffer
// with the file.
func checkDeviceWindows(b *testing.B, ctx cuda.Context, file *os.File, dev cuda.DevicePtr, size int) {
	n := min(1<<20, size)
	got, want := make([]byte, n), make([]byte, n)
	for _, off := range []int{0, size/3 + 12345, size - n} {
		off = min(off, size-n)
		if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyDtoH(got, dev+cuda.DevicePtr(off)) }); err != nil {
			b.Fatal(err)
		}
		if _, err := file.ReadAt(want, int64(off)); err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			b.Fatalf("zero-copy read: device bytes at %d differ from the file", off)
		}
	}
}
