package kvik

import (
	"context"
	"sync"

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

// opGate counts a handle's operations in flight so that Close can wait
// for them, and refuses operations once the handle is closed.
type opGate struct {
	mu       sync.Mutex
	idle     sync.Cond // signalled when inflight drops
	inflight int
	closed   bool
}

func (h *opGate) initGate() { h.idle.L = &h.mu }

// enter marks an operation in flight, or fails with ErrClosed.
func (h *opGate) enter() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.inflight++
	return nil
}

// release marks an operation done.
func (h *opGate) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight--; h.inflight == 0 {
		h.idle.Broadcast()
	}
}

// closeLocked marks the handle closed and waits for the operations in
// flight; h.mu is held. It reports false when the handle was closed
// already.
func (h *opGate) closeLocked() bool {
	if h.closed {
		return false
	}
	h.closed = true
	for h.inflight > 0 {
		h.idle.Wait()
	}
	return true
}

// Closed reports whether Close has been called.
func (h *opGate) Closed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}
