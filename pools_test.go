package kvik

import "testing"

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
