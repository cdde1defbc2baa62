// Package zarrtune holds settings of package zarr that benchmarks switch
// to compare designs in one run (bench/zarrbench): internal, not API.
package zarrtune

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Layouts of a device read's pinned band buffers.
const (
	// Auto picks per band: Cells where each chunk's copy to the device is
	// a few wide rows, else Region.
	Auto int32 = iota
	// Region assembles each band in the region's layout: the band goes
	// to the device in one copy, but an uncompressed chunk is read into
	// it row by row (one preadv of many iovecs) and a compressed one is
	// decoded into scratch, then copied into place row by row.
	Region
	// Cells gives each chunk (inner chunk) of a band its own slot, its
	// bytes whole as decoded: an uncompressed chunk is one read, a
	// compressed one decodes in place, and each chunk goes to the device
	// in one 2D copy (rows of the chunk's width).
	Cells
)

// DeviceLayout is the layout of device reads' bands (Auto when unset).
var DeviceLayout atomic.Int32

// InlineFetch makes the workers of a read from a remote store fetch the
// chunks they decode themselves, requests still bounded by the store's
// MaxRequests, instead of handing them over from a fetch stage of their
// own (unset: the fetch stage, zarr's design).
var InlineFetch atomic.Bool

// NoYield stops the workers of a read from a remote store from yielding
// their processor before each decode (zarr's yieldProc), to compare.
var NoYield atomic.Bool

// WholeSpans makes the workers of a read from a remote store decode each
// fetched span of a shard whole, one worker its every inner chunk,
// instead of in parts that any worker takes (zarr's spanParts), to
// compare.
var WholeSpans atomic.Bool

// EagerShardPlan makes a banded read of a sharded array from a remote
// store read every shard's index before it fetches any chunk, instead of
// planning each band as its shards' indexes arrive (zarr's shardPlan),
// to compare.
var EagerShardPlan atomic.Bool

// RowMajorWrites makes region writes to a DirStore take their chunks in
// C order (a row of chunks, one directory, at once) instead of spread
// over directories (zarr's spreadDirs), to compare.
var RowMajorWrites atomic.Bool

// CPUUnshuffle makes device reads unshuffle Blosc's byte-shuffled chunks
// on the CPU, as host reads do, instead of on the GPU after their copy
// (zarr's GPU unshuffle), to compare.
var CPUUnshuffle atomic.Bool

// CPUDecode makes device reads decode the chunks the GPU would (zstd,
// gzip, zlib) on the CPU, as host reads do, instead of giving the GPU a
// share (zarr's gpuDecoder), to compare.
var CPUDecode atomic.Bool

// CPUEncode makes device writes encode on the CPU the chunks the GPU
// would (Blosc LZ4: zarr's gpuBlosc), as host writes do, to compare.
var CPUEncode atomic.Bool

// GPUEncodeBytes, when above 0, is how many bytes of chunks a device
// write encodes on the GPU at once, in place of zarr's default
// (gpuEncodeBytes), to compare.
var GPUEncodeBytes atomic.Int64

// GPUEncodeBlock, when above 0, is the Blosc block size of chunks a
// device write encodes on the GPU where the codec leaves it to the
// encoder, in place of zarr's default (gpuBlockSize), to compare.
var GPUEncodeBlock atomic.Int64

// GPUDecodeShare, when above 0, is the share of a device read's rows of
// chunks the GPU decodes, in thousandths (1000: every chunk), in place
// of zarr's default for the codec (gpuKernel), to compare.
var GPUDecodeShare atomic.Int64

// GPUDecodeBatch and GPUDecodeSlots, when above 0, are the frames of a batch
// the GPU decodes with one launch and the batches in flight at once, in
// place of zarr's defaults (gpuBatchFrames, gpuSlots), to compare.
var GPUDecodeBatch, GPUDecodeSlots atomic.Int64

// BandLimit, when above 0, caps the bytes of a device read's bands (at
// least one cell), the pinned buffers they go through keeping their
// size: a smaller set of staging memory in rotation, to compare.
var BandLimit atomic.Int64

// GPUDecode is a setting of GPUDecodeShare, GPUDecodeBatch and GPUDecodeSlots
// (0: zarr's default).
type GPUDecode struct{ Share, Batch, Slots int64 }

// ParseGPUDecode parses a comma-separated list of SHARE/BATCH/SLOTS
// settings, as the benchmarks take them ("500/32/16,350/256/2").
func ParseGPUDecode(list string) ([]GPUDecode, error) {
	var out []GPUDecode
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' }) {
		var g GPUDecode
		if _, err := fmt.Sscanf(f, "%d/%d/%d", &g.Share, &g.Batch, &g.Slots); err != nil || g.Share < 0 || g.Batch < 0 || g.Slots < 0 {
			return nil, fmt.Errorf("zarrtune: %q is not SHARE/BATCH/SLOTS", f)
		}
		out = append(out, g)
	}
	return out, nil
}

// String returns g as ParseGPUDecode reads it.
func (g GPUDecode) String() string { return fmt.Sprintf("%d/%d/%d", g.Share, g.Batch, g.Slots) }

// Set stores g and returns a function that restores what was before.
func (g GPUDecode) Set() (restore func()) {
	old := GPUDecode{GPUDecodeShare.Load(), GPUDecodeBatch.Load(), GPUDecodeSlots.Load()}
	GPUDecodeShare.Store(g.Share)
	GPUDecodeBatch.Store(g.Batch)
	GPUDecodeSlots.Store(g.Slots)
	return func() { old.Set() }
}
