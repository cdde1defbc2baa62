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
// the device: a stream and a pinned staging buffer.
type deviceWorker struct {
	stream  cuda.Stream
	pinned  *cuda.HostBuffer
	pending bool // copies from pinned are queued on stream
}

func (w *deviceWorker) staging(n int) ([]byte, error) {
	if w.pending {
		if err := cuda.StreamSynchronize(w.stream); err != nil {
			return nil, err
		}
		w.pending = false
	}
	if w.pinned == nil || w.pinned.Len() < n {
		if w.pinned != nil {
			w.pinned.Close()
		}
		var err error
		if w.pinned, err = cuda.MemHostAlloc(max(n, 1), cuda.MemHostAllocPortable); err != nil {
			w.pinned = nil
			return nil, err
		}
	}
	return w.pinned.Bytes()[:n], nil
}

func (w *deviceWorker) close() error {
	var err error
	if w.pending {
		err = cuda.StreamSynchronize(w.stream)
	}
	if w.pinned != nil {
		w.pinned.Close()
	}
	if w.stream != 0 {
		cuda.StreamDestroy(w.stream)
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
			s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
			if err != nil {
				fail(err)
				return
			}
			w := &deviceWorker{stream: s}
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
	// Decode on the host (a scratch buffer, while the previous copy runs),
	// then stage in pinned memory and queue the copies.
	host := make([]byte, boxBytes)
	hv := view{buf: host, shape: t.sel.count, es: es, start: make([]int, len(t.sel.count))}
	switch {
	case !ok:
		hv.fill(t.sel.count, a.pipe.fill)
	case a.pipe.raw():
		hout := view{buf: host, shape: t.sel.count, es: es}
		local := chunkTask{coords: t.coords, sel: t.sel, dstStart: make([]int, len(t.sel.count))}
		if err := a.rawRuns(local, hout, func(fileOff int64, dstOff, n int) error {
			return readFull(fr.f, key, host[dstOff:dstOff+n], fileOff)
		}); err != nil {
			return err
		}
	default:
		if err := a.pipe.readRegion(fr, a.meta.ChunkShape, t.sel, hv); err != nil {
			return fmt.Errorf("chunk %s: %w", key, err)
		}
	}
	pinned, err := w.staging(boxBytes)
	if err != nil {
		return err
	}
	copy(pinned, host)
	pos := 0
	err = out.sub(t.dstStart).runs(t.sel.count, func(off, n int) error {
		e := cuda.MemcpyHtoDAsync(dst+cuda.DevicePtr(off), pinned[pos:pos+n], w.stream)
		pos += n
		return e
	})
	w.pending = true
	return err
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
