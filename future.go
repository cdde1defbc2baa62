package kvik

import "context"

// Future is the result of an operation running in the background, like
// KvikIO's IOFuture. Its methods are safe for concurrent use.
type Future struct {
	done chan struct{}
	n    int
	err  error
}

func newFuture() *Future { return &Future{done: make(chan struct{})} }

func (f *Future) complete(n int, err error) {
	f.n, f.err = n, err
	close(f.done)
}

// Get waits for the operation and returns the bytes transferred and the
// error, with the same meaning as the matching blocking call.
func (f *Future) Get() (int, error) {
	<-f.done
	return f.n, f.err
}

// Wait is Get that gives up when ctx is done, returning ctx.Err(). The
// operation goes on; cancel it through the context it was started with.
func (f *Future) Wait(ctx context.Context) (int, error) {
	select {
	case <-f.done:
		return f.n, f.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Done reports whether the operation has finished.
func (f *Future) Done() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// Ready returns a channel that is closed when the operation finishes.
func (f *Future) Ready() <-chan struct{} { return f.done }
