package kvik

import (
	"errors"
	"fmt"
	"io/fs"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/blockdev"
	"golang.org/x/sys/unix"
)

// pcWriteRandom writes size random bytes to a new file in dir and returns
// its path.
func pcWriteRandom(t *testing.T, dir string, size int) string {
	t.Helper()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(rand.IntN(255) + 1)
	}
	f, err := os.CreateTemp(dir, "kvik-pagecache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// pcReadAll reads the whole file at path, bringing it into the page cache.
func pcReadAll(t *testing.T, path string) {
	t.Helper()
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
}

// pcInMemoryFS reports whether the file system holding path keeps its
// files in the page cache for good, so that nothing can be dropped.
func pcInMemoryFS(t *testing.T, path string) bool {
	t.Helper()
	typ, err := blockdev.FSType(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is on %s", path, typ)
	return typ == "tmpfs" || typ == "ramfs" || typ == "hugetlbfs"
}

// pcRandomSize returns a random file size of several MB that is not a
// multiple of the page size.
func pcRandomSize() int {
	size := 3<<20 + rand.IntN(5<<20)
	if size%unix.Getpagesize() == 0 {
		size++
	}
	return size
}

// pcExpectTotal counts the pages that [offset, offset+length) spans in a
// file of the given size, as PageCacheInfo documents it.
func pcExpectTotal(size, offset, length, ps int64) int {
	if offset >= size {
		return 0
	}
	end := offset + length
	if length <= 0 || end > size {
		end = size
	}
	first := offset / ps
	last := (end - 1) / ps
	return int(last - first + 1)
}

func pcTestResidentAndDrop(t *testing.T, dir string) {
	size := pcRandomSize()
	path := pcWriteRandom(t, dir, size)
	pcReadAll(t, path)

	ps := unix.Getpagesize()
	resident, total, err := PageCacheInfo(path, 0, 0)
	if err != nil {
		t.Fatalf("PageCacheInfo: %v", err)
	}
	if want := (size + ps - 1) / ps; total != want || resident != total {
		t.Fatalf("PageCacheInfo after reading = (%d, %d), want (%d, %d)", resident, total, want, want)
	}

	if err := DropFilePageCache(path, 0, 0); err != nil {
		t.Fatalf("DropFilePageCache: %v", err)
	}
	after, total2, err := PageCacheInfo(path, 0, 0)
	if err != nil {
		t.Fatalf("PageCacheInfo after drop: %v", err)
	}
	if total2 != total {
		t.Errorf("total after drop = %d, want %d", total2, total)
	}
	t.Logf("size %d: %d of %d pages resident after drop", size, after, total2)
	if !pcInMemoryFS(t, path) && after >= total {
		t.Errorf("resident after DropFilePageCache = %d of %d, want fewer", after, total)
	}
}

func TestPageCacheInfoResidentAndDrop(t *testing.T) {
	pcTestResidentAndDrop(t, t.TempDir())
}

func TestPageCacheInfoTmpfs(t *testing.T) {
	const dir = "/dev/shm"
	if typ, err := blockdev.FSType(dir); err != nil || typ != "tmpfs" {
		t.Skipf("%s is not tmpfs (%q, %v)", dir, typ, err)
	}
	pcTestResidentAndDrop(t, dir)
}

func TestPageCacheInfoRanges(t *testing.T) {
	ps := int64(unix.Getpagesize())
	size := 5*ps + 123
	path := pcWriteRandom(t, t.TempDir(), int(size))
	pcReadAll(t, path)

	tests := []struct {
		offset, length int64
		total          int
	}{
		{0, 0, 6},
		{0, -1, 6},
		{0, 1, 1},
		{0, ps, 1},
		{0, ps + 1, 2},
		{1, ps, 2},
		{ps - 1, 2, 2},
		{ps, ps, 1},
		{ps + 17, 3 * ps, 4},
		{5 * ps, 0, 1},
		{size - 1, 100, 1},
		{size - 1, 0, 1},
		{0, 10 * size, 6},
		{123, 1 << 62, 6},
		{size, 0, 0},
		{size, 1, 0},
		{size + ps, 10, 0},
		{1 << 62, 1 << 62, 0},
	}
	for _, tt := range tests {
		if want := pcExpectTotal(size, tt.offset, tt.length, ps); want != tt.total {
			t.Fatalf("bad test case (%d, %d): total %d, formula says %d", tt.offset, tt.length, tt.total, want)
		}
		resident, total, err := PageCacheInfo(path, tt.offset, tt.length)
		if err != nil {
			t.Errorf("PageCacheInfo(%d, %d): %v", tt.offset, tt.length, err)
			continue
		}
		if total != tt.total || resident != tt.total {
			t.Errorf("PageCacheInfo(%d, %d) = (%d, %d), want (%d, %d)",
				tt.offset, tt.length, resident, total, tt.total, tt.total)
		}
	}

	// Random ranges over a random, unaligned file size.
	size = int64(pcRandomSize())
	path = pcWriteRandom(t, t.TempDir(), int(size))
	pcReadAll(t, path)
	for range 50 {
		offset := rand.Int64N(size + 2*ps)
		length := rand.Int64N(size+2*ps) - ps
		resident, total, err := PageCacheInfo(path, offset, length)
		want := pcExpectTotal(size, offset, length, ps)
		if err != nil || total != want || resident != want {
			t.Errorf("size %d: PageCacheInfo(%d, %d) = (%d, %d, %v), want (%d, %d, nil)",
				size, offset, length, resident, total, err, want, want)
		}
	}
}

func TestPageCacheInfoWindows(t *testing.T) {
	ps := int64(unix.Getpagesize())
	size := pcRandomSize()
	path := pcWriteRandom(t, t.TempDir(), size)
	// Drop the file, then read a slice from its middle, so that resident
	// counts vary along it.
	if err := DropFilePageCache(path, 0, 0); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(make([]byte, size/4), int64(size)/3); err != nil {
		t.Fatal(err)
	}

	ranges := [][2]int64{{0, 0}, {ps + 5, 0}, {7, 10*ps + 3}, {int64(size) / 2, 0}, {int64(size) - 1, 0}}
	type result struct{ resident, total int }
	want := make([]result, len(ranges))
	for i, r := range ranges {
		res, tot, err := PageCacheInfo(path, r[0], r[1])
		if err != nil {
			t.Fatal(err)
		}
		want[i] = result{res, tot}
	}
	t.Logf("%d of %d pages resident", want[0].resident, want[0].total)
	if !pcInMemoryFS(t, path) && (want[0].resident == 0 || want[0].resident == want[0].total) {
		t.Errorf("%d of %d pages resident, want some but not all", want[0].resident, want[0].total)
	}

	old := pageCacheWindow
	t.Cleanup(func() { pageCacheWindow = old })
	for _, w := range []int64{1, ps, 2 * ps, 3*ps + 5, 64 * ps} {
		pageCacheWindow = w
		for i, r := range ranges {
			res, tot, err := PageCacheInfo(path, r[0], r[1])
			if err != nil || (result{res, tot}) != want[i] {
				t.Errorf("window %d: PageCacheInfo(%d, %d) = (%d, %d, %v), want (%d, %d, nil)",
					w, r[0], r[1], res, tot, err, want[i].resident, want[i].total)
			}
		}
	}
}

func TestPageCacheInfoFd(t *testing.T) {
	ps := unix.Getpagesize()
	size := 3*ps + 1
	path := pcWriteRandom(t, t.TempDir(), size)
	pcReadAll(t, path)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resident, total, err := PageCacheInfoFd(int(f.Fd()), 1, 0)
	if err != nil || resident != 4 || total != 4 {
		t.Errorf("PageCacheInfoFd = (%d, %d, %v), want (4, 4, nil)", resident, total, err)
	}
	if err := DropFilePageCacheFd(int(f.Fd()), 0, 0); err != nil {
		t.Errorf("DropFilePageCacheFd: %v", err)
	}

	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, _, err := PageCacheInfoFd(int(w.Fd()), 0, 0); err == nil {
		t.Error("PageCacheInfoFd on a write-only file succeeded, want an error")
	}

	if _, _, err := PageCacheInfoFd(-1, 0, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("PageCacheInfoFd(-1) error = %v, want EBADF", err)
	}
	if err := DropFilePageCacheFd(-1, 0, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("DropFilePageCacheFd(-1) error = %v, want EBADF", err)
	}
}

func TestPageCacheInfoEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 0}, {0, 100}, {5, 0}} {
		resident, total, err := PageCacheInfo(path, r[0], r[1])
		if resident != 0 || total != 0 || err != nil {
			t.Errorf("PageCacheInfo(empty, %d, %d) = (%d, %d, %v), want (0, 0, nil)", r[0], r[1], resident, total, err)
		}
	}
	if err := DropFilePageCache(path, 0, 0); err != nil {
		t.Errorf("DropFilePageCache(empty): %v", err)
	}
}

func TestPageCacheInfoErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, _, err := PageCacheInfo(missing, 0, 0)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Op != "pagecacheinfo" || pe.Path != missing {
		t.Errorf("PageCacheInfo(missing) error = %#v, want *fs.PathError{Op: pagecacheinfo} matching fs.ErrNotExist", err)
	}
	if err := DropFilePageCache(missing, 0, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DropFilePageCache(missing) error = %v, want fs.ErrNotExist", err)
	}

	path := pcWriteRandom(t, t.TempDir(), 10)
	if _, _, err := PageCacheInfo(path, -1, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("PageCacheInfo(offset -1) error = %v, want ErrInvalidArgument", err)
	}
	if err := DropFilePageCache(path, -1, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("DropFilePageCache(offset -1) error = %v, want ErrInvalidArgument", err)
	}
}

func TestDropFilePageCacheRange(t *testing.T) {
	ps := int64(unix.Getpagesize())
	path := pcWriteRandom(t, t.TempDir(), int(8*ps+1))
	for _, r := range [][2]int64{{0, ps}, {ps + 1, 2 * ps}, {4 * ps, 0}, {3 * ps, -1}, {100 * ps, ps}} {
		if err := DropFilePageCache(path, r[0], r[1]); err != nil {
			t.Errorf("DropFilePageCache(%d, %d): %v", r[0], r[1], err)
		}
	}
}

// pcFakeDropPath points pageCacheDropPath at path for the test.
func pcFakeDropPath(t *testing.T, path string) {
	old := pageCacheDropPath
	pageCacheDropPath = path
	t.Cleanup(func() { pageCacheDropPath = old })
}

func TestDropSystemPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drop_caches")
	pcFakeDropPath(t, path)
	for _, tt := range []struct {
		reclaim bool
		want    string
	}{{true, "3"}, {false, "1"}} {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := DropSystemPageCache(tt.reclaim); err != nil {
			t.Fatalf("DropSystemPageCache(%v): %v", tt.reclaim, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("DropSystemPageCache(%v) wrote %q, want %q", tt.reclaim, got, tt.want)
		}
	}
}

func TestDropSystemPageCachePermission(t *testing.T) {
	// A read-only file stops anyone but root; sysfs refuses root too when
	// an attribute has no write permission.
	path := filepath.Join(t.TempDir(), "drop_caches")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		f.Close()
		path = "/sys/kernel/uevent_seqnum"
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil || !errors.Is(err, fs.ErrPermission) {
			if err == nil {
				f.Close()
			}
			t.Skip("no unwritable file found for this user")
		}
	}
	pcFakeDropPath(t, path)

	err := DropSystemPageCache(true)
	if !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("DropSystemPageCache error = %v, want fs.ErrPermission", err)
	}
	t.Log(err)
}

func TestDropSystemPageCacheMissing(t *testing.T) {
	pcFakeDropPath(t, filepath.Join(t.TempDir(), "missing"))
	err := DropSystemPageCache(false)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		t.Errorf("DropSystemPageCache error = %v, want fs.ErrNotExist only", err)
	}
}

func ExamplePageCacheInfo() {
	f, err := os.CreateTemp("", "kvik-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		log.Fatal(err)
	}

	// A file just written is in the page cache.
	resident, total, err := PageCacheInfo(f.Name(), 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("all cached:", resident == total)
	// Output: all cached: true
}

// TestPageCacheCharDevice: a character device has no page cache, so
// PageCacheInfo counts nothing and DropFilePageCache has nothing to drop:
// both succeed, by path and by descriptor (fdatasync(2) of /dev/null
// fails with EINVAL, which the drop took for an error before).
func TestPageCacheCharDevice(t *testing.T) {
	const dev = "/dev/null"
	if st, err := os.Stat(dev); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Skipf("%s is not a character device here (%v)", dev, err)
	}
	if r, n, err := PageCacheInfo(dev, 0, 0); err != nil || r != 0 || n != 0 {
		t.Errorf("PageCacheInfo(%s) = (%d, %d, %v), want (0, 0, nil)", dev, r, n, err)
	}
	if err := DropFilePageCache(dev, 0, 0); err != nil {
		t.Errorf("DropFilePageCache(%s): %v", dev, err)
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := DropFilePageCacheFd(int(f.Fd()), 4096, 1); err != nil {
		t.Errorf("DropFilePageCacheFd(%s): %v", dev, err)
	}
	if err := DropFilePageCacheFd(-1, 0, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("DropFilePageCacheFd(-1) = %v, want EBADF", err)
	}
}

// TestPageCacheFdKinds: the Fd functions refuse what their path functions
// refuse (a pipe's and a directory's descriptors) with ErrNotRegular
// naming the kind, where they used to answer a pipe with no pages and
// a directory's drop with success.
func TestPageCacheFdKinds(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	d, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		f    *os.File
		kind string
	}{{r, "a FIFO"}, {d, "a directory"}} {
		fd := int(c.f.Fd())
		_, _, ierr := PageCacheInfoFd(fd, 0, 0)
		derr := DropFilePageCacheFd(fd, 0, 0)
		for _, err := range []error{ierr, derr} {
			var pe *fs.PathError
			if !errors.Is(err, ErrNotRegular) || !errors.As(err, &pe) || pe.Path != pcFdName(fd) || !strings.Contains(err.Error(), c.kind) {
				t.Errorf("%s: %v, want ErrNotRegular naming %q in a PathError for %q", c.kind, err, c.kind, pcFdName(fd))
			}
		}
	}
}
