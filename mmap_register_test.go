package kvik_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// TestMmapRegisterClosed checks RegisterDevice on a closed handle, and
// without a CUDA driver; it needs no GPU.
func TestMmapRegisterClosed(t *testing.T) {
	path, data := mmapFile(t, rand.New(rand.NewPCG(relTestSeed(t), 16)), 5000)
	h, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	if cuda.Init() != nil {
		if err := h.RegisterDevice(); err == nil || h.DeviceRegistered() {
			t.Fatalf("RegisterDevice without a driver: %v, registered %v", err, h.DeviceRegistered())
		}
		got := make([]byte, len(data)-3)
		if n, err := h.ReadAt(got, 3); n != len(got) || err != nil || relFirstDiff(got, data[3:]) < len(got) {
			t.Fatalf("host read after a refused registration: (%d, %v)", n, err)
		}
	}
	h.Close()
	if err := h.RegisterDevice(); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("RegisterDevice after Close: %v, want ErrClosed", err)
	}
	if h.DeviceRegistered() {
		t.Fatal("a closed handle reports a registration")
	}
}

// TestMmapDeviceRegistered reads random ranges of a registered mapping
// into device memory (the zero-copy path), unregisters half-way, and
// compares every read with the file.
func TestMmapDeviceRegistered(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 17))
	const size = 20<<20 + 4321
	path, data := mmapFile(t, rng, size)
	dev := devAlloc(t, ctx, size+8192)
	lo := int64(rng.IntN(1 << 20))
	h, err := kvik.OpenMmap(path, "r", kvik.WithMapOffset(lo))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.RegisterDevice(); err != nil {
		t.Fatal("RegisterDevice:", err)
	}
	if err := h.RegisterDevice(); err != nil || !h.DeviceRegistered() {
		t.Fatalf("second RegisterDevice: %v, registered %v", err, h.DeviceRegistered())
	}
	for c := range 30 {
		if c == 20 {
			if err := h.UnregisterDevice(); err != nil || h.DeviceRegistered() {
				t.Fatalf("UnregisterDevice: %v, registered %v", err, h.DeviceRegistered())
			}
		}
		cfg := relRandomConfig(rng)
		off := lo + rng.Int64N(size-lo)
		n := rng.IntN(int(size-off)) + 1
		if c%5 == 0 {
			n = int(size-off) + rng.IntN(3000) + 1 // past end of file
		}
		devOff := int64(rng.IntN(8192))
		n = min(n, size+8192-int(devOff))
		want := min(n, int(size-off))
		var got int
		relWithConfig(t, cfg, func() {
			if c%2 == 0 {
				got, err = h.ReadDevice(dev.Ptr(), n, off, devOff)
			} else {
				got, err = h.PReadDevice(context.Background(), dev.Ptr(), n, off, devOff).Get()
			}
		})
		if got != want || (want < n) != (err == io.EOF) || (want == n && err != nil) {
			t.Fatalf("case %d (%v): %d bytes at %d: got (%d, %v), want %d bytes", c, cfg, n, off, got, err, want)
		}
		back := fromDevice(t, ctx, dev.Ptr()+cuda.DevicePtr(devOff), got)
		if i := relFirstDiff(back, data[off:off+int64(got)]); i < got {
			t.Fatalf("case %d (%v): %d bytes at %d: first difference at byte %d", c, cfg, n, off, i)
		}
	}
}

// TestMmapRegisteredConcurrentClose starts zero-copy reads and closes the
// handle while they run: Close must wait for them, unregister, then
// unmap, and every read must deliver the file's bytes.
func TestMmapRegisteredConcurrentClose(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 18))
	const size = 16 << 20
	path, data := mmapFile(t, rng, size)
	h, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterDevice(); err != nil {
		t.Fatal("RegisterDevice:", err)
	}
	const readers = 4
	devs := make([]*cuda.DeviceBuffer, readers)
	futs := make([]*kvik.Future, readers)
	for i := range readers {
		devs[i] = devAlloc(t, ctx, size)
		futs[i] = h.PReadDevice(context.Background(), devs[i].Ptr(), size, 0, 0)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := h.Close(); err != nil {
			t.Error("Close:", err)
		}
	})
	for i, f := range futs {
		n, err := f.Get()
		if errors.Is(err, kvik.ErrClosed) {
			continue // Close came first
		}
		if n != size || err != nil {
			t.Fatalf("reader %d: (%d, %v)", i, n, err)
		}
		if j := relFirstDiff(fromDevice(t, ctx, devs[i].Ptr(), size), data); j < size {
			t.Fatalf("reader %d: first difference at byte %d", i, j)
		}
	}
	wg.Wait()
	if h.DeviceRegistered() {
		t.Fatal("still registered after Close")
	}
}
