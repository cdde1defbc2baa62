package kvik

import (
	"context"

	"github.com/kvikgo/kvik/internal/sched"
)

// runOp is the one op runner of every handle: it runs tasks with fn on
// pool and ends the operation once they have all finished, calling end
// with the bytes of the completed prefix and the first error (end
// releases what the operation held and shapes the result: path, io.EOF).
// With fut nil it blocks, running a single task in the calling goroutine
// with no hand-off; otherwise it completes fut and returns at once, on
// fallback when pool is nil (a Future must not make its caller wait).
func runOp(ctx context.Context, pool, fallback *sched.Pool, tasks []sched.Task, fn sched.TaskFunc, fut *Future, end func(n int, err error) (int, error)) (int, error) {
	blocking := fut == nil
	if blocking {
		fut = newFuture()
		if len(tasks) == 1 {
			pool = nil
		}
	} else if pool == nil {
		pool = fallback
	}
	sched.Run(ctx, pool, tasks, fn, func(n int, err error) {
		fut.complete(end(n, err))
	})
	if blocking {
		return fut.Get()
	}
	return 0, nil
}

// failOp reports an operation refused before it started (err already
// shaped by the handle), completing fut when there is one.
func failOp(err error, fut *Future) (int, error) {
	if fut != nil {
		fut.complete(0, err)
	}
	return 0, err
}
