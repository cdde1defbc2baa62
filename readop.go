package kvik

import (
	"context"
	"io"

	"github.com/kvikgo/kvik/internal/sched"
)

// readOp is what runRead needs of a read-only handle (MmapHandle,
// RemoteHandle): how to end an operation and how to name its errors.
type readOp struct {
	release func()            // marks the operation done on the handle
	wrap    func(error) error // adds the handle's name to an error
}

// run splits [off, off+n) into tasks and runs them on pool (in the caller
// when the call blocks and there is one task); eof says the read was
// clamped at the end of the data. With fut nil it blocks; otherwise it
// completes fut and returns at once.
func (o readOp) run(ctx context.Context, d Defaults, pool *sched.Pool, off int64, n int, eof bool, fn sched.TaskFunc, fut *Future) (int, error) {
	blocking := fut == nil
	if blocking {
		fut = newFuture()
	}
	tasks := sched.Split(off, n, d.TaskSize)
	if blocking && len(tasks) == 1 {
		pool = nil
	}
	if !blocking && pool == nil {
		pool = poolFor(d, "")
	}
	sched.Run(ctx, pool, tasks, fn, func(done int, err error) {
		o.release()
		if err == nil && eof {
			err = io.EOF
		}
		if err != nil && err != io.EOF {
			err = o.wrap(err)
		}
		fut.complete(done, err)
	})
	if blocking {
		return fut.Get()
	}
	return 0, nil
}

// fail reports an operation refused before it started, completing fut
// when there is one.
func (o readOp) fail(err error, fut *Future) (int, error) {
	err = o.wrap(err)
	if fut != nil {
		fut.complete(0, err)
	}
	return 0, err
}
