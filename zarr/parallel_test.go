package zarr

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestParallel checks the worker loop under Array.run: every item once,
// on a worker index below the count; the first failure is what it
// returns, cancels the context the others see and starts no more items;
// a cancelled parent gives the parent's error.
func TestParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		n, w := rng.IntN(200), 1+rng.IntN(9)
		var mu sync.Mutex
		seen := make([]int, n)
		err := parallel(context.Background(), n, w, func(_ context.Context, worker, i int) error {
			if worker < 0 || worker >= min(w, n) {
				t.Errorf("worker %d of %d", worker, w)
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d w=%d: item %d ran %d times", n, w, i, c)
			}
		}
	}

	boom := errors.New("boom")
	var calls atomic.Int64
	err := parallel(context.Background(), 1000, 4, func(ctx context.Context, _, i int) error {
		calls.Add(1)
		if i == 10 {
			return boom
		}
		if i > 10 {
			<-ctx.Done() // released by the failure
			return ctx.Err()
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("%v, want the first failure", err)
	}
	if c := calls.Load(); c > 20 {
		t.Fatalf("%d items started after the failure stopped the loop", c)
	}

	ctx, cancel := context.WithCancel(context.Background())
	err = parallel(ctx, 100, 3, func(_ context.Context, _, i int) error {
		if i == 5 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want the parent's cancellation", err)
	}
	if err := parallel(ctx, 0, 3, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("no items, cancelled parent: %v", err)
	}
}
