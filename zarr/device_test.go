package zarr

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// needGPU skips where no CUDA device is usable and returns device 0's
// primary context.
func needGPU(t testing.TB) cuda.Context {
	t.Helper()
	return gputest.Primary(t, 0)
}

func devAlloc(t testing.TB, ctx cuda.Context, n int) *cuda.DeviceBuffer {
	t.Helper()
	var b *cuda.DeviceBuffer
	if err := cuda.WithContext(ctx, func() (err error) { b, err = cuda.MemAlloc(max(n, 1)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func fromDevice(t testing.TB, ctx cuda.Context, p cuda.DevicePtr, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyDtoH(out, p) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeviceRegionReads compares device region reads with host reads of
// the same regions for uncompressed (direct and gathered), compressed,
// sharded and v2 arrays with missing chunks, then writes from device
// memory and reads back; for the arrays of lockedCases also through a
// store WithProcessLocks (device writes of parts of chunks locked).
func TestDeviceRegionReads(t *testing.T) {
	ctx := needGPU(t)
	gpuTestShare(t)
	rng := rand.New(rand.NewPCG(7, 8))
	dir := os.Getenv("KVIK_TEST_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	for name, m := range withLocked(deviceCases) {
		t.Run(name, func(t *testing.T) {
			// A store of its own, new: Create refuses an array a run
			// before left at the path (ErrExists).
			root := fmt.Sprintf("%s/%s", dir, name)
			if err := os.RemoveAll(root); err != nil {
				t.Fatal(err)
			}
			s, err := NewDirStore(root, lockedOptions(name)...)
			if err != nil {
				t.Fatal(err)
			}
			before := gpuDecodedChunks.Load()
			checkDeviceRegions(t, ctx, rng, s, m)
			checkGPUDecode(t, name, before)
		})
	}
}

// gpuDecodeCases are the arrays of deviceCases whose chunks the GPU decodes
// (plain zstd frames, gzip and zlib streams): in place where contiguous
// in the region, else in a batch's memory and copied.
var gpuDecodeCases = map[string]bool{"zstd-rows": true, "zstd-tiles": true, "v2-zstd": true, "sharded-zstd": true,
	"sharded": true, "gzip-rows": true, "v2-zlib": true}

// gpuTestShare gives the GPU half of the rows of the chunks it decodes in
// every device read of t, however small (the default leaves reads below
// gpuDecodeMin to the CPU).
func gpuTestShare(t *testing.T) {
	zarrtune.GPUDecodeShare.Store(500)
	t.Cleanup(func() { zarrtune.GPUDecodeShare.Store(0) })
}

// checkGPUDecode fails t where the GPU decoded no chunk of a gpuDecodeCases
// array since before (or any of another).
func checkGPUDecode(t *testing.T, name string, before int64) {
	t.Helper()
	if got := gpuDecodedChunks.Load() - before; gpuDecodeCases[strings.TrimSuffix(name, "-locked")] != (got > 0) {
		t.Errorf("%s: the GPU decoded %d chunks", name, got)
	}
}

// lockedCases are the arrays of deviceCases the device tests also write
// through a store opened WithProcessLocks, named NAME-locked.
var lockedCases = []string{"zstd", "sharded", "raw-small"}

// withLocked returns cases with the lockedCases added again as
// NAME-locked.
func withLocked(cases map[string]Metadata) map[string]Metadata {
	out := maps.Clone(cases)
	for _, name := range lockedCases {
		out[name+"-locked"] = cases[name]
	}
	return out
}

// lockedOptions returns WithProcessLocks for a case named NAME-locked.
func lockedOptions(name string) []StoreOption {
	if strings.HasSuffix(name, "-locked") {
		return []StoreOption{WithProcessLocks()}
	}
	return nil
}

// TestDeviceBands runs the checks of TestDeviceRegionReads with bands of
// one to a few chunks (bandTarget lowered), so that small arrays make
// many bands through few pinned buffers, bands that are not contiguous
// in the region (cuMemcpy2DAsync) and edge bands of partial chunks; for
// the arrays of the band tests too (three dimensions, every codec); in
// each layout of the bands' buffers (zarrtune); the GPU's share of zstd
// chunks staged through pinned buffers of the bands' size, spans of
// shards larger than one taken from their own memory.
func TestDeviceBands(t *testing.T) {
	ctx := needGPU(t)
	gpuTestShare(t)
	old := bandTarget
	t.Cleanup(func() { bandTarget = old })
	rng := rand.New(rand.NewPCG(7, 10))
	dir := os.Getenv("KVIK_TEST_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	t.Cleanup(func() { zarrtune.DeviceLayout.Store(zarrtune.Auto) })
	for ci, cases := range []map[string]Metadata{deviceCases, bandCases} {
		for name, m := range cases {
			for layout, lname := range []string{"auto", "region", "cells"} {
				t.Run(name+"/"+lname, func(t *testing.T) {
					zarrtune.DeviceLayout.Store(int32(layout))
					bandTarget = (1 + rng.IntN(3)) * numElements(m.ChunkShape) * m.DataType.Size
					// A store of its own: both case lists name a "sharded"
					// array, and a shard the other left behind is corrupt
					// for this one's layout.
					root := fmt.Sprintf("%s/bands-%d-%s-%s", dir, ci, name, lname)
					if err := os.RemoveAll(root); err != nil {
						t.Fatal(err)
					}
					s, err := NewDirStore(root)
					if err != nil {
						t.Fatal(err)
					}
					checkDeviceRegions(t, ctx, rng, s, m)
				})
			}
		}
	}
}

// TestRemoteDeviceRegionReads runs the checks of TestDeviceRegionReads on
// arrays in S3 (versitygw): region reads from S3 into device memory
// against host reads, and device writes uploaded as chunks (on S3's
// conditions for the lockedCases).
func TestRemoteDeviceRegionReads(t *testing.T) {
	ctx := needGPU(t)
	gpuTestShare(t)
	rng := rand.New(rand.NewPCG(7, 9))
	srv := s3test.Start(t)
	for name, m := range withLocked(deviceCases) {
		t.Run(name, func(t *testing.T) {
			opts := append(lockedOptions(name), WithRemoteOptions(srv.Opts()...), WithMaxRequests(1+rng.IntN(8)))
			s, err := OpenURL(bg, srv.URLOf(name), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before := gpuDecodedChunks.Load()
			checkDeviceRegions(t, ctx, rng, s, m)
			checkGPUDecode(t, name, before)
		})
	}
}

// deviceCases are the arrays of the device tests: uncompressed (read
// directly or gathered), compressed, sharded and v2.
var deviceCases = map[string]Metadata{
	"raw-direct": {Shape: []int{64, 1 << 16}, ChunkShape: []int{8, 1 << 16}, DataType: DataType{Kind: Float, Size: 4}},
	"raw-small":  {Shape: []int{50, 70}, ChunkShape: []int{16, 16}, DataType: DataType{Kind: Int, Size: 2}, FillValue: -3},
	"zstd":       {Shape: []int{300, 200}, ChunkShape: []int{64, 50}, DataType: DataType{Kind: Float, Size: 8}, Codecs: roundTripCodecs["zstd+crc"], FillValue: "NaN"},
	"blosc":      {Shape: []int{97, 33}, ChunkShape: []int{10, 10}, DataType: DataType{Kind: Uint, Size: 4}, Codecs: roundTripCodecs["blosc-lz4"]},
	"sharded":    {Shape: []int{40, 36}, ChunkShape: []int{8, 12}, DataType: DataType{Kind: Float, Size: 2}, Codecs: shardCodecs([]int{4, 6}, false, roundTripCodecs["gzip"])},
	// Inner chunks read together: staged through pinned memory, and for
	// 1 MiB inner chunks of a DirStore, straight from the file.
	"sharded-raw":     {Shape: []int{45, 36}, ChunkShape: []int{16, 12}, DataType: DataType{Kind: Int, Size: 4}, Codecs: shardCodecs([]int{4, 6}, true, []Codec{{Name: "bytes"}}), FillValue: 7},
	"sharded-raw-1mb": {Shape: []int{40, 1 << 16}, ChunkShape: []int{16, 1 << 16}, DataType: DataType{Kind: Float, Size: 4}, Codecs: shardCodecs([]int{4, 1 << 16}, false, []Codec{{Name: "bytes"}})},
	"v2-F-zlib":       {ZarrFormat: 2, Order: 'F', Shape: []int{33, 21}, ChunkShape: []int{8, 8}, DataType: DataType{Kind: Int, Size: 8}, Compressor: &Codec{Name: "zlib", Configuration: map[string]any{"level": 1}}},
	// Plain zstd frames, decoded on the GPU: chunks as wide as the array
	// (each contiguous in a region of whole rows), tiles, and v2.
	"zstd-rows":  {Shape: []int{300, 64}, ChunkShape: []int{32, 64}, DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}, FillValue: 1.5},
	"zstd-tiles": {Shape: []int{300, 200}, ChunkShape: []int{64, 50}, DataType: DataType{Kind: Int, Size: 2}, Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}, FillValue: 5},
	"v2-zstd":    {ZarrFormat: 2, Shape: []int{130, 40}, ChunkShape: []int{16, 40}, DataType: DataType{Kind: Uint, Size: 8}, Compressor: &Codec{Name: "zstd", Configuration: map[string]any{"level": 5}}},
	"gzip-rows":  {Shape: []int{250, 96}, ChunkShape: []int{24, 96}, DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 6}}}, FillValue: -1},
	"v2-zlib":    {ZarrFormat: 2, Shape: []int{90, 70}, ChunkShape: []int{16, 30}, DataType: DataType{Kind: Int, Size: 2}, Compressor: &Codec{Name: "zlib", Configuration: map[string]any{"level": 1}}},
	// Inner chunks of plain zstd: fetched in spans of their shards and
	// decoded on the GPU; the last row of shards cut by the array's edge.
	"sharded-zstd": {Shape: []int{70, 48}, ChunkShape: []int{16, 24}, DataType: DataType{Kind: Float, Size: 4}, Codecs: shardCodecs([]int{4, 8}, false, []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 2}}}), FillValue: 2.5},
}

// checkDeviceRegions creates array m in s with its last chunk row
// missing, compares device region reads with host reads, then writes a
// region from device memory and reads it back.
func checkDeviceRegions(t *testing.T, ctx cuda.Context, rng *rand.Rand, s Store, m Metadata) {
	a, err := Create(bg, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	// Write all but the last chunk row, leaving chunks missing.
	stop := append([]int(nil), m.Shape...)
	stop[0] = max(stop[0]-m.ChunkShape[0], 1)
	src := randValues(rng, m.DataType, numElements(stop))
	if err := a.WriteRegion(bg, make([]int, len(stop)), stop, src); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 8; r++ {
		start, stop := make([]int, len(m.Shape)), m.Shape
		if r > 0 {
			start, stop = randRegion(rng, m.Shape)
		}
		n := boxBytes(start, stop, m.DataType.Size)
		want := make([]byte, n)
		if err := a.ReadRegion(bg, start, stop, want); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue
		}
		buf := devAlloc(t, ctx, n)
		a.SetWorkers(1 + r%4)
		if err := a.ReadRegionDevice(bg, start, stop, buf.Ptr()); err != nil {
			t.Fatalf("%v-%v: %v", start, stop, err)
		}
		if got := fromDevice(t, ctx, buf.Ptr(), n); !bytes.Equal(got, want) {
			t.Fatalf("device region %v-%v differs from the host read", start, stop)
		}
	}
	// Device writes: a random region, then compare a host read.
	start, stop2 := randRegion(rng, m.Shape)
	n := boxBytes(start, stop2, 1)
	if n == 0 {
		return
	}
	vals := randValues(rng, m.DataType, n)
	buf := devAlloc(t, ctx, len(vals))
	if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyHtoD(buf.Ptr(), vals) }); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegionDevice(bg, start, stop2, buf.Ptr()); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(vals))
	if err := a.ReadRegion(bg, start, stop2, got); err != nil || !bytes.Equal(got, vals) {
		t.Fatalf("device write %v-%v: %v", start, stop2, err)
	}
}

// boxBytes returns the bytes of [start, stop) in es-byte elements.
func boxBytes(start, stop []int, es int) int {
	n := es
	for d := range start {
		n *= stop[d] - start[d]
	}
	return n
}

// TestDeviceWriteForNumpy writes an uncompressed v3 float32 array from
// device memory (value = row*1000 + col) into $KVIK_ZARR_NUMPY_DIR for a
// NumPy check of the raw chunks on the GPU machine.
func TestDeviceWriteForNumpy(t *testing.T) {
	ctx := needGPU(t)
	dir := os.Getenv("KVIK_ZARR_NUMPY_DIR")
	if dir == "" {
		t.Skip("KVIK_ZARR_NUMPY_DIR not set")
	}
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := Metadata{Shape: []int{300, 500}, ChunkShape: []int{100, 500}, DataType: DataType{Kind: Float, Size: 4}}
	a, err := Create(bg, s, "arr", m)
	if err != nil {
		t.Fatal(err)
	}
	host := make([]byte, 0, 300*500*4)
	for r := 0; r < 300; r++ {
		for c := 0; c < 500; c++ {
			host = append(host, element(m.DataType, float64(r*1000+c))...)
		}
	}
	buf := devAlloc(t, ctx, len(host))
	if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyHtoD(buf.Ptr(), host) }); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegionDevice(bg, []int{0, 0}, m.Shape, buf.Ptr()); err != nil {
		t.Fatal(err)
	}
}
