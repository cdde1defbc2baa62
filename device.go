package kvik

import (
	"context"
	"io"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// ReadDevice reads size bytes at fileOffset into device memory at
// buf+devOffset, in parallel, and returns when done. buf may be any
// address inside a device allocation (a DeviceBuffer's Ptr, or memory from
// another library); the whole range must lie inside that allocation.
//
// With cuFile (CompatMode() == CompatOff) each task calls cuFileRead;
// otherwise tasks read through pinned bounce buffers, overlapping the file
// read of one chunk with the copy of the previous one. Transfers smaller
// than GDSThreshold run synchronously in the calling goroutine on the POSIX
// path. A read that reaches end of file returns the bytes read and io.EOF.
func (f *FileHandle) ReadDevice(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	return f.deviceOp(context.Background(), opRead, buf, size, fileOffset, devOffset, nil)
}

// WriteDevice writes size bytes from device memory at buf+devOffset to the
// file at fileOffset, in parallel, and returns when done.
func (f *FileHandle) WriteDevice(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	return f.deviceOp(context.Background(), opWrite, buf, size, fileOffset, devOffset, nil)
}

// PReadDevice starts ReadDevice and returns at once. Cancelling ctx stops
// tasks that have not started.
func (f *FileHandle) PReadDevice(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) *Future {
	fut := newFuture()
	f.deviceOp(ctx, opRead, buf, size, fileOffset, devOffset, fut)
	return fut
}

// PWriteDevice starts WriteDevice and returns at once.
func (f *FileHandle) PWriteDevice(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) *Future {
	fut := newFuture()
	f.deviceOp(ctx, opWrite, buf, size, fileOffset, devOffset, fut)
	return fut
}

// RawRead reads with a single cuFileRead call in the calling goroutine,
// without the worker pool; it may return fewer bytes than asked, with a
// nil error, as cuFileRead does. On a POSIX handle it does one synchronous
// bounce-buffer transfer instead. Host memory is an error.
func (f *FileHandle) RawRead(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	return f.raw(opRead, buf, size, fileOffset, devOffset)
}

// RawWrite writes with a single cuFileWrite call; see RawRead.
func (f *FileHandle) RawWrite(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	return f.raw(opWrite, buf, size, fileOffset, devOffset)
}

func (f *FileHandle) raw(kind opKind, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error) {
	d, r, err := f.beginDevice(kind, buf, size, fileOffset, devOffset)
	if err != nil {
		return 0, f.pathErr(kind, err)
	}
	defer f.release()
	t := sched.Task{Off: fileOffset, Len: size}
	var n int
	if f.compat == CompatOff {
		err = cuda.WithContext(r.Ctx, func() (err error) {
			n, err = f.cufileCall(kind, r, size, fileOffset, 0)
			return err
		})
	} else {
		n, err = f.posixDeviceTask(kind, d, r, t, staging.ChunkByWorkers)
		if err == io.EOF {
			err = nil // a short count, as cuFileRead reports end of file
		}
	}
	return n, f.wrapErr(kind, err)
}

// beginDevice checks a device operation and marks it in flight.
func (f *FileHandle) beginDevice(kind opKind, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (Defaults, devmem.Range, error) {
	d, err := f.begin(kind, fileOffset, size)
	if err != nil {
		return d, devmem.Range{}, err
	}
	r, err := resolveSynced(buf, size, devOffset)
	if err != nil {
		f.release()
	}
	return d, r, err
}

func (f *FileHandle) deviceOp(ctx context.Context, kind opKind, buf cuda.DevicePtr, size int, fileOffset, devOffset int64, fut *Future) (int, error) {
	d, r, err := f.beginDevice(kind, buf, size, fileOffset, devOffset)
	if err != nil {
		return f.fail(kind, err, fut)
	}
	leave := workers.Enter(r.Ctx) // before the pool, so that it is sized for every device in use
	pool := f.devicePool(d, r.Ctx)
	if f.compat == CompatOff && size >= d.GDSThreshold {
		fn := func(_ context.Context, t sched.Task) (int, error) { return f.cufileTask(kind, r, t) }
		return f.run(ctx, kind, d, pool, fileOffset, size, fn, fut, leave)
	}
	tasks := deviceTasks(fileOffset, size, d)
	if size < d.GDSThreshold {
		pool = nil
	} else if kind == opRead && tune.spreadDeviceReads {
		tasks = sched.Spread(fileOffset, size, d.TaskSize, d.NumThreads, tune.minSpreadTask, pageSize)
	}
	// A read of at most one task per worker has no later task to keep
	// the link busy while it reads: each task overlaps its own reads and
	// copies, however many workers there are. When other operations
	// already have tasks queued on the pool (many chunk reads at once,
	// say), those keep the link busy, and one chunk per task is faster.
	how := staging.ChunkByWorkers
	if kind == opRead && len(tasks) <= d.NumThreads && (pool == nil || pool.Pending() == 0) {
		how = staging.ChunkPipeline
	}
	if kind == opRead && pool != nil {
		if b := f.batchTasks(d, tasks, pool.Limit()); len(b) < len(tasks) {
			tasks, how = b, staging.ChunkBatch
		}
	}
	if pool != nil && len(tasks) > 1 && fut == nil && tune.reserveBounce {
		// Allocate the bounce buffers the tasks will need at once, as one
		// slab, rather than one registration per task. (Not for a Future,
		// whose caller must not wait: its tasks allocate for themselves.)
		// Each GPU in flight has a pool of its own (pools.go), whose
		// workers hold buffers of this one bounce pool at once.
		p := planner(d).Plan(kind == opWrite, tasks[0].Len, how)
		need := min(len(tasks), pool.Limit()) * max(1, workers.Active())
		if err := cuda.WithContext(r.Ctx, func() error { return p.Pool.Reserve(need, p.BufSize) }); err != nil {
			leave()
			f.release()
			return f.fail(kind, err, fut)
		}
	}
	fn := func(_ context.Context, t sched.Task) (int, error) { return f.posixDeviceTask(kind, d, r, t, how) }
	if kind == opRead && pool != nil {
		tasks, fn = f.withLane(d, r, tasks, fn)
	}
	return f.runTasks(ctx, kind, d, pool, tasks, fn, fut, leave)
}

// deviceTasks cuts a POSIX device operation into tasks of d.TaskSize
// whose boundaries fall on page boundaries of the file. Each task is
// staged in a page-aligned pinned buffer, so an aligned task's O_DIRECT
// reads land in it directly; a task starting mid-page would read its
// partial head page buffered and its direct middle through a second,
// host bounce buffer (an unaligned destination), then copy. File formats
// put their data at unaligned offsets (after a safetensors header, say):
// on the H200, a cold 2 GiB read at offset 70008 ran 1.18-1.36x faster
// with aligned tasks. Host reads keep KvikIO's split: their destination's
// alignment against the file is the caller's, and aligned tasks measured
// no faster there (0.91-0.99x).
func deviceTasks(off int64, size int, d Defaults) []sched.Task {
	return sched.SplitAligned(off, size, d.TaskSize, taskAlign())
}

// batchTasks merges runs of up to tune.deviceBatch consecutive tasks of
// a device read into one task each, but for the last two per worker, when
// the read's range is cached and leaves at least four batches to each of
// workers. The worker moves a batch as one pipeline (staging.ChunkBatch), where
// separate tasks each drained their copies before the worker read on:
// with two GPUs fed from one process, copies slowed by the host's memory
// traffic made those drains the bound (2x H200, balanced
// safetensors.Load of 7.93 GB: 1.11-1.14x in one call, 1.02-1.06x in
// another; two concurrent 4 GiB reads 1.10-1.15x; one GPU 1.01-1.03x;
// docs/performance.md). A cold read keeps its tasks: the drive bounds
// it, and its direct reads are planned per task. So does a read on one
// worker, which the zero-copy lane shares (zerocopy.go).
func (f *FileHandle) batchTasks(d Defaults, tasks []sched.Task, workers int) []sched.Task {
	k := min(tune.deviceBatch, len(tasks)/(4*max(workers, 1)))
	if k < 2 || workers < 2 {
		return tasks
	}
	first, last := tasks[0], tasks[len(tasks)-1]
	if !f.cachedRange(d, first.Off, int(last.Off-first.Off)+last.Len) {
		return tasks
	}
	// The last two tasks per worker stay single: a 16 MiB batch left
	// for last would run alone for the time of four tasks.
	return sched.Batch(tasks, k, 2*workers)
}

// taskAlign is the alignment of device tasks and their staging chunks in
// the file: the page size, or 0 (none) with tune.alignTasks off.
func taskAlign() int {
	if tune.alignTasks {
		return pageSize
	}
	return 0
}

// cufileTask moves one task with cuFile, looping over short transfers.
func (f *FileHandle) cufileTask(kind opKind, r devmem.Range, t sched.Task) (done int, err error) {
	err = cuda.WithContext(r.Ctx, func() error {
		for done < t.Len {
			n, err := f.cufileCall(kind, r, t.Len-done, t.Off+int64(done), int64(t.BufOff+done))
			if err != nil {
				return err
			}
			if n == 0 {
				if kind == opRead {
					return io.EOF
				}
				return io.ErrShortWrite
			}
			done += n
		}
		return nil
	})
	return done, err
}

// cufileCall makes one cuFileRead or cuFileWrite of size bytes at
// fileOffset, to or from the operation's memory at relOffset.
func (f *FileHandle) cufileCall(kind opKind, r devmem.Range, size int, fileOffset, relOffset int64) (int, error) {
	bufOff := int64(r.Ptr-r.Base) + relOffset
	if kind == opRead {
		return cufile.Read(f.cuHandle, r.Base, size, fileOffset, bufOff)
	}
	return cufile.Write(f.cuHandle, r.Base, size, fileOffset, bufOff)
}

// posixDeviceTask moves one task through pinned bounce buffers. A task of
// more than one chunk uses two buffers (two halves of one pooled buffer
// where they fit) so that storage transfers and device copies overlap.
// how chooses its chunks (staging.Planner; deviceOp).
func (f *FileHandle) posixDeviceTask(kind opKind, d Defaults, r devmem.Range, t sched.Task, how staging.Chunking) (n int, err error) {
	p := planner(d).Plan(kind == opWrite, t.Len, how)
	md := d
	if kind == opRead {
		chk := f.checkDeviceTask(d, t.Off, t.Len)
		if chk.oneChunk {
			// One chunk, so that the drive sees the task's direct
			// read as concurrent requests (directRead); the copy to
			// the device is a few percent of a read from the drive.
			p.Chunk = min(staging.AlignUp(t.Len, pageSize), p.BufSize)
		}
		if chk.buffered {
			// Cached: the chunks need no check of their own.
			md.AutoDirectIORead, md.DirectIOReadPolicy = false, ReadPolicyBuffered
		}
		if tune.serialStaging {
			p = staging.Plan{Chunk: min(staging.AlignUp(t.Len, pageSize), bounceSize(d)), Pool: pinnedBounce, BufSize: bounceSize(d), Single: true}
		}
	}
	err = cuda.WithContext(r.Ctx, func() error {
		n, err = tune.staging.Task(kind == opWrite, r, t, p, taskAlign(), false, func(c *staging.Copier) staging.Mover {
			return &deviceMover{Copier: c, f: f, d: md}
		})
		return err
	})
	return n, err
}

// deviceMover connects the staging pipeline to a file and a device range.
type deviceMover struct {
	*staging.Copier
	f *FileHandle
	d Defaults
}

func (m *deviceMover) ReadFile(p []byte, off int64) (int, error) {
	return m.f.hostTask(opRead, m.d, p, off)
}

func (m *deviceMover) WriteFile(p []byte, off int64) (int, error) {
	return m.f.hostTask(opWrite, m.d, p, off)
}
