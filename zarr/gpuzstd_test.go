package zarr

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
)

// TestDeviceZstdFallback: chunks of a plain zstd array that the GPU
// leaves to the CPU within one device read (frames with a checksum) read
// as the host read reads them, the GPU decoding the rest
// of the chunks; a corrupt chunk fails the device read with the host
// read's error; with zarrtune.CPUZstd the GPU decodes none.
func TestDeviceZstdFallback(t *testing.T) {
	ctx := needGPU(t)
	zarrtune.GPUZstdShare.Store(1000) // every chunk row the GPU's
	defer zarrtune.GPUZstdShare.Store(0)
	m := deviceCases["zstd-rows"]
	a, vals := newWrittenArray(t, m, 11)
	s := a.store
	zero := make([]int, len(m.Shape))
	chunk := numElements(m.ChunkShape) * m.DataType.Size
	enc, err := zstd.NewWriter(nil) // klauspost writes a checksum by default
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	c0, c1 := vals[:chunk], vals[chunk:2*chunk]
	if err := s.Set(bg, a.ChunkKey([]int{0, 0}), enc.EncodeAll(c0, nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(bg, a.ChunkKey([]int{1, 0}), enc.EncodeAll(c1, nil)); err != nil {
		t.Fatal(err)
	}
	n := len(vals)
	buf := devAlloc(t, ctx, n)
	for _, cpu := range []bool{false, true} {
		zarrtune.CPUZstd.Store(cpu)
		before := gpuZstdChunks.Load()
		if err := a.ReadRegionDevice(bg, zero, m.Shape, buf.Ptr()); err != nil {
			t.Fatal(err)
		}
		zarrtune.CPUZstd.Store(false)
		if got := fromDevice(t, ctx, buf.Ptr(), n); !bytes.Equal(got, vals) {
			t.Fatalf("CPUZstd %v: the device read differs from the array", cpu)
		}
		// 10 chunk rows: two left to the CPU, the last cut by the array's edge.
		if got, want := gpuZstdChunks.Load()-before, map[bool]int64{false: 7, true: 0}[cpu]; got != want {
			t.Errorf("CPUZstd %v: the GPU decoded %d chunks, want %d", cpu, got, want)
		}
	}
	bad, err := s.Get(bg, a.ChunkKey([]int{4, 0}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(bad) / 3; i < len(bad)/3+16; i++ {
		bad[i] ^= 0x5a
	}
	if err := s.Set(bg, a.ChunkKey([]int{4, 0}), bad); err != nil {
		t.Fatal(err)
	}
	// Without a checksum zstd may decode changed bytes to other bytes:
	// the device read must then read what the host read reads.
	host := make([]byte, n)
	hostErr := a.ReadRegion(bg, zero, m.Shape, host)
	devErr := a.ReadRegionDevice(bg, zero, m.Shape, buf.Ptr())
	switch {
	case hostErr == nil && devErr == nil:
		if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), n), host) {
			t.Fatal("a changed chunk: the device read differs from the host read")
		}
	case hostErr == nil || devErr == nil || hostErr.Error() != devErr.Error():
		t.Fatalf("a corrupt chunk: the device read's error %v, the host read's %v", devErr, hostErr)
	}
}

// TestDeviceZstdSplit: device reads of zstd arrays whose first rows of
// chunks the GPU decodes while the CPU reads the others, at shares from
// a row to all, over random regions, read what host reads read; the GPU
// decodes chunks of the whole array wherever its share is a row or
// more, none of a read below gpuZstdMin by default, none where device
// memory runs out (its rows read by the CPU's path), none with
// SetGPUDecode(false).
func TestDeviceZstdSplit(t *testing.T) {
	ctx := needGPU(t)
	defer zarrtune.GPUZstdShare.Store(0)
	rng := rand.New(rand.NewPCG(5, 40))
	for i, name := range []string{"zstd-rows", "zstd-tiles"} {
		m := deviceCases[name]
		a, vals := newWrittenArray(t, m, uint64(40+i))
		zero := make([]int, len(m.Shape))
		buf := devAlloc(t, ctx, len(vals))
		// The default leaves a read this small to the CPU; out of device
		// memory, the GPU's rows are read by the CPU's path; with
		// SetGPUDecode(false) every chunk is the CPU's.
		for _, c := range []struct {
			share        int64
			noMem, noGPU bool
		}{{0, false, false}, {1000, true, false}, {1000, false, true}} {
			zarrtune.GPUZstdShare.Store(c.share)
			gpuZstdNoMemory.Store(c.noMem)
			a.SetGPUDecode(!c.noGPU)
			before := gpuZstdChunks.Load()
			err := a.ReadRegionDevice(bg, zero, m.Shape, buf.Ptr())
			gpuZstdNoMemory.Store(false)
			a.SetGPUDecode(true)
			if err != nil {
				t.Fatalf("%s, %+v: %v", name, c, err)
			}
			if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), len(vals)), vals) {
				t.Fatalf("%s, %+v: the device read differs from the array", name, c)
			}
			if n := gpuZstdChunks.Load() - before; n != 0 {
				t.Errorf("%s, %+v: the GPU decoded %d chunks", name, c, n)
			}
		}
		for _, share := range []int64{1, 150, 300, 500, 999, 1000} {
			zarrtune.GPUZstdShare.Store(share)
			for range 8 {
				start, stop := make([]int, len(m.Shape)), make([]int, len(m.Shape))
				for d, n := range m.Shape {
					start[d] = rng.IntN(n)
					stop[d] = start[d] + 1 + rng.IntN(n-start[d])
				}
				whole := rng.IntN(3) == 0
				if whole {
					copy(start, zero)
					copy(stop, m.Shape)
				}
				host := make([]byte, len(vals))
				size := numElements(boxCount(start, stop)) * m.DataType.Size
				if err := a.ReadRegion(bg, start, stop, host[:size]); err != nil {
					t.Fatal(err)
				}
				before := gpuZstdChunks.Load()
				if err := a.ReadRegionDevice(bg, start, stop, buf.Ptr()); err != nil {
					t.Fatalf("%s, share %d, [%v, %v): %v", name, share, start, stop, err)
				}
				if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), size), host[:size]) {
					t.Fatalf("%s, share %d, [%v, %v): the device read differs from the host read", name, share, start, stop)
				}
				// Of the whole array, the GPU's rows hold whole chunks.
				c0 := m.ChunkShape[0]
				rows := (stop[0]+c0-1)/c0 - start[0]/c0
				if gpu := gpuZstdChunks.Load() - before; whole && (int64(rows)*share+500)/1000 > 0 && gpu == 0 {
					t.Errorf("%s, share %d, [%v, %v): the GPU decoded no chunk of %d rows", name, share, start, stop, rows)
				}
			}
		}
	}
}

// TestSetGPUDecode: the GPU may decode chunks of plain zstd and unshuffle
// Blosc's by default, neither with SetGPUDecode(false), nor chunks of
// other chains.
func TestSetGPUDecode(t *testing.T) {
	for _, name := range []string{"zstd-rows", "v2-zstd", "blosc", "zstd", "raw-small"} {
		a, _ := newFilledArray(t, deviceCases[name])
		zstdOK, bloscOK := gpuZstdCases[name], name == "blosc"
		for _, on := range []bool{true, false} {
			a.SetGPUDecode(on)
			if a.gpuZstdChain() != (on && zstdOK) || a.gpuUnshuffles() != (on && bloscOK) {
				t.Errorf("%s, SetGPUDecode(%v): zstd %v, unshuffle %v", name, on, a.gpuZstdChain(), a.gpuUnshuffles())
			}
		}
	}
}
