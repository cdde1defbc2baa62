package staging

import (
	"errors"
	"testing"
)

func TestBouncePool(t *testing.T) {
	pinned := 0
	p := &Pool{Pin: func(b []byte) (func() error, error) {
		pinned++
		return func() error { pinned--; return nil }, nil
	}}
	a, err := p.Get(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Mem) != PageSize || uintptr(AddrOf(a.Mem))%uintptr(PageSize) != 0 || pinned != 1 {
		t.Fatalf("a 1-byte request gives one aligned, pinned page: len %d", len(a.Mem))
	}
	b, _ := p.Get(1)
	p.Put(a)
	p.Put(b)
	if c, _ := p.Get(1); c != b {
		t.Fatal("the pool must hand back the most recently returned buffer")
	}
	if p.Mapped() != int64(2*PageSize) {
		t.Fatalf("mapped %d", p.Mapped())
	}
	// A new size drops idle buffers of the old one, and frees the old
	// buffer in use when it comes back.
	d, _ := p.Get(3 * PageSize)
	if len(d.Mem) != 3*PageSize || p.Mapped() != int64(4*PageSize) {
		t.Fatalf("resize: len %d, mapped %d", len(d.Mem), p.Mapped())
	}
	p.Put(b)
	p.Put(d)
	if p.Mapped() != int64(3*PageSize) || pinned != 1 {
		t.Fatalf("after return: mapped %d, pinned %d", p.Mapped(), pinned)
	}
	if n := p.Drop(); n != int64(3*PageSize) || p.Mapped() != 0 || pinned != 0 {
		t.Fatalf("drop freed %d, mapped %d, pinned %d", n, p.Mapped(), pinned)
	}
}

// TestBouncePoolReserve checks that reserve allocates the missing buffers
// as one pinned slab, that get hands them out before allocating more, and
// that a slab is unpinned only when all of its buffers are freed.
func TestBouncePoolReserve(t *testing.T) {
	pins, unpins := 0, 0
	var pinnedLen []int
	p := &Pool{Pin: func(b []byte) (func() error, error) {
		pins++
		pinnedLen = append(pinnedLen, len(b))
		return func() error { unpins++; return nil }, nil
	}}
	size := hugePage / 2 // a slab of four crosses the huge-page path
	if err := p.Reserve(4, size); err != nil {
		t.Fatal(err)
	}
	if pins != 1 || pinnedLen[0] != 4*size || p.Mapped() != int64(4*size) {
		t.Fatalf("reserve(4): %d registrations of %v bytes, mapped %d", pins, pinnedLen, p.Mapped())
	}
	if err := p.Reserve(3, size); err != nil || pins != 1 {
		t.Fatalf("reserve below what is held must not allocate: %v, %d registrations", err, pins)
	}
	var bufs []*Buffer
	seen := map[int]bool{}
	for range 4 {
		b, err := p.Get(size)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Mem) != size || seen[AddrOf(b.Mem)] {
			t.Fatalf("buffer of %d bytes at %#x: wrong size or handed out twice", len(b.Mem), AddrOf(b.Mem))
		}
		seen[AddrOf(b.Mem)] = true
		for i := range b.Mem {
			b.Mem[i] = byte(len(bufs) + 1) // buffers must not overlap
		}
		bufs = append(bufs, b)
	}
	if AddrOf(bufs[0].Mem)%hugePage != 0 && AddrOf(bufs[3].Mem)%hugePage != 0 {
		t.Fatal("a pinned slab of whole huge pages must start on a huge-page boundary")
	}
	for i, b := range bufs {
		for _, c := range b.Mem {
			if c != byte(i+1) {
				t.Fatalf("buffer %d overlaps another", i)
			}
		}
	}
	if pins != 1 {
		t.Fatalf("get allocated while reserved buffers were idle: %d registrations", pins)
	}
	extra, err := p.Get(size) // the pool is empty now: a buffer of its own
	if err != nil || pins != 2 || pinnedLen[1] != size {
		t.Fatalf("get on an empty pool: %v, registrations %v", err, pinnedLen)
	}
	// Changing the size frees idle buffers; the slab stays pinned while
	// any of its buffers is in use.
	p.Put(bufs[0])
	p.Put(bufs[1])
	if _, err := p.Get(3 * PageSize); err != nil {
		t.Fatal(err)
	}
	if unpins != 0 {
		t.Fatalf("slab unpinned with buffers in use (%d unpins)", unpins)
	}
	p.Put(bufs[2])
	p.Put(extra)
	if unpins != 1 {
		t.Fatalf("the single buffer must be unpinned when it comes back after a resize: %d unpins", unpins)
	}
	p.Put(bufs[3])
	if unpins != 2 {
		t.Fatalf("the slab must be unpinned with its last buffer: %d unpins", unpins)
	}
	p.Drop()
	if p.Mapped() != int64(3*PageSize) {
		t.Fatalf("mapped %d, want only the 3-page buffer still in use", p.Mapped())
	}
}

// TestBouncePoolReserveFailure checks that a failed registration leaves
// nothing counted or mapped.
func TestBouncePoolReserveFailure(t *testing.T) {
	p := &Pool{Pin: func([]byte) (func() error, error) { return nil, errPinTest }}
	if err := p.Reserve(3, PageSize); !errors.Is(err, errPinTest) {
		t.Fatalf("reserve: %v", err)
	}
	if p.Mapped() != 0 || p.held != 0 || len(p.free) != 0 {
		t.Fatalf("after a failed reserve: mapped %d, held %d, free %d", p.Mapped(), p.held, len(p.free))
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
		if got := DeviceLimit(c.threads, c.ndev, c.cpus); got != c.want {
			t.Errorf("DeviceLimit(%d threads, %d devices, %d CPUs) = %d, want %d", c.threads, c.ndev, c.cpus, got, c.want)
		}
	}
}

var errPinTest = errors.New("pin refused")
