package staging

import (
	"runtime"
	"testing"
	"time"

	"github.com/kvikgo/kvik/cuda"
)

// TestWorkersPools checks that host and device pools are apart, one per
// (block device, context), and stable.
func TestWorkersPools(t *testing.T) {
	var w Workers
	a, b := cuda.Context(0x3003), cuda.Context(0x4004)
	host := w.Host("", 8)
	pa, pb := w.Device("", a, 8), w.Device("", b, 8)
	if pa == host || pb == host || pa == pb {
		t.Fatalf("pools shared: host %p, GPU a %p, GPU b %p", host, pa, pb)
	}
	if w.Device("", a, 8) != pa || w.Host("", 8) != host {
		t.Fatal("a second call made a new pool")
	}
	if w.Device("sda", a, 8) == pa || w.Host("sda", 8) == host {
		t.Fatal("another block device shares a pool")
	}
	if host.Limit() != 8 || pa.Limit() != 8 {
		t.Fatalf("limits %d, %d: want the thread count", host.Limit(), pa.Limit())
	}
	w.Resize(5)
	if host.Limit() != 5 || pa.Limit() != 5 || w.Host("sda", 5).Limit() != 5 {
		t.Fatal("Resize must reach every pool")
	}
}

// TestWorkersEnter feeds operations on two (fake) contexts: each GPU's
// pool gets its share while both are in flight and the whole thread
// count again when the second one's last operation ends; host pools keep
// the thread count throughout.
func TestWorkersEnter(t *testing.T) {
	var w Workers
	threads := max(runtime.NumCPU(), 2) // two GPUs share the CPUs: each limit halves
	host := w.Host("", threads)
	pool := w.Device("", cuda.Context(0x1001), threads)
	want := func(ndev int) int { return DeviceLimit(threads, ndev, runtime.NumCPU()) }
	a1 := w.Enter(cuda.Context(0x1001))
	a2 := w.Enter(cuda.Context(0x1001))
	if got := pool.Limit(); got != want(1) || w.Active() != 1 {
		t.Fatalf("one context: limit %d, want %d; %d active", got, want(1), w.Active())
	}
	b := w.Enter(cuda.Context(0x2002))
	if got := pool.Limit(); got != want(2) || got >= threads || host.Limit() != threads {
		t.Fatalf("two contexts: GPU limit %d, want %d; host limit %d, want %d", got, want(2), host.Limit(), threads)
	}
	b()
	b() // leave is idempotent
	if got := pool.Limit(); got != want(1) || w.Active() != 1 {
		t.Fatalf("back to one context: limit %d, want %d; %d active", got, want(1), w.Active())
	}
	a1()
	a2()
	if w.Active() != 0 || pool.Limit() != threads {
		t.Fatalf("after all: %d contexts, limit %d", w.Active(), pool.Limit())
	}
}

// TestWorkersSideBySide is what the pools per GPU are for: work queued
// for GPU a first must not hold back GPU b's.
func TestWorkersSideBySide(t *testing.T) {
	var w Workers
	pa, pb := w.Device("", cuda.Context(0x5005), 2), w.Device("", cuda.Context(0x6006), 2)
	hold := make(chan struct{})
	started := make(chan struct{}, 8)
	for range 8 { // more than a's workers: the rest queue
		pa.Submit(func() { started <- struct{}{}; <-hold })
	}
	<-started
	<-started
	ran := make(chan struct{})
	pb.Submit(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("GPU b's task waited behind GPU a's queue")
	}
	if n := pa.Pending(); n != 6 {
		t.Errorf("GPU a: %d tasks pending, want 6", n)
	}
	close(hold)
	for range 6 {
		<-started
	}
}
