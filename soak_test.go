package kvik_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc64"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// TestDeviceMemoryPressure fills the card to within 512 MiB of its limit,
// then checks that a failed allocation is a typed error and that I/O into
// the memory that remains still works.
func TestDeviceMemoryPressure(t *testing.T) {
	ctx := needGPU(t)
	if testing.Short() {
		t.Skip("fills the GPU's memory; run without -short")
	}
	var free int64
	cuda.WithContext(ctx, func() (err error) { free, _, err = cuda.MemGetInfo(); return err })
	var hogs []*cuda.DeviceBuffer
	defer func() {
		for _, h := range hogs {
			h.Close()
		}
	}()
	const chunk = 1 << 30
	for free > chunk+512<<20 {
		var b *cuda.DeviceBuffer
		if err := cuda.WithContext(ctx, func() (err error) { b, err = cuda.MemAlloc(chunk); return err }); err != nil {
			t.Fatalf("allocating with %d bytes free: %v", free, err)
		}
		hogs = append(hogs, b)
		cuda.WithContext(ctx, func() (err error) { free, _, err = cuda.MemGetInfo(); return err })
	}
	t.Logf("holding %d GiB, %d MiB free", len(hogs), free>>20)
	err := cuda.WithContext(ctx, func() error { _, err := cuda.MemAlloc(int(free) + 1<<30); return err })
	if !errors.Is(err, cuda.ErrorOutOfMemory) {
		t.Fatalf("allocation beyond the card: %v, want ErrorOutOfMemory", err)
	}
	rng := rand.New(rand.NewPCG(71, 72))
	path, data := writeRandomFile(t, rng, testDir(t), 64<<20+9)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := devAlloc(t, ctx, len(data))
	if n, err := f.ReadDevice(buf.Ptr(), len(data), 0, 0); n != len(data) || err != nil {
		t.Fatalf("read under memory pressure: %d, %v", n, err)
	}
	if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), len(data)), data) {
		t.Fatal("read under memory pressure differs")
	}
}

// TestDeviceSoak mixes device reads and writes from 8 goroutines for
// KVIK_SOAK (a duration, e.g. 10m), each verified by a checksum.
func TestDeviceSoak(t *testing.T) {
	ctx := needGPU(t)
	d, err := time.ParseDuration(os.Getenv("KVIK_SOAK"))
	if err != nil {
		t.Skip("set KVIK_SOAK to a duration to run the soak")
	}
	dir := testDir(t)
	modes := gpuCompatModes(t, dir)
	table := crc64.MakeTable(crc64.ECMA)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ops, bytesMoved := 0, int64(0)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 99))
			mode := modes[g%len(modes)]
			f, err := kvik.Open(filepath.Join(dir, fmt.Sprintf("soak-%d", g)), "w+", 0, kvik.WithCompatMode(mode))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			const max = 48 << 20
			src, dst := devAlloc(t, ctx, max), devAlloc(t, ctx, max)
			for i := 0; time.Now().Before(deadline); i++ {
				size := rng.IntN(max-4096) + 1
				off, devOff := rng.Int64N(1<<30), int64(rng.IntN(4096))
				size = min(size, max-int(devOff))
				data := randomBytes(rng, size)
				toDevice(t, ctx, src.Ptr()+cuda.DevicePtr(devOff), data)
				if n, err := f.WriteDevice(src.Ptr(), size, off, devOff); n != size || err != nil {
					t.Errorf("goroutine %d op %d: write %d at %d: %d, %v", g, i, size, off, n, err)
					return
				}
				if n, err := f.PReadDevice(t.Context(), dst.Ptr(), size, off, 0).Get(); n != size || err != nil {
					t.Errorf("goroutine %d op %d: read %d at %d: %d, %v", g, i, size, off, n, err)
					return
				}
				if crc64.Checksum(fromDevice(t, ctx, dst.Ptr(), size), table) != crc64.Checksum(data, table) {
					t.Errorf("goroutine %d op %d: checksum differs (%v, %d bytes at %d)", g, i, mode, size, off)
					return
				}
				mu.Lock()
				ops += 2
				bytesMoved += 2 * int64(size)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("soak %v: %d verified operations, %.1f GiB moved, modes %v", d, ops, float64(bytesMoved)/(1<<30), modes)
}
