package kvik_test

// Over-read (KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD): reads that go to the
// drive read their unaligned head and tail with O_DIRECT too, through a
// staging buffer. These tests replace the system calls (posix.SetSyscalls) and change settings: they
// must not run in parallel.

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/kvikgo/kvik"
)

// TestOverreadMatchesReadAt reads random unaligned ranges, some reaching
// or passing the end of the file (whose last page is short), with
// over-read on, under the direct and auto policies, with random task
// sizes; every byte, count and end-of-file error must match os.File's.
// Under the direct policy no byte may come through the buffered
// descriptor.
func TestOverreadMatchesReadAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 43))
	size := 6<<20 + 1234 // a short last page
	ref, f, data := directFile(t, rng, size)
	count := resCount(t, f)
	for i := range 300 {
		policy := []kvik.ReadPolicy{kvik.ReadPolicyDirect, kvik.ReadPolicyAuto}[i%2]
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
			d.AutoDirectIORead, d.DirectIOReadPolicy, d.AutoDirectIOReadOverread = false, policy, true
			d.NumThreads = 1 + rng.IntN(6)
			d.TaskSize = []int{1 << 20, 64<<10 + 123, 3<<20 + 4097}[rng.IntN(3)]
		})
		if err != nil {
			t.Fatal(err)
		}
		var off int64
		var n int
		switch rng.IntN(4) {
		case 0: // small, anywhere, maybe straddling a page boundary
			off, n = rng.Int64N(int64(size)), 1+rng.IntN(9000)
		case 1: // to the end of the file, or past it
			off = rng.Int64N(int64(size))
			n = int(int64(size)-off) + rng.IntN(3)*rng.IntN(5000)
		case 2: // past the end
			off, n = int64(size)+rng.Int64N(10000), 1+rng.IntN(5000)
		default: // large, unaligned
			off, n = rng.Int64N(int64(size)/2), 1+rng.IntN(3<<20)
		}
		if i%7 == 0 {
			if err := kvik.DropFilePageCache(f.Name(), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		count.take()
		got := make([]byte, n)
		gn, gerr := f.ReadAt(got, off)
		want := make([]byte, n)
		wn, werr := ref.ReadAt(want, off)
		direct, buffered := count.take()
		restore()
		if gn != wn || (gerr == nil) != (werr == nil) || gerr != nil && !errors.Is(gerr, io.EOF) {
			t.Fatalf("%v: ReadAt(%d bytes at %d) = %d, %v; os.File: %d, %v", policy, n, off, gn, gerr, wn, werr)
		}
		if !bytes.Equal(got[:gn], want[:wn]) {
			t.Fatalf("%v: ReadAt(%d bytes at %d): bytes differ", policy, n, off)
		}
		if policy == kvik.ReadPolicyDirect && buffered != 0 {
			t.Fatalf("direct: %d of %d bytes at %d: %d bytes read buffered, %d direct", gn, n, off, buffered, direct)
		}
	}
	if n, err := f.ReadAt(make([]byte, 10), int64(len(data))); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v", n, err)
	}
}

// TestOverreadOff checks that with over-read off (the default) the head
// and tail of a direct read stay buffered, as KvikIO does, and that a
// cached task stays buffered with over-read on.
func TestOverreadOff(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 45))
	_, f, data := directFile(t, rng, 3<<20)
	count := resCount(t, f)
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy, d.AutoDirectIOReadOverread = false, kvik.ReadPolicyDirect, false
		d.TaskSize = 8 << 20
	})
	got := make([]byte, 2<<20)
	off := int64(1000)
	if n, err := f.ReadAt(got, off); n != len(got) || err != nil || !bytes.Equal(got, data[off:off+int64(n)]) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	page := int64(os.Getpagesize())
	head, tail := page-off, (off+int64(len(got)))%page
	if _, buffered := count.take(); buffered != head+tail {
		t.Fatalf("over-read off: %d bytes buffered, want head %d + tail %d", buffered, head, tail)
	}
	// Auto policy, file cached: buffered whether or not over-read is on.
	setDefaults(t, func(d *kvik.Defaults) { d.DirectIOReadPolicy, d.AutoDirectIOReadOverread = kvik.ReadPolicyAuto, true })
	resWarm(t, f.Name(), 0, len(data))
	if n, err := f.ReadAt(got, off); n != len(got) || err != nil || !bytes.Equal(got, data[off:off+int64(n)]) {
		t.Fatalf("ReadAt: %d, %v", n, err)
	}
	if direct, buffered := count.take(); direct != 0 || buffered != int64(len(got)) {
		t.Fatalf("cached, over-read on: %d direct, %d buffered", direct, buffered)
	}
}

// TestOverreadRefused makes the O_DIRECT descriptor refuse reads (EINVAL,
// as some file systems do for some alignments): over-read falls back to
// buffered reads and the bytes still match.
func TestOverreadRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 47))
	_, f, data := directFile(t, rng, 1<<20+77)
	setDefaults(t, func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy, d.AutoDirectIOReadOverread = false, kvik.ReadPolicyDirect, true
	})
	refuseDirect(t, f)
	for range 50 {
		off := rng.Int64N(int64(len(data)))
		n := 1 + rng.IntN(10000)
		got := make([]byte, n)
		gn, err := f.ReadAt(got, off)
		wn := min(n, len(data)-int(off))
		if gn != wn || (gn < n) != (err == io.EOF) || gn == n && err != nil || !bytes.Equal(got[:gn], data[off:off+int64(gn)]) {
			t.Fatalf("ReadAt(%d at %d) with O_DIRECT refused: %d, %v", n, off, gn, err)
		}
	}
}

// TestDeviceOverread (GPU) reads random unaligned ranges into device
// memory through the POSIX path with over-read on and the direct policy,
// and checks every byte against os.File and that no byte came through the
// buffered descriptor.
func TestDeviceOverread(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(48, 49))
	size := 9<<20 + 321
	path, data := resFile(t, rng, size)
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.IsDirectIOSupported() {
		t.Skipf("over-read needs O_DIRECT, which the file system under %s refuses", path)
	}
	count := resCount(t, f)
	dev := devAlloc(t, ctx, size)
	for i := range 60 {
		setDefaults(t, func(d *kvik.Defaults) {
			d.AutoDirectIORead, d.DirectIOReadPolicy, d.AutoDirectIOReadOverread = false, kvik.ReadPolicyDirect, true
			d.NumThreads = 1 + rng.IntN(8)
			d.TaskSize = []int{1 << 20, 4 << 20, 2<<20 + 4097}[rng.IntN(3)]
			d.GDSThreshold = []int{0, 16 << 10}[rng.IntN(2)]
		})
		off := rng.Int64N(int64(size))
		n := 1 + rng.IntN(int(min(int64(size)-off, 5<<20)))
		if i%3 == 0 {
			n = int(int64(size) - off) // to the end: the short last page
		}
		count.take()
		if got, err := f.ReadDevice(dev.Ptr(), n, off, 0); got != n || err != nil {
			t.Fatalf("ReadDevice(%d at %d) = %d, %v", n, off, got, err)
		}
		if _, buffered := count.take(); buffered != 0 {
			t.Fatalf("ReadDevice(%d at %d): %d bytes read buffered", n, off, buffered)
		}
		if !bytes.Equal(fromDevice(t, ctx, dev.Ptr(), n), data[off:off+int64(n)]) {
			t.Fatalf("ReadDevice(%d at %d): bytes differ", n, off)
		}
	}
}
