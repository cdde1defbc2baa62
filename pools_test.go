package kvik

import (
	"errors"
	"runtime"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/staging"
	"golang.org/x/sys/unix"
)

func TestPoolPerBlockDevice(t *testing.T) {
	d := BuiltinDefaults()
	shared := poolFor(d, "sda")
	if poolFor(d, "nvme0") != shared {
		t.Fatal("without ThreadPoolPerBlockDevice every file must share one pool")
	}
	d.ThreadPoolPerBlockDevice = true
	a, b := poolFor(d, "sda"), poolFor(d, "nvme0")
	if a == b || a == shared || poolFor(d, "sda") != a {
		t.Fatal("each block device needs its own, stable pool")
	}
	workers.Resize(7)
	t.Cleanup(func() { workers.Resize(BuiltinDefaults().NumThreads) })
	if a.Limit() != 7 || b.Limit() != 7 || shared.Limit() != 7 {
		t.Fatal("resize must reach every pool")
	}
}

// TestDevicePools checks that each GPU's operations get a pool of their
// own, apart from host operations and from each other, and that pools
// follow the block-device setting.
func TestDevicePools(t *testing.T) {
	d := BuiltinDefaults()
	a, b := cuda.Context(0x3003), cuda.Context(0x4004)
	host := poolFor(d, "")
	pa, pb := devicePoolFor(d, "", a), devicePoolFor(d, "", b)
	if pa == host || pb == host || pa == pb {
		t.Fatalf("pools shared: host %p, GPU a %p, GPU b %p", host, pa, pb)
	}
	if devicePoolFor(d, "", a) != pa {
		t.Fatal("a second call for GPU a made a new pool")
	}
	if devicePoolFor(d, "sda", a) != pa {
		t.Fatal("without ThreadPoolPerBlockDevice the block device chose another pool")
	}
	d.ThreadPoolPerBlockDevice = true
	if devicePoolFor(d, "sda", a) == pa || devicePoolFor(d, "sda", a) == devicePoolFor(d, "nvme0", a) {
		t.Fatal("ThreadPoolPerBlockDevice: block devices share a GPU pool")
	}
}

// TestEnterDeviceResizesPools feeds operations on two (fake) contexts:
// each GPU's pool gets its share of the workers while both are in flight
// and NumThreads again when the second one's last operation ends; the
// host pool keeps NumThreads throughout.
func TestEnterDeviceResizesPools(t *testing.T) {
	d := BuiltinDefaults()
	// As many threads as CPUs, so that two GPUs share them: each pool's
	// limit halves (rounded up) on any machine of two or more CPUs.
	d.NumThreads = max(runtime.NumCPU(), 2)
	restore, err := SetDefaults(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
	host := poolFor(d, "")
	pool := devicePoolFor(d, "", cuda.Context(0x1001))
	want := func(ndev int) int { return staging.DeviceLimit(d.NumThreads, ndev, runtime.NumCPU()) }
	a1 := workers.Enter(cuda.Context(0x1001))
	a2 := workers.Enter(cuda.Context(0x1001))
	if got := pool.Limit(); got != want(1) {
		t.Fatalf("one context: limit %d, want %d", got, want(1))
	}
	b := workers.Enter(cuda.Context(0x2002))
	if got := pool.Limit(); got != want(2) || got >= d.NumThreads || host.Limit() != d.NumThreads {
		t.Fatalf("two contexts: GPU limit %d, want %d; host limit %d, want %d", got, want(2), host.Limit(), d.NumThreads)
	}
	b()
	b() // leave is idempotent
	if got := pool.Limit(); got != want(1) {
		t.Fatalf("back to one context: limit %d, want %d", got, want(1))
	}
	a1()
	if workers.Active() != 1 {
		t.Fatalf("%d contexts in flight, want 1", workers.Active())
	}
	a2()
	if workers.Active() != 0 || pool.Limit() != d.NumThreads {
		t.Fatalf("after all: %d contexts, limit %d", workers.Active(), pool.Limit())
	}
}

// TestBouncePoolUnmaps checks that freed slabs, including trimmed huge-page
// slabs, leave no mapping behind: mincore fails with ENOMEM on unmapped
// memory.
func TestBouncePoolUnmaps(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		p := &staging.Pool{}
		if pinned {
			p.Pin = func([]byte) (func() error, error) { return func() error { return nil }, nil }
		}
		if err := p.Reserve(3, hugePageTest); err != nil {
			t.Fatal(err)
		}
		var addrs [][]byte
		for range 3 {
			b, _ := p.Get(hugePageTest)
			addrs = append(addrs, b.Mem)
			p.Put(b)
		}
		vec := make([]byte, (2<<20)/pageSize)
		for _, m := range addrs {
			if err := pcMincore(m, vec); err != nil {
				t.Fatalf("pinned %v: mincore of a live buffer: %v", pinned, err)
			}
		}
		p.Drop()
		for i, m := range addrs {
			if err := pcMincore(m, vec); !errors.Is(err, unix.ENOMEM) {
				t.Fatalf("pinned %v: buffer %d still mapped after drop (mincore: %v)", pinned, i, err)
			}
		}
	}
}

// hugePageTest is the slab size of TestBouncePoolUnmaps: a huge page, so
// that pinned slabs take the trimmed huge-page path.
const hugePageTest = 2 << 20
