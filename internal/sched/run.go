package sched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// TaskFunc performs one task. It returns the bytes done, and a non-nil
// error whenever that is less than t.Len (io.EOF for a read at end of
// file).
type TaskFunc func(ctx context.Context, t Task) (int, error)

// errSkipped marks tasks not started because an earlier one failed.
var errSkipped = errors.New("sched: task skipped after an earlier failure")

// Run performs tasks with fn, on pool p, and calls done exactly once when
// all have finished, with the number of bytes of the contiguous prefix of
// the operation that completed and the error of the first task (by
// position) that fell short. When an error occurs, tasks not yet started
// are skipped; when ctx is cancelled, they fail with ctx.Err().
//
// With a nil pool the tasks run in the calling goroutine before Run
// returns.
func Run(ctx context.Context, p *Pool, tasks []Task, fn TaskFunc, done func(n int, err error)) {
	if ctx == nil {
		ctx = context.Background()
	}
	op := &op{ctx: ctx, tasks: tasks, fn: fn, done: done, res: make([]result, len(tasks))}
	op.left.Store(int64(len(tasks)))
	op.failedAt.Store(math.MaxInt64)
	if p == nil {
		for i := range tasks {
			op.run(i)
		}
		return
	}
	for i := range tasks {
		p.Submit(func() { op.run(i) })
	}
}

type result struct {
	n   int
	err error
}

type op struct {
	ctx   context.Context
	tasks []Task
	fn    TaskFunc
	done  func(int, error)
	res   []result
	// failedAt is the lowest index of a failed task; tasks after it that
	// have not started are skipped.
	failedAt atomic.Int64
	left     atomic.Int64
	mu       sync.Mutex // orders writes to res before the final read
}

func (o *op) run(i int) {
	var r result
	switch {
	case int64(i) > o.failedAt.Load():
		r.err = errSkipped
	case o.ctx.Err() != nil:
		r.err = o.ctx.Err()
	default:
		r = o.call(o.tasks[i])
	}
	for r.err != nil {
		old := o.failedAt.Load()
		if int64(i) >= old || o.failedAt.CompareAndSwap(old, int64(i)) {
			break
		}
	}
	o.mu.Lock()
	o.res[i] = r
	o.mu.Unlock()
	if o.left.Add(-1) == 0 {
		o.finish()
	}
}

// call runs fn, turning a panic into an error so that one bad task cannot
// take down a worker without completing its operation.
func (o *op) call(t Task) (r result) {
	defer func() {
		if v := recover(); v != nil {
			r = result{err: fmt.Errorf("sched: task at offset %d panicked: %v", t.Off, v)}
		}
	}()
	r.n, r.err = o.fn(o.ctx, t)
	if r.err == nil && r.n < t.Len {
		r.err = fmt.Errorf("sched: task at offset %d did %d of %d bytes without an error", t.Off, r.n, t.Len)
	}
	return r
}

func (o *op) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.res {
		n += r.n
		if r.err != nil {
			if r.err == errSkipped {
				r.err = errors.New("sched: internal error: skipped task before any failure")
			}
			o.done(n, r.err)
			return
		}
	}
	o.done(n, nil)
}
