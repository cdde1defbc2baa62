package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// TestDeviceSmallReads reads files of the sizes where an operation has at
// most one task per worker (each task overlapping its reads and copies)
// at unaligned file and device offsets, and across the end of the file,
// against os.File; synchronously and with a Future. It runs again in a
// child process with small reads spread over the workers
// (KVIK_BENCH_SPREAD=1, sched.Spread), the plan benchmarks compare.
func TestDeviceSmallReads(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const fileSize = 17<<20 + 333
	data := randomBytes(rng, fileSize)
	path := filepath.Join(dir, "small")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := devAlloc(t, ctx, fileSize+8192)
	for _, threads := range []int{16, 5, 1} {
		for _, size := range []int{16 << 20, 16<<20 + 4097, 8 << 20, 2<<20 + 1, 1 << 20, 300 << 10, 20 << 10} {
			t.Run(fmt.Sprintf("threads=%d/size=%d", threads, size), func(t *testing.T) {
				setDefaults(t, func(d *kvik.Defaults) { d.NumThreads, d.CompatMode = threads, kvik.CompatOn })
				f, err := kvik.Open(path, "r", 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				fileOff := int64(rng.IntN(fileSize - size + 1))
				devOff := int64(rng.IntN(4096))
				clearDevice(t, ctx, dst)
				if n, err := f.ReadDevice(dst.Ptr(), size, fileOff, devOff); n != size || err != nil {
					t.Fatalf("ReadDevice(%d at %d): %d, %v", size, fileOff, n, err)
				}
				if got := fromDevice(t, ctx, dst.Ptr()+cuda.DevicePtr(devOff), size); !bytes.Equal(got, data[fileOff:fileOff+int64(size)]) {
					t.Fatalf("ReadDevice(%d at %d): bytes differ from the file", size, fileOff)
				}
				// Across the end of the file, as a Future.
				clearDevice(t, ctx, dst)
				off := int64(fileSize - size/2 - 1)
				n, err := f.PReadDevice(context.Background(), dst.Ptr(), size, off, devOff).Get()
				if want := fileSize - int(off); n != want || err != io.EOF {
					t.Fatalf("PReadDevice across EOF: %d, %v (want %d, io.EOF)", n, err, want)
				}
				if got := fromDevice(t, ctx, dst.Ptr()+cuda.DevicePtr(devOff), n); !bytes.Equal(got, data[off:]) {
					t.Fatal("PReadDevice across EOF: bytes differ from the file")
				}
			})
		}
	}
	if os.Getenv("KVIK_BENCH_SPREAD") == "" {
		runChild(t, "TestDeviceSmallReads", "KVIK_BENCH_SPREAD=1")
	}
	// Every task uses one bounce buffer, large or small (1 MiB): each pool
	// stays within one per worker and one for an operation run in the
	// caller.
	d, _ := kvik.GetDefaults()
	if _, pinned := kvik.BounceBufferBytes(); pinned > int64(17*(min(d.BounceBufferSize, d.TaskSize)+1<<20)) {
		t.Fatalf("%d bytes of pinned bounce buffers after reads on at most 16 workers", pinned)
	}
}

func clearDevice(t *testing.T, ctx cuda.Context, b *cuda.DeviceBuffer) {
	t.Helper()
	if err := cuda.WithContext(ctx, func() error { return cuda.MemsetD8(b.Ptr(), 0, b.Size()) }); err != nil {
		t.Fatal(err)
	}
}

// TestWarmup checks that Warmup pins one slab for NumThreads workers, that
// a second call adds nothing, and that reads afterwards are correct and
// allocate no more pinned memory.
func TestWarmup(t *testing.T) {
	if err := cuda.Init(); err != nil {
		if err := kvik.Warmup(0); err == nil || !errors.Is(err, cuda.ErrLibraryNotFound) && !errors.As(err, new(cuda.Result)) {
			t.Fatalf("Warmup without a usable driver: %v", err)
		}
		t.Skipf("no CUDA driver: %v", err)
	}
	ctx := needGPU(t)
	setDefaults(t, func(d *kvik.Defaults) { d.NumThreads, d.CompatMode = 12, kvik.CompatOn })
	kvik.FreeBounceBuffers()
	if err := kvik.Warmup(0); err != nil {
		t.Fatal(err)
	}
	d, _ := kvik.GetDefaults()
	want := int64(12 * (min(d.BounceBufferSize, d.TaskSize) + 1<<20)) // large and small buffers
	if _, pinned := kvik.BounceBufferBytes(); pinned != want {
		t.Fatalf("after Warmup: %d pinned bytes, want %d", pinned, want)
	}
	if err := kvik.Warmup(0); err != nil {
		t.Fatal(err)
	}
	if _, pinned := kvik.BounceBufferBytes(); pinned != want {
		t.Fatalf("after a second Warmup: %d pinned bytes, want %d", pinned, want)
	}
	rng := rand.New(rand.NewPCG(61, 62))
	size := 40<<20 + 77
	data := randomBytes(rng, size)
	path := filepath.Join(testDir(t), "warm")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := devAlloc(t, ctx, size)
	for _, n := range []int{size, 16 << 20, 3<<20 + 5} {
		if got, err := f.ReadDevice(dst.Ptr(), n, int64(size-n), 0); got != n || err != nil {
			t.Fatalf("ReadDevice(%d): %d, %v", n, got, err)
		}
		if got := fromDevice(t, ctx, dst.Ptr(), n); !bytes.Equal(got, data[size-n:]) {
			t.Fatalf("ReadDevice(%d): bytes differ", n)
		}
	}
	if _, pinned := kvik.BounceBufferBytes(); pinned != want {
		t.Fatalf("reads after Warmup pinned more: %d bytes, want %d", pinned, want)
	}
	if err := kvik.Warmup(cuda.Device(1 << 20)); err == nil {
		t.Fatal("Warmup of a device that does not exist succeeded")
	}
}
