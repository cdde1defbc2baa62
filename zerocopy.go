package kvik

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// One-shot zero-copy lane of POSIX device reads from the page cache.
//
// A bounce-buffer worker moves a task with the CPU: pread copies it from
// the page cache into pinned memory, and the copy engine takes it from
// there. The lane instead maps a piece of the file, pins its page-cache
// pages (cuMemHostRegister, read-only) and lets the copy engine read them
// in place: the CPU only walks page tables. A read on one worker runs the
// lane instead of bounce buffers: 1.4-1.8x faster for reads of 64 MiB to
// 4 GiB on an H100 (docs/performance.md). With more workers it is slower:
// the driver serialises registrations and, while one runs, holds up the
// other workers' copies and waits, so a lane beside bounce workers cost
// them more than it moved (0.6-0.9x at 4-32 workers).
//
// The lane takes pieces from the back of the read while any bounce
// workers take tasks from the front, until they meet; each piece's
// mapping and registration overlaps the copy of the one before.

// zc is the lanes' state; their settings are tune.zc.
var zc struct {
	broken atomic.Bool
	moved  atomic.Int64 // bytes lanes have moved, for tests and logs
}

// zcRead is one device read with a zero-copy lane.
type zcRead struct {
	f     *FileHandle
	r     devmem.Range
	tasks []sched.Task // the read's tasks, in file order

	mu    sync.Mutex
	front int        // tasks below front were started by bounce workers
	hi    int        // tasks from hi on are claimed by the lane
	owner []*zcPiece // the lane's piece for each task it claimed
}

// zcPiece is a run of tasks the lane moves in one registration.
type zcPiece struct {
	first, last int // task indexes [first, last)
	mem         []byte
	copier      *staging.Copier // not nil once the copy may be queued
	done        chan struct{}
	err         error // set before done closes; not nil: a bounce worker moves the tasks
}

// laneTask marks the extra task that runs the lane.
var laneTask = sched.Task{BufOff: -1}

// withLane returns tasks with the lane's task first and the function
// that runs them, or tasks and fn unchanged when the read does not
// qualify: a read on one worker, of the page cache, of at least
// tune.zc.minBytes, inside the file, with more than one task.
func (f *FileHandle) withLane(d Defaults, r devmem.Range, tasks []sched.Task, fn sched.TaskFunc) ([]sched.Task, sched.TaskFunc) {
	n := len(tasks)
	if !tune.zc.on || zc.broken.Load() || n < 2 || (d.NumThreads > 1 && !tune.zc.all) {
		return tasks, fn
	}
	first, last := tasks[0], tasks[n-1]
	size := int(last.Off-first.Off) + last.Len
	if size < tune.zc.minBytes || !f.cachedRange(d, first.Off, size) {
		return tasks, fn
	}
	z := &zcRead{f: f, r: r, tasks: tasks, hi: n, owner: make([]*zcPiece, n)}
	run := func(ctx context.Context, t sched.Task) (int, error) {
		if t.BufOff < 0 {
			z.lane(ctx)
			return 0, nil
		}
		i := sort.Search(n, func(i int) bool { return tasks[i].BufOff >= t.BufOff })
		if p := z.take(i); p != nil {
			<-p.done
			if p.err == nil {
				return t.Len, nil
			}
		}
		return fn(ctx, t)
	}
	return append([]sched.Task{laneTask}, tasks...), run
}

// cachedRange reports whether [off, off+n) is inside the file (a block
// device's size is not its stat's: see Size) and in the page cache (or
// on a memory file system). It runs inside a read, which holds f open.
func (f *FileHandle) cachedRange(d Defaults, off int64, n int) bool {
	if size, err := f.size(); err != nil || off+int64(n) > size {
		return false
	}
	if d.ReadPolicy() == ReadPolicyDirect {
		return false
	}
	if f.inMemoryFS() {
		return true
	}
	start, end := alignDown(off, int64(pageSize)), alignUp64(off+int64(n), int64(pageSize))
	v, err := sampleResidency(f.fd, start, int((end-start)/int64(pageSize)))
	return err == nil && v == sampleResident
}

// take marks task i as started by a bounce worker, or returns the lane's
// piece that moves it.
func (z *zcRead) take(i int) *zcPiece {
	z.mu.Lock()
	defer z.mu.Unlock()
	if p := z.owner[i]; p != nil {
		return p
	}
	z.front = max(z.front, i+1)
	return nil
}

// claim takes the next piece from the back of the read, nil when the
// lane has met the bounce workers.
func (z *zcRead) claim() *zcPiece {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.hi <= z.front {
		return nil
	}
	first, bytes := z.hi, 0
	for first > z.front && bytes < tune.zc.piece {
		first--
		bytes += z.tasks[first].Len
	}
	p := &zcPiece{first: first, last: z.hi, done: make(chan struct{})}
	for i := first; i < z.hi; i++ {
		z.owner[i] = p
	}
	z.hi = first
	return p
}

// lane moves pieces until none are left, starting the next piece's
// mapping and registration while the current one's copy runs.
func (z *zcRead) lane(ctx context.Context) {
	cuda.WithContext(z.r.Ctx, func() error {
		var cur *zcPiece
		for {
			var next *zcPiece
			if ctx.Err() == nil && !zc.broken.Load() {
				if next = z.claim(); next != nil {
					z.start(next)
				}
			}
			if cur != nil {
				z.finish(cur)
			}
			if next == nil {
				return nil
			}
			cur = next
		}
	})
}

// start maps, populates and registers piece p and queues its copy; on a
// failure it leaves p.err set for finish.
func (z *zcRead) start(p *zcPiece) {
	first, last := z.tasks[p.first], z.tasks[p.last-1]
	mapOff := alignDown(first.Off, int64(pageSize))
	end := last.Off + int64(last.Len)
	mem, err := unix.Mmap(z.f.fd, mapOff, int(end-mapOff), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		p.err = err
		return
	}
	p.mem = mem
	if err := populateRead(mem); err != nil {
		p.err = err
		return
	}
	if err := cuda.MemHostRegister(mem, cuda.MemHostRegisterReadOnly); err != nil {
		p.err = err
		if errors.Is(err, cuda.ErrorNotSupported) || errors.Is(err, cuda.ErrorNotPermitted) || errors.Is(err, cuda.ErrorInvalidValue) {
			zc.broken.Store(true) // the driver refuses file pages: no lanes in this process
		}
		return
	}
	// The lane waits in cuStreamSynchronize, as when its piece size and
	// thresholds were measured: one large copy per piece, on a thread
	// that is locked for the whole lane anyway.
	c, err := staging.NewCopier(z.r, z.r.Ptr+cuda.DevicePtr(first.BufOff), false, staging.WaitSpin)
	if err != nil {
		p.err = err
		cuda.MemHostUnregister(mem)
		return
	}
	p.copier = c
	p.err = c.ToDevice(mem[first.Off-mapOff:end-mapOff], 0)
}

// finish waits for p's copy, unregisters and unmaps it, and hands p's
// tasks to their waiting workers.
func (z *zcRead) finish(p *zcPiece) {
	if p.copier != nil {
		if err := p.copier.Sync(); p.err == nil {
			p.err = err
		}
		p.copier.Close()
		cuda.MemHostUnregister(p.mem)
	}
	if p.mem != nil {
		unix.Munmap(p.mem)
	}
	if p.err == nil {
		zc.moved.Add(int64(len(p.mem)))
	}
	close(p.done)
}
