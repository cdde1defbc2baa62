package kvik_test

// Concurrency: one handle shared by many goroutines, Close racing with
// operations in flight, pool resizing during I/O, and cancellation that
// must leave no goroutine behind. Run under -race.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
)

// relModelFile creates a file of size random bytes and returns its path and
// a copy of its contents (the model the tests keep in step).
func relModelFile(t *testing.T, rng *rand.Rand, size int) (string, []byte) {
	t.Helper()
	data := randomBytes(rng, size)
	path := filepath.Join(t.TempDir(), "shared")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, append([]byte(nil), data...)
}

// relCheckFile compares the file at path with the model.
func relCheckFile(t *testing.T, path string, model []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		t.Fatalf("file (%d bytes) differs from the model (%d bytes) at byte %d", len(got), len(model), relFirstDiff(got, model))
	}
}

// TestConcurrentSharedHandle has many goroutines share one handle: each
// owns a region (boundaries unaligned) where it writes new data with
// WriteAt, Write or several PWrites in flight at once, and reads back
// with ReadAt, Read or PRead, checking every byte; others read a region
// nobody writes. The file must end equal to the model.
func TestConcurrentSharedHandle(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	seed := relTestSeed(t)
	workers, opsPer := 16, 60
	if testing.Short() {
		workers, opsPer = 8, 25
	}
	for ci, c := range []relPropConfig{
		{threads: 4, taskSize: 4096, bounce: 8192, directRead: true, directWrite: true},
		{threads: 16, taskSize: 10007, bounce: 1, directRead: true, directWrite: false},
		{threads: 2, taskSize: 64 << 10, bounce: 1 << 20, directRead: false, directWrite: true},
		{threads: 8, taskSize: 1 << 20, bounce: 16 << 20, directRead: false, directWrite: false},
	} {
		t.Run(c.String(), func(t *testing.T) {
			setDefaults(t, c.apply)
			rng := rand.New(rand.NewPCG(seed, uint64(ci)))
			region := 96<<10 + 13
			readOnly := 200<<10 + 1
			path, model := relModelFile(t, rng, workers*region+readOnly)
			f, err := kvik.Open(path, "r+", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var wg sync.WaitGroup
			errs := make(chan error, workers+4)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := relRegionWorker(f, model, w*region, region, rand.New(rand.NewPCG(seed, uint64(100+w))), opsPer); err != nil {
						errs <- fmt.Errorf("worker %d: %w", w, err)
					}
				}()
			}
			for r := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, uint64(1000+r)))
					base := workers * region
					for range opsPer {
						off := base + rng.IntN(readOnly)
						n := rng.IntN(readOnly-(off-base)) + 1
						buf := relNewGuarded(rng, n, relRandomShift(rng))
						_, got, err := relKvikRead(f, rng.IntN(3), buf.buf(), int64(off))
						if got != n || err != nil || !bytes.Equal(buf.buf(), model[off:off+n]) {
							errs <- fmt.Errorf("reader %d: %d bytes at %d: (%d, %v), bytes equal %v", r, n, off, got, err, bytes.Equal(buf.buf(), model[off:off+n]))
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if t.Failed() {
				return
			}
			relCheckFile(t, path, model)
		})
	}
}

// relRegionWorker does ops random operations on [base, base+size) of f,
// keeping model[base:base+size] in step; only it touches that part.
func relRegionWorker(f *kvik.FileHandle, model []byte, base, size int, rng *rand.Rand, ops int) error {
	for i := range ops {
		off := base + rng.IntN(size)
		n := rng.IntN(base+size-off) + 1
		switch rng.IntN(3) {
		case 0: // one write
			src := randomBytes(rng, n)
			op, got, err := relKvikWrite(f, rng.IntN(3), src, int64(off))
			if got != n || err != nil {
				return fmt.Errorf("op %d: %s of %d bytes at %d: (%d, %v)", i, op, n, off, got, err)
			}
			copy(model[off:], src)
		case 1: // several PWrites in flight at once, on disjoint pieces
			pieces := rng.IntN(4) + 2
			src := randomBytes(rng, n)
			futs := make([]*kvik.Future, 0, pieces)
			cuts := []int{0}
			for p := 1; p < pieces; p++ {
				cuts = append(cuts, rng.IntN(n+1))
			}
			cuts = append(cuts, n)
			for p := 1; p < len(cuts); p++ {
				cuts[p] = max(cuts[p], cuts[p-1])
			}
			for p := 0; p+1 < len(cuts); p++ {
				futs = append(futs, f.PWrite(context.Background(), src[cuts[p]:cuts[p+1]], int64(off+cuts[p])))
			}
			for p, fut := range futs {
				if got, err := fut.Get(); got != cuts[p+1]-cuts[p] || err != nil {
					return fmt.Errorf("op %d: PWrite piece %d of %d bytes: (%d, %v)", i, p, cuts[p+1]-cuts[p], got, err)
				}
			}
			copy(model[off:], src)
		default:
			buf := relNewGuarded(rng, n, relRandomShift(rng))
			op, got, err := relKvikRead(f, rng.IntN(3), buf.buf(), int64(off))
			if got != n || err != nil {
				return fmt.Errorf("op %d: %s of %d bytes at %d: (%d, %v)", i, op, n, off, got, err)
			}
			if !bytes.Equal(buf.buf(), model[off:off+n]) {
				return fmt.Errorf("op %d: %s of %d bytes at %d: differs from what was written at byte %d", i, op, n, off, relFirstDiff(buf.buf(), model[off:off+n]))
			}
		}
	}
	return nil
}

// TestCloseRacesWithIO closes a handle (twice, from two goroutines) while
// workers run reads and writes on it. Every operation must either complete
// correctly or fail with ErrClosed having done nothing; after Close every
// operation fails with ErrClosed; the file must hold exactly the writes
// that reported success.
func TestCloseRacesWithIO(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	seed := relTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 20))
	rounds := 40
	if testing.Short() {
		rounds = 12
	}
	const workers = 8
	region := 40<<10 + 7
	closedOps := 0
	for round := range rounds {
		c := relRandomConfig(rng)
		c.taskSize = max(c.taskSize, 4096)
		var path string
		var model []byte
		relWithConfig(t, c, func() {
			path, model = relModelFile(t, rng, workers*region)
			f, err := kvik.Open(path, "r+", 0)
			if err != nil {
				t.Fatal(err)
			}
			fds := []int{f.Fd(), f.FdDirect()}
			var done atomic.Int64
			closeAfter := int64(rng.IntN(workers * 6))
			var wg sync.WaitGroup
			errs := make(chan error, workers+2)
			var closed, alive atomic.Int64
			alive.Store(workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer alive.Add(-1)
					n, err := relUntilClosed(f, model, w*region, region, rand.New(rand.NewPCG(seed, uint64(round*100+w))), &done)
					closed.Add(int64(n))
					if err != nil {
						errs <- fmt.Errorf("round %d worker %d: %w", round, w, err)
					}
				}()
			}
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for done.Load() < closeAfter && alive.Load() > 0 {
						runtime.Gosched()
					}
					if err := f.Close(); err != nil {
						errs <- fmt.Errorf("round %d: Close: %v", round, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			closedOps += int(closed.Load())
			// Both descriptors are closed.
			for _, fd := range fds {
				if fd < 0 {
					continue
				}
				if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, syscall.EBADF) {
					t.Fatalf("round %d: descriptor %d still open after Close (%v)", round, fd, err)
				}
			}
		})
		relCheckFile(t, path, model)
	}
	t.Logf("%d rounds; %d operations failed with ErrClosed", rounds, closedOps)
}

// relUntilClosed runs random operations on [base, base+size) until one
// fails; the failure must be ErrClosed with nothing done, and so must the
// next operation. It returns how many operations saw ErrClosed.
func relUntilClosed(f *kvik.FileHandle, model []byte, base, size int, rng *rand.Rand, done *atomic.Int64) (int, error) {
	for i := 0; ; i++ {
		off := base + rng.IntN(size)
		n := rng.IntN(base+size-off) + 1
		var op string
		var got int
		var err error
		var src []byte
		var buf *relGuarded
		write := rng.IntN(2) == 0
		if write {
			src = randomBytes(rng, n)
			op, got, err = relKvikWrite(f, rng.IntN(3), src, int64(off))
		} else {
			buf = relNewGuarded(rng, n, relRandomShift(rng))
			op, got, err = relKvikRead(f, rng.IntN(3), buf.buf(), int64(off))
		}
		if err != nil {
			if !errors.Is(err, kvik.ErrClosed) || got != 0 {
				return 0, fmt.Errorf("op %d: %s of %d bytes at %d: (%d, %v), want success or (0, ErrClosed)", i, op, n, off, got, err)
			}
			// Once closed, always closed: every entry point says so.
			if _, err := f.Size(); !errors.Is(err, kvik.ErrClosed) {
				return 1, fmt.Errorf("Size after ErrClosed: %v", err)
			}
			if n, err := f.PWrite(context.Background(), []byte{1}, int64(base)).Get(); n != 0 || !errors.Is(err, kvik.ErrClosed) {
				return 1, fmt.Errorf("PWrite after ErrClosed: (%d, %v)", n, err)
			}
			if n, err := f.ReadAt(make([]byte, 3), int64(base)); n != 0 || !errors.Is(err, kvik.ErrClosed) {
				return 1, fmt.Errorf("ReadAt after ErrClosed: (%d, %v)", n, err)
			}
			return 1, nil
		}
		if got != n {
			return 0, fmt.Errorf("op %d: %s of %d bytes at %d: n = %d with no error", i, op, n, off, got)
		}
		if write {
			copy(model[off:], src)
		} else if !bytes.Equal(buf.buf(), model[off:off+n]) {
			return 0, fmt.Errorf("op %d: %s of %d bytes at %d: wrong bytes from %d", i, op, n, off, relFirstDiff(buf.buf(), model[off:off+n]))
		}
		done.Add(1)
	}
}

// TestPoolResizeDuringIO changes NumThreads (and BounceBufferSize) again
// and again while goroutines run many-task reads and writes. No operation
// may be lost or stall, the data must be right, the settings must come
// back exactly, and no bounce buffer may stay in use.
func TestPoolResizeDuringIO(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	if _, err := kvik.GetDefaults(); err != nil {
		t.Skipf("environment holds bad KVIKIO_* values: %v", err)
	}
	seed := relTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 30))
	setDefaults(t, func(d *kvik.Defaults) {
		d.TaskSize, d.NumThreads, d.BounceBufferSize = 4096, 4, 8192
		d.AutoDirectIORead, d.AutoDirectIOWrite = true, true
	})
	workers, opsPer := 8, 80
	if testing.Short() {
		workers, opsPer = 4, 20
	}
	region := 128<<10 + 5
	path, model := relModelFile(t, rng, workers*region)
	f, err := kvik.Open(path, "r+", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stop := make(chan struct{})
	resized := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(seed, 31))
		n := 0
		for {
			select {
			case <-stop:
				resized <- n
				return
			default:
			}
			restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
				d.NumThreads = rng.IntN(16) + 1
				if rng.IntN(4) == 0 {
					d.BounceBufferSize = (rng.IntN(3) + 1) * 4096
				}
			})
			if err != nil {
				panic(err)
			}
			for range rng.IntN(50) {
				runtime.Gosched()
			}
			restore()
			n++
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := relRegionWorker(f, model, w*region, region, rand.New(rand.NewPCG(seed, uint64(40+w))), opsPer); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	n := <-resized
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	relCheckFile(t, path, model)
	t.Logf("%d resizes during %d operations", n, workers*opsPer)
	d, _ := kvik.GetDefaults()
	if d.NumThreads != 4 || d.BounceBufferSize != 8192 || d.TaskSize != 4096 {
		t.Fatalf("settings not restored after resizing: %+v", d)
	}
	// Every operation has finished, so every bounce buffer is idle.
	kvik.FreeBounceBuffers()
	if total, pinned := kvik.BounceBufferBytes(); total != 0 || pinned != 0 {
		t.Fatalf("after FreeBounceBuffers with no I/O in flight: %d bytes (%d pinned) still held", total, pinned)
	}
}

// TestCancelMidTransfer cancels operations while their tasks run: from the
// fault layer at a chosen offset (deterministic), and from another
// goroutine at random moments. The result is either complete or a
// context.Canceled error whose count covers correct bytes only; no
// goroutine may remain afterwards.
func TestCancelMidTransfer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	seed := relTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 50))
	size := 2<<20 + 77
	path, model := relModelFile(t, rng, size)
	f, err := kvik.Open(path, "r+", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	setDefaults(t, func(d *kvik.Defaults) { d.TaskSize, d.NumThreads = 8192, 2 })

	check := func(what string, write bool, src []byte, buf []byte, off int64, n int, err error) {
		t.Helper()
		want := len(buf)
		if write {
			want = len(src)
		}
		if err == nil {
			if n != want {
				t.Fatalf("%s: n = %d of %d with no error", what, n, want)
			}
		} else if !errors.Is(err, context.Canceled) || n >= want || n < 0 {
			t.Fatalf("%s: (%d, %v), want a count below %d with context.Canceled", what, n, err, want)
		}
		if write {
			copy(model[off:], src[:n])
			// Later tasks may have written too; take the file as it is
			// past the prefix, then check the prefix.
			disk, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(disk[off:off+int64(n)], src[:n]) {
				t.Fatalf("%s: the %d bytes reported written are not in the file", what, n)
			}
			copy(model, disk)
		} else if !bytes.Equal(buf[:n], model[off:off+int64(n)]) {
			t.Fatalf("%s: the %d bytes reported read are wrong", what, n)
		}
	}

	t.Run("at a chosen task", func(t *testing.T) {
		var cancelAt int64
		var cancel context.CancelFunc
		l := relInstallFaults(t, f, seed, func(l *relFaultLayer, c relCall) (int, error) {
			if c.off+int64(len(c.p)) > cancelAt {
				cancel()
			}
			return c.do(c.p)
		})
		for i := range 20 {
			write := i%2 == 1
			off := int64(rng.IntN(4096))
			n := size - int(off) - rng.IntN(4096)
			var ctx context.Context
			l.mu.Lock()
			ctx, cancel = context.WithCancel(context.Background())
			// At least four tasks of 8 KiB remain after the one that
			// cancels, and two workers run: one at least never starts.
			cancelAt = off + int64(rng.IntN(n-4*8192))
			l.mu.Unlock()
			src, buf, got, err := relRandomOp(ctx, f, rng, write, off, n)
			l.mu.Lock()
			cancel()
			what := fmt.Sprintf("case %d (write %v, %d bytes at %d, cancel at %d)", i, write, n, off, cancelAt)
			l.mu.Unlock()
			if err == nil {
				t.Fatalf("%s: completed although cancelled", what)
			}
			check(what, write, src, buf, off, got, err)
		}
	})
	t.Run("from another goroutine", func(t *testing.T) {
		cancelled := 0
		cases := 60
		if testing.Short() {
			cases = 20
		}
		for i := range cases {
			write := rng.IntN(2) == 0
			off := int64(rng.IntN(size / 2))
			n := rng.IntN(size-int(off)) + 1
			ctx, cancel := context.WithCancel(context.Background())
			spins := rng.IntN(2000)
			go func() {
				for range spins {
					runtime.Gosched()
				}
				cancel()
			}()
			src, buf, got, err := relRandomOp(ctx, f, rng, write, off, n)
			cancel()
			if err != nil {
				cancelled++
			}
			check(fmt.Sprintf("case %d (write %v, %d bytes at %d)", i, write, n, off), write, src, buf, off, got, err)
		}
		t.Logf("%d of %d operations were cut short by cancellation", cancelled, cases)
	})
	relCheckFile(t, path, model)
}

// TestWaitAndCloseWithOperationInFlight holds an operation in flight (its
// first system call blocks in the fault layer) and checks that
// Future.Wait gives up on its own context without stopping the operation,
// that Close waits for the operation, which completes correctly, and that
// operations after Close fail with ErrClosed.
func TestWaitAndCloseWithOperationInFlight(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rng := rand.New(rand.NewPCG(relTestSeed(t), 60))
	path, model := relModelFile(t, rng, 1<<20)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	setDefaults(t, func(d *kvik.Defaults) { d.TaskSize, d.NumThreads = 64<<10, 4 })
	entered := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	relInstallFaults(t, f, 1, func(l *relFaultLayer, c relCall) (int, error) {
		once.Do(func() {
			close(entered)
			<-release
		})
		return c.do(c.p)
	})
	buf := make([]byte, 1<<20-3)
	fut := f.PRead(context.Background(), buf, 3)
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := fut.Wait(ctx); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context: (%d, %v)", n, err)
	}
	if fut.Done() {
		t.Fatal("operation reported done while its system call is blocked")
	}
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an operation was in flight", err)
	default:
	}
	close(release)
	if n, err := fut.Get(); n != len(buf) || err != nil || !bytes.Equal(buf, model[3:]) {
		t.Fatalf("operation in flight during Close: (%d, %v), bytes equal %v", n, err, bytes.Equal(buf, model[3:]))
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := f.PRead(context.Background(), buf, 0).Get(); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("PRead after Close: %v", err)
	}
}

// relRandomOp writes n random bytes at off (returning them as src) or reads
// n bytes there (into buf), through a Future.
func relRandomOp(ctx context.Context, f *kvik.FileHandle, rng *rand.Rand, write bool, off int64, n int) (src, buf []byte, got int, err error) {
	if write {
		src = randomBytes(rng, n)
		got, err = f.PWrite(ctx, src, off).Get()
	} else {
		buf = make([]byte, n)
		got, err = f.PRead(ctx, buf, off).Get()
	}
	return src, buf, got, err
}
