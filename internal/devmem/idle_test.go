package devmem

import (
	"sync"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

func TestIdleLastInFirstOut(t *testing.T) {
	var c idle[int, string]
	if v, ok := c.take(1); ok {
		t.Fatalf("take from an empty cache = %q, true", v)
	}
	c.give(1, "a")
	c.give(1, "b")
	c.give(2, "c")
	if n := c.count(1); n != 2 {
		t.Fatalf("count(1) = %d, want 2", n)
	}
	for _, want := range []string{"b", "a"} {
		if v, ok := c.take(1); !ok || v != want {
			t.Fatalf("take(1) = %q, %v; want %q", v, ok, want)
		}
	}
	if _, ok := c.take(1); ok {
		t.Fatal("take(1) after both were taken succeeded")
	}
	if v, ok := c.take(2); !ok || v != "c" {
		t.Fatalf("take(2) = %q, %v; want c: keys keep their own handles", v, ok)
	}
}

// TestIdleConcurrent gives and takes from many goroutines (run with
// -race): every handle given is taken exactly once.
func TestIdleConcurrent(t *testing.T) {
	var c idle[int, int]
	const workers, per = 8, 500
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				c.give(w%2, w*per+i)
				if v, ok := c.take(w % 2); ok {
					mu.Lock()
					seen[v]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for k := range 2 {
		for {
			v, ok := c.take(k)
			if !ok {
				break
			}
			seen[v]++
		}
	}
	if len(seen) != workers*per {
		t.Fatalf("%d distinct handles came back, want %d", len(seen), workers*per)
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("handle %d taken %d times", v, n)
		}
	}
}

// TestEventCache checks on a GPU that an event given back is handed out
// again for the same context and flags, and works when recorded anew.
func TestEventCache(t *testing.T) {
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	ctx, err := PrimaryContext(dev)
	if err != nil {
		t.Fatal(err)
	}
	err = cuda.WithContext(ctx, func() error {
		const flags = cuda.EventDisableTiming
		e, err := GetEvent(ctx, true, flags)
		if err != nil {
			return err
		}
		PutEvent(ctx, true, flags, e)
		again, err := GetEvent(ctx, true, flags)
		if err != nil {
			return err
		}
		if again != e {
			t.Errorf("GetEvent after PutEvent = %#x, want the cached %#x", again, e)
		}
		other, err := GetEvent(ctx, true, flags|cuda.EventBlockingSync)
		if err != nil {
			return err
		}
		if other == e {
			t.Error("an event of other flags came from the same cache entry")
		}
		s, err := GetStream(ctx, true)
		if err != nil {
			return err
		}
		defer PutStream(ctx, true, s)
		for _, ev := range []cuda.Event{again, other} {
			if err := cuda.EventRecord(ev, s); err != nil {
				return err
			}
			if err := WaitEvent(ev); err != nil {
				return err
			}
		}
		PutEvent(ctx, true, flags, again)
		PutEvent(ctx, true, flags|cuda.EventBlockingSync, other)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
