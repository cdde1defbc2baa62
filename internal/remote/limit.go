package remote

import (
	"context"
	"sync"
)

// Limiter bounds how many requests are in flight at once. Its limit can
// change at any time; a limit of 0 or less means no limit. The zero value
// has no limit.
type Limiter struct {
	mu    sync.Mutex
	limit int
	inUse int
	freed chan struct{} // made for waiters, closed when a slot frees
}

// NewLimiter returns a Limiter of n slots (n <= 0: no limit).
func NewLimiter(n int) *Limiter { return &Limiter{limit: n} }

// requests bounds the remote requests of the whole process
// (KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS); every client holds a slot
// of it.
var requests = &Limiter{}

// Requests returns the process-wide limiter, whose limit the root package
// keeps in step with the settings.
func Requests() *Limiter { return requests }

// SetLimit changes the limit; waiters that now fit go on at once.
func (l *Limiter) SetLimit(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = n
	l.wakeLocked()
}

// Limit returns the current limit (0 or less: none).
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limit
}

// Acquire waits for a slot, or until ctx is done.
func (l *Limiter) Acquire(ctx context.Context) error {
	for {
		l.mu.Lock()
		if l.limit <= 0 || l.inUse < l.limit {
			l.inUse++
			l.mu.Unlock()
			return nil
		}
		if l.freed == nil {
			l.freed = make(chan struct{})
		}
		freed := l.freed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release frees a slot taken by Acquire.
func (l *Limiter) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inUse--
	l.wakeLocked()
}

// wakeLocked lets every waiter try again.
func (l *Limiter) wakeLocked() {
	if l.freed != nil {
		close(l.freed)
		l.freed = nil
	}
}

// acquireAll takes a slot of each limiter in order, and returns the
// function that frees them. Every caller passes its limiters in the same
// order (a handle's own before the process's), so none waits in a cycle.
func acquireAll(ctx context.Context, ls []*Limiter) (release func(), err error) {
	for i, l := range ls {
		if err := l.Acquire(ctx); err != nil {
			releaseAll(ls[:i])
			return nil, err
		}
	}
	return func() { releaseAll(ls) }, nil
}

func releaseAll(ls []*Limiter) {
	for _, l := range ls {
		l.Release()
	}
}
