package kvik

import (
	"context"
	"fmt"
	"io"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
)

// readSource is what a read-only handle (MmapHandle, RemoteHandle)
// supplies; readMethods builds the reading methods of Reader from it.
type readSource interface {
	// begin checks a read of size bytes at off and marks it in flight
	// (nothing is in flight after an error). It returns the bytes to
	// move, clamped at the end of the data, and eof when it clamped.
	begin(off int64, size int) (d Defaults, n int, eof bool, err error)
	// fetcher returns the storage read of one task: p filled from off.
	fetcher(d Defaults) fetchFunc
	// release ends an operation that begin started.
	release()
	// pathErr adds the handle's name to an error.
	pathErr(err error) error
}

type fetchFunc func(ctx context.Context, p []byte, off int64) (int, error)

// zeroCopier is a readSource whose device reads may skip the bounce
// buffers: zeroCopy returns the task of such a read into r and the
// release that ends it, or ok false to stage as usual.
type zeroCopier interface {
	zeroCopy(r devmem.Range) (fn sched.TaskFunc, release func(), ok bool)
}

// hostTaskSizer is a readSource whose host reads of n bytes may use
// another task size than d.TaskSize.
type hostTaskSizer interface {
	hostTaskSize(d Defaults, n int) int
}

// readMethods gives a readSource the reading methods of Reader: each
// read is split into TaskSize tasks run in parallel on the worker pool,
// device reads through pinned bounce buffers that overlap the storage
// read of one chunk with the device copy of the previous one.
type readMethods struct{ src readSource }

// ReadAt reads len(p) bytes at off in parallel tasks. It satisfies
// io.ReaderAt: n < len(p) comes with an error, io.EOF when the data ends
// first.
func (h *readMethods) ReadAt(p []byte, off int64) (int, error) {
	return h.hostOp(context.Background(), p, off, nil)
}

// Read reads size bytes at fileOffset into buf[:size] (KvikIO's read).
func (h *readMethods) Read(buf []byte, size int, fileOffset int64) (int, error) {
	if size < 0 || size > len(buf) {
		return 0, h.src.pathErr(fmt.Errorf("%w: size %d for a %d-byte buffer", ErrInvalidArgument, size, len(buf)))
	}
	return h.ReadAt(buf[:size], fileOffset)
}

// PRead starts ReadAt and returns at once (KvikIO's pread); p must not be
// touched until the Future completes. Cancelling ctx stops the read
// (a remote one aborts its requests in flight).
func (h *readMethods) PRead(ctx context.Context, p []byte, off int64) *Future {
	fut := newFuture()
	h.hostOp(ctx, p, off, fut)
	return fut
}

// ReadDevice reads size bytes at fileOffset into device memory at
// buf+devOffset and returns when done. buf may be any address inside a
// device allocation; the range must lie in it. A read past the end
// returns the bytes read and io.EOF.
func (h *readMethods) ReadDevice(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	return h.deviceOp(context.Background(), buf, size, fileOffset, devOffset, nil)
}

// PReadDevice starts ReadDevice and returns at once.
func (h *readMethods) PReadDevice(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) *Future {
	fut := newFuture()
	h.deviceOp(ctx, buf, size, fileOffset, devOffset, fut)
	return fut
}

func (h *readMethods) hostOp(ctx context.Context, p []byte, off int64, fut *Future) (int, error) {
	d, n, eof, err := h.src.begin(off, len(p))
	if err != nil {
		return h.fail(err, fut)
	}
	if ts, ok := h.src.(hostTaskSizer); ok {
		d.TaskSize = ts.hostTaskSize(d, n)
	}
	read := h.src.fetcher(d)
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		return read(ctx, p[t.BufOff:t.BufOff+t.Len], t.Off)
	}
	return h.run(ctx, d, poolFor(d, ""), off, n, eof, fn, h.src.release, fut)
}

func (h *readMethods) deviceOp(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64, fut *Future) (int, error) {
	d, n, eof, err := h.src.begin(fileOffset, size)
	if err != nil {
		return h.fail(err, fut)
	}
	r, err := resolveSynced(buf, size, devOffset)
	if err != nil {
		h.src.release()
		return h.fail(err, fut)
	}
	read := h.src.fetcher(d)
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		// The storage reads run without a CUDA context current, so the
		// network poller wakes them as any goroutine.
		return stagedRead(d, r, t, func(p []byte, off int64) (int, error) { return read(ctx, p, off) })
	}
	release := h.src.release
	if z, ok := h.src.(zeroCopier); ok {
		if zfn, zrelease, ok := z.zeroCopy(r); ok {
			fn, release = zfn, zrelease
		}
	}
	leave := workers.Enter(r.Ctx) // before the pool, so that it is sized for every device in use
	srcRelease := release
	release = func() { leave(); srcRelease() }
	pool := devicePoolFor(d, "", r.Ctx)
	if n < d.GDSThreshold {
		pool = nil
	}
	return h.run(ctx, d, pool, fileOffset, n, eof, fn, release, fut)
}

// run splits [off, off+n) into tasks and runs them on pool (in the caller
// when the call blocks and there is one task); eof says the read was
// clamped at the end of the data, and release ends the operation. With
// fut nil it blocks; otherwise it completes fut and returns at once.
func (h *readMethods) run(ctx context.Context, d Defaults, pool *sched.Pool, off int64, n int, eof bool, fn sched.TaskFunc, release func(), fut *Future) (int, error) {
	return runOp(ctx, pool, poolFor(d, ""), sched.Split(off, n, d.TaskSize), fn, fut, func(done int, err error) (int, error) {
		release()
		if err == nil && eof {
			err = io.EOF
		}
		if err != nil && err != io.EOF {
			err = h.src.pathErr(err)
		}
		return done, err
	})
}

// fail reports an operation refused before it started, completing fut
// when there is one.
func (h *readMethods) fail(err error, fut *Future) (int, error) {
	return failOp(h.src.pathErr(err), fut)
}
