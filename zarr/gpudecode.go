package zarr

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/kernels"
)

// A device read of an array whose chunks (or inner chunks of shards)
// are plain little-endian elements compressed by one codec the GPU
// decodes (zstd without a checksum: numcodecs' and zarr-python's
// default; gzip; zlib) gives the GPU a share of its rows (readGPUSplit).
// Their stored bytes go to the device in batches, through pinned buffers
// (stageStored), chunks fetched a request each and inner chunks in spans
// of their shards, are decoded there (kernels.Zstd, kernels.Inflate: one
// warp a frame) straight into the region (a chunk contiguous there) or
// into device memory of the batch's and copied into place on the
// device. A frame the GPU leaves (more than one frame, a checksum it
// does not check, a corrupt one), a missing chunk and a chunk the region
// cuts are done on the CPU and copied up, so that errors are the CPU
// decoder's. Batches of gpuBatchFrames frames, gpuSlots of them at once
// (one launch; see the shares): a zstd launch takes the GPU 46 ms for
// 64 frames of 1 MiB and 61 ms for 1,024 (H200), a deflate launch 114
// and 124 ms. A zstd batch holds 2.6 MiB of the kernel's scratch memory
// a frame; a batch, up to gpuScratch bytes for its decoded chunks where
// the region cuts them, and its stored bytes: about 1.6 GiB of device
// memory while a 1 GiB read of zstd chunks lasts (410 frames), up to
// 4.6 GiB for 1,024 frames, half that for deflate (a device out of
// memory leaves the GPU's rows to the CPU). Inner chunks fetched a
// request each, not in spans, read at 0.89x the CPU alone (H200, S3 and
// tmpfs).

// gpuKernel is a decoder the GPU may take a share of a read with: how to
// load it, and its shares of a device read's rows of chunks (along the
// first dimension), in thousandths, from a local store and from a
// remote one (whose chunks the CPU also receives), while the CPU's path
// reads the others at the same time.
type gpuKernel struct {
	load          func(cuda.Context) (kernels.Decoder, error)
	local, remote int64
}

const (
	gpuBatchFrames = 1024
	gpuSlots       = 1
	// gpuScratch bounds the device memory of a batch's decoded chunks
	// where the region cuts them (and so a batch's frames).
	gpuScratch = 1 << 30
)

// A read's GPU frames go in one launch (up to 1,024, as many as the
// scratch memory bounds): a device memory allocation (a batch's, its
// staging's) between two launches on different streams keeps the
// second from running beside the first, so two slots of 256 frames ran
// one after the other; one launch read 1.07-1.32x as fast (H200, zstd
// and gzip, tmpfs and S3). The best share moves from machine to machine
// (H200s, of the decode ceiling in the median round): zstd from tmpfs
// at 400 1.32 where 300 read 1.17 and 500 1.29, from S3 at 375 1.07
// where 300 read 1.01 and 400 1.03 (with two slots of 256, 350-500
// moved by 1.3x from machine to machine). A deflate stream takes one
// warp over 100 ms a megabyte, however many run at once (kernels.Inflate),
// so the GPU's share of a gzip or zlib read is what it decodes while
// the CPU does the rest: from S3 375 read 1.10 where 300 read 0.98 and
// 500 0.91 (the kernel's first form, 140 ms a megabyte), 1.20 where 450
// read 0.87x it (the final form); from tmpfs 375 read 1.07x 300 (1.34
// and 1.22 of the decode ceiling) with the final form, where with the
// first 300 had read 1.07 and 400 1.02.
var (
	gpuZstdKernel    = gpuKernel{func(c cuda.Context) (kernels.Decoder, error) { return kernels.LoadZstd(c) }, 400, 375}
	gpuDeflateKernel = [...]gpuKernel{
		kernels.Gzip: {func(c cuda.Context) (kernels.Decoder, error) { return kernels.LoadInflate(c, kernels.Gzip) }, 375, 375},
		kernels.Zlib: {func(c cuda.Context) (kernels.Decoder, error) { return kernels.LoadInflate(c, kernels.Zlib) }, 375, 375},
	}
)

// gpuDecodeMin is the smallest device read the GPU takes a share of: a
// launch takes the GPU tens of milliseconds however few its frames, the
// time in which the CPU decodes a few hundred megabytes.
const gpuDecodeMin = 256 << 20

// readGPUSplit reads region r into dst (target), decoding the chunks
// of its first rows on the GPU (readGPUDevice) and reading the others
// with the CPU's path (readRegionDeviceCPU), both at once: C order puts
// the rows of the first dimension one after another in dst (gpuDecoder
// leaves reads smaller than gpuDecodeMin to the CPU); rows the GPU cannot
// take for want of device memory are read by the CPU's path after all.
func (a *Array) readGPUSplit(ctx context.Context, z kernels.Decoder, k *gpuKernel, target devmem.Range, r box, dst cuda.DevicePtr) error {
	es := a.meta.DataType.Size
	share := k.local
	if _, remote := requestSlots(a.store); remote {
		share = k.remote
	}
	if v := zarrtune.GPUDecodeShare.Load(); v > 0 {
		share = min(v, 1000)
	}
	c0 := a.cellShape()[0]
	first, end := r.start[0]/c0, (r.start[0]+r.count[0]+c0-1)/c0
	rows := int64(end - first)
	split := min((first+int((rows*share+500)/1000))*c0, r.start[0]+r.count[0]) - r.start[0]
	if split <= 0 {
		return a.readRegionDeviceCPU(ctx, r, target, dst)
	}
	gpu := box{start: slices.Clone(r.start), count: slices.Clone(r.count)}
	gpu.count[0] = split
	readGPU := func(ctx context.Context) error {
		err := a.readGPUDevice(ctx, z, target, gpu, view{shape: gpu.count, es: es}, dst)
		if errors.Is(err, cuda.ErrorOutOfMemory) && ctx.Err() == nil {
			return a.readRegionDeviceCPU(ctx, gpu, target, dst)
		}
		return err
	}
	if split == r.count[0] {
		return readGPU(ctx)
	}
	cpu := box{start: slices.Clone(r.start), count: slices.Clone(r.count)}
	cpu.start[0] += split
	cpu.count[0] -= split
	off := numElements(gpu.count) * es
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return readGPU(ctx) })
	g.Go(func() error {
		return a.readRegionDeviceCPU(ctx, cpu, target.Sub(off), dst+cuda.DevicePtr(off))
	})
	return g.Wait()
}

// gpuDecodedChunks counts the chunks the GPU decoded, for the tests.
var gpuDecodedChunks atomic.Int64

// gpuNoMemory makes the GPU's reads fail as if out of device memory,
// for the tests.
var gpuNoMemory atomic.Bool

// gpuDecoder returns the GPU's decoder of a's chunks for a device read
// of size bytes into r, and its shares, or nil where the GPU takes no
// share (gpuCodec), the read is below gpuDecodeMin (unless
// zarrtune.GPUDecodeShare says otherwise), or the kernel cannot be
// loaded (the CPU decodes then): a read the GPU takes no share of does
// not wait for the driver to compile the kernel.
func (a *Array) gpuDecoder(r devmem.Range, size int) (kernels.Decoder, *gpuKernel) {
	k := a.gpuCodec()
	if k == nil || size < gpuDecodeMin && zarrtune.GPUDecodeShare.Load() <= 0 {
		return nil, nil
	}
	var d kernels.Decoder
	if cuda.WithContext(r.Ctx, func() (err error) { d, err = k.load(r.Ctx); return err }) != nil {
		return nil, nil
	}
	return d, k
}

// gpuCodec returns the GPU's kernel for a's chunks: plain little-endian
// elements compressed with zstd without a checksum, gzip or zlib; nil
// for others, or where SetGPUDecode(false) or zarrtune.CPUDecode is set.
func (a *Array) gpuCodec() *gpuKernel {
	c, ok := a.cellPipe().plainThen()
	if !ok || a.cpuDecode || zarrtune.CPUDecode.Load() {
		return nil
	}
	switch c := c.(type) {
	case zstdCodec:
		if !c.checksum {
			return &gpuZstdKernel
		}
	case gzipCodec:
		return &gpuDeflateKernel[kernels.Gzip]
	case zlibCodec:
		return &gpuDeflateKernel[kernels.Zlib]
	}
	return nil
}

// gpuSlot is one batch in flight: its stream, the kernel's memory, the
// stored bytes on the device and the chunks decoded there.
type gpuSlot struct {
	s       cuda.Stream
	batch   *kernels.Batch
	stored  *cuda.DeviceBuffer
	decoded *cuda.DeviceBuffer
}

func (s *gpuSlot) close() {
	if s.s != 0 {
		cuda.StreamDestroy(s.s)
	}
	if s.batch != nil {
		s.batch.Close()
	}
	s.stored.Close() // a nil *DeviceBuffer closes as nothing
	s.decoded.Close()
}

// deviceBuf returns *b, grown to at least n bytes.
func deviceBuf(b **cuda.DeviceBuffer, n int) (cuda.DevicePtr, error) {
	if *b != nil && (*b).Size() >= n {
		return (*b).Ptr(), nil
	}
	if *b != nil {
		(*b).Close()
		*b = nil
	}
	d, err := cuda.MemAlloc(max(n, 1))
	if err != nil {
		return 0, err
	}
	*b = d
	return d.Ptr(), nil
}

// readGPUDevice reads region r of the array into the region at dst on
// target's device (out: the region's view), decoding its chunks with z.
// The chunks are fetched as the CPU's path fetches them: a request each,
// or for the inner chunks of shards a request per span of a shard's
// bytes (see Array.spans), each span going up to the device whole.
func (a *Array) readGPUDevice(ctx context.Context, z kernels.Decoder, target devmem.Range, r box, out view, dst cuda.DevicePtr) error {
	if gpuNoMemory.Load() {
		return fmt.Errorf("zarr: device memory for the GPU's frames: %w", cuda.ErrorOutOfMemory)
	}
	pieces, err := a.plan(ctx, r)
	if err != nil {
		return err
	}
	chunk := numElements(a.cellShape()) * out.es
	per, slots := tuned(gpuBatchFrames, &zarrtune.GPUDecodeBatch), tuned(gpuSlots, &zarrtune.GPUDecodeSlots)
	per = max(1, min(per, gpuScratch/max(chunk, 1)))
	batches := gpuBatches(a.spans(pieces, out, false, 1), per, chunk, out.es)
	// A kernel batch no larger than the most pieces a batch has (the
	// zstd kernel's scratch memory is per frame).
	most := 1
	for _, b := range batches {
		n := 0
		for _, sp := range b {
			n += len(sp.pieces)
		}
		most = max(most, n)
	}
	per = min(per, most)
	slots = min(slots, len(batches))
	fetchers := max(1, a.concurrency()/max(slots, 1))
	var next atomic.Int64
	g, ctx := errgroup.WithContext(ctx)
	for range slots {
		g.Go(func() error {
			var sl gpuSlot
			defer func() { cuda.WithContext(target.Ctx, func() error { sl.close(); return nil }) }()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(batches) || ctx.Err() != nil {
					return nil
				}
				if err := a.gpuBatch(ctx, z, target, &sl, batches[i], out, dst, chunk, per, fetchers); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}

// tuned returns v's value where set above 0, else def.
func tuned(def int, v *atomic.Int64) int {
	if n := v.Load(); n > 0 {
		return int(n)
	}
	return def
}

// gpuBatches groups spans, in order, into batches of at most per
// pieces, the frames a kernel batch is made for; a span of more pieces
// (a shard's bytes that compress very well) is cut into spans of per. A
// missing shard, one piece of the shard's selection, counts as the
// chunks of chunk bytes that selection fills (es-byte elements), so
// that a batch's device memory stays within per chunks but for a
// selection larger than that, which has a batch of its own.
func gpuBatches(spans []span, per, chunk, es int) [][]span {
	var out [][]span
	var cur []span
	n := 0
	add := func(sp span, w int) {
		if n > 0 && n+w > per {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, sp)
		n += w
	}
	for _, sp := range spans {
		if pc := sp.pieces[0]; sp.single() && pc.missing {
			add(sp, max(1, (numElements(pc.sel.count)*es+chunk-1)/max(chunk, 1)))
			continue
		}
		for len(sp.pieces) > 0 {
			take := min(len(sp.pieces), per)
			part := sp
			if take < len(sp.pieces) {
				part = subSpan(sp, sp.pieces[:take])
				sp = subSpan(sp, sp.pieces[take:])
			} else {
				sp.pieces = nil
			}
			add(part, take)
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// subSpan returns the span of sp's bytes that holds ps, pieces of sp in
// order of offset, read as a range (not as sp's whole shard).
func subSpan(sp span, ps []piece) span {
	end := int64(0)
	for _, p := range ps {
		end = max(end, p.off+p.n)
	}
	return span{key: sp.key, off: ps[0].off, n: end - ps[0].off, pieces: ps}
}

// fetchGPUSpan fetches the stored bytes of sp into a pooled buffer (no
// bytes for a missing chunk: done).
func (a *Array) fetchGPUSpan(ctx context.Context, sp *span) (fetched, error) {
	if sp.single() {
		return a.fetchStored(ctx, sp.pieces[0])
	}
	p := getBuf(int(sp.n))
	if err := a.readSpan(ctx, sp, *p, nil); err != nil {
		putBuf(p)
		return fetched{}, err
	}
	return fetched{p: p, b: *p}, nil
}

// gpuBatch fetches the stored bytes of the spans of batch, decodes
// their whole pieces on the GPU with slot sl (its kernel memory made for
// per frames, the most a batch holds) and the others on the CPU, and puts
// each piece's selection in its place.
func (a *Array) gpuBatch(ctx context.Context, z kernels.Decoder, r devmem.Range, sl *gpuSlot, batch []span, out view, dst cuda.DevicePtr, chunk, per, fetchers int) error {
	stored := make([]fetched, len(batch))
	defer func() {
		for _, f := range stored {
			if f.p != nil {
				putBuf(f.p)
			}
		}
	}()
	err := parallel(ctx, len(batch), fetchers, func(ctx context.Context, _, i int) (err error) {
		stored[i], err = a.fetchGPUSpan(ctx, &batch[i])
		return err
	})
	if err != nil {
		return err
	}
	// The batch's pieces, each with its stored bytes (or missing) and
	// where those will be in the batch's device memory (at): the spans
	// back to back, a span's pieces where they are in it.
	var ps []piece
	var bs [][]byte
	var missing []bool
	var at []int
	total := 0
	for i := range batch {
		sp := &batch[i]
		for _, pc := range sp.pieces {
			b, o := stored[i].b, 0
			if !sp.single() {
				b, o = sp.bytes(b, pc), int(pc.off-sp.off)
			}
			ps, bs, missing, at = append(ps, pc), append(bs, b), append(missing, stored[i].done), append(at, total+o)
		}
		total += len(stored[i].b)
	}
	return cuda.WithContext(r.Ctx, func() error {
		if sl.s == 0 {
			s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
			if err != nil {
				return err
			}
			sl.s = s
			b, err := z.NewBatch(per)
			if err != nil {
				return err
			}
			sl.batch = b
		}
		sp, err := deviceBuf(&sl.stored, total)
		if err != nil {
			return err
		}
		// Device memory for the pieces the region cuts or the CPU
		// decodes, taken only where there are such: piece i's at
		// slot[i].
		slot := scratchSlots(ps, chunk, out.es)
		var scratch cuda.DevicePtr
		needScratch := func() error {
			if scratch == 0 {
				scratch, err = deviceBuf(&sl.decoded, int(slot[len(ps)]))
			}
			return err
		}
		// The stored bytes up, through pinned buffers, the spans back to
		// back (a span's pieces back to back in it); the GPU's frames:
		// whole pieces, each decoded into its place in the region or into
		// the batch's memory (slot i).
		staged, err := stageStored(ctx, stored, sp, bandBufferSize(chunk), sl.s)
		defer func() {
			cuda.StreamSynchronize(sl.s) // the copies from staged done
			for _, p := range staged {
				p.Release()
			}
		}()
		if err != nil {
			return err
		}
		var frames []kernels.Frame
		var idx []int
		for i, pc := range ps {
			if missing[i] || !pc.whole() {
				continue
			}
			var to cuda.DevicePtr
			if contiguous(out, pc.dstStart, pc.sel.count) {
				to = dst + cuda.DevicePtr(out.sub(pc.dstStart).offset())
			} else {
				if err := needScratch(); err != nil {
					return err
				}
				to = scratch + slot[i]
			}
			frames = append(frames, kernels.Frame{Src: sp + cuda.DevicePtr(at[i]), SrcLen: len(bs[i]), Dst: to, DstCap: chunk})
			idx = append(idx, i)
		}
		sizes, err := sl.batch.Decode(sl.s, frames)
		if err != nil {
			return err
		}
		onGPU := make([]bool, len(ps))
		for k, n := range sizes {
			if n == chunk {
				onGPU[idx[k]] = true
			}
		}
		for i, pc := range ps {
			if onGPU[i] {
				gpuDecodedChunks.Add(1)
				if contiguous(out, pc.dstStart, pc.sel.count) {
					continue
				}
			} else {
				if err := needScratch(); err != nil {
					return err
				}
				if err := a.cpuPiece(pc, bs[i], missing[i], scratch+slot[i], out.es); err != nil {
					return err
				}
			}
			// The piece's selection, dense in slot i: to its place.
			for _, c := range bandCopies(out.shape, box{start: pc.dstStart, count: pc.sel.count}, out.es) {
				if err := copyDtoD(dst+cuda.DevicePtr(c.dst), scratch+slot[i]+cuda.DevicePtr(c.src), c, sl.s); err != nil {
					return err
				}
			}
		}
		return cuda.StreamSynchronize(sl.s)
	})
}

// scratchSlots returns where each of ps has its place in a batch's
// device memory, offsets from its start, and (last) the size of it: a
// chunk's bytes, or a piece's selection where larger (a missing shard
// is one piece of the shard's shape, not an inner chunk's).
func scratchSlots(ps []piece, chunk, es int) []cuda.DevicePtr {
	slot := make([]cuda.DevicePtr, len(ps)+1)
	for i, pc := range ps {
		slot[i+1] = slot[i] + cuda.DevicePtr(max(chunk, numElements(pc.sel.count)*es))
	}
	return slot
}

// bandBufferSize is the size of a device read's pinned buffers for
// cells of cellBytes: the GPU's part takes its staging of the size the
// CPU's bands take, the one size kvik's pool keeps.
func bandBufferSize(cellBytes int) int {
	size, _ := bandBuffers(cellBytes, 0)
	return size
}

// stageStored queues on s the copies of the fetched bytes of stored,
// back to back, to dev: each through a pinned buffer of size bytes
// (filled by up to GOMAXPROCS goroutines), a part larger than that from
// its own memory. Uploaded from pageable memory (the driver staging
// them), the batches in flight held each other back: the same 1 GiB
// read at 0.44x the default with 8 batches of 64 frames at once, 1.08x
// with pinned staging (H200). The buffers returned are in use until s
// is done.
func stageStored(ctx context.Context, stored []fetched, dev cuda.DevicePtr, size int, s cuda.Stream) ([]*kvik.PinnedBuffer, error) {
	sizes := make([]int, len(stored))
	for i, f := range stored {
		sizes[i] = len(f.b)
	}
	places, fill := stagePlaces(sizes, size)
	bufs := make([]*kvik.PinnedBuffer, len(fill))
	for k := range bufs {
		p, err := kvik.GetPinnedBuffer(size)
		if err != nil {
			return bufs[:k], err
		}
		bufs[k] = p
	}
	err := parallel(ctx, len(stored), runtime.GOMAXPROCS(0), func(_ context.Context, _, i int) error {
		if pl := places[i]; pl.buf >= 0 {
			copy(bufs[pl.buf].Bytes()[pl.off:], stored[i].b)
		}
		return nil
	})
	if err != nil {
		return bufs, err
	}
	// The copies in order of dev: a buffer's when its first part comes.
	off, queued := 0, -1
	for i, f := range stored {
		pl := places[i]
		switch {
		case pl.buf < 0 && len(f.b) > 0:
			err = cuda.MemcpyHtoDAsync(dev+cuda.DevicePtr(off), f.b, s)
		case pl.buf > queued:
			queued = pl.buf
			err = cuda.MemcpyHtoDAsync(dev+cuda.DevicePtr(off), bufs[pl.buf].Bytes()[:fill[pl.buf]], s)
		}
		if err != nil {
			return bufs, err
		}
		off += len(f.b)
	}
	return bufs, nil
}

// stagePlace is where stageStored puts a part: in pinned buffer buf at
// off, or (buf -1) nowhere, the part going up from its own memory.
type stagePlace struct{ buf, off int }

// stagePlaces places parts of sizes, to go to the device back to back,
// in buffers of size bytes: each buffer a run of consecutive parts
// (one copy puts them in their places), a part larger than a buffer in
// none; fill is the bytes used of each buffer.
func stagePlaces(sizes []int, size int) (places []stagePlace, fill []int) {
	places = make([]stagePlace, len(sizes))
	open := false // whether the last buffer takes the next part
	for i, n := range sizes {
		switch {
		case n > size:
			places[i] = stagePlace{-1, 0}
			open = false // the parts after it go after it on the device
		case open && fill[len(fill)-1]+n <= size:
			places[i] = stagePlace{len(fill) - 1, fill[len(fill)-1]}
			fill[len(fill)-1] += n
		default:
			places[i] = stagePlace{len(fill), 0}
			fill = append(fill, n)
			open = true
		}
	}
	return places, fill
}

// copyDtoD queues c from src (its first row) to dst, both on the device:
// one 2D copy, or one per row where a pitch exceeds cuda.MaxPitch.
func copyDtoD(dst, src cuda.DevicePtr, c copy2D, s cuda.Stream) error {
	sp, dp := max(c.srcPitch, c.width), max(c.dstPitch, c.width)
	if c.height == 1 || sp <= cuda.MaxPitch && dp <= cuda.MaxPitch {
		return cuda.MemcpyDtoD2DAsync(dst, dp, src, sp, c.width, c.height, s)
	}
	for y := range c.height {
		if err := cuda.MemcpyDtoD2DAsync(dst+cuda.DevicePtr(y*dp), c.width, src+cuda.DevicePtr(y*sp), c.width, c.width, 1, s); err != nil {
			return err
		}
	}
	return nil
}

// cpuPiece decodes pc, whose stored bytes are b (missing: its fill
// value), on the CPU and puts its selection, dense, at slot on the
// device.
func (a *Array) cpuPiece(pc piece, b []byte, missing bool, slot cuda.DevicePtr, es int) error {
	n := numElements(pc.sel.count) * es
	p := getBuf(n)
	defer putBuf(p)
	hv := view{buf: *p, shape: pc.sel.count, es: es, start: negate(pc.dstStart)}
	if missing {
		hv.sub(pc.dstStart).fill(pc.sel.count, pc.pipe.fill)
	} else if err := a.decodeStored(pc, b, hv.sub(pc.dstStart), hostPlace(pc, hv)); err != nil {
		return err
	}
	if err := cuda.MemcpyHtoD(slot, *p); err != nil {
		return fmt.Errorf("chunk %s: %w", pc.key, err)
	}
	return nil
}
