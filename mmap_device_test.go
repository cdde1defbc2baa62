package kvik_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// TestMmapDeviceRandom reads random ranges of a mapped file into device
// memory, at random device offsets and settings, and compares what
// arrived with the file.
func TestMmapDeviceRandom(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 14))
	const size = 24<<20 + 777
	path, data := mmapFile(t, rng, size)
	dev := devAlloc(t, ctx, size+8192)
	for c := range 40 {
		lo := int64(0)
		var opts []kvik.MmapOption
		if c%3 == 1 {
			lo = rng.Int64N(size / 2)
			opts = append(opts, kvik.WithMapOffset(lo))
		}
		h, err := kvik.OpenMmap(path, "r", opts...)
		if err != nil {
			t.Fatal(err)
		}
		cfg := relRandomConfig(rng)
		off := lo + rng.Int64N(size-lo)
		n := rng.IntN(int(size-off)) + 1
		if c%5 == 0 {
			n = int(size-off) + rng.IntN(3000) + 1 // past end of file
		}
		devOff := int64(rng.IntN(8192))
		want := min(n, int(size-off))
		var got int
		relWithConfig(t, cfg, func() {
			if c%2 == 0 {
				got, err = h.ReadDevice(dev.Ptr(), min(n, size+8192-int(devOff)), off, devOff)
			} else {
				got, err = h.PReadDevice(context.Background(), dev.Ptr(), min(n, size+8192-int(devOff)), off, devOff).Get()
			}
		})
		if got != want || (want < n) != (err == io.EOF) || (want == n && err != nil) {
			t.Fatalf("case %d (%v): %d bytes at %d: got (%d, %v), want %d bytes", c, cfg, n, off, got, err, want)
		}
		back := fromDevice(t, ctx, dev.Ptr()+cuda.DevicePtr(devOff), got)
		if i := relFirstDiff(back, data[off:off+int64(got)]); i < got {
			t.Fatalf("case %d (%v): %d bytes at %d: first difference at byte %d", c, cfg, n, off, i)
		}
		h.Close()
	}
}

func TestMmapDeviceBadInput(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 15))
	path, _ := mmapFile(t, rng, 1<<20)
	h, err := kvik.OpenMmap(path, "r", kvik.WithMapSize(1<<19))
	if err != nil {
		t.Fatal(err)
	}
	dev := devAlloc(t, ctx, 1<<20)
	if _, err := h.ReadDevice(dev.Ptr(), 4096, 1<<19, 0); !errors.Is(err, kvik.ErrOutOfRange) {
		t.Errorf("read past the region: %v", err)
	}
	if _, err := h.ReadDevice(dev.Ptr(), 4096, 0, 1<<20-100); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Errorf("device range overrun: %v", err)
	}
	host := make([]byte, 4096)
	if _, err := h.ReadDevice(cuda.DevicePtr(uintptr(unsafePointer(host))), 4096, 0, 0); !errors.Is(err, kvik.ErrNotDeviceMemory) {
		t.Errorf("host memory: %v", err)
	}
	h.Close()
	if _, err := h.ReadDevice(dev.Ptr(), 4096, 0, 0); !errors.Is(err, kvik.ErrClosed) {
		t.Errorf("after close: %v", err)
	}
}
