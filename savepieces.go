package kvik

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
	"golang.org/x/sync/errgroup"
)

// pieceLayout places the pieces of a SaveFile in the file, one after
// another.
type pieceLayout struct {
	pieces []Piece
	ends   []int64        // ends[i]: the file offset just past piece i
	devs   []devmem.Range // resolved device pieces, by index (zero for host pieces)
	ctxs   []cuda.Context
}

// newLayout lays pieces out and resolves the device pieces with ops,
// waiting once per context for work queued on its legacy default stream.
func newLayout(pieces []Piece, ops saveDeviceOps) (*pieceLayout, error) {
	l := &pieceLayout{pieces: pieces, ends: make([]int64, len(pieces)), devs: make([]devmem.Range, len(pieces))}
	var at int64
	for i, p := range pieces {
		at += p.Len()
		l.ends[i] = at
		if p.Ptr == 0 || p.Size == 0 {
			continue
		}
		r, err := ops.resolve(p)
		if err != nil {
			return nil, fmt.Errorf("piece %d: %w", i, err)
		}
		l.devs[i] = r
		if !slices.Contains(l.ctxs, r.Ctx) {
			l.ctxs = append(l.ctxs, r.Ctx)
		}
	}
	for _, c := range l.ctxs {
		if err := ops.sync(c); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *pieceLayout) size() int64 {
	if len(l.ends) == 0 {
		return 0
	}
	return l.ends[len(l.ends)-1]
}

func (l *pieceLayout) isDevice(i int) bool { return l.devs[i].Ptr != 0 }

// span is the part of one piece that falls in a task.
type span struct {
	piece  int
	off    int64 // in the piece
	n      int
	bufOff int // in the task
}

// spans returns the non-empty parts of the pieces in the file's bytes
// [off, off+n).
func (l *pieceLayout) spans(off int64, n int) []span {
	i, _ := slices.BinarySearch(l.ends, off+1) // the first piece ending after off
	var out []span
	end := off + int64(n)
	for ; i < len(l.pieces) && l.ends[i]-l.pieces[i].Len() < end; i++ {
		start := l.ends[i] - l.pieces[i].Len()
		lo, hi := max(off, start), min(end, l.ends[i])
		if lo < hi {
			out = append(out, span{piece: i, off: lo - start, n: int(hi - lo), bufOff: int(lo - off)})
		}
	}
	return out
}

// minDirectSpan is the smallest host span a task writes straight from the
// caller's memory; a task with a smaller one (a header, a norm's weights,
// padding) gathers its spans in a buffer and writes them with one call.
const minDirectSpan = 256 << 10

// saveWriter writes a layout to a file.
type saveWriter struct {
	f   *FileHandle
	d   Defaults
	l   *pieceLayout
	ops saveDeviceOps
}

// write writes the pieces of w.l to w.f as the file's bytes from offset
// 0. The bytes are cut into page-aligned tasks of bounceSize(d) that run
// in parallel, whatever the pieces' sizes, as one host write of the same
// bytes would be cut. A task that holds device bytes is staged: the
// device-to-host copies of its spans (from one or several GPUs) and the
// host spans beside them fill one pinned buffer, which goes to the file
// in one page-aligned write (O_DIRECT where the file takes it), so the
// copies of some workers' tasks overlap the writes of others'. A task of
// host pieces only is written from the caller's memory, unless it has
// small pieces, which it gathers into one write the same way. Tasks with
// device bytes run on their GPU's pool, the others on the file's.
func (w *saveWriter) write(ctx context.Context) error {
	total := w.l.size()
	if total == 0 {
		return nil
	}
	if _, err := w.f.begin(opWrite, 0, int(total)); err != nil {
		return err
	}
	defer w.f.release()
	for _, c := range w.l.ctxs {
		defer w.ops.enter(c)()
	}
	size := bounceSize(w.d)
	tasks := sched.SplitAligned(0, int(total), size, pageSize)
	// Group the tasks by the context of their first device span (0: host).
	groups := map[cuda.Context][]sched.Task{}
	var order []cuda.Context
	for _, t := range tasks {
		c := w.taskContext(t)
		if _, ok := groups[c]; !ok {
			order = append(order, c)
		}
		groups[c] = append(groups[c], t)
	}
	if n := len(tasks) - len(groups[0]); n > 1 {
		// One slab for the buffers the workers will hold at once (a
		// single task may be small enough for a small buffer).
		workers := 0
		for _, c := range w.l.ctxs {
			workers += w.ops.pool(w.f, w.d, c).Limit()
		}
		if err := w.ops.reserve(w.l.ctxs[0], min(n, workers), size); err != nil {
			return err
		}
	}
	if len(tasks) == 1 { // a small file: no hand-off
		if err := ctx.Err(); err != nil {
			return err
		}
		return runTask(w.task, tasks[0])
	}
	// A failure in one group stops the others' tasks not yet started;
	// the first failure is the one reported, not the cancellations it
	// caused.
	g, rctx := errgroup.WithContext(ctx)
	for _, c := range order {
		g.Go(func() error { return runWindowed(rctx, w.ops.pool(w.f, w.d, c), groups[c], w.task) })
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// runWindowed runs fn on tasks in pool, keeping at most the pool's limit
// of them queued or running: each task that ends submits the next. A
// pool runs its work in submission order, so with all tasks submitted at
// once, saves running side by side (the shards of SaveSharded) would
// write one file after the other; with a window each save's next task
// queues behind the others', and the files are written at once, each
// under its own inode lock. It returns the first error; after one, or
// when ctx is done, no task starts.
func runWindowed(ctx context.Context, pool *sched.Pool, tasks []sched.Task, fn func(sched.Task) (int, error)) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	var submit func()
	submit = func() {
		mu.Lock()
		if next == len(tasks) || first != nil {
			mu.Unlock()
			return
		}
		t := tasks[next]
		next++
		mu.Unlock()
		wg.Add(1)
		pool.Submit(func() {
			defer wg.Done()
			err := ctx.Err()
			if err == nil {
				err = runTask(fn, t)
			}
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			submit()
		})
	}
	for range max(pool.Limit(), 1) {
		submit()
	}
	wg.Wait()
	return first
}

// runTask runs fn on t, turning a short count into io.ErrShortWrite and
// a panic into an error, so that one bad task cannot take down a worker
// and leave the save waiting.
func runTask(fn func(sched.Task) (int, error), t sched.Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("kvik: save task at offset %d panicked: %v", t.Off, v)
		}
	}()
	n, err := fn(t)
	if err == nil && n < t.Len {
		err = io.ErrShortWrite
	}
	return err
}

// taskContext returns the context of t's first device span, 0 for none.
func (w *saveWriter) taskContext(t sched.Task) cuda.Context {
	for _, s := range w.l.spans(t.Off, t.Len) {
		if w.l.isDevice(s.piece) {
			return w.l.devs[s.piece].Ctx
		}
	}
	return 0
}

// task writes the file's bytes [t.Off, t.Off+t.Len).
func (w *saveWriter) task(t sched.Task) (int, error) {
	spans := w.l.spans(t.Off, t.Len)
	stage := false
	var dctx cuda.Context
	for _, s := range spans {
		if w.l.isDevice(s.piece) {
			if dctx == 0 {
				dctx = w.l.devs[s.piece].Ctx
			}
			stage = true
		} else if len(spans) > 1 && s.n < minDirectSpan {
			stage = true
		}
	}
	if !stage {
		done := 0
		for _, s := range spans {
			p := w.l.pieces[s.piece].Data[s.off : s.off+int64(s.n)]
			n, err := w.f.hostTask(opWrite, w.d, p, t.Off+int64(s.bufOff))
			done += n
			if err != nil {
				return done, err
			}
		}
		return done, nil
	}
	buf, put, err := w.ops.buffer(dctx, t.Len, w.d)
	if err != nil {
		return 0, err
	}
	defer put()
	b := buf[:t.Len]
	var dev []span
	for _, s := range spans {
		if w.l.isDevice(s.piece) {
			dev = append(dev, s)
		} else {
			copy(b[s.bufOff:s.bufOff+s.n], w.l.pieces[s.piece].Data[s.off:])
		}
	}
	// Copy per context (a task rarely spans two GPUs' pieces).
	for len(dev) > 0 {
		c := w.l.devs[dev[0].piece].Ctx
		var now, later []span
		for _, s := range dev {
			if w.l.devs[s.piece].Ctx == c {
				now = append(now, s)
			} else {
				later = append(later, s)
			}
		}
		copies := make([]devCopy, len(now))
		for i, s := range now {
			copies[i] = devCopy{dst: b[s.bufOff : s.bufOff+s.n], src: w.l.devs[s.piece].Ptr + cuda.DevicePtr(s.off)}
		}
		if err := w.ops.fromDevice(w.l.devs[now[0].piece], copies); err != nil {
			return 0, err
		}
		dev = later
	}
	n, err := w.f.hostTask(opWrite, w.d, b, t.Off)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return n, err
}

// devCopy is one device-to-host copy of a staged task.
type devCopy struct {
	dst []byte
	src cuda.DevicePtr
}

// saveDeviceOps is what a save does with CUDA: a variable (saveDevice) so
// that tests run the engine on fake device memory where there is no GPU.
type saveDeviceOps interface {
	// resolve checks a device piece and finds its context.
	resolve(p Piece) (devmem.Range, error)
	// sync waits for the work queued on the legacy default stream of c.
	sync(c cuda.Context) error
	// enter marks a device operation on c as started (staging.Workers.Enter).
	enter(c cuda.Context) (leave func())
	// pool is the worker pool for tasks of context c (0: host tasks).
	pool(f *FileHandle, d Defaults, c cuda.Context) *sched.Pool
	// reserve makes sure n staging buffers of size bytes are allocated.
	reserve(c cuda.Context, n, size int) error
	// buffer returns a page-aligned staging buffer of at least n bytes,
	// pinned when c is not 0, and the function that returns it.
	buffer(c cuda.Context, n int, d Defaults) ([]byte, func(), error)
	// fromDevice copies device memory of r's context to the host and
	// waits for the copies.
	fromDevice(r devmem.Range, copies []devCopy) error
}

var saveDevice saveDeviceOps = cudaSave{}

// cudaSave is saveDeviceOps on the CUDA driver.
type cudaSave struct{}

func (cudaSave) resolve(p Piece) (devmem.Range, error) { return devmem.Resolve(p.Ptr, int(p.Size), 0) }

func (cudaSave) sync(c cuda.Context) error {
	return cuda.WithContext(c, func() error { return cuda.StreamSynchronize(0) })
}

func (cudaSave) enter(c cuda.Context) func() { return workers.Enter(c) }

func (cudaSave) pool(f *FileHandle, d Defaults, c cuda.Context) *sched.Pool {
	if c == 0 {
		return f.pool(d)
	}
	return f.devicePool(d, c)
}

func (cudaSave) reserve(c cuda.Context, n, size int) error {
	return cuda.WithContext(c, func() error { return pinnedBounce.Reserve(n, size) })
}

func (cudaSave) buffer(c cuda.Context, n int, d Defaults) ([]byte, func(), error) {
	if c == 0 {
		b, err := hostBounce.Get(max(d.BounceBufferSize, n))
		if err != nil {
			return nil, nil, err
		}
		return b.Mem, func() { hostBounce.Put(b) }, nil
	}
	pool, size := planner(d).Pinned(n) // as Plan: small tasks take small buffers
	var b *staging.Buffer
	err := cuda.WithContext(c, func() (err error) { b, err = pool.Get(size); return err }) // pinning needs a context
	if err != nil {
		return nil, nil, err
	}
	return b.Mem, func() { cuda.WithContext(c, func() error { pool.Put(b); return nil }) }, nil
}

func (cudaSave) fromDevice(r devmem.Range, copies []devCopy) error {
	return cuda.WithContext(r.Ctx, func() error {
		// Device offset 0 at address 0: each copy names its source
		// address, pieces of one context lying anywhere in its memory.
		c, err := staging.NewCopier(r, 0, false, tune.staging.Wait)
		if err != nil {
			return err
		}
		defer c.Close() // lets queued copies finish before the buffer is reused
		for _, cp := range copies {
			if err := c.FromDevice(cp.dst, int64(cp.src)); err != nil {
				return err
			}
		}
		return c.Sync()
	})
}
