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
// little-endian elements; the allocation must hold the region. The region
// is assembled in bands of whole chunk rows (32 MiB, or one chunk where a
// chunk is larger) in pinned host memory, every worker fetching and
// decoding the chunks of a band straight into it, and each band is
// copied to the device in one call while the next is decoded. Chunks of a
// DirStore stored uncompressed whose rows in the region are long go from
// the file straight to the device instead (kvik's cuFile or overlapped
// POSIX path). Fetches of a RemoteStore run concurrently, up to its
// MaxRequests, beside SetWorkers decodes. Missing chunks read as the fill
// value. Cancelling ctx stops the requests in flight.
func (a *Array) ReadRegionDevice(ctx context.Context, start, stop []int, dst cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	target, err := deviceTarget(dst, size)
	if err != nil {
		return err
	}
	es := a.meta.DataType.Size
	bufSize := max(bandTarget, numElements(a.cellShape())*es)
	bands, err := a.bandPlan(ctx, r, bufSize)
	if err != nil {
		return err
	}
	out := view{shape: r.count, es: es}
	ds, _ := a.store.(*DirStore)
	banded := 0
	for _, b := range bands {
		if ds != nil {
			a.directBand(b, out)
		}
		if !b.direct {
			banded++
		}
	}
	// A few buffers in rotation, of one size for every read (as long as
	// chunks are at most bandTarget), so that kvik's pool keeps them.
	n := min(banded, max(2, min(4, 4*bandTarget/bufSize)))
	sink, err := newDeviceSink(target, dst, r.count, es, bufSize, n)
	if err != nil {
		return err
	}
	workers := make([]*deviceWorker, a.concurrency())
	err = a.readBands(ctx, bands, sink, func(ctx context.Context, k int, sp span) error {
		if sp.direct {
			_, err := ds.ReadRangeDevice(ctx, sp.key, sp.off, dst, int(sp.n), int64(sp.dstOff))
			return err
		}
		if workers[k] == nil {
			workers[k] = &deviceWorker{r: target, size: bufSize}
		}
		return a.readPieceDevice(ctx, workers[k], ds, sp.pieces[0], out, dst)
	})
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

// directBand makes b a direct band, its spans in region coordinates
// (out), when every piece of it can go from its file straight to the
// device: a run of uncompressed inner chunks that lie back to back in
// the store and in the region, or an uncompressed chunk whose rows in
// the region are on average directRunMin long.
func (a *Array) directBand(b *band, out view) {
	var pieces []piece
	for _, sp := range b.spans {
		pieces = append(pieces, sp.pieces...)
	}
	spans := a.spans(pieces, out, true)
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
// pinned, to its place in the region at dst.
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

// deviceSink takes a device read's bands to device memory at dst, where
// the region starts: bands are assembled in up to max pinned buffers from
// kvik's pool, taken as needed, and one goroutine queues each band's
// copies on one stream as the band is filled and gives its buffer back
// once they are done, so that copies run while later bands decode.
type deviceSink struct {
	c      *staging.Copier
	dst    cuda.DevicePtr
	region []int
	es     int
	size   int // bytes of each buffer
	max    int
	pinned []*kvik.PinnedBuffer // taken so far; only take appends
	free   chan int             // buffers whose copies are done
	bands  chan *band           // filled bands, for the copying goroutine
	failed chan struct{}        // closed when a copy fails, err set
	err    error
	done   chan struct{} // closed when the copying goroutine returns
}

func newDeviceSink(target devmem.Range, dst cuda.DevicePtr, region []int, es, size, n int) (*deviceSink, error) {
	c, err := staging.NewCopier(target, 0, true, staging.WaitPoll)
	if err != nil {
		return nil, err
	}
	s := &deviceSink{c: c, dst: dst, region: region, es: es, size: size, max: max(n, 1),
		free: make(chan int, max(n, 1)), bands: make(chan *band, max(n, 1)), failed: make(chan struct{}), done: make(chan struct{})}
	go s.copyBands()
	return s, nil
}

func (s *deviceSink) take(ctx context.Context, b *band) ([]byte, error) {
	k := -1
	select {
	case k = <-s.free:
	default:
		if len(s.pinned) < s.max {
			var p *kvik.PinnedBuffer
			if err := s.c.In(func() (err error) { p, err = kvik.GetPinnedBuffer(s.size); return err }); err != nil {
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

// fail records the copying goroutine's first error.
func (s *deviceSink) fail(err error) {
	if s.err == nil {
		s.err = err
		close(s.failed)
	}
}

// queue queues the copies of b and marks their end with b's buffer.
func (s *deviceSink) queue(b *band) error {
	err := s.c.In(func() error {
		for _, c := range bandCopies(s.region, b.box, s.es) {
			if err := copyHtoD(s.dst+cuda.DevicePtr(c.dst), b.buf[c.src:], c, s.c.Stream()); err != nil {
				return err
			}
		}
		return nil
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

// close waits for the copies, then gives the buffers and the stream
// back.
func (s *deviceSink) close() error {
	close(s.bands)
	<-s.done
	s.c.In(func() error {
		for _, p := range s.pinned {
			p.Release() // may unpin: in the context
		}
		return nil
	})
	s.c.Close()
	return s.err
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
		return a.store.SetDevice(ctx, a.ChunkKey(t.coords), src, numElements(t.sel.count)*in.es, int64(off))
	})
}
