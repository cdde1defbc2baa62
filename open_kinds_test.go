package kvik_test

// Opens of every kind of file: a directory, FIFO or socket fails at once
// with ErrNotRegular naming its kind, where a FIFO's open used to wait for
// its other end; regular files, and the device nodes each open takes,
// open as before.

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/fskinds"
)

// kindNames are the names errors give the kinds of fskinds.
var kindNames = map[string]string{
	"regular": "a regular file", "dir": "a directory", "fifo": "a FIFO", "socket": "a socket",
	"char-device": "a character device", "block-device": "a block device",
}

// kindPath is a path to open and the kind of file it leads to.
type kindPath struct{ kind, path string }

// kindPaths makes a path of every kind in a new directory, and a link to
// each; /dev/null stands for character devices, and /dev/loop0, where
// present, for block devices. fskinds' block device node is left out: no
// driver answers its numbers, and opening it may have the kernel make
// the loop device.
func kindPaths(t *testing.T) []kindPath {
	var ps []kindPath
	for _, d := range fskinds.Make(t, t.TempDir(), []byte("regular file")) {
		kind := strings.TrimPrefix(d.Kind, "link-to-")
		if kind == "chain-to-regular" {
			kind = "regular"
		}
		if _, ok := kindNames[kind]; ok && kind != "block-device" {
			ps = append(ps, kindPath{kind, d.Path})
		}
	}
	ps = append(ps, kindPath{"char-device", "/dev/null"})
	if fi, err := os.Stat("/dev/loop0"); err == nil && fi.Mode().Type() == fs.ModeDevice && unix.Access("/dev/loop0", unix.R_OK) == nil {
		ps = append(ps, kindPath{"block-device", "/dev/loop0"})
	} else {
		t.Logf("no block device to open: /dev/loop0: %v (needs root)", err)
	}
	return ps
}

// promptly returns what open returns; an open that has not returned
// within five seconds (a FIFO's, waiting for its other end) fails the
// test, and ok is false.
func promptly(t *testing.T, what string, open func() error) (err error, ok bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- open() }()
	select {
	case err := <-done:
		return err, true
	case <-time.After(5 * time.Second):
		t.Errorf("%s: did not return within 5s", what)
		return nil, false
	}
}

// opener is one way to open a path, and the kinds of file it takes.
type opener struct {
	name  string
	open  func(path string) error
	takes func(kind string) bool
	touch bool // opens to write, or drops cached pages: not tried on block devices
}

// openers are the ways kvik opens a user's path.
func openers() []opener {
	fileOrDevice := func(k string) bool { return k == "regular" || strings.HasSuffix(k, "-device") }
	fileOrBlock := func(k string) bool { return k == "regular" || k == "block-device" }
	handle := func(flags string) func(string) error {
		return func(p string) error {
			f, err := kvik.Open(p, flags, 0)
			if err == nil {
				err = f.Close()
			}
			return err
		}
	}
	handleFlag := func(flag int) func(string) error {
		return func(p string) error {
			f, err := kvik.OpenFile(p, flag, 0)
			if err == nil {
				err = f.Close()
			}
			return err
		}
	}
	return []opener{
		{"Open r", handle("r"), fileOrDevice, false},
		{"OpenFile O_RDONLY", handleFlag(os.O_RDONLY), fileOrDevice, false},
		{"Open r+", handle("r+"), fileOrDevice, true},
		{"Open w", handle("w"), fileOrDevice, true},
		{"OpenFile O_WRONLY|O_CREATE", handleFlag(os.O_WRONLY | os.O_CREATE), fileOrDevice, true},
		{"OpenMmap", func(p string) error {
			h, err := kvik.OpenMmap(p, "r")
			if err == nil {
				err = h.Close()
			}
			return err
		}, fileOrBlock, false},
		{"PageCacheInfo", func(p string) error { _, _, err := kvik.PageCacheInfo(p, 0, 0); return err }, fileOrDevice, false},
		{"DropFilePageCache", func(p string) error { return kvik.DropFilePageCache(p, 0, 0) }, fileOrDevice, true},
	}
}

// TestOpenKinds opens a path of every kind each way kvik opens a user's
// path: a directory, FIFO or socket (or a link to one) fails at once with
// ErrNotRegular in an *fs.PathError naming the path and the kind, as
// does a character device for OpenMmap; a regular file opens, and so do
// device nodes where the open takes them (a device's later calls, such
// as the ioctls of a node no driver answers, may fail, but not with
// ErrNotRegular).
func TestOpenKinds(t *testing.T) {
	paths := kindPaths(t)
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			for _, p := range paths {
				if o.touch && p.kind == "block-device" {
					continue
				}
				what := o.name + " of " + p.path + " (" + p.kind + ")"
				err, ok := promptly(t, what, func() error { return o.open(p.path) })
				switch {
				case !ok:
				case o.takes(p.kind) && p.kind == "regular":
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
				case o.takes(p.kind):
					if errors.Is(err, kvik.ErrNotRegular) {
						t.Errorf("%s: %v, a device it takes", what, err)
					} else if err != nil {
						t.Logf("%s: %v", what, err)
					}
				default:
					checkNotRegular(t, what, err, p.path, kindNames[p.kind])
				}
			}
		})
	}
}

// checkNotRegular fails unless err is an *fs.PathError for path that
// matches ErrNotRegular and names kind.
func checkNotRegular(t *testing.T, what string, err error, path, kind string) {
	t.Helper()
	var pe *fs.PathError
	switch {
	case !errors.Is(err, kvik.ErrNotRegular):
		t.Errorf("%s: %v, want ErrNotRegular", what, err)
	case !errors.As(err, &pe) || pe.Path != path:
		t.Errorf("%s: %v, want an *fs.PathError for the path", what, err)
	case !strings.Contains(err.Error(), kind):
		t.Errorf("%s: %q does not say %q", what, err, kind)
	}
}

// TestOpenFIFOWithWriter opens a FIFO that has a writer, and one with a
// reader for writing: the opens would not have blocked, and are refused
// all the same.
func TestOpenFIFOWithWriter(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0) // both ends
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(other)
	for _, flags := range []string{"r", "w", "r+"} {
		err, ok := promptly(t, "Open "+flags, func() error {
			f, err := kvik.Open(p, flags, 0)
			if err == nil {
				f.Close()
			}
			return err
		})
		if ok {
			checkNotRegular(t, "Open "+flags, err, p, "a FIFO")
		}
	}
}

// TestOpenRegularReadsAndWrites opens regular files as Open always has:
// reads at a random unaligned offset give the file's bytes, through
// descriptors that are blocking again (O_DIRECT kept on the second);
// "w+" creates and truncates, O_EXCL refuses an existing file.
func TestOpenRegularReadsAndWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	dir := t.TempDir()
	p := filepath.Join(dir, "data")
	data := make([]byte, 3<<20+rng.IntN(1<<20))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(p, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkBlocking(t, "Fd", f.Fd(), false)
	if fd := f.FdDirect(); fd >= 0 {
		checkBlocking(t, "FdDirect", fd, true)
	} else {
		t.Logf("no O_DIRECT descriptor here")
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	off := 1 + rng.IntN(1<<20)
	got := make([]byte, len(want)-off-rng.IntN(4096))
	if n, err := f.ReadAt(got, int64(off)); n != len(got) || err != nil || !bytes.Equal(got, want[off:off+len(got)]) {
		t.Fatalf("ReadAt %d bytes at %d: %d, %v; bytes equal: %v", len(got), off, n, err, bytes.Equal(got[:n], want[off:off+n]))
	}

	w, err := kvik.Open(p, "w+", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.WriteAt(data[:12345], 7); n != 12345 || err != nil {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, append(make([]byte, 7), data[:12345]...)) {
		t.Fatalf("after w+ and WriteAt the file has %d bytes, %v; want 7 zeros and 12345 written", len(got), err)
	}
	if _, err := kvik.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL of an existing file: %v, want fs.ErrExist", err)
	}
}

// checkBlocking fails if fd's open file has O_NONBLOCK, or lacks
// O_DIRECT when direct says it has it.
func checkBlocking(t *testing.T, name string, fd int, direct bool) {
	t.Helper()
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.O_NONBLOCK != 0 {
		t.Errorf("%s has O_NONBLOCK (flags %#o)", name, fl)
	}
	if direct && fl&unix.O_DIRECT == 0 {
		t.Errorf("%s lost O_DIRECT (flags %#o)", name, fl)
	}
}

// blockDevice returns a loop device over random bytes (a multiple of 512,
// 1-4 MiB) and the bytes; it skips t where none can be attached.
func blockDevice(t *testing.T, seed uint64) (string, []byte) {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	data := make([]byte, 512*(2048+rng.IntN(6144)))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	return fskinds.LoopDevice(t, t.TempDir(), data), data
}

// TestBlockDeviceSize: a FileHandle and an MmapHandle of a block device
// have the device's size (its stat says 0: ReadFileToDevice read
// nothing), as do its page-cache count and read plan, and read its bytes
// at an unaligned offset.
func TestBlockDeviceSize(t *testing.T) {
	dev, data := blockDevice(t, 91)
	f, err := kvik.Open(dev, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.Size(); err != nil || n != int64(len(data)) {
		t.Fatalf("FileHandle.Size of %s: %d, %v; want %d", dev, n, err, len(data))
	}
	off, n := int64(len(data)/3+7), len(data)/2-11
	got := make([]byte, n)
	if m, err := f.PRead(context.Background(), got, off).Get(); err != nil || m != n || !bytes.Equal(got, data[off:off+int64(n)]) {
		t.Fatalf("PRead of %s: %d bytes, %v (equal %t)", dev, m, err, bytes.Equal(got, data[off:off+int64(n)]))
	}
	pages := (len(data) + os.Getpagesize() - 1) / os.Getpagesize()
	if _, total, err := kvik.PageCacheInfo(dev, 0, 0); err != nil || total != pages {
		t.Errorf("PageCacheInfo of %s: %d pages, %v; want %d", dev, total, err, pages)
	}
	if p, err := f.ReadPlan(0, 0); err != nil || p.TotalPages != pages || p.DirectBytes+p.BufferedBytes != int64(len(data)) {
		t.Errorf("ReadPlan of %s: %+v, %v; want %d pages, %d bytes", dev, p, err, pages, len(data))
	}
	h, err := kvik.OpenMmap(dev, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if n, err := h.Size(); err != nil || n != int64(len(data)) {
		t.Fatalf("MmapHandle.Size of %s: %d, %v; want %d", dev, n, err, len(data))
	}
	clear(got)
	if m, err := h.ReadAt(got, off); err != nil || m != n || !bytes.Equal(got, data[off:off+int64(n)]) {
		t.Fatalf("MmapHandle.ReadAt of %s: %d bytes, %v", dev, m, err)
	}
}

// TestBlockDeviceToGPU: ReadFileToDevice of a block device loads all of
// it.
func TestBlockDeviceToGPU(t *testing.T) {
	needGPU(t)
	dev, data := blockDevice(t, 92)
	buf, err := kvik.ReadFileToDevice(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	if buf.Size() != len(data) || !bytes.Equal(fromDevice(t, buf.Context(), buf.Ptr(), len(data)), data) {
		t.Fatalf("ReadFileToDevice of %s: %d bytes of %d, or different", dev, buf.Size(), len(data))
	}
}

// TestBlockDeviceZeroCopy: a read of a block device's cached bytes on one
// worker takes the zero-copy lane, as a regular file's does (the lane
// checked the range against the stat size, 0 for a device, and so never
// ran), and lands the device's bytes, from unaligned offsets.
func TestBlockDeviceZeroCopy(t *testing.T) {
	ctx := needGPU(t)
	dev, data := blockDevice(t, 93)
	if got, err := os.ReadFile(dev); err != nil || !bytes.Equal(got, data) { // into the page cache
		t.Fatalf("reading %s: %d bytes, %v", dev, len(got), err)
	}
	f, err := kvik.Open(dev, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(93, uint64(time.Now().UnixNano())))
	setDefaults(t, func(d *kvik.Defaults) { d.NumThreads, d.TaskSize = 1, 256<<10+rng.IntN(16)*4096 })
	restore, err := kvik.SetStagingVariant("zc512k+zcmin512k")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	buf := devAlloc(t, ctx, len(data)+4096)
	before, _ := kvik.ZeroCopyLane()
	for range 3 {
		off := int64(rng.IntN(4096))
		n, devOff := len(data)-int(off)-rng.IntN(4096), int64(rng.IntN(4096))
		if got, err := f.ReadDevice(buf.Ptr(), n, off, devOff); got != n || err != nil {
			t.Fatalf("ReadDevice of %s: %d bytes of %d at %d, %v", dev, got, n, off, err)
		}
		if b := fromDevice(t, ctx, buf.Ptr()+cuda.DevicePtr(devOff), n); !bytes.Equal(b, data[off:off+int64(n)]) {
			t.Fatalf("ReadDevice of %s: %d bytes at %d differ", dev, n, off)
		}
	}
	switch moved, refused := kvik.ZeroCopyLane(); {
	case refused:
		t.Logf("the driver refused to register the device's pages: the lane fell back to bounce buffers")
	case moved == before:
		t.Errorf("no zero-copy lane ran for %s", dev)
	default:
		t.Logf("the lane moved %d bytes of %s", moved-before, dev)
	}
}
