package kvik

import (
	"errors"
	"runtime"
	"testing"
	"time"

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

func TestDeviceLimit(t *testing.T) {
	for _, c := range []struct{ threads, ndev, cpus, want int }{
		{16, 0, 64, 16}, // no device operation: NumThreads
		{16, 1, 64, 16}, // one GPU: never more than NumThreads
		{16, 2, 64, 16}, // two GPUs: NumThreads each
		{16, 2, 24, 12}, // together capped by the CPUs
		{16, 4, 8, 4},   // together never below NumThreads
		{1, 3, 2, 1},
		{16, 3, 40, 14}, // 40 CPUs over 3 GPUs, rounded up
	} {
		if got := deviceLimit(c.threads, c.ndev, c.cpus); got != c.want {
			t.Errorf("deviceLimit(%d threads, %d devices, %d CPUs) = %d, want %d", c.threads, c.ndev, c.cpus, got, c.want)
		}
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

// TestDevicePoolsRunSideBySide is what the pools per GPU are for: work
// queued for GPU a first must not hold back GPU b's. With one pool for
// both, b's task would wait for every task of a; here it runs while a's
// are held.
func TestDevicePoolsRunSideBySide(t *testing.T) {
	d := BuiltinDefaults()
	d.NumThreads = 2
	a, b := cuda.Context(0x5005), cuda.Context(0x6006)
	pa, pb := devicePoolFor(d, "", a), devicePoolFor(d, "", b)
	pa.SetLimit(2)
	pb.SetLimit(2)
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
	want := func(ndev int) int { return deviceLimit(d.NumThreads, ndev, runtime.NumCPU()) }
	a1 := enterDevice(cuda.Context(0x1001))
	a2 := enterDevice(cuda.Context(0x1001))
	if got := pool.Limit(); got != want(1) {
		t.Fatalf("one context: limit %d, want %d", got, want(1))
	}
	b := enterDevice(cuda.Context(0x2002))
	if got := pool.Limit(); got != want(2) || got >= d.NumThreads || host.Limit() != d.NumThreads {
		t.Fatalf("two contexts: GPU limit %d, want %d; host limit %d, want %d", got, want(2), host.Limit(), d.NumThreads)
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
