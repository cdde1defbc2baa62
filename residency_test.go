package kvik_test

// The residency read policy (KVIK_DIRECT_IO_READ_POLICY=auto): bytes read
// under every policy match the file whatever part of it is cached, and on a
// file system that can drop pages, cold ranges go through O_DIRECT and
// cached ones do not. These tests replace the system calls (posix.SetSyscalls) and change settings:
// they must not run in parallel.

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/posix"
)

// resFile writes size random bytes to a new file in a temporary directory
// and returns its path and contents.
func resFile(t *testing.T, rng *rand.Rand, size int) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "res.bin")
	data := randomBytes(rng, size)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// resCanDrop reports whether the file system under path drops pages on
// request (tmpfs does not), saying why not when it cannot.
func resCanDrop(t *testing.T, path string) (bool, string) {
	t.Helper()
	if err := kvik.DropFilePageCache(path, 0, 0); err != nil {
		return false, err.Error()
	}
	res, total, err := kvik.PageCacheInfo(path, 0, 0)
	if err != nil {
		return false, err.Error()
	}
	if res*10 > total {
		return false, "the file system keeps the pages of a dropped file (tmpfs?)"
	}
	return true, ""
}

// resWarm reads [off, off+n) of path with buffered I/O, caching it.
func resWarm(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && n > 0 {
		if _, serr := f.Stat(); serr != nil {
			t.Fatal(err)
		}
	}
}

// resCounter counts the bytes read through each descriptor of one handle.
type resCounter struct {
	mu             sync.Mutex
	direct, buffer int64
}

// resCount replaces the system calls (posix.SetSyscalls) so that preads on f's descriptors are counted.
func resCount(t *testing.T, f *kvik.FileHandle) *resCounter {
	c := &resCounter{}
	saved := posix.CurrentSyscalls()
	fd, dfd := f.Fd(), f.FdDirect()
	next := saved
	next.Pread = func(x int, p []byte, off int64) (int, error) {
		n, err := saved.Pread(x, p, off)
		c.mu.Lock()
		switch x {
		case dfd:
			c.direct += int64(max(n, 0))
		case fd:
			c.buffer += int64(max(n, 0))
		}
		c.mu.Unlock()
		return n, err
	}
	posix.SetSyscalls(next)
	t.Cleanup(func() { posix.SetSyscalls(saved) })
	return c
}

func (c *resCounter) take() (direct, buffered int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	direct, buffered = c.direct, c.buffer
	c.direct, c.buffer = 0, 0
	return direct, buffered
}

// TestReadPolicyPartlyCachedProperty reads random ranges under every
// policy while random ranges of the file are dropped from and loaded into
// the page cache, and compares every byte with the file's contents.
func TestReadPolicyPartlyCachedProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 31))
	size := 20<<20 + rng.IntN(1<<20)
	path, data := resFile(t, rng, size)
	canDrop, why := resCanDrop(t, path)
	if !canDrop {
		t.Logf("page cache cannot be dropped here (%s): residency is not varied, bytes are still compared", why)
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	policies := []kvik.ReadPolicy{kvik.ReadPolicyAuto, kvik.ReadPolicyBuffered, kvik.ReadPolicyDirect}
	for i := range 60 {
		// Change what is cached: drop some ranges, load others.
		for range 1 + rng.IntN(4) {
			off := rng.Int64N(int64(size))
			n := rng.Int64N(8 << 20)
			if rng.IntN(3) == 0 {
				resWarm(t, path, off, int(min(n, int64(size)-off)))
			} else if err := kvik.DropFilePageCache(path, off, n); err != nil {
				t.Fatal(err)
			}
		}
		policy := policies[rng.IntN(len(policies))]
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
			d.AutoDirectIORead, d.DirectIOReadPolicy = false, policy
			d.NumThreads = 1 + rng.IntN(8)
			d.TaskSize = []int{1 << 20, 4 << 20, 3<<20 + 4097, 8 << 20}[rng.IntN(4)]
		})
		if err != nil {
			t.Fatal(err)
		}
		off := rng.Int64N(int64(size))
		if rng.IntN(2) == 0 {
			off &^= 4095
		}
		n := rng.IntN(size - int(off) + 1)
		// An unaligned destination sometimes, for the bounce path.
		shift := rng.IntN(2) * (1 + rng.IntN(4095))
		buf := make([]byte, n+shift)[shift:]
		for j := range buf {
			buf[j] = 0xA5
		}
		got, err := f.ReadAt(buf, off)
		restore()
		if err != nil || got != n {
			t.Fatalf("read %d: policy %v, %d bytes at %d: got %d, %v", i, policy, n, off, got, err)
		}
		if want := data[off : off+int64(n)]; !bytes.Equal(buf, want) {
			for j := range want {
				if buf[j] != want[j] {
					t.Fatalf("read %d: policy %v, %d bytes at %d: byte %d differs (got %#x, want %#x)", i, policy, n, off, j, buf[j], want[j])
				}
			}
		}
	}
}

// TestReadPolicyRoutesByResidency checks where the bytes come from: a cold
// file through O_DIRECT, a cached one through the page cache, a
// half-cached one half and half, as ReadPlan predicts.
func TestReadPolicyRoutesByResidency(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	const stripe = 2 << 20
	size := 16 * stripe
	path, data := resFile(t, rng, size)
	canDrop, why := resCanDrop(t, path)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !canDrop || !f.IsDirectIOSupported() {
		t.Skipf("residency routing needs a file system that drops pages and allows O_DIRECT (drop: %v %s; O_DIRECT: %v)", canDrop, why, f.IsDirectIOSupported())
	}
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy = false, kvik.ReadPolicyAuto
		d.NumThreads, d.TaskSize = 4, stripe
	})
	count := resCount(t, f)
	read := func(what string) (direct, buffered int64) {
		t.Helper()
		buf := make([]byte, size)
		if n, err := f.ReadAt(buf, 0); err != nil || n != size || !bytes.Equal(buf, data) {
			t.Fatalf("%s: read %d, %v; bytes equal: %v", what, n, err, bytes.Equal(buf, data))
		}
		return count.take()
	}

	// Cold: everything through O_DIRECT, and the page cache stays empty.
	if err := kvik.DropFilePageCache(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	plan, err := f.ReadPlan(0, 0)
	if err != nil || plan.Policy != kvik.ReadPolicyAuto || plan.DirectBytes != int64(size) || plan.ColdTasks != size/stripe {
		t.Fatalf("cold plan: %+v, %v", plan, err)
	}
	if direct, buffered := read("cold"); direct != int64(size) || buffered != 0 {
		t.Fatalf("cold file: %d bytes direct, %d buffered; want all direct", direct, buffered)
	}
	if res, _, _ := kvik.PageCacheInfo(path, 0, 0); res*10 > size/4096 {
		t.Fatalf("cold read left %d pages cached: it was not direct", res)
	}

	// Warm: everything through the page cache.
	resWarm(t, path, 0, size)
	if plan, err := f.ReadPlan(0, 0); err != nil || plan.BufferedBytes != int64(size) || plan.ResidentTasks != size/stripe {
		t.Fatalf("warm plan: %+v, %v", plan, err)
	}
	if direct, buffered := read("warm"); direct != 0 || buffered != int64(size) {
		t.Fatalf("warm file: %d bytes direct, %d buffered; want all buffered", direct, buffered)
	}

	// Half: odd stripes dropped. Readahead of the cached stripes may load
	// the start of the next one, so allow a few pages either way.
	for off := int64(stripe); off < int64(size); off += 2 * stripe {
		if err := kvik.DropFilePageCache(path, off, stripe); err != nil {
			t.Fatal(err)
		}
	}
	plan, err = f.ReadPlan(0, 0)
	if err != nil || abs(plan.DirectBytes-int64(size/2)) > int64(size/16) {
		t.Fatalf("half plan: %+v, %v; want about %d bytes direct", plan, err, size/2)
	}
	if direct, buffered := read("half"); abs(direct-int64(size/2)) > int64(size/8) || direct+buffered != int64(size) {
		t.Fatalf("half-cached file: %d bytes direct, %d buffered; want about half each", direct, buffered)
	}

	// The explicit policies ignore residency.
	setDefaults(t, func(d *kvik.Defaults) { d.DirectIOReadPolicy = kvik.ReadPolicyBuffered })
	if direct, _ := read("buffered policy"); direct != 0 {
		t.Fatalf("buffered policy read %d bytes directly", direct)
	}
	resWarm(t, path, 0, size)
	setDefaults(t, func(d *kvik.Defaults) { d.DirectIOReadPolicy = kvik.ReadPolicyDirect })
	if direct, _ := read("direct policy"); direct != int64(size) {
		t.Fatalf("direct policy on a cached file read %d of %d bytes directly", direct, size)
	}
	setDefaults(t, func(d *kvik.Defaults) { d.DirectIOReadPolicy, d.AutoDirectIORead = kvik.ReadPolicyBuffered, true })
	if direct, _ := read("AutoDirectIORead"); direct != int64(size) {
		t.Fatalf("AutoDirectIORead on a cached file read %d of %d bytes directly", direct, size)
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestReadPlanErrors checks ReadPlan on a closed handle and its policies.
func TestReadPlanErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	path, _ := resFile(t, rng, 3<<20+5)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy, d.TaskSize = false, kvik.ReadPolicyBuffered, 1<<20
	})
	if p, err := f.ReadPlan(0, 0); err != nil || p.DirectBytes != 0 || p.BufferedBytes != 3<<20+5 || p.TotalPages != 769 {
		t.Fatalf("buffered plan: %+v, %v", p, err)
	}
	setDefaults(t, func(d *kvik.Defaults) { d.DirectIOReadPolicy = kvik.ReadPolicyDirect })
	want := int64(0)
	if f.IsDirectIOSupported() {
		want = 3 << 20 // the last 5 bytes are an unaligned tail
	}
	if p, err := f.ReadPlan(0, 0); err != nil || p.DirectBytes != want || p.DirectBytes+p.BufferedBytes != 3<<20+5 {
		t.Fatalf("direct plan: %+v, %v", p, err)
	}
	if p, err := f.ReadPlan(-1, 0); err == nil {
		t.Fatalf("negative offset: %+v", p)
	}
	f.Close()
	if _, err := f.ReadPlan(0, 0); err == nil {
		t.Fatal("ReadPlan on a closed handle succeeded")
	}
}

// TestDirectReadSplitError reads with one worker, where a direct read is
// split into concurrent requests, and fails the third request: the read
// reports the error and exactly the bytes before it.
func TestDirectReadSplitError(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 12))
	const size = 8 << 20
	path, data := resFile(t, rng, size)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.IsDirectIOSupported() {
		t.Skip("O_DIRECT is not supported here")
	}
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy = false, kvik.ReadPolicyDirect
		d.NumThreads, d.TaskSize = 1, size
	})
	saved := posix.CurrentSyscalls()
	t.Cleanup(func() { posix.SetSyscalls(saved) })
	dfd := f.FdDirect()
	var mu sync.Mutex
	offsets := map[int64]bool{}
	next := saved
	next.Pread = func(fd int, p []byte, off int64) (int, error) {
		if fd == dfd {
			mu.Lock()
			offsets[off] = true
			mu.Unlock()
			if off >= 4<<20 && off < 6<<20 {
				return 0, syscall.EIO
			}
		}
		return saved.Pread(fd, p, off)
	}
	posix.SetSyscalls(next)
	for _, shift := range []int{0, 512} { // aligned, and through the bounce buffer
		buf := make([]byte, size+shift)[shift:]
		n, err := f.ReadAt(buf, 0)
		if !errors.Is(err, syscall.EIO) || n != 4<<20 {
			t.Fatalf("shift %d: ReadAt = %d, %v; want %d bytes and EIO", shift, n, err, 4<<20)
		}
		if !bytes.Equal(buf[:n], data[:n]) {
			t.Fatalf("shift %d: the bytes before the error differ", shift)
		}
	}
	// The read was split: requests started at the four 2 MiB pieces.
	for _, off := range []int64{0, 2 << 20, 4 << 20, 6 << 20} {
		if !offsets[off] {
			t.Fatalf("no direct request at %d (requests at %v): the read was not split", off, offsets)
		}
	}
}

// TestReadPolicyPartlyCachedDevice is the property test for device memory
// on the POSIX path, whose storage reads follow the same policy.
func TestReadPolicyPartlyCachedDevice(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(17, 71))
	size := 12<<20 + rng.IntN(1<<20)
	path := filepath.Join(testDir(t), "res.bin")
	data := randomBytes(rng, size)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, why := resCanDrop(t, path); !ok {
		t.Logf("page cache cannot be dropped here (%s): residency is not varied, bytes are still compared", why)
	}
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dev := devAlloc(t, ctx, size)
	policies := []kvik.ReadPolicy{kvik.ReadPolicyAuto, kvik.ReadPolicyBuffered, kvik.ReadPolicyDirect}
	for i := range 30 {
		for range 1 + rng.IntN(3) {
			off := rng.Int64N(int64(size))
			n := rng.Int64N(6 << 20)
			if rng.IntN(3) == 0 {
				resWarm(t, path, off, int(min(n, int64(size)-off)))
			} else if err := kvik.DropFilePageCache(path, off, n); err != nil {
				t.Fatal(err)
			}
		}
		policy := policies[rng.IntN(len(policies))]
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
			d.AutoDirectIORead, d.DirectIOReadPolicy = false, policy
			d.NumThreads = []int{1, 2, 16}[rng.IntN(3)]
			d.TaskSize = []int{1 << 20, 4 << 20, 3<<20 + 4097}[rng.IntN(3)]
		})
		if err != nil {
			t.Fatal(err)
		}
		off := rng.Int64N(int64(size)) &^ int64(rng.IntN(2)*4095)
		n := rng.IntN(size - int(off) + 1)
		devOff := int64(rng.IntN(size - n + 1))
		toDevice(t, ctx, dev.Ptr(), bytes.Repeat([]byte{0x5A}, size))
		got, err := f.ReadDevice(dev.Ptr(), n, off, devOff)
		restore()
		if err != nil || got != n {
			t.Fatalf("read %d: policy %v, %d bytes at %d: got %d, %v", i, policy, n, off, got, err)
		}
		back := fromDevice(t, ctx, dev.Ptr()+cuda.DevicePtr(devOff), n)
		if !bytes.Equal(back, data[off:off+int64(n)]) {
			t.Fatalf("read %d: policy %v, %d bytes at %d into device offset %d: bytes differ", i, policy, n, off, devOff)
		}
	}
}
