package kvik_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// Benchmarks read and write a file of KVIK_BENCH_SIZE bytes (default 64
// MiB) in KVIK_BENCH_DIR (default a temp dir; use /dev/shm for page-cache
// speed) with 1, 4 and 16 workers, into host memory and into device memory,
// so that each device figure has its host peer from the same run
// (KVIK_BENCH_COMPAT picks the compat mode, default on; KVIK_BENCH_DIRECT=1
// forces O_DIRECT reads, otherwise the default read policy applies; KVIK_BENCH_COLD=1 drops the file's page cache
// before each read; KVIK_BENCH_THREADS lists worker counts, default 1,4,16):
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 go test -run '^$' -bench . -benchtime 5x

func benchFile(b *testing.B) (string, int) {
	b.Helper()
	size := 64 << 20
	if s := os.Getenv("KVIK_BENCH_SIZE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("KVIK_BENCH_SIZE: %v", err)
		}
		size = n
	}
	dir := os.Getenv("KVIK_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("kvik-bench-%d", size))
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(size) {
		return path, size
	}
	f, err := kvik.Open(path, "w", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<20)
	for i := range chunk {
		chunk[i] = byte(i*7 + i>>13 + 1)
	}
	for off := 0; off < size; off += len(chunk) {
		if _, err := f.WriteAt(chunk[:min(len(chunk), size-off)], int64(off)); err != nil {
			b.Fatal(err)
		}
	}
	return path, size
}

// hostBuffer returns page-aligned memory outside the Go heap: anonymous
// pages, or with KVIK_BENCH_HOSTMEM=huge the same asking for transparent
// huge pages, or with KVIK_BENCH_HOSTMEM=pinned memory from MemHostAlloc
// (so that host reads can be compared by destination memory).
func hostBuffer(b *testing.B, n int) []byte {
	if os.Getenv("KVIK_BENCH_HOSTMEM") == "pinned" {
		return pinnedHost(b, needGPU(b), n, 0)
	}
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Munmap(m) })
	if os.Getenv("KVIK_BENCH_HOSTMEM") == "huge" {
		if err := unix.Madvise(m, unix.MADV_HUGEPAGE); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < n; i += 4096 {
		m[i] = 1 // fault the pages in now, not inside the timed loop
	}
	return m
}

// pinnedHost returns n bytes of page-locked memory from MemHostAlloc with
// flags, freed when the benchmark ends.
func pinnedHost(b *testing.B, ctx cuda.Context, n int, flags uint32) []byte {
	var hb *cuda.HostBuffer
	if err := cuda.WithContext(ctx, func() (err error) { hb, err = cuda.MemHostAlloc(n, flags); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hb.Close() })
	return hb.Bytes()
}

// hostAndDeviceReads returns reads of n bytes of f at off into host memory
// (hostBuffer) and, where a GPU is usable, into device memory, by "host"
// and "device", for benchmarks that compare both.
func hostAndDeviceReads(b *testing.B, f *kvik.FileHandle, off int64, n int) map[string]func() (int, error) {
	buf := hostBuffer(b, n)
	reads := map[string]func() (int, error){"host": func() (int, error) { return f.ReadAt(buf, off) }}
	if gputest.Count() > 0 {
		dev := devAlloc(b, needGPU(b), n)
		reads["device"] = func() (int, error) { return f.ReadDevice(dev.Ptr(), n, off, 0) }
	}
	return reads
}

// threadList returns the worker counts KVIK_BENCH_THREADS lists, or def.
func threadList(b *testing.B, def []int) []int {
	s := os.Getenv("KVIK_BENCH_THREADS")
	if s == "" {
		return def
	}
	var threads []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			b.Fatalf("KVIK_BENCH_THREADS=%q: want positive worker counts", s)
		}
		threads = append(threads, n)
	}
	return threads
}

func benchThreads(b *testing.B, run func(b *testing.B)) {
	for _, n := range threadList(b, []int{1, 4, 16}) {
		b.Run(fmt.Sprintf("threads=%d", n), func(b *testing.B) {
			mode := kvik.CompatOn
			if m := os.Getenv("KVIK_BENCH_COMPAT"); m != "" {
				var err error
				if mode, err = kvik.ParseCompatMode(m); err != nil {
					b.Fatal(err)
				}
			}
			direct := os.Getenv("KVIK_BENCH_DIRECT") == "1"
			setDefaults(b, func(d *kvik.Defaults) {
				d.NumThreads, d.CompatMode, d.AutoDirectIORead = n, mode, direct
			})
			run(b)
		})
	}
}

// BenchmarkHostRead reads the file into host memory (see hostBuffer; with
// KVIK_BENCH_HOSTMEM=reuse it reads it 4 MiB at a time into one 4 MiB
// buffer instead, and with =unaligned into a buffer 64 bytes off a page).
func BenchmarkHostRead(b *testing.B) {
	path, size := benchFile(b)
	buf := hostBuffer(b, size+os.Getpagesize())
	read := func(f *kvik.FileHandle) (int, error) { return f.ReadAt(buf[:size], 0) }
	switch os.Getenv("KVIK_BENCH_HOSTMEM") {
	case "unaligned":
		read = func(f *kvik.FileHandle) (int, error) { return f.ReadAt(buf[64:64+size], 0) }
	case "reuse":
		read = func(f *kvik.FileHandle) (int, error) {
			done := 0
			for done < size {
				n, err := f.ReadAt(buf[:min(4<<20, size-done)], int64(done))
				done += n
				if err != nil {
					return done, err
				}
			}
			return done, nil
		}
	}
	benchThreads(b, func(b *testing.B) {
		f := openBench(b, path, "r")
		b.SetBytes(int64(size))
		for b.Loop() {
			dropCold(b, path)
			if n, err := read(f); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}

func BenchmarkHostWrite(b *testing.B) {
	path, size := benchFile(b)
	buf := hostBuffer(b, size)
	for i := range buf {
		buf[i] = byte(i>>12 + 1)
	}
	benchThreads(b, func(b *testing.B) {
		f := openBench(b, path+".w", "w")
		b.SetBytes(int64(size))
		for b.Loop() {
			if n, err := f.WriteAt(buf, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}

func BenchmarkDeviceRead(b *testing.B) {
	ctx := needGPU(b)
	path, size := benchFile(b)
	dev := devAlloc(b, ctx, size)
	benchThreads(b, func(b *testing.B) {
		f := openBench(b, path, "r")
		b.SetBytes(int64(size))
		for b.Loop() {
			dropCold(b, path)
			if n, err := f.ReadDevice(dev.Ptr(), size, 0, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}

func BenchmarkDeviceWrite(b *testing.B) {
	ctx := needGPU(b)
	path, size := benchFile(b)
	dev := devAlloc(b, ctx, size)
	cuda.WithContext(ctx, func() error { return cuda.MemsetD8(dev.Ptr(), 0x5a, size) })
	benchThreads(b, func(b *testing.B) {
		f := openBench(b, path+".w", "w")
		b.SetBytes(int64(size))
		for b.Loop() {
			if n, err := f.WriteDevice(dev.Ptr(), size, 0, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}

// BenchmarkPinnedCopy is the PCIe ceiling: one pinned host to device copy.
func BenchmarkPinnedCopy(b *testing.B) {
	ctx := needGPU(b)
	_, size := benchFile(b)
	dev := devAlloc(b, ctx, size)
	var host *cuda.HostBuffer
	if err := cuda.WithContext(ctx, func() (err error) { host, err = cuda.MemHostAlloc(size, 0); return err }); err != nil {
		b.Fatal(err)
	}
	defer host.Close()
	b.SetBytes(int64(size))
	for b.Loop() {
		if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyHtoD(dev.Ptr(), host.Bytes()) }); err != nil {
			b.Fatal(err)
		}
	}
}

func openBench(b *testing.B, path, flags string) *kvik.FileHandle {
	f, err := kvik.Open(path, flags, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// dropCold drops the file's cached pages, outside the timed region, when
// KVIK_BENCH_COLD=1.
func dropCold(b *testing.B, path string) {
	if os.Getenv("KVIK_BENCH_COLD") != "1" {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	if err := kvik.DropFilePageCache(path, 0, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMmapRead compares MmapHandle.ReadAt with FileHandle.ReadAt of
// the same page-cached file (benchFile: KVIK_BENCH_SIZE bytes in
// KVIK_BENCH_DIR).
func BenchmarkMmapRead(b *testing.B) {
	path, size := benchFile(b)
	f, m := openFileAndMmap(b, path)
	buf := make([]byte, size)
	for _, c := range []struct {
		name string
		r    io.ReaderAt
	}{{"file", f}, {"mmap", m}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := c.r.ReadAt(buf, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMmapReadDevice compares MmapHandle.ReadDevice with
// FileHandle.ReadDevice of the same page-cached file (benchFile), and with
// host reads of it.
func BenchmarkMmapReadDevice(b *testing.B) {
	ctx := needGPU(b)
	path, size := benchFile(b)
	f, m := openFileAndMmap(b, path)
	dev := devAlloc(b, ctx, size)
	host := make([]byte, size)
	for _, c := range []struct {
		name string
		read func() (int, error)
	}{
		{"file-host", func() (int, error) { return f.ReadAt(host, 0) }},
		{"file-device", func() (int, error) { return f.ReadDevice(dev.Ptr(), size, 0, 0) }},
		{"mmap-host", func() (int, error) { return m.ReadAt(host, 0) }},
		{"mmap-device", func() (int, error) { return m.ReadDevice(dev.Ptr(), size, 0, 0) }},
		// Zero-copy, registering the mapping for each read and then once.
		{"mmap-device-register-each", func() (int, error) {
			if err := m.RegisterDevice(); err != nil {
				return 0, err
			}
			n, err := m.ReadDevice(dev.Ptr(), size, 0, 0)
			if uerr := m.UnregisterDevice(); err == nil {
				err = uerr
			}
			return n, err
		}},
		{"mmap-device-registered", func() (int, error) {
			if err := m.RegisterDevice(); err != nil {
				return 0, err
			}
			return m.ReadDevice(dev.Ptr(), size, 0, 0)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := c.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// openFileAndMmap loads path into the page cache and opens it as a
// FileHandle and an MmapHandle, both closed when the benchmark ends.
func openFileAndMmap(b *testing.B, path string) (*kvik.FileHandle, *kvik.MmapHandle) {
	b.Helper()
	loadPageCache(b, path)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	m, err := kvik.OpenMmap(path, "r")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return f, m
}
