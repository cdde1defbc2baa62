package zarr

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

// TestDeviceWaitsForDefaultStream queues work on the legacy default
// stream (stream 0) that the device paths must wait for, as kvik's own
// transfers do: a 256 MiB copy that keeps the stream busy for
// milliseconds, then a copy of a write's source into device memory, or
// of zeros over a read's destination. WriteRegionDevice, called at once,
// must store the source's final bytes (part of an uncompressed chunk and
// of a compressed one: both staged through pinned memory), and
// ReadRegionDevice must leave the array's values, not the zeros landing
// after them. The copies of both run on non-blocking streams, which
// nothing orders after stream 0: without the wait the write stored what
// the buffer held before (the GPU tests' partial device writes failed 1
// in 12 to 25 runs with the udev shim).
func TestDeviceWaitsForDefaultStream(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const delay = 256 << 20
	var big, pinned *cuda.HostBuffer
	err := cuda.WithContext(ctx, func() (err error) {
		if big, err = cuda.MemHostAlloc(delay, 0); err != nil {
			return err
		}
		pinned, err = cuda.MemHostAlloc(1<<20, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	defer pinned.Close()
	scratch := devAlloc(t, ctx, delay)
	// queue copies big into scratch, then host into dst, on stream 0.
	queue := func(dst cuda.DevicePtr, host []byte) {
		t.Helper()
		copy(pinned.Bytes(), host)
		err := cuda.WithContext(ctx, func() error {
			if err := cuda.MemcpyHtoDAsync(scratch.Ptr(), big.Bytes(), 0); err != nil {
				return err
			}
			return cuda.MemcpyHtoDAsync(dst, pinned.Bytes()[:len(host)], 0)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]Metadata{
		"raw":  {Shape: []int{64, 4096}, ChunkShape: []int{16, 4096}, DataType: DataType{Kind: Float, Size: 4}},
		"zstd": {Shape: []int{64, 4096}, ChunkShape: []int{16, 1024}, DataType: DataType{Kind: Int, Size: 8}, Codecs: roundTripCodecs["zstd+crc"]},
	} {
		a, err := Create(bg, s, name, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, randValues(rng, m.DataType, 64*4096)); err != nil {
			t.Fatal(err)
		}
		for round := range 5 {
			start, stop := []int{3 + round, 100}, []int{13 + round, 3000 + round} // parts of chunks
			n := boxBytes(start, stop, m.DataType.Size)
			vals := randValues(rng, m.DataType, n/m.DataType.Size)
			src := devAlloc(t, ctx, n)
			queue(src.Ptr(), vals)
			if err := a.WriteRegionDevice(bg, start, stop, src.Ptr()); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := a.ReadRegion(bg, start, stop, got); err != nil || !bytes.Equal(got, vals) {
				t.Fatalf("%s round %d: the region written from device memory is not the source's final bytes (%v)", name, round, err)
			}
			dst := devAlloc(t, ctx, n)
			queue(dst.Ptr(), make([]byte, n))
			if err := a.ReadRegionDevice(bg, start, stop, dst.Ptr()); err != nil {
				t.Fatal(err)
			}
			if got := fromDevice(t, ctx, dst.Ptr(), n); !bytes.Equal(got, vals) {
				t.Fatalf("%s round %d: zeros queued before the device read landed after it", name, round)
			}
		}
	}
}
