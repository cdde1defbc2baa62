package kvik_test

// Leaks: thousands of open/read/write/close cycles, failing opens and
// cancelled operations included, must leave the descriptor count, the
// goroutines and the bounce-buffer bytes where they were.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
)

// relOpenFds counts this process's open descriptors.
func relOpenFds(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list /proc/self/fd: %v", err)
	}
	return len(ents)
}

// relCheckFdClosed fails if fd is still open.
func relCheckFdClosed(t testing.TB, fd int, what string) {
	t.Helper()
	if fd < 0 {
		return
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("%s: descriptor %d still open after Close (F_GETFD: %v)", what, fd, err)
	}
}

// TestOpenIOCloseCyclesDoNotLeak runs 10,000 cycles (2,000 with -short) of
// open, I/O and close, mixing reads (aligned and bounced O_DIRECT,
// buffered), writes, cancelled operations, double closes and failing
// opens. Afterwards the process must hold the same descriptors (within
// 2, for the runtime's own), no extra goroutine, and no more bounce-buffer
// memory than one buffer per worker plus one for the calling goroutine;
// with the idle buffers freed, none.
func TestOpenIOCloseCyclesDoNotLeak(t *testing.T) {
	cycles := 10000
	if testing.Short() {
		cycles = 2000
	}
	const threads, taskSize, bounce = 4, 64 << 10, 64 << 10
	setDefaults(t, func(d *kvik.Defaults) {
		d.NumThreads, d.TaskSize, d.BounceBufferSize = threads, taskSize, bounce
		d.AutoDirectIORead, d.AutoDirectIOWrite = true, true
	})
	rng := rand.New(rand.NewPCG(relTestSeed(t), 70))
	dir := t.TempDir()
	size := 256<<10 + 99
	path := filepath.Join(dir, "cycle")
	data := randomBytes(rng, size)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	modes := relCompatModes()
	cuFile := kvik.ProbeCuFile().Usable

	cycle := func(i int) {
		what := func(s string) string { return fmt.Sprintf("%s in cycle %d", s, i) }
		switch i % 10 {
		case 7: // failing opens
			if _, err := kvik.Open(filepath.Join(dir, "missing"), "r", 0); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open of a missing file: %v", err)
			}
			if _, err := kvik.Open(path, "rw", 0); !errors.Is(err, kvik.ErrInvalidArgument) {
				t.Fatalf("open with bad flags: %v", err)
			}
			if _, err := kvik.OpenFile(path, os.O_RDWR|os.O_APPEND, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
				t.Fatalf("open with O_APPEND: %v", err)
			}
			if _, err := kvik.Open(dir, "w", 0); err == nil {
				t.Fatal("opening a directory for writing succeeded")
			}
			if !cuFile {
				if _, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOff)); !errors.Is(err, kvik.ErrCuFileRequired) {
					t.Fatalf("CompatOff without cuFile: %v", err)
				}
			}
			return
		case 8: // open and close without I/O, twice
			f, err := kvik.Open(path, "r", 0)
			if err != nil {
				t.Fatal(err)
			}
			fd, dfd := f.Fd(), f.FdDirect()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			relCheckFdClosed(t, fd, what("buffered fd"))
			relCheckFdClosed(t, dfd, what("O_DIRECT fd"))
			return
		}
		flags := "r"
		if i%10 == 3 {
			flags = "r+"
		}
		f, err := kvik.Open(path, flags, 0, kvik.WithCompatMode(modes[i%len(modes)]))
		if err != nil {
			t.Fatal(err)
		}
		fd, dfd := f.Fd(), f.FdDirect()
		off := rng.IntN(size)
		n := rng.IntN(size-off) + 1
		switch i % 10 {
		case 3: // write back the same bytes, so the file stays as it is
			if got, err := f.PWrite(context.Background(), data[off:off+n], int64(off)).Get(); got != n || err != nil {
				t.Fatalf("PWrite: %d, %v", got, err)
			}
		case 5: // an operation cancelled before it starts
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := f.PRead(ctx, make([]byte, n), int64(off)).Get(); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled PRead: %v", err)
			}
		default: // reads: page-aligned buffer (direct), unaligned (bounced)
			buf := relNewGuarded(rng, n, (i%2)*(1+rng.IntN(100)))
			if got, err := f.ReadAt(buf.buf(), int64(off)); got != n || err != nil || !bytes.Equal(buf.buf(), data[off:off+n]) {
				t.Fatalf("ReadAt of %d bytes at %d: %d, %v", n, off, got, err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			relCheckFdClosed(t, fd, what("buffered fd"))
			relCheckFdClosed(t, dfd, what("O_DIRECT fd"))
		}
	}

	for i := range 50 { // warm up: pools, bounce buffers, runtime descriptors
		cycle(i)
	}
	fds0 := relOpenFds(t)
	goroutines0 := runtime.NumGoroutine()
	ignore := goleak.IgnoreCurrent()
	bounce0, pinned0 := kvik.BounceBufferBytes()

	for i := range cycles {
		cycle(i)
	}

	goleak.VerifyNone(t, ignore)
	fds1 := relOpenFds(t)
	bounce1, pinned1 := kvik.BounceBufferBytes()
	t.Logf("%d cycles: fds %d -> %d, goroutines %d -> %d, bounce bytes %d -> %d (pinned %d -> %d)",
		cycles, fds0, fds1, goroutines0, runtime.NumGoroutine(), bounce0, bounce1, pinned0, pinned1)
	if fds1 > fds0+2 {
		t.Fatalf("descriptors: %d before, %d after %d cycles", fds0, fds1, cycles)
	}
	// Bounce buffers are pooled: at most one per worker plus one for an
	// operation run in the calling goroutine, whatever the cycle count.
	// (Pinned buffers belong to device I/O, which this test does not do:
	// their bytes must not move.)
	limit := int64((threads + 1) * bounce)
	if bounce1-pinned1 > limit || pinned1 != pinned0 {
		t.Fatalf("bounce buffers: %d bytes (%d pinned) after %d cycles, bound %d (before: %d, %d pinned)",
			bounce1, pinned1, cycles, limit, bounce0, pinned0)
	}
	kvik.FreeBounceBuffers()
	if total, pinned := kvik.BounceBufferBytes(); total != 0 || pinned != 0 {
		t.Fatalf("after FreeBounceBuffers with no I/O in flight: %d bytes (%d pinned) still held", total, pinned)
	}
}
