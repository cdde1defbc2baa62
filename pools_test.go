package kvik

import (
	"errors"
	"runtime"
	"testing"

	"github.com/kvikgo/kvik/cuda"
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
	resizePools(7)
	t.Cleanup(func() { resizePools(BuiltinDefaults().NumThreads) })
	if a.Limit() != 7 || b.Limit() != 7 || shared.Limit() != 7 {
		t.Fatal("resize must reach every pool")
	}
}

func TestBouncePool(t *testing.T) {
	pinned := 0
	p := &bouncePool{pin: func(b []byte) (func() error, error) {
		pinned++
		return func() error { pinned--; return nil }, nil
	}}
	a, err := p.get(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.mem) != pageSize || uintptrOf(a.mem)%uintptr(pageSize) != 0 || pinned != 1 {
		t.Fatalf("a 1-byte request gives one aligned, pinned page: len %d", len(a.mem))
	}
	b, _ := p.get(1)
	p.put(a)
	p.put(b)
	if c, _ := p.get(1); c != b {
		t.Fatal("the pool must hand back the most recently returned buffer")
	}
	if p.mapped() != int64(2*pageSize) {
		t.Fatalf("mapped %d", p.mapped())
	}
	// A new size drops idle buffers of the old one, and frees the old
	// buffer in use when it comes back.
	d, _ := p.get(3 * pageSize)
	if len(d.mem) != 3*pageSize || p.mapped() != int64(4*pageSize) {
		t.Fatalf("resize: len %d, mapped %d", len(d.mem), p.mapped())
	}
	p.put(b)
	p.put(d)
	if p.mapped() != int64(3*pageSize) || pinned != 1 {
		t.Fatalf("after return: mapped %d, pinned %d", p.mapped(), pinned)
	}
	if n := p.drop(); n != int64(3*pageSize) || p.mapped() != 0 || pinned != 0 {
		t.Fatalf("drop freed %d, mapped %d, pinned %d", n, p.mapped(), pinned)
	}
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafePointer(b)) }

// TestBouncePoolReserve checks that reserve allocates the missing buffers
// as one pinned slab, that get hands them out before allocating more, and
// that a slab is unpinned only when all of its buffers are freed.
func TestBouncePoolReserve(t *testing.T) {
	pins, unpins := 0, 0
	var pinnedLen []int
	p := &bouncePool{pin: func(b []byte) (func() error, error) {
		pins++
		pinnedLen = append(pinnedLen, len(b))
		return func() error { unpins++; return nil }, nil
	}}
	size := hugePage / 2 // a slab of four crosses the huge-page path
	if err := p.reserve(4, size); err != nil {
		t.Fatal(err)
	}
	if pins != 1 || pinnedLen[0] != 4*size || p.mapped() != int64(4*size) {
		t.Fatalf("reserve(4): %d registrations of %v bytes, mapped %d", pins, pinnedLen, p.mapped())
	}
	if err := p.reserve(3, size); err != nil || pins != 1 {
		t.Fatalf("reserve below what is held must not allocate: %v, %d registrations", err, pins)
	}
	var bufs []*bounceBuffer
	seen := map[int]bool{}
	for range 4 {
		b, err := p.get(size)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.mem) != size || seen[addrOf(b.mem)] {
			t.Fatalf("buffer of %d bytes at %#x: wrong size or handed out twice", len(b.mem), addrOf(b.mem))
		}
		seen[addrOf(b.mem)] = true
		for i := range b.mem {
			b.mem[i] = byte(len(bufs) + 1) // buffers must not overlap
		}
		bufs = append(bufs, b)
	}
	if addrOf(bufs[0].mem)%hugePage != 0 && addrOf(bufs[3].mem)%hugePage != 0 {
		t.Fatal("a pinned slab of whole huge pages must start on a huge-page boundary")
	}
	for i, b := range bufs {
		for _, c := range b.mem {
			if c != byte(i+1) {
				t.Fatalf("buffer %d overlaps another", i)
			}
		}
	}
	if pins != 1 {
		t.Fatalf("get allocated while reserved buffers were idle: %d registrations", pins)
	}
	extra, err := p.get(size) // the pool is empty now: a buffer of its own
	if err != nil || pins != 2 || pinnedLen[1] != size {
		t.Fatalf("get on an empty pool: %v, registrations %v", err, pinnedLen)
	}
	// Changing the size frees idle buffers; the slab stays pinned while
	// any of its buffers is in use.
	p.put(bufs[0])
	p.put(bufs[1])
	if _, err := p.get(3 * pageSize); err != nil {
		t.Fatal(err)
	}
	if unpins != 0 {
		t.Fatalf("slab unpinned with buffers in use (%d unpins)", unpins)
	}
	p.put(bufs[2])
	p.put(extra)
	if unpins != 1 {
		t.Fatalf("the single buffer must be unpinned when it comes back after a resize: %d unpins", unpins)
	}
	p.put(bufs[3])
	if unpins != 2 {
		t.Fatalf("the slab must be unpinned with its last buffer: %d unpins", unpins)
	}
	p.drop()
	if p.mapped() != int64(3*pageSize) {
		t.Fatalf("mapped %d, want only the 3-page buffer still in use", p.mapped())
	}
}

// TestBouncePoolReserveFailure checks that a failed registration leaves
// nothing counted or mapped.
func TestBouncePoolReserveFailure(t *testing.T) {
	p := &bouncePool{pin: func([]byte) (func() error, error) { return nil, errPinTest }}
	if err := p.reserve(3, pageSize); !errors.Is(err, errPinTest) {
		t.Fatalf("reserve: %v", err)
	}
	if p.mapped() != 0 || p.held != 0 || len(p.free) != 0 {
		t.Fatalf("after a failed reserve: mapped %d, held %d, free %d", p.mapped(), p.held, len(p.free))
	}
}

var errPinTest = errors.New("pin refused")

// TestBouncePoolUnmaps checks that freed slabs, including trimmed huge-page
// slabs, leave no mapping behind: mincore fails with ENOMEM on unmapped
// memory.
func TestBouncePoolUnmaps(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		p := &bouncePool{}
		if pinned {
			p.pin = func([]byte) (func() error, error) { return func() error { return nil }, nil }
		}
		if err := p.reserve(3, hugePage); err != nil {
			t.Fatal(err)
		}
		var addrs [][]byte
		for range 3 {
			b, _ := p.get(hugePage)
			addrs = append(addrs, b.mem)
			p.put(b)
		}
		vec := make([]byte, hugePage/pageSize)
		for _, m := range addrs {
			if err := pcMincore(m, vec); err != nil {
				t.Fatalf("pinned %v: mincore of a live buffer: %v", pinned, err)
			}
		}
		p.drop()
		for i, m := range addrs {
			if err := pcMincore(m, vec); !errors.Is(err, unix.ENOMEM) {
				t.Fatalf("pinned %v: buffer %d still mapped after drop (mincore: %v)", pinned, i, err)
			}
		}
	}
}

func TestPoolLimit(t *testing.T) {
	for _, c := range []struct{ threads, ndev, cpus, want int }{
		{16, 0, 64, 16}, // no device operation: NumThreads
		{16, 1, 64, 16}, // one GPU: never more than NumThreads
		{16, 2, 64, 32}, // two GPUs: NumThreads each
		{16, 2, 24, 24}, // capped by the CPUs
		{16, 4, 8, 16},  // never below NumThreads
		{1, 3, 2, 2},
	} {
		if got := poolLimit(c.threads, c.ndev, c.cpus); got != c.want {
			t.Errorf("poolLimit(%d threads, %d devices, %d CPUs) = %d, want %d", c.threads, c.ndev, c.cpus, got, c.want)
		}
	}
}

// TestEnterDeviceResizesPools feeds operations on two (fake) contexts: the
// shared pool grows while both are in flight and shrinks back when the
// second one's last operation ends.
func TestEnterDeviceResizesPools(t *testing.T) {
	d := BuiltinDefaults()
	d.NumThreads = 1 // so that two devices need more workers on any machine
	restore, err := SetDefaults(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
	pool := poolFor(d, "")
	want := func(ndev int) int { return poolLimit(d.NumThreads, ndev, runtime.NumCPU()) }
	a1 := enterDevice(cuda.Context(0x1001))
	a2 := enterDevice(cuda.Context(0x1001))
	if got := pool.Limit(); got != want(1) {
		t.Fatalf("one context: limit %d, want %d", got, want(1))
	}
	b := enterDevice(cuda.Context(0x2002))
	if got := pool.Limit(); got != want(2) || got != 2 {
		t.Fatalf("two contexts: limit %d, want %d", got, want(2))
	}
	b()
	b() // leave is idempotent
	if got := pool.Limit(); got != want(1) {
		t.Fatalf("back to one context: limit %d, want %d", got, want(1))
	}
	a1()
	if activeDevices() != 1 {
		t.Fatalf("%d contexts in flight, want 1", activeDevices())
	}
	a2()
	if activeDevices() != 0 || pool.Limit() != d.NumThreads {
		t.Fatalf("after all: %d contexts, limit %d", activeDevices(), pool.Limit())
	}
}
