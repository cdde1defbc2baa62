package zarr

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// directRunMin is the average run length from which uncompressed chunks
// are read straight from the file into device memory, one kvik device
// read per run; shorter runs are gathered in pinned host memory and
// copied, so that many tiny reads do not cost more than the copy saves.
const directRunMin = 1 << 20

// deviceTarget checks that [dst, dst+size) is device memory and returns
// the context to work in, and a release function.
func deviceTarget(dst cuda.DevicePtr, size int) (cuda.Context, func(), error) {
	if dst == 0 {
		return 0, nil, fmt.Errorf("%w: nil device pointer", kvik.ErrInvalidArgument)
	}
	if err := cuda.Init(); err != nil {
		return 0, nil, err
	}
	at, err := cuda.PointerGetAttributes(uintptr(dst))
	if err != nil {
		return 0, nil, err
	}
	if at.MemoryType != cuda.MemoryTypeDevice && at.MemoryType != cuda.MemoryTypeUnified {
		return 0, nil, fmt.Errorf("%w: %#x is %v memory", kvik.ErrNotDeviceMemory, uint64(dst), at.MemoryType)
	}
	if at.RangeSize > 0 && uint64(dst)+uint64(size) > uint64(at.RangeStart)+uint64(at.RangeSize) {
		return 0, nil, fmt.Errorf("%w: a %d-byte region overruns the %d-byte allocation at %#x", ErrInvalidRegion, size, at.RangeSize, uint64(at.RangeStart))
	}
	if at.Context != 0 {
		return at.Context, func() {}, nil
	}
	dev, err := cuda.DeviceGet(at.DeviceOrdinal)
	if err != nil {
		return 0, nil, err
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		return 0, nil, err
	}
	return ctx, func() { dev.PrimaryCtxRelease() }, nil
}

// deviceWorker holds what one goroutine needs to copy decoded chunks to
// the device: two pinned staging buffers, each with its own stream, used
// in turn, so that the copy of one chunk runs while the next is decoded
// into the other buffer.
type deviceWorker struct {
	streams [2]cuda.Stream
	pinned  [2]*cuda.HostBuffer
	pending [2]bool // copies from pinned[k] are queued on streams[k]
	next    int
}

// staging returns n bytes of the next pinned buffer, once its earlier
// copies are done, and the stream to copy it on.
func (w *deviceWorker) staging(n int) ([]byte, cuda.Stream, error) {
	k := w.next
	w.next ^= 1
	if w.streams[k] == 0 {
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return nil, 0, err
		}
		w.streams[k] = s
	}
	if w.pending[k] {
		if err := cuda.StreamSynchronize(w.streams[k]); err != nil {
			return nil, 0, err
		}
		w.pending[k] = false
	}
	if w.pinned[k] == nil || w.pinned[k].Len() < n {
		if w.pinned[k] != nil {
			w.pinned[k].Close()
		}
		var err error
		if w.pinned[k], err = cuda.MemHostAlloc(max(n, 1), cuda.MemHostAllocPortable); err != nil {
			w.pinned[k] = nil
			return nil, 0, err
		}
	}
	w.pending[k] = true // the caller queues copies next
	return w.pinned[k].Bytes()[:n], w.streams[k], nil
}

func (w *deviceWorker) close() error {
	var err error
	for k := range w.streams {
		if w.streams[k] == 0 {
			continue
		}
		if e := cuda.StreamSynchronize(w.streams[k]); e != nil && err == nil {
			err = e
		}
		cuda.StreamDestroy(w.streams[k])
		if w.pinned[k] != nil {
			w.pinned[k].Close()
		}
	}
	return err
}

// ReadRegionDevice reads [start, stop) into device memory at dst, C order,
// little-endian elements; the allocation must hold the region. Chunks
// stored uncompressed go from the file straight to the device (kvik's
// cuFile or overlapped POSIX path) when their rows in the region are long;
// other chunks are read and decoded on the CPU by up to SetWorkers
// goroutines into pinned buffers and copied asynchronously, each
// worker's copy overlapping its next decode. Missing chunks read as the
// fill value.
func (a *Array) ReadRegionDevice(start, stop []int, dst cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	ctx, release, err := deviceTarget(dst, size)
	if err != nil {
		return err
	}
	defer release()
	out := view{shape: r.count, es: a.meta.DataType.Size}
	var tasks []chunkTask
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error { tasks = append(tasks, t); return nil })
	nw := max(1, min(a.workers, len(tasks)))
	return parallelPinned(len(tasks), nw, ctx, func(w *deviceWorker, i int) error {
		return a.readChunkDevice(w, tasks[i], out, dst)
	})
}

// parallelPinned runs f(worker, i) for i in [0, n) on nw goroutines, each
// locked to its thread with ctx current and owning a deviceWorker that it
// drains and frees at the end. It returns the first error.
func parallelPinned(n, nw int, ctx cuda.Context, f func(*deviceWorker, int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	for k := 0; k < nw; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := cuda.CtxPushCurrent(ctx); err != nil {
				fail(err)
				return
			}
			defer cuda.CtxPopCurrent()
			w := &deviceWorker{}
			for {
				mu.Lock()
				if next >= n || first != nil {
					mu.Unlock()
					break
				}
				i := next
				next++
				mu.Unlock()
				if err := f(w, i); err != nil {
					fail(err)
				}
			}
			if err := w.close(); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	return first
}

func (a *Array) readChunkDevice(w *deviceWorker, t chunkTask, out view, dst cuda.DevicePtr) error {
	key := a.ChunkKey(t.coords)
	es := out.es
	boxBytes := numElements(t.sel.count) * es
	fr, ok, err := a.openChunk(key)
	if err != nil {
		return err
	}
	if ok {
		defer fr.f.Close()
	}
	if ok && a.pipe.raw() {
		want := int64(numElements(a.meta.ChunkShape) * es)
		if fr.n != want {
			return fmt.Errorf("%w: %s has %d bytes, want %d", ErrCorruptChunk, key, fr.n, want)
		}
		runs := 0
		a.rawRuns(t, out, func(int64, int, int) error { runs++; return nil })
		if boxBytes/runs >= directRunMin {
			return a.rawRuns(t, out, func(fileOff int64, dstOff, n int) error {
				return readDeviceFull(fr.f, key, fileOff, dst, n, int64(dstOff))
			})
		}
	}
	// Decode on the host into a pinned buffer (while the copy of the
	// previous chunk runs from the other one), then queue the copies.
	pinned, stream, err := w.staging(boxBytes)
	if err != nil {
		return err
	}
	hv := view{buf: pinned, shape: t.sel.count, es: es, start: make([]int, len(t.sel.count))}
	switch {
	case !ok:
		hv.fill(t.sel.count, a.pipe.fill)
	case a.pipe.raw():
		local := chunkTask{coords: t.coords, sel: t.sel, dstStart: make([]int, len(t.sel.count))}
		if err := a.rawRuns(local, view{buf: pinned, shape: t.sel.count, es: es}, func(fileOff int64, dstOff, n int) error {
			return readFull(fr.f, key, pinned[dstOff:dstOff+n], fileOff)
		}); err != nil {
			return err
		}
	case a.wholeChunk(t) && a.pipe.sharded() == nil:
		// The decoded chunk is the box: let the last codec write into
		// the pinned buffer.
		b, err := readAll(fr)
		if err != nil {
			return err
		}
		c, err := a.pipe.decode(b, a.meta.ChunkShape, pinned)
		if err != nil {
			return fmt.Errorf("chunk %s: %w", key, err)
		}
		if len(c.data) > 0 && &c.data[0] != &pinned[0] {
			copy(pinned, c.data)
		}
	default:
		if err := a.pipe.readRegion(fr, a.meta.ChunkShape, t.sel, hv); err != nil {
			return fmt.Errorf("chunk %s: %w", key, err)
		}
	}
	pos := 0
	return out.sub(t.dstStart).runs(t.sel.count, func(off, n int) error {
		e := cuda.MemcpyHtoDAsync(dst+cuda.DevicePtr(off), pinned[pos:pos+n], stream)
		pos += n
		return e
	})
}

// wholeChunk reports whether t selects its entire (stored) chunk.
func (a *Array) wholeChunk(t chunkTask) bool {
	for d := range t.sel.count {
		if t.sel.start[d] != 0 || t.sel.count[d] != a.meta.ChunkShape[d] {
			return false
		}
	}
	return true
}

// WriteRegionDevice writes the region [start, stop) from device memory at
// src (C order, little-endian elements). Uncompressed chunks that the
// region covers whole and that are contiguous in src go from the device
// straight to their file (a temporary name, renamed); otherwise the
// region is copied to host memory and written as WriteRegion does.
func (a *Array) WriteRegionDevice(start, stop []int, src cuda.DevicePtr) error {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return err
	}
	ctx, release, err := deviceTarget(src, size)
	if err != nil {
		return err
	}
	defer release()
	in := view{shape: r.count, es: a.meta.DataType.Size}
	var direct, staged []chunkTask
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error {
		if a.pipe.raw() && a.covers(t) && a.insideArray(t) && contiguous(in, t) {
			direct = append(direct, t)
		} else {
			staged = append(staged, t)
		}
		return nil
	})
	if len(staged) > 0 {
		host := make([]byte, size)
		if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyDtoH(host, src) }); err != nil {
			return err
		}
		in.buf = host
		if err := parallel(len(staged), a.workers, func(_, i int) error { return a.writeChunk(staged[i], in) }); err != nil {
			return err
		}
	}
	return parallel(len(direct), a.workers, func(_, i int) error {
		t := direct[i]
		off := in.sub(t.dstStart).offset()
		return a.store.SetDevice(a.ChunkKey(t.coords), src, numElements(t.sel.count)*in.es, int64(off))
	})
}

// insideArray reports whether t's chunk lies wholly inside the array (an
// edge chunk is padded, so it is never one contiguous piece of a region).
func (a *Array) insideArray(t chunkTask) bool {
	for d, c := range t.coords {
		if (c+1)*a.meta.ChunkShape[d] > a.meta.Shape[d] {
			return false
		}
	}
	return true
}

// contiguous reports whether t's part of the region is one run in v.
func contiguous(v view, t chunkTask) bool {
	runs := 0
	v.sub(t.dstStart).runs(t.sel.count, func(int, int) error { runs++; return nil })
	return runs == 1
}
