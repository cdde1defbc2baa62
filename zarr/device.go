package zarr

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/kernels"
	"github.com/kvikgo/kvik/internal/staging"
)

// directRunMin is the average run length from which uncompressed chunks
// are read straight from the file into device memory, one kvik device
// read per run; shorter runs are gathered in pinned host memory and
// copied, so that many tiny reads do not cost more than the copy saves.
const directRunMin = 1 << 20

// deviceTarget checks that [dst, dst+size) is device memory, with the
// engine's rules, and waits for the work queued on its legacy default
// stream, as kvik's own transfers do (devmem.ResolveSynced): the copies
// of a region read or write run on streams that nothing orders after
// stream 0, so a kernel or copy still filling a write's source there
// would be read half done. A range past its allocation is
// ErrInvalidRegion.
func deviceTarget(dst cuda.DevicePtr, size int) (devmem.Range, error) {
	r, err := devmem.ResolveSynced(dst, size, 0)
	if errors.Is(err, devmem.ErrOverrun) {
		return r, fmt.Errorf("%w: %w", ErrInvalidRegion, err)
	}
	return r, err
}

// deviceWorker holds what one goroutine needs to copy decoded chunks to
// the device: pinned staging buffers, used in turn, and a copier of the
// staging engine (its own stream) with a mark per buffer, so that the
// copies of one chunk run while the next is fetched and decoded into
// another buffer. The buffers are two from kvik's pool (mapped with huge
// pages and registered, as kvik's bounce buffers), taken on first use, or
// cells carved for the worker by readCellsDevice. The goroutine is not
// locked to a thread: the copier makes the context current for its CUDA
// calls only, so a worker waiting on the network holds no thread.
type deviceWorker struct {
	r      devmem.Range
	size   int // bytes of each buffer from the pool
	c      *staging.Copier
	bufs   [][]byte
	pinned []*kvik.PinnedBuffer // the pool's buffers behind bufs, if any
	marked []bool               // copies from buffer k are queued and marked
	last   int                  // the buffer staging handed out last, or -1
	next   int
	// GPU unshuffle (see unshuffleOut): u is nil where the CPU unshuffles;
	// shuf takes a shuffled chunk from its buffer, rows the chunk
	// unshuffled where it goes to the region in more than one copy.
	u          *kernels.Unshuffler
	shuf, rows *cuda.DeviceBuffer
}

// newDeviceWorker returns a worker with two buffers of size bytes from
// kvik's pool, or with cells as its buffers.
func newDeviceWorker(r devmem.Range, size int, cells [][]byte) *deviceWorker {
	w := &deviceWorker{r: r, size: size, bufs: cells, last: -1}
	if cells == nil {
		w.bufs, w.pinned = make([][]byte, 2), make([]*kvik.PinnedBuffer, 2)
	}
	w.marked = make([]bool, len(w.bufs))
	return w
}

// staging returns n bytes of the next buffer, once its earlier copies are
// done, and the copier to copy it with; the copies the caller queues from
// it are marked at the next call (or waited for by close).
func (w *deviceWorker) staging(n int) ([]byte, *staging.Copier, error) {
	if w.c == nil {
		c, err := staging.NewCopier(w.r, 0, true, staging.WaitPoll)
		if err != nil {
			return nil, nil, err
		}
		w.c = c
	}
	if k := w.last; k >= 0 {
		w.last = -1
		if err := w.c.Mark(k); err != nil {
			return nil, nil, err
		}
		w.marked[k] = true
	}
	k := w.next
	w.next = (k + 1) % len(w.bufs)
	if w.marked[k] {
		if err := w.c.WaitMark(k); err != nil {
			return nil, nil, err
		}
		w.marked[k] = false
	}
	if w.bufs[k] == nil {
		var err error
		if w.pinned[k], err = pinnedIn(w.c, max(w.size, 1)); err != nil {
			return nil, nil, err
		}
		w.bufs[k] = w.pinned[k].Bytes()
	}
	w.last = k
	return w.bufs[k][:n:n], w.c, nil
}

// close waits for the queued copies, gives the stream back and returns
// the pool's buffers.
func (w *deviceWorker) close() error {
	if w.c == nil {
		return nil
	}
	err := w.c.Sync()
	w.c.Close()
	releaseIn(w.c, w.pinned) // In needs only the range's context
	w.shuf.Close()
	w.rows.Close()
	return err
}

// unshuffledOnGPU counts the chunks device reads left shuffled for the
// GPU, for the tests.
var unshuffledOnGPU atomic.Int64

// unshuffler returns the GPU's unshuffler for a device read of the array
// into r, or nil where the GPU does not unshuffle (gpuUnshuffles) or the
// kernel cannot be loaded (an old driver: the CPU unshuffles, as before).
func (a *Array) unshuffler(r devmem.Range) *kernels.Unshuffler {
	if !a.gpuUnshuffles() {
		return nil
	}
	return loadKernel(r, kernels.LoadUnshuffler)
}

// loadKernel returns the kernel load gives in r's context, made current
// for it, or nil where the driver cannot run it (the CPU does the work
// then).
func loadKernel[K any](r devmem.Range, load func(cuda.Context) (*K, error)) *K {
	var k *K
	if cuda.WithContext(r.Ctx, func() (err error) { k, err = load(r.Ctx); return err }) != nil {
		return nil
	}
	return k
}

// gpuUnshuffles reports whether the GPU may unshuffle a's chunks: Blosc
// over plain elements (of shards too), neither SetGPUDecode(false) nor
// zarrtune.CPUUnshuffle set.
func (a *Array) gpuUnshuffles() bool {
	_, ok := a.cellPipe().bloscFirst()
	return ok && !a.cpuDecode && !zarrtune.CPUUnshuffle.Load()
}

// unshuffles reports whether w leaves pc's Blosc blocks shuffled for the
// GPU: a whole chunk of a Blosc chain, with w's device buffer for it at
// hand (a device out of memory leaves the rest of the read to the CPU).
func (w *deviceWorker) unshuffles(pc piece) bool {
	if _, ok := pc.pipe.bloscFirst(); w.u == nil || !ok || !pc.whole() {
		return false
	}
	if w.shuf == nil && w.c.In(func() error { return allocated(&w.shuf, w.size) }) != nil {
		w.u = nil
		return false
	}
	return true
}

// allocated allocates *b, size bytes of device memory in the current
// context, unless it is already.
func allocated(b **cuda.DeviceBuffer, size int) (err error) {
	if *b == nil {
		*b, err = cuda.MemAlloc(size)
	}
	return err
}

// unshuffleOut queues on w's stream the copy of pinned, a chunk (pc)
// decoded with its Blosc blocks left shuffled (sh), to w's device buffer,
// and its unshuffle into its place in the region at dst (unshuffleTo).
// The stream's order keeps the next chunk's copy into the buffer behind
// the kernel. A chunk of several copies whose buffer of rows cannot be
// had is unshuffled on the CPU.
func (w *deviceWorker) unshuffleOut(pinned []byte, sh shuffled, pc piece, out view, dst cuda.DevicePtr) error {
	cs := bandCopies(out.shape, box{start: pc.dstStart, count: pc.sel.count}, out.es)
	var rows cuda.DevicePtr
	err := w.c.In(func() error {
		if len(cs) > 1 {
			if allocated(&w.rows, w.size) != nil {
				return nil
			}
			rows = w.rows.Ptr()
		}
		unshuffledOnGPU.Add(1)
		if err := cuda.MemcpyHtoDAsync(w.shuf.Ptr(), pinned, w.c.Stream()); err != nil {
			return err
		}
		return unshuffleTo(w.u, w.c.Stream(), dst, cs, w.shuf.Ptr(), len(pinned), sh, rows)
	})
	if err == nil && len(cs) > 1 && rows == 0 {
		sh.undo(pinned)
		return copyOut(w.c, pinned, pc, out, dst)
	}
	return err
}

// unshuffleTo queues on st the unshuffle of the n-byte piece at src on
// the device, its Blosc blocks shuffled (sh), to its copies cs into the
// region at dst: straight into the rows of a piece that lands in one
// copy, else into rows (n bytes of device memory) and copied from there.
func unshuffleTo(u *kernels.Unshuffler, st cuda.Stream, dst cuda.DevicePtr, cs []copy2D, src cuda.DevicePtr, n int, sh shuffled, rows cuda.DevicePtr) error {
	if len(cs) == 1 {
		c := cs[0]
		return u.Unshuffle(st, dst+cuda.DevicePtr(c.dst), c.width, rowPitch(c), src, n, sh.blocksize, sh.typesize)
	}
	if err := u.Unshuffle(st, rows, n, n, src, n, sh.blocksize, sh.typesize); err != nil {
		return err
	}
	for _, c := range cs {
		if err := cuda.MemcpyDtoD2DAsync(dst+cuda.DevicePtr(c.dst), c.dstPitch, rows+cuda.DevicePtr(c.src), c.srcPitch, c.width, c.height, st); err != nil {
			return err
		}
	}
	return nil
}

// rowPitch is the pitch of c's rows in the destination, its width for
// one row.
func rowPitch(c copy2D) int {
	if c.height == 1 {
		return c.width
	}
	return c.dstPitch
}

// ReadRegionDevice reads [start, stop) into device memory at dst, C order,
// little-endian elements; the allocation must hold the region. The region
// is assembled in bands of whole chunk rows (32 MiB, or one chunk where a
// chunk is larger) in pinned host memory, every worker fetching and
// decoding the chunks of a band straight into it, and each band is
// copied to the device in one call while the next is decoded. Chunks of a
// DirStore stored uncompressed whose rows in the region are long go from
// the file straight to the device instead (kvik's cuFile or overlapped
// POSIX path). Chunks of a DirStore of at most 4 MiB whose copies to the
// region are few wide rows go through each worker's own pinned buffers:
// read or decoded whole, then copied in one 2D copy while the worker goes
// on. Fetches of a RemoteStore run concurrently, up to its MaxRequests,
// beside SetWorkers decodes; a band of a sharded array is planned once
// its shards' indexes are in, the first bands read while later indexes
// are. Whole chunks (inner chunks) of Blosc with byte shuffle over plain
// little-endian elements are decoded with their blocks left shuffled and
// unshuffled by the GPU after their copy (a kernel of kvik's own, loaded
// into the context by the first such read): device reads of Blosc-lz4
// and Blosc-zstd ran 1.08-1.10x as fast as with the CPU's AVX2
// unshuffle (from a directory and from S3, H200). Missing chunks read
// as the fill value. A read of 256 MiB or more of plain zstd, gzip or
// zlib chunks (or inner chunks of shards) gives the GPU the chunks of
// its first rows to decode (kernels of kvik's own, gpuKernel) while the
// CPU reads the rest: zstd 1.39-1.52x the CPU alone from tmpfs,
// 1.00-1.39x from S3, gzip 1.26x and 1.32x (H200). Cancelling ctx stops
// the requests in flight.
func (a *Array) ReadRegionDevice(ctx context.Context, start, stop []int, dst cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	target, err := deviceTarget(dst, size)
	if err != nil {
		return err
	}
	if z, k := a.gpuDecoder(target, size); z != nil {
		return a.readGPUSplit(ctx, z, k, target, r, dst)
	}
	return a.readRegionDeviceCPU(ctx, r, target, dst)
}

// readRegionDeviceCPU reads region r into dst (target) with the chunks
// decoded on the CPU (see ReadRegionDevice).
func (a *Array) readRegionDeviceCPU(ctx context.Context, r box, target devmem.Range, dst cuda.DevicePtr) error {
	es := a.meta.DataType.Size
	cellBytes := numElements(a.cellShape()) * es
	bufSize, _ := bandBuffers(cellBytes, 0)
	limit := bufSize
	if v := int(zarrtune.BandLimit.Load()); v > 0 {
		limit = min(limit, max(v, cellBytes))
	}
	out := view{shape: r.count, es: es}
	ds, _ := a.store.(*DirStore)
	layout := zarrtune.DeviceLayout.Load()
	u := a.unshuffler(target)
	p, err := a.bandPlan(ctx, r, limit, func(b *band) {
		if ds != nil {
			a.directBand(b, out)
		}
		layoutBands([]*band{b}, r.count, es, layout)
		if u != nil && !b.direct {
			b.shuf = make([][]pieceShuffle, len(b.spans))
			for i := range b.spans {
				b.shuf[i] = make([]pieceShuffle, len(b.spans[i].pieces))
			}
		}
	})
	if err != nil {
		return err
	}
	banded := 0
	for _, b := range p.bands {
		if !b.direct {
			banded++
		}
	}
	if ds != nil && p.indexes == nil {
		if cell, ok := workerStaged(p.bands, es); ok {
			return a.readCellsDevice(ctx, ds, p.bands, target, dst, out, cell, u)
		}
	}
	_, n := bandBuffers(bufSize, banded)
	sink, err := newDeviceSink(target, dst, es, bufSize, n)
	if err != nil {
		return err
	}
	sink.u, sink.region = u, r.count
	workers := make([]*deviceWorker, a.concurrency())
	err = a.readBands(ctx, p, sink, func(ctx context.Context, k int, sp span) error {
		if workers[k] == nil {
			workers[k] = newDeviceWorker(target, bufSize, nil)
		}
		return a.readDirectSpan(ctx, workers[k], ds, sp, out, dst)
	})
	return closeWorkers(workers, err)
}

// readDirectSpan reads sp, a span of a direct band (region coordinates),
// from its file to the region at dst: a run of chunks in one device read,
// a chunk run by run (readPieceDevice).
func (a *Array) readDirectSpan(ctx context.Context, w *deviceWorker, ds *DirStore, sp span, out view, dst cuda.DevicePtr) error {
	if sp.direct {
		_, err := ds.ReadRangeDevice(ctx, sp.key, sp.off, dst, int(sp.n), int64(sp.dstOff))
		return err
	}
	return a.readPieceDevice(ctx, w, ds, sp.pieces[0], out, dst)
}

// closeWorkers closes the workers that were made and returns err, or the
// first error of a close.
func closeWorkers(workers []*deviceWorker, err error) error {
	for _, w := range workers {
		if w == nil {
			continue
		}
		if e := w.close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// workerCellMax is the largest cell (chunk or inner chunk) that a device
// read of a DirStore stages in its workers' own pinned buffers, and
// workerCells how many each worker has: enough that a copy held back
// behind other workers' on PCIe seldom makes the worker wait.
const (
	workerCellMax = 4 << 20
	workerCells   = 4
)

// workerStaged reports whether the bands of a device read (es-byte
// elements) go through the workers' own pinned buffers rather than band
// buffers, and how large those must be: where every band that is not
// direct is laid out in cells, one piece of at most workerCellMax bytes
// per span. Then each worker reads or decodes a chunk into a
// buffer of its own and queues its copies to the device at once, on its
// own stream, as the engine's device reads do: no goroutine in between
// has to be scheduled for a band's copies or buffers, which, with every
// worker in a read(2), waited for a processor for milliseconds (a 1 GiB
// array of 1 MiB chunks read at 0.72x a file of the same bytes).
func workerStaged(bands []*band, es int) (cell int, ok bool) {
	for _, b := range bands {
		if !b.direct && b.slots == nil {
			return 0, false
		}
		for i := range b.spans {
			sp := &b.spans[i]
			if !b.direct && !sp.single() {
				return 0, false
			}
			// A missing shard is one piece, larger than an inner chunk;
			// a direct band's missing chunk is filled in a worker's
			// buffer too.
			for _, pc := range sp.pieces {
				cell = max(cell, numElements(pc.sel.count)*es)
			}
		}
	}
	return cell, cell <= workerCellMax
}

// readCellsDevice reads the spans of bands (see workerStaged) on the
// array's workers: those of a direct band from their files to the device
// (readDirectSpan), any other fetched and decoded whole into one of the
// worker's workerCells pinned buffers of size bytes and copied from there
// to its place in the region at dst while the worker goes on.
func (a *Array) readCellsDevice(ctx context.Context, ds *DirStore, bands []*band, target devmem.Range, dst cuda.DevicePtr, out view, size int, u *kernels.Unshuffler) error {
	type item struct {
		b *band
		i int
	}
	var items []item
	for _, b := range bands {
		for i := range b.spans {
			items = append(items, item{b, i})
		}
	}
	es := out.es
	workers := make([]*deviceWorker, max(1, min(a.concurrency(), len(items))))
	slots, err := cellWorkers(target, workers, es, max(size, 1))
	if slots != nil {
		defer slots.close()
	}
	if err != nil {
		return err
	}
	for _, w := range workers {
		w.u = u
	}
	err = a.run(ctx, len(items), func(ctx context.Context, k, i int) error {
		b, sp, w := items[i].b, &items[i].b.spans[items[i].i], workers[k]
		if b.direct {
			return a.readDirectSpan(ctx, w, ds, *sp, out, dst)
		}
		pc := sp.pieces[0]
		pinned, c, err := w.staging(numElements(pc.sel.count) * es)
		if err != nil {
			return err
		}
		cell := view{buf: pinned, shape: pc.sel.count, es: es, start: negate(pc.dstStart)}
		f, err := a.fetchPiece(ctx, pc, cell)
		var sh shuffled
		switch {
		case err != nil || f.done:
		case w.unshuffles(pc):
			if sh, err = pc.pipe.decodeShuffled(f.b, pinned); err != nil {
				err = fmt.Errorf("chunk %s: %w", pc.key, err)
			}
		default:
			err = a.decodeStored(pc, f.b, cell.sub(pc.dstStart), hostPlace(pc, cell))
		}
		if f.p != nil {
			putBuf(f.p)
		}
		if err != nil {
			return err
		}
		if sh.typesize > 0 {
			return w.unshuffleOut(pinned, sh, pc, out, dst)
		}
		return copyOut(c, pinned, pc, out, dst)
	})
	return closeWorkers(workers, err)
}

// cellWorkers makes workers, each with workerCells pinned buffers of size
// bytes, carved from band-sized buffers of kvik's pool (so that reads and
// writes of any layout share its one size), which the returned slots
// hold (nil if none were made): close them once the workers are closed,
// on error too.
func cellWorkers(target devmem.Range, workers []*deviceWorker, es, size int) (*pinnedSlots, error) {
	bufSize, _ := bandBuffers(size, 0)
	perBuf := bufSize / size
	slots, err := newPinnedSlots(target, es, bufSize, (workerCells*len(workers)+perBuf-1)/perBuf)
	if err != nil {
		return nil, err
	}
	for k := range workers {
		cells := make([][]byte, workerCells)
		for j := range cells {
			c := workerCells*k + j
			if c/perBuf == len(slots.pinned) {
				p, err := pinnedIn(slots.c, bufSize)
				if err != nil {
					return &slots, err
				}
				slots.pinned = append(slots.pinned, p)
			}
			off := c % perBuf * size
			cells[j] = slots.pinned[c/perBuf].Bytes()[off : off+size : off+size]
		}
		workers[k] = newDeviceWorker(target, size, cells)
	}
	return &slots, nil
}

// directBand makes b a direct band, its spans in region coordinates
// (out), when every piece of it can go from its file straight to the
// device: a run of uncompressed inner chunks that lie back to back in
// the store and in the region, or an uncompressed chunk whose rows in
// the region are on average directRunMin long.
func (a *Array) directBand(b *band, out view) {
	var pieces []piece
	for _, sp := range b.spans {
		for _, pc := range sp.pieces {
			if !pc.pipe.raw() {
				return // decoded: never read straight to the device
			}
		}
		pieces = append(pieces, sp.pieces...)
	}
	spans := a.spans(pieces, out, true, 1)
	for _, sp := range spans {
		pc := sp.pieces[0]
		switch {
		case sp.direct:
			if sp.n < directRunMin {
				return
			}
		case !sp.single() || !pc.pipe.raw() || pc.n >= 0 || pc.missing:
			return
		default:
			runs := 0
			a.rawRuns(pc, out, func(int64, int, int) error { runs++; return nil })
			if numElements(pc.sel.count)*out.es/runs < directRunMin {
				return
			}
		}
	}
	b.spans, b.direct = spans, true
}

// Cells layout limits (see zarrtune.Cells): in Auto, a band is laid out
// in cells only where each piece's copies have rows of at least
// cellRowMin bytes and move cellCopyMin bytes each on average, so that
// neither the DMA engine's rows nor the calls per byte cost more than the
// reads and decodes in place save.
const (
	cellRowMin  = 1 << 10
	cellCopyMin = 256 << 10
)

// layoutBands lays out the buffers of the bands of a device read of a
// region of shape region, in layout (a zarrtune layout), and plans their
// copies to the device.
func layoutBands(bands []*band, region []int, es int, layout int32) {
	for _, b := range bands {
		if b.direct || layout != zarrtune.Region && b.layCells(region, es, layout == zarrtune.Cells) {
			continue
		}
		b.slots, b.copies = nil, bandCopies(region, b.box, es)
	}
}

// layCells gives each piece of b a slot in b's buffer, in order, the
// pieces of a span back to back, and plans each piece's copies from its
// slot to the region. Unless forced it does so, and reports true, only
// where the copies are wide and few (cellRowMin, cellCopyMin) and some
// piece is not contiguous in the region already (then the region's
// layout reads it in place too, and copies the band in one call).
func (b *band) layCells(region []int, es int, force bool) bool {
	var copies []copy2D
	slots := make([][]int, len(b.spans))
	off, scattered := 0, false
	for i, sp := range b.spans {
		slots[i] = make([]int, len(sp.pieces))
		for j, pc := range sp.pieces {
			slots[i][j] = off
			n := numElements(pc.sel.count) * es
			cs := bandCopies(region, box{start: pc.dstStart, count: pc.sel.count}, es)
			if !force && len(cs) > 1 && n/len(cs) < cellCopyMin {
				return false
			}
			scattered = scattered || len(cs) > 1 || cs[0].height > 1
			for _, c := range cs {
				if !force && c.height > 1 && c.width < cellRowMin {
					return false
				}
				c.src += off
				copies = append(copies, c)
			}
			off += n
		}
	}
	if off != numElements(b.box.count)*es || !force && !scattered {
		return false
	}
	b.slots, b.copies = slots, copies
	return true
}

// readPieceDevice reads pc, an uncompressed chunk of ds, run by run from
// its file into the region at dst; a missing chunk's fill value goes
// through one of w's pinned buffers.
func (a *Array) readPieceDevice(ctx context.Context, w *deviceWorker, ds *DirStore, pc piece, out view, dst cuda.DevicePtr) error {
	done, err := a.readRuns(pc, out, func(off int64, dstOff, n int) (int64, error) {
		return ds.ReadRangeDevice(ctx, pc.key, off, dst, n, int64(dstOff))
	})
	if done || err != nil {
		return err
	}
	pinned, c, err := w.staging(numElements(pc.sel.count) * out.es)
	if err != nil {
		return err
	}
	hv := view{buf: pinned, shape: pc.sel.count, es: out.es, start: make([]int, len(pc.sel.count))}
	hv.fill(pc.sel.count, pc.pipe.fill)
	return copyOut(c, pinned, pc, out, dst)
}

// copyOut queues on c the copies of pc's selection, in C order in
// pinned, to its place in the region at dst: 2D copies, as a band's.
func copyOut(c *staging.Copier, pinned []byte, pc piece, out view, dst cuda.DevicePtr) error {
	return c.In(func() error {
		for _, cp := range bandCopies(out.shape, box{start: pc.dstStart, count: pc.sel.count}, out.es) {
			if err := copyHtoD(dst+cuda.DevicePtr(cp.dst), pinned[cp.src:], cp, c.Stream()); err != nil {
				return err
			}
		}
		return nil
	})
}

// pinnedSlots are up to max pinned buffers of size bytes from kvik's
// pool, taken as needed, each given back to free once its copies are
// done; a buffer is known by its slot.
type pinnedSlots struct {
	c      *staging.Copier // its stream copies to and from the buffers
	es     int
	size   int
	max    int
	pinned []*kvik.PinnedBuffer // taken so far; only take appends
	free   chan int
	failed chan struct{} // closed when a copy fails, err set
	err    error
}

func newPinnedSlots(target devmem.Range, es, size, n int) (pinnedSlots, error) {
	// The copies of one goroutine: it sleeps while they run (WaitBlock)
	// rather than poll on a core the workers reading and decoding use.
	c, err := staging.NewCopier(target, 0, true, staging.WaitBlock)
	n = max(n, 1)
	return pinnedSlots{c: c, es: es, size: size, max: n, free: make(chan int, n), failed: make(chan struct{})}, err
}

// take returns a buffer for b, once one is free.
func (s *pinnedSlots) take(ctx context.Context, b *band) ([]byte, error) {
	k := -1
	select {
	case k = <-s.free:
	default:
		if len(s.pinned) < s.max {
			p, err := pinnedIn(s.c, s.size)
			if err != nil {
				return nil, err
			}
			s.pinned = append(s.pinned, p)
			k = len(s.pinned) - 1
			break
		}
		select {
		case k = <-s.free:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.failed:
			return nil, s.err
		}
	}
	b.slot = k
	n := numElements(b.box.count) * s.es
	return s.pinned[k].Bytes()[:n:n], nil
}

// fail records the first copy error.
func (s *pinnedSlots) fail(err error) {
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
}

// close gives the buffers and the stream back, once nothing uses them.
func (s *pinnedSlots) close() {
	releaseIn(s.c, s.pinned)
	s.c.Close()
}

// pinnedIn takes a buffer of n bytes from kvik's pool in c's context,
// where the pool may pin it.
func pinnedIn(c *staging.Copier, n int) (*kvik.PinnedBuffer, error) {
	var p *kvik.PinnedBuffer
	err := c.In(func() (err error) { p, err = kvik.GetPinnedBuffer(n); return err })
	return p, err
}

// releaseIn gives the buffers of ps (nil ones skipped) back to kvik's
// pool in c's context, where a release may unpin.
func releaseIn(c *staging.Copier, ps []*kvik.PinnedBuffer) {
	c.In(func() error {
		for _, p := range ps {
			if p != nil {
				p.Release()
			}
		}
		return nil
	})
}

// deviceSink takes a device read's bands to device memory at dst, where
// the region starts: bands are assembled in pinned buffers, and one
// goroutine queues each band's copies on one stream as the band is
// filled and gives its buffer back once they are done, so that copies
// run while later bands decode.
type deviceSink struct {
	pinnedSlots
	dst   cuda.DevicePtr
	bands chan *band    // filled bands, for the copying goroutine
	done  chan struct{} // closed when the copying goroutine returns
	// GPU unshuffle of the pieces of bands left shuffled (band.shuf): u,
	// the region's shape, and the device buffer shuffled pieces are
	// copied to, taken at the first.
	u          *kernels.Unshuffler
	region     []int
	shuf, rows *cuda.DeviceBuffer
}

func newDeviceSink(target devmem.Range, dst cuda.DevicePtr, es, size, n int) (*deviceSink, error) {
	p, err := newPinnedSlots(target, es, size, n)
	if err != nil {
		return nil, err
	}
	s := &deviceSink{pinnedSlots: p, dst: dst, bands: make(chan *band, p.max), done: make(chan struct{})}
	go s.copyBands()
	return s, nil
}

func (s *deviceSink) filled(b *band) error {
	select {
	case s.bands <- b: // never waits: a band holds one of max buffers
		return nil
	case <-s.failed:
		return s.err
	}
}

// copyBands queues the copies of each filled band and gives buffers back
// as their copies finish: the oldest in flight once no band is waiting,
// so that the stream always has copies queued while there are any.
func (s *deviceSink) copyBands() {
	defer close(s.done)
	var inflight []*band
	release := func() {
		b := inflight[0]
		inflight = inflight[1:]
		if err := s.c.WaitMark(b.slot); err != nil {
			s.fail(err)
		}
		s.free <- b.slot
	}
	for {
		var b *band
		ok := true
		if len(inflight) == 0 {
			b, ok = <-s.bands
		} else {
			select {
			case b, ok = <-s.bands:
			default:
				release()
				continue
			}
		}
		if !ok {
			break
		}
		if s.err != nil {
			s.free <- b.slot // after a failure bands are not copied
			continue
		}
		if err := s.queue(b); err != nil {
			s.fail(err)
		}
		inflight = append(inflight, b)
	}
	for len(inflight) > 0 {
		release()
	}
}

// queue queues the copies of b and marks their end with b's buffer.
func (s *deviceSink) queue(b *band) error {
	err := s.c.In(func() error {
		if b.shuf != nil {
			return s.queuePieces(b)
		}
		return s.queueCopies(b)
	})
	if err != nil {
		return err
	}
	return s.c.Mark(b.slot)
}

// copyHtoD queues c from src (whose start is c's first row) to dst: one
// 2D copy, or one copy per row where a pitch exceeds cuda.MaxPitch.
func copyHtoD(dst cuda.DevicePtr, src []byte, c copy2D, st cuda.Stream) error {
	if c.height == 1 {
		return cuda.MemcpyHtoDAsync(dst, src[:c.width], st)
	}
	if c.srcPitch <= cuda.MaxPitch && c.dstPitch <= cuda.MaxPitch {
		return cuda.MemcpyHtoD2DAsync(dst, c.dstPitch, src, c.srcPitch, c.width, c.height, st)
	}
	for y := range c.height {
		if err := cuda.MemcpyHtoDAsync(dst+cuda.DevicePtr(y*c.dstPitch), src[y*c.srcPitch:y*c.srcPitch+c.width], st); err != nil {
			return err
		}
	}
	return nil
}

// queueCopies queues b's copies from its buffer.
func (s *deviceSink) queueCopies(b *band) error {
	for _, c := range b.copies {
		if err := copyHtoD(s.dst+cuda.DevicePtr(c.dst), b.buf[c.src:], c, s.c.Stream()); err != nil {
			return err
		}
	}
	return nil
}

// queuePieces queues the copies of b, whose pieces may be left shuffled
// (band.shuf): with some, the band's buffer goes to the sink's device
// buffer in one copy, its bytes from there to the region as the band's
// copies would take them (unless every piece is shuffled), then the
// shuffled pieces are unshuffled over their places (unshuffleTo). Where
// the device buffers cannot be had (the device out of memory), the CPU
// unshuffles a piece in b's buffer and it goes as any other.
func (s *deviceSink) queuePieces(b *band) error {
	type onGPU struct {
		sh pieceShuffle
		cs []copy2D
		n  int
	}
	var gpu []onGPU
	all := true
	for i, sp := range b.spans {
		for j, pc := range sp.pieces {
			sh, n := b.shuf[i][j], numElements(pc.sel.count)*s.es
			if sh.typesize == 0 {
				all = false
				continue
			}
			cs := bandCopies(s.region, box{start: pc.dstStart, count: pc.sel.count}, s.es)
			if allocated(&s.shuf, s.size) != nil || len(cs) > 1 && allocated(&s.rows, s.size) != nil {
				sh.undo(b.buf[sh.off : sh.off+n])
				all = false
				continue
			}
			gpu = append(gpu, onGPU{sh, cs, n})
		}
	}
	if len(gpu) == 0 {
		return s.queueCopies(b)
	}
	st, dev := s.c.Stream(), s.shuf.Ptr()
	if err := cuda.MemcpyHtoDAsync(dev, b.buf[:numElements(b.box.count)*s.es], st); err != nil {
		return err
	}
	if !all { // the pieces left as they are go from the device buffer
		for _, c := range b.copies {
			if err := cuda.MemcpyDtoD2DAsync(s.dst+cuda.DevicePtr(c.dst), rowPitch(c), dev+cuda.DevicePtr(c.src), max(c.srcPitch, c.width), c.width, c.height, st); err != nil {
				return err
			}
		}
	}
	for _, p := range gpu {
		unshuffledOnGPU.Add(1)
		if err := unshuffleTo(s.u, st, s.dst, p.cs, dev+cuda.DevicePtr(p.sh.off), p.n, p.sh.shuffled, s.rows.Ptr()); err != nil {
			return err
		}
	}
	return nil
}

// close waits for the copies, then gives the buffers and the stream
// back.
func (s *deviceSink) close() error {
	close(s.bands)
	<-s.done
	s.pinnedSlots.close()
	s.shuf.Close()
	s.rows.Close()
	return s.err
}

// loadSink gives a device write's bands their bytes from device memory
// at src, where the region starts: taking a band's pinned buffer copies
// the band into it (the taking goroutine runs ahead of the encoders, so
// the copies of later bands overlap their encoding), and a band whose
// chunks are written gives its buffer back.
type loadSink struct {
	pinnedSlots
	src    cuda.DevicePtr
	region []int
}

func (s *loadSink) take(ctx context.Context, b *band) ([]byte, error) {
	buf, err := s.pinnedSlots.take(ctx, b)
	if err != nil {
		return nil, err
	}
	err = s.c.In(func() error {
		for _, c := range bandCopies(s.region, b.box, s.es) {
			if err := copyDtoH(buf[c.src:], s.src+cuda.DevicePtr(c.dst), c, s.c.Stream()); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = s.c.Sync()
	}
	return buf, err
}

func (s *loadSink) filled(b *band) error {
	s.free <- b.slot
	return nil
}

func (s *loadSink) close() error {
	s.c.Sync() // a take that failed may have left copies queued
	s.pinnedSlots.close()
	return nil
}

// copyDtoH queues c, the reverse way of copyHtoD: from the region at src
// into dst (whose start is c's first row).
func copyDtoH(dst []byte, src cuda.DevicePtr, c copy2D, st cuda.Stream) error {
	if c.height == 1 {
		return cuda.MemcpyDtoHAsync(dst[:c.width], src, st)
	}
	if c.srcPitch <= cuda.MaxPitch && c.dstPitch <= cuda.MaxPitch {
		return cuda.MemcpyDtoH2DAsync(dst, c.srcPitch, src, c.dstPitch, c.width, c.height, st)
	}
	for y := range c.height {
		if err := cuda.MemcpyDtoHAsync(dst[y*c.srcPitch:y*c.srcPitch+c.width], src+cuda.DevicePtr(y*c.dstPitch), st); err != nil {
			return err
		}
	}
	return nil
}

// WriteRegionDevice writes the region [start, stop) from device memory at
// src (C order, little-endian elements). Uncompressed chunks that the
// region covers whole and that are contiguous in src go from the device
// straight to the store (SetDevice: a file written through kvik, or an
// object uploaded through pinned bounce buffers), the GPU looking for
// those all of the fill value first (see SetWriteEmptyChunks; a driver
// that cannot load kvik's kernel stores them). Blosc LZ4 chunks it
// covers whole (inner chunks of shards too), 32 MiB of them or more,
// are encoded by the GPU where they lie and only their encoded bytes
// copied to host memory to be stored (see SetGPUEncode). Otherwise the
// region is copied to host memory and written as WriteRegion does.
func (a *Array) WriteRegionDevice(ctx context.Context, start, stop []int, src cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	target, err := deviceTarget(src, size)
	if err != nil {
		return err
	}
	in := view{shape: r.count, es: a.meta.DataType.Size}
	var direct, staged []chunkTask
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error {
		if a.pipe.raw() && a.covers(t) && a.insideArray(t) && contiguous(in, t.dstStart, t.sel.count) {
			direct = append(direct, t)
		} else {
			staged = append(staged, t)
		}
		return nil
	})
	if c, ok := a.gpuBlosc(); ok && len(staged) > 0 {
		gpu, cpu := a.splitGPU(in, staged)
		a.spreadDirs(gpu)
		left, err := a.writeGPU(ctx, target, in, gpu, src, c)
		if err != nil {
			return err
		}
		staged = append(cpu, left...)
	}
	if len(staged) > 0 {
		if err := a.writeBands(ctx, target, r, staged, src); err != nil {
			return err
		}
	}
	stored, err := a.directStored(target, in, direct)
	if err != nil {
		return err
	}
	return a.run(ctx, len(direct), func(ctx context.Context, _, i int) error {
		t := direct[i]
		off := in.sub(t.dstStart).offset()
		key := a.ChunkKey(t.coords)
		unlock, err := a.lockChunk(ctx, key)
		if err != nil {
			return err
		}
		defer unlock()
		if !stored[i] {
			return a.store.Delete(ctx, key)
		}
		return a.store.SetDevice(ctx, key, src, numElements(t.sel.count)*in.es, int64(off))
	})
}

// directStored reports which of the chunks direct, whole in the region
// in at r's device memory, a device write stores: every one where a
// stores chunks of the fill value, else those the GPU finds anything but
// the fill value in; every one where the kernel cannot be loaded (an old
// driver), as before it.
func (a *Array) directStored(r devmem.Range, in view, direct []chunkTask) ([]bool, error) {
	if !a.writeEmpty && len(direct) > 0 {
		offs := make([]uint64, len(direct))
		for i, t := range direct {
			offs[i] = uint64(in.sub(t.dstStart).offset())
		}
		n := numElements(a.meta.ChunkShape) * in.es
		var stored []bool
		err := cuda.WithContext(r.Ctx, func() error {
			u, err := kernels.LoadFillScanner(r.Ctx)
			if err != nil {
				return nil
			}
			s, err := devmem.GetStream(r.Ctx, r.Primary)
			if err != nil {
				return err
			}
			stored, err = u.Differs(s, r.Ptr, offs, n, a.pipe.fill)
			devmem.PutStream(r.Ctx, r.Primary, s)
			return err
		})
		if stored != nil || err != nil {
			return stored, err
		}
	}
	stored := make([]bool, len(direct))
	for i := range stored {
		stored[i] = true
	}
	return stored, nil
}

// writeBands writes the chunks of tasks, parts of region r whose bytes
// are in device memory at src, band by band: each band of whole chunks
// (bandTarget bytes, or one chunk) is copied into a pinned buffer, ahead
// of the encoders, and its chunks are encoded and stored by every worker
// at once.
func (a *Array) writeBands(ctx context.Context, target devmem.Range, r box, tasks []chunkTask, src cuda.DevicePtr) error {
	es := a.meta.DataType.Size
	bufSize, _ := bandBuffers(numElements(a.meta.ChunkShape)*es, 0)
	bands := writePlan(r, a.meta.ChunkShape, es, bufSize, tasks)
	for _, b := range bands {
		a.spreadDirs(b.tasks)
	}
	_, n := bandBuffers(bufSize, len(bands))
	p, err := newPinnedSlots(target, es, bufSize, n)
	if err != nil {
		return err
	}
	return a.writeBandsFrom(ctx, bands, &loadSink{pinnedSlots: p, src: src, region: r.count}, n)
}

// writePlan groups tasks, the chunks of region r, into bands of whole
// chunks of at most limit bytes.
func writePlan(r box, chunks []int, es, limit int, tasks []chunkTask) []*band {
	g := newBandGrid(r, chunks, es, limit)
	per := make([][]chunkTask, g.n())
	for _, t := range tasks {
		g.split(piece{sel: t.sel, dstStart: t.dstStart}, func(i int, _ piece) { per[i] = append(per[i], t) })
	}
	var bands []*band
	for i, ts := range per {
		if len(ts) > 0 {
			bands = append(bands, &band{box: g.box(i), tasks: ts, n: len(ts), ready: make(chan struct{})})
		}
	}
	return bands
}

// writeBandsFrom writes the chunks of bands from the memory sink gives
// each band, n bands at most at once. Spread over directories, the
// workers take chunks of up to half of those in turn: the other half
// are copied meanwhile, where interleaving them all would finish them
// all at once, their buffers freed together and the next copies waited
// for.
func (a *Array) writeBandsFrom(ctx context.Context, bands []*band, sink bandSink, n int) error {
	es := a.meta.DataType.Size
	w := bandWork{finish: func(ctx context.Context, _ int, b *band, i int, _ fetched) error {
		return a.writeChunk(ctx, b.tasks[i], b.view(es))
	}}
	if a.spreadsDirs() {
		w.spread = min(bandsSpread, n/2)
	}
	return runBands(ctx, bands, sink, a.concurrency(), w)
}
