package remote

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimiterBounds runs many goroutines through a limiter whose limit
// changes under them, and checks that no more than the limit in force
// ever hold a slot at once, and that all finish.
func TestLimiterBounds(t *testing.T) {
	l := NewLimiter(3)
	var in, peak atomic.Int32
	var limit atomic.Int32
	limit.Store(3)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if err := l.Acquire(context.Background()); err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			if n > limit.Load() {
				t.Errorf("%d in flight over a limit of %d", n, limit.Load())
			}
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(time.Duration(i%3) * time.Millisecond)
			in.Add(-1)
			l.Release()
		})
		if i == 32 {
			// The check's limit rises first, so it is never below the
			// limiter's.
			limit.Store(5)
			l.SetLimit(5)
		}
	}
	wg.Wait()
	if peak.Load() < 2 {
		t.Fatalf("peak %d: the goroutines never overlapped", peak.Load())
	}
}

// TestLimiterRaiseWakes checks that raising the limit lets waiters in,
// that a limit of 0 means none, and that a waiter gives up when its
// context ends.
func TestLimiterRaiseWakes(t *testing.T) {
	l := NewLimiter(1)
	if err := l.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("full limiter: %v, want the context's error", err)
	}
	done := make(chan error)
	go func() { done <- l.Acquire(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("second slot granted at limit 1: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	l.SetLimit(0) // no limit
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := l.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if l.Limit() != 0 {
		t.Fatalf("limit %d", l.Limit())
	}
}
