package zarr

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/staging"
)

// directRunMin is the average run length from which uncompressed chunks
// are read straight from the file into device memory, one kvik device
// read per run; shorter runs are gathered in pinned host memory and
// copied, so that many tiny reads do not cost more than the copy saves.
const directRunMin = 1 << 20

// deviceTarget checks that [dst, dst+size) is device memory, with the
// engine's rules (devmem.Resolve); a range past its allocation is
// ErrInvalidRegion.
func deviceTarget(dst cuda.DevicePtr, size int) (devmem.Range, error) {
	r, err := devmem.Resolve(dst, size, 0)
	if errors.Is(err, devmem.ErrOverrun) {
		return r, fmt.Errorf("%w: %w", ErrInvalidRegion, err)
	}
	return r, err
}

// deviceWorker holds what one goroutine needs to copy decoded chunks to
// the device: two pinned staging buffers from kvik's pool (mapped with
// huge pages and registered, as kvik's bounce buffers), each with a
// copier of the staging engine (its own stream), used in turn, so that
// the copy of one chunk runs while the next is fetched and decoded into
// the other buffer. The goroutine is not locked to a thread: the copiers
// make the context current for their CUDA calls only, so a worker
// waiting on the network holds no thread.
type deviceWorker struct {
	r       devmem.Range
	size    int // bytes of each staging buffer
	copiers [2]*staging.Copier
	pinned  [2]*kvik.PinnedBuffer
	pending [2]bool // copies from pinned[k] are queued on copiers[k]
	next    int
}

// staging returns n bytes of the next pinned buffer, once its earlier
// copies are done, and the copier to copy it with.
func (w *deviceWorker) staging(n int) ([]byte, *staging.Copier, error) {
	k := w.next
	w.next ^= 1
	if w.copiers[k] == nil {
		c, err := staging.NewCopier(w.r, 0, true, staging.WaitPoll)
		if err != nil {
			return nil, nil, err
		}
		w.copiers[k] = c
	}
	c := w.copiers[k]
	if w.pending[k] {
		if err := c.Sync(); err != nil {
			return nil, nil, err
		}
		w.pending[k] = false
	}
	if w.pinned[k] == nil {
		err := c.In(func() (err error) { w.pinned[k], err = kvik.GetPinnedBuffer(max(w.size, 1)); return err })
		if err != nil {
			return nil, nil, err
		}
	}
	w.pending[k] = true // the caller queues copies next
	return w.pinned[k].Bytes()[:n:n], c, nil
}

// close waits for the queued copies, gives the streams back and
// returns the buffers.
func (w *deviceWorker) close() error {
	var err error
	for k, c := range w.copiers {
		if c == nil {
			continue
		}
		if e := c.Sync(); e != nil && err == nil {
			err = e
		}
		c.In(func() error {
			c.Close()
			if w.pinned[k] != nil {
				w.pinned[k].Release() // may unpin: in the context
			}
			return nil
		})
	}
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
	target, err := deviceTarget(dst, size)
	if err != nil {
		return err
	}
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
		workers[i] = &deviceWorker{r: target, size: stage}
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
	pinned, c, err := w.staging(boxBytes)
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
	return copyOut(c, pinned, pc, out, dst)
}

// copyOut queues on c the copies of pc's selection, decoded in C order
// into pinned, to its place in the region at dst.
func copyOut(c *staging.Copier, pinned []byte, pc piece, out view, dst cuda.DevicePtr) error {
	pos := 0
	return c.In(func() error {
		return out.sub(pc.dstStart).runs(pc.sel.count, func(off, n int) error {
			e := cuda.MemcpyHtoDAsync(dst+cuda.DevicePtr(off), pinned[pos:pos+n], c.Stream())
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
	if len(staged) > 0 {
		host := make([]byte, size)
		if err := cuda.WithContext(target.Ctx, func() error { return cuda.MemcpyDtoH(host, src) }); err != nil {
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
		key := a.ChunkKey(t.coords)
		unlock, err := a.lockChunk(ctx, key)
		if err != nil {
			return err
		}
		defer unlock()
		return a.store.SetDevice(ctx, key, src, numElements(t.sel.count)*in.es, int64(off))
	})
}
