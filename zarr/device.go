package zarr

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
)

// directRunMin is the average run length from which uncompressed chunks
// are read straight from the file into device memory, one kvik device
// read per run; shorter runs are gathered in pinned host memory and
// copied, so that many tiny reads do not cost more than the copy saves.
const directRunMin = 1 << 20

// deviceTarget checks that [dst, dst+size) is device memory, with the
// engine's rules (devmem.Resolve), and returns the context to work in and
// a release function (a no-op: the engine keeps primary contexts
// retained).
func deviceTarget(dst cuda.DevicePtr, size int) (cuda.Context, func(), error) {
	r, err := devmem.Resolve(dst, size, 0)
	if errors.Is(err, devmem.ErrOverrun) {
		return 0, nil, fmt.Errorf("%w: %w", ErrInvalidRegion, err)
	}
	if err != nil {
		return 0, nil, err
	}
	return r.Ctx, func() {}, nil
}

// deviceWorker holds what one goroutine needs to copy decoded chunks to
// the device: two pinned staging buffers from kvik's pool (mapped with
// huge pages and registered, as kvik's bounce buffers), each with its own
// stream, used in turn, so that the copy of one chunk runs while the next
// is fetched and decoded into the other buffer. The goroutine is not
// locked to a thread: only the CUDA calls run with ctx current, so a
// worker waiting on the network holds no thread.
type deviceWorker struct {
	ctx     cuda.Context
	size    int // bytes of each staging buffer
	streams [2]cuda.Stream
	pinned  [2]*kvik.PinnedBuffer
	pending [2]bool // copies from pinned[k] are queued on streams[k]
	next    int
}

// staging returns n bytes of the next pinned buffer, once its earlier
// copies are done, and the stream to copy it on.
func (w *deviceWorker) staging(n int) ([]byte, cuda.Stream, error) {
	k := w.next
	w.next ^= 1
	err := cuda.WithContext(w.ctx, func() (err error) {
		if w.streams[k] == 0 {
			if w.streams[k], err = cuda.StreamCreate(cuda.StreamNonBlocking); err != nil {
				return err
			}
		}
		if w.pending[k] {
			if err := devmem.WaitStream(w.streams[k]); err != nil {
				return err
			}
			w.pending[k] = false
		}
		if w.pinned[k] == nil {
			w.pinned[k], err = kvik.GetPinnedBuffer(max(w.size, 1))
		}
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	w.pending[k] = true // the caller queues copies next
	return w.pinned[k].Bytes()[:n:n], w.streams[k], nil
}

func (w *deviceWorker) close() error {
	var err error
	cuda.WithContext(w.ctx, func() error {
		for k := range w.streams {
			if w.streams[k] != 0 {
				if e := devmem.WaitStream(w.streams[k]); e != nil && err == nil {
					err = e
				}
				cuda.StreamDestroy(w.streams[k])
			}
			if w.pinned[k] != nil {
				w.pinned[k].Release()
			}
		}
		return nil
	})
	return err
}

// ReadRegionDevice reads [start, stop) into device memory at dst, C order,
// little-endian elements; the allocation must hold the region. Chunks of
// a DirStore stored uncompressed go from the file straight to the device
// (kvik's cuFile or overlapped POSIX path) when their rows in the region
// are long; other chunks, and every chunk of a RemoteStore, are fetched
// and decoded on the CPU into pinned buffers and copied asynchronously,
// each goroutine's copy overlapping its next fetch and decode. Fetches of
// a RemoteStore run concurrently, up to its MaxRequests, beside
// SetWorkers decodes. Missing chunks read as the fill value. Cancelling
// ctx stops the requests in flight.
func (a *Array) ReadRegionDevice(ctx context.Context, start, stop []int, dst cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	cctx, release, err := deviceTarget(dst, size)
	if err != nil {
		return err
	}
	defer release()
	pieces, err := a.plan(ctx, r)
	if err != nil {
		return err
	}
	out := view{shape: r.count, es: a.meta.DataType.Size}
	_, direct := a.store.(*DirStore)
	spans := a.spans(pieces, out, direct)
	// One size of pinned buffer for every read, TaskSize unless a span
	// needs more, so that reads of different arrays do not make kvik's
	// staging pool drop its buffers for another size.
	d, _ := kvik.GetDefaults()
	stage := d.TaskSize
	for _, sp := range spans {
		stage = max(stage, spanStaging(sp, out.es))
	}
	workers := make([]*deviceWorker, min(a.concurrency(), len(spans)))
	for i := range workers {
		workers[i] = &deviceWorker{ctx: cctx, size: stage}
	}
	err = a.run(ctx, len(spans), func(ctx context.Context, k, i int) error {
		return a.readSpanDevice(ctx, workers[k], spans[i], out, dst)
	})
	for _, w := range workers {
		if e := w.close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (a *Array) readPieceDevice(ctx context.Context, w *deviceWorker, pc piece, out view, dst cuda.DevicePtr) error {
	es := out.es
	boxBytes := numElements(pc.sel.count) * es
	if ds, ok := a.store.(*DirStore); ok && pc.pipe.raw() && pc.n < 0 && !pc.missing {
		runs := 0
		a.rawRuns(pc, out, func(int64, int, int) error { runs++; return nil })
		if boxBytes/runs >= directRunMin {
			done, err := a.readRuns(pc, out, func(off int64, dstOff, n int) (int64, error) {
				return ds.ReadRangeDevice(ctx, pc.key, off, dst, n, int64(dstOff))
			})
			if done || err != nil {
				return err
			}
		}
	}
	// Fetch and decode on the host into a pinned buffer (while the copy
	// of the previous piece runs from the other one), then queue copies.
	pinned, stream, err := w.staging(boxBytes)
	if err != nil {
		return err
	}
	hv := view{buf: pinned, shape: pc.sel.count, es: es, start: make([]int, len(pc.sel.count))}
	var place []byte
	if pc.whole() {
		place = pinned // the box is the whole piece, in order
	}
	if err := a.decodePiece(ctx, pc, hv, place); err != nil {
		return err
	}
	return w.copyOut(pinned, stream, pc, out, dst)
}

// copyOut queues the copies of pc's selection, decoded in C order into
// pinned, to its place in the region at dst.
func (w *deviceWorker) copyOut(pinned []byte, stream cuda.Stream, pc piece, out view, dst cuda.DevicePtr) error {
	pos := 0
	return cuda.WithContext(w.ctx, func() error {
		return out.sub(pc.dstStart).runs(pc.sel.count, func(off, n int) error {
			e := cuda.MemcpyHtoDAsync(dst+cuda.DevicePtr(off), pinned[pos:pos+n], stream)
			pos += n
			return e
		})
	})
}

// decodePiece fetches pc and writes its selection into hv, a buffer of
// the selection's shape; place, when not nil, is hv's memory and the
// selection is the whole piece.
func (a *Array) decodePiece(ctx context.Context, pc piece, hv view, place []byte) error {
	if pc.missing {
		hv.fill(pc.sel.count, pc.pipe.fill)
		return nil
	}
	var into []byte
	if pc.pipe.raw() {
		into = place // stored bytes are the decoded piece
	}
	b, ok, err := a.fetch(ctx, pc, into)
	if err != nil {
		return err
	}
	if !ok {
		hv.fill(pc.sel.count, pc.pipe.fill)
		return nil
	}
	return a.decodeStored(pc, b, hv, place)
}

// WriteRegionDevice writes the region [start, stop) from device memory at
// src (C order, little-endian elements). Uncompressed chunks that the
// region covers whole and that are contiguous in src go from the device
// straight to the store (SetDevice: a file written through kvik, or an
// object uploaded through pinned bounce buffers); otherwise the region is
// copied to host memory and written as WriteRegion does.
func (a *Array) WriteRegionDevice(ctx context.Context, start, stop []int, src cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	cctx, release, err := deviceTarget(src, size)
	if err != nil {
		return err
	}
	defer release()
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
	if len(staged) > 0 {
		host := make([]byte, size)
		if err := cuda.WithContext(cctx, func() error { return cuda.MemcpyDtoH(host, src) }); err != nil {
			return err
		}
		in.buf = host
		if err := a.run(ctx, len(staged), func(ctx context.Context, _, i int) error { return a.writeChunk(ctx, staged[i], in) }); err != nil {
			return err
		}
	}
	return a.run(ctx, len(direct), func(ctx context.Context, _, i int) error {
		t := direct[i]
		off := in.sub(t.dstStart).offset()
		return a.store.SetDevice(ctx, a.ChunkKey(t.coords), src, numElements(t.sel.count)*in.es, int64(off))
	})
}
