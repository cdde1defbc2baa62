package kvik_test

// Fault injection: a layer that replaces posix.SetSyscalls (the system calls under
// every host read and write, O_DIRECT ones included) and a real tmpfs that
// fills up. Tests that install the layer must not run in parallel.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
)

// relCall is one pread or pwrite on a descriptor of the handle under test.
type relCall struct {
	write, direct bool
	fd            int
	p             []byte
	off           int64
	real          func(fd int, p []byte, off int64) (int, error)
}

// do performs the real system call on p (a prefix of c.p, or c.p).
func (c relCall) do(p []byte) (int, error) { return c.real(c.fd, p, c.off) }

// relFaultHook decides the outcome of one call. Hooks run one at a time,
// under the layer's lock, so they may use l's fields freely.
type relFaultHook func(l *relFaultLayer, c relCall) (int, error)

// relFaultLayer replaces posix.SetSyscalls for the descriptors of one FileHandle;
// calls on other descriptors go straight to the system.
type relFaultLayer struct {
	mu     sync.Mutex
	fds    map[int]bool // descriptor -> opened with O_DIRECT
	rng    *rand.Rand
	hook   relFaultHook
	calls  int // calls seen on the handle's descriptors
	faults int // calls the hook changed

	// Per-case state for hooks, set by the scenario's setup.
	at     int64            // eio: the failing file offset
	budget int64            // enospc, zero-write: bytes that may still be written
	limit  int64            // enospc, zero-write: the budget the case began with
	spins  map[[2]int64]int // persistent EINTR: calls per (fd, offset)
}

// relInstallFaults replaces posix.SetSyscalls with the layer for f's descriptors
// and restores the saved value when the test ends.
func relInstallFaults(t *testing.T, f *kvik.FileHandle, seed uint64, hook relFaultHook) *relFaultLayer {
	t.Helper()
	l := &relFaultLayer{fds: map[int]bool{f.Fd(): false}, rng: rand.New(rand.NewPCG(seed, 77)), hook: hook}
	if fd := f.FdDirect(); fd >= 0 {
		l.fds[fd] = true
	} else {
		t.Logf("O_DIRECT unavailable on %s: direct-I/O cases run buffered", f.Name())
	}
	saved := posix.CurrentSyscalls()
	wrap := func(write bool, real func(int, []byte, int64) (int, error)) func(int, []byte, int64) (int, error) {
		return func(fd int, p []byte, off int64) (int, error) {
			l.mu.Lock()
			defer l.mu.Unlock()
			direct, ok := l.fds[fd]
			if !ok {
				return real(fd, p, off)
			}
			l.calls++
			return l.hook(l, relCall{write: write, direct: direct, fd: fd, p: p, off: off, real: real})
		}
	}
	t.Cleanup(posix.SetSyscalls(posix.Syscalls{Pread: wrap(false, saved.Pread), Pwrite: wrap(true, saved.Pwrite)}))
	return l
}

func (l *relFaultLayer) fault() { l.faults++ }

// relFaultCheck judges the count and error of an operation under faults.
type relFaultCheck func(t *testing.T, what string, l *relFaultLayer, off int64, n, got int, err error)

// relFaultScenario is one kind of fault with what must come of it.
type relFaultScenario struct {
	name   string
	reads  bool // run read cases
	writes bool // run write cases
	// crossEOF lets read ranges run past the end of the file; only for
	// scenarios that expect os.File's exact result.
	crossEOF bool
	// onlyDirect limits cases to direct I/O settings, so that the calls
	// faulted are O_DIRECT ones.
	onlyDirect bool
	// noDirect turns direct I/O off in every case.
	noDirect bool
	setup    func(l *relFaultLayer, rng *rand.Rand, off int64, n int)
	hook     relFaultHook
	// check is nil when the operation must succeed with os.File's result;
	// otherwise it judges the error and count (the bytes within the count
	// are compared by the runner).
	check relFaultCheck
}

const relFaultFileSize = 1<<20 + 1234

// relRunFaultScenario runs random reads and writes under s's faults and
// checks each against os.File on the same file (os.File does not go
// through posix.SetSyscalls, so it sees the file as it really is).
func relRunFaultScenario(t *testing.T, s relFaultScenario, cases int) {
	seed := relTestSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	path := filepath.Join(t.TempDir(), "faulty")
	if err := os.WriteFile(path, randomBytes(rng, relFaultFileSize), 0o644); err != nil {
		t.Fatal(err)
	}
	ref, f := openWithReference(t, path)
	l := relInstallFaults(t, f, seed, s.hook)
	for i := range cases {
		write := s.writes && (!s.reads || rng.IntN(2) == 0)
		c := relRandomConfig(rng)
		if s.onlyDirect || s.noDirect {
			c.directRead, c.directWrite = s.onlyDirect, s.onlyDirect
		}
		n := relRandomSize(rng)
		if s.check != nil {
			n = max(n, 1) // an error needs a byte to fail on
		}
		n = min(n, 1<<20)
		c = c.forSize(n)
		var off int64
		if !write && s.crossEOF && rng.IntN(4) == 0 {
			off = max(0, relFaultFileSize-int64(rng.IntN(n+2*relTestPageSize)))
		} else {
			off = relRandomOffset(rng, int64(relFaultFileSize-n))
		}
		if rng.IntN(3) == 0 {
			off = off / int64(relTestPageSize) * int64(relTestPageSize)
		}
		shift := relRandomShift(rng)
		l.mu.Lock()
		if s.setup != nil {
			s.setup(l, rng, off, n)
		}
		l.mu.Unlock()
		if write {
			src := relNewGuarded(rng, n, shift)
			var op string
			var got int
			var gerr error
			relWithConfig(t, c, func() { op, got, gerr = relKvikWrite(f, rng.IntN(3), src.buf(), off) })
			what := fmt.Sprintf("%s case %d: %s of %d bytes at %d (shift %d, %v)", s.name, i, op, n, off, shift, c)
			src.checkUnchanged(t, what)
			if got < 0 || got > n {
				t.Fatalf("%s: impossible count %d", what, got)
			}
			disk := make([]byte, n)
			if m, err := ref.ReadAt(disk, off); m != n {
				t.Fatalf("%s: reading back: %d, %v", what, m, err)
			}
			if s.check == nil {
				if got != n || gerr != nil {
					t.Fatalf("%s: n = %d, err = %v; want %d, nil", what, got, gerr, n)
				}
			} else {
				s.check(t, what, l, off, n, got, gerr)
			}
			if !bytes.Equal(disk[:got], src.buf()[:got]) {
				t.Fatalf("%s: reported %d bytes written (err %v) but the file differs from the source at byte %d",
					what, got, gerr, relFirstDiff(disk[:got], src.buf()[:got]))
			}
		} else {
			want := make([]byte, n)
			wn, werr := ref.ReadAt(want, off)
			dst := relNewGuarded(rng, n, shift)
			var op string
			var got int
			var gerr error
			relWithConfig(t, c, func() { op, got, gerr = relKvikRead(f, rng.IntN(3), dst.buf(), off) })
			what := fmt.Sprintf("%s case %d: %s of %d bytes at %d (shift %d, %v)", s.name, i, op, n, off, shift, c)
			dst.checkGuards(t, what)
			if s.check == nil {
				relCheckReadResult(t, what, dst.buf(), got, gerr, want, wn, werr)
			} else {
				if got < 0 || got > wn {
					t.Fatalf("%s: impossible count %d (file holds %d bytes there)", what, got, wn)
				}
				s.check(t, what, l, off, n, got, gerr)
				if !bytes.Equal(dst.buf()[:got], want[:got]) {
					t.Fatalf("%s: reported %d bytes read (err %v) but they differ from the file at byte %d",
						what, got, gerr, relFirstDiff(dst.buf()[:got], want[:got]))
				}
			}
		}
	}
	if l.faults == 0 {
		t.Fatalf("%s: no fault was injected in %d calls", s.name, l.calls)
	}
	t.Logf("%s: %d cases, %d system calls, %d faults injected", s.name, cases, l.calls, l.faults)
}

// relShortLen returns a random short length for a call of n bytes: any
// length for a buffered descriptor, whole pages for an O_DIRECT one (as
// O_DIRECT requires), or n when no shorter length fits.
func relShortLen(rng *rand.Rand, n int, direct bool) int {
	if !direct {
		if n < 2 {
			return n
		}
		return rng.IntN(n-1) + 1
	}
	pages := n / relTestPageSize
	if pages < 2 {
		return n
	}
	return (rng.IntN(pages-1) + 1) * relTestPageSize
}

// relErrCheck expects an error matching target and a count within the
// operation; it must not report the whole operation as done.
func relErrCheck(target error, limit func(l *relFaultLayer, off int64, n int) int) relFaultCheck {
	return func(t *testing.T, what string, l *relFaultLayer, off int64, n, got int, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: succeeded (n = %d) although the fault layer failed it", what, got)
		}
		if !errors.Is(err, target) {
			t.Fatalf("%s: err = %v, want one matching %v", what, err, target)
		}
		if got >= n {
			t.Fatalf("%s: n = %d of %d with error %v: a failed operation reported as complete", what, got, n, err)
		}
		if lim := limit(l, off, n); got > lim {
			t.Fatalf("%s: n = %d, but at most %d bytes can have been transferred", what, got, lim)
		}
	}
}

// TestFaultInjection runs random operations under each kind of fault.
func TestFaultInjection(t *testing.T) {
	cases := 150
	if testing.Short() {
		cases = 40
	}
	eioCheck := relErrCheck(syscall.EIO, func(l *relFaultLayer, off int64, n int) int { return int(l.at - off) })
	scenarios := []relFaultScenario{
		{
			// A third of the calls are interrupted before moving a byte.
			name: "EINTR", reads: true, writes: true, crossEOF: true,
			hook: func(l *relFaultLayer, c relCall) (int, error) {
				if l.rng.IntN(3) == 0 {
					l.fault()
					return -1, syscall.EINTR
				}
				return c.do(c.p)
			},
		},
		{
			// Half of the calls transfer fewer bytes than asked (whole
			// pages on O_DIRECT descriptors).
			name: "short transfers", reads: true, writes: true, crossEOF: true,
			hook: func(l *relFaultLayer, c relCall) (int, error) {
				if l.rng.IntN(2) == 0 {
					if m := relShortLen(l.rng, len(c.p), c.direct); m < len(c.p) {
						l.fault()
						return c.do(c.p[:m])
					}
				}
				return c.do(c.p)
			},
		},
		{
			// O_DIRECT writes that report a count that is not a whole
			// number of pages: the rest must be finished another way.
			name: "unaligned short O_DIRECT writes", writes: true, onlyDirect: true,
			hook: func(l *relFaultLayer, c relCall) (int, error) {
				n, err := c.do(c.p)
				if c.direct && c.write && err == nil && n > 1 && l.rng.IntN(2) == 0 {
					m := l.rng.IntN(n-1) + 1
					if m%relTestPageSize == 0 {
						m--
					}
					l.fault()
					return m, nil
				}
				return n, err
			},
		},
		{
			// The file system refuses O_DIRECT at I/O time (EINVAL):
			// kvik must finish with buffered I/O.
			name: "EINVAL from O_DIRECT", reads: true, writes: true, crossEOF: true, onlyDirect: true,
			hook: func(l *relFaultLayer, c relCall) (int, error) {
				if c.direct && l.rng.IntN(3) != 0 {
					l.fault()
					return -1, syscall.EINVAL
				}
				return c.do(c.p)
			},
		},
		{
			// A bad sector: calls that reach file offset l.at move the
			// bytes before it (whole pages on O_DIRECT) and then fail
			// with EIO.
			name: "EIO", reads: true, writes: true,
			setup: func(l *relFaultLayer, rng *rand.Rand, off int64, n int) { l.at = off + rng.Int64N(int64(n)) },
			hook: func(l *relFaultLayer, c relCall) (int, error) {
				end := c.off + int64(len(c.p))
				if l.at < c.off || l.at >= end {
					return c.do(c.p)
				}
				l.fault()
				m := int(l.at - c.off)
				if m == 0 || (c.direct && m%relTestPageSize != 0) {
					return -1, syscall.EIO
				}
				return c.do(c.p[:m])
			},
			check: eioCheck,
		},
		{
			// The device fills up after l.budget more bytes.
			name: "ENOSPC", writes: true,
			setup: relBudgetSetup,
			hook:  relBudgetHook(func() (int, error) { return -1, syscall.ENOSPC }),
			check: relErrCheck(syscall.ENOSPC, relBudgetLimit),
		},
		{
			// Writes that stop making progress without an error.
			name: "zero-progress writes", writes: true,
			setup: relBudgetSetup,
			hook:  relBudgetHook(func() (int, error) { return 0, nil }),
			check: relErrCheck(io.ErrShortWrite, relBudgetLimit),
		},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) { relRunFaultScenario(t, s, cases) })
	}
}

// relBudgetSetup gives a case a random budget smaller than its size.
func relBudgetSetup(l *relFaultLayer, rng *rand.Rand, off int64, n int) {
	l.budget = rng.Int64N(int64(n))
	l.limit = l.budget
}

// relBudgetLimit: no more bytes than the budget can have been written.
func relBudgetLimit(l *relFaultLayer, off int64, n int) int { return int(l.limit) }

// relBudgetHook lets writes through until l.budget bytes have been
// written (whole pages on O_DIRECT), then answers every write with full().
// Reads pass.
func relBudgetHook(full func() (int, error)) relFaultHook {
	return func(l *relFaultLayer, c relCall) (int, error) {
		if !c.write {
			return c.do(c.p)
		}
		m := int(min(int64(len(c.p)), l.budget))
		if c.direct {
			m = m / relTestPageSize * relTestPageSize
		}
		if m == 0 {
			l.fault()
			return full()
		}
		if m < len(c.p) {
			l.fault()
		}
		n, err := c.do(c.p[:m])
		if n > 0 {
			l.budget -= int64(n)
		}
		return n, err
	}
}

// TestFaultEIOCountIsExactBuffered checks, without O_DIRECT, that the count
// reported with EIO is exactly the bytes before the bad offset: every task
// before the failing one completes, and the failing one reports its
// progress.
func TestFaultEIOCountIsExactBuffered(t *testing.T) {
	cases := 100
	if testing.Short() {
		cases = 30
	}
	relRunFaultScenario(t, relFaultScenario{
		name: "exact EIO count", reads: true, writes: true, noDirect: true,
		setup: func(l *relFaultLayer, rng *rand.Rand, off int64, n int) { l.at = off + rng.Int64N(int64(n)) },
		hook: func(l *relFaultLayer, c relCall) (int, error) {
			if c.direct {
				return -1, fmt.Errorf("O_DIRECT call with direct I/O disabled")
			}
			end := c.off + int64(len(c.p))
			if l.at < c.off || l.at >= end {
				return c.do(c.p)
			}
			l.fault()
			if l.at == c.off {
				return -1, syscall.EIO
			}
			return c.do(c.p[:l.at-c.off])
		},
		check: func(t *testing.T, what string, l *relFaultLayer, off int64, n, got int, err error) {
			if !errors.Is(err, syscall.EIO) || got != int(l.at-off) {
				t.Fatalf("%s: (%d, %v), want (%d, EIO)", what, got, err, l.at-off)
			}
		},
	}, cases)
}

// TestFaultUnalignedShortDirectRead: an O_DIRECT read may return fewer
// bytes than asked, not a whole number of pages, before the end of the
// file (network and FUSE file systems do). It must be finished, not taken
// for end of file.
func TestFaultUnalignedShortDirectRead(t *testing.T) {
	cases := 100
	if testing.Short() {
		cases = 30
	}
	relRunFaultScenario(t, relFaultScenario{
		name: "unaligned short O_DIRECT reads", reads: true, crossEOF: true, onlyDirect: true,
		hook: func(l *relFaultLayer, c relCall) (int, error) {
			n, err := c.do(c.p)
			if c.direct && !c.write && err == nil && n == len(c.p) && n > 1 && l.rng.IntN(2) == 0 {
				m := l.rng.IntN(n-1) + 1
				if m%relTestPageSize == 0 {
					m--
				}
				l.fault()
				return m, nil // as if interrupted after m bytes
			}
			return n, err
		},
	}, cases)
}

// errRelSpin is what the persistent-EINTR layer returns once a call has
// been interrupted 100,000 times in a row: a loop that never gives up.
var errRelSpin = errors.New("fault layer: EINTR returned 100000 times in a row without the caller giving up")

// TestFaultPersistentEINTR: a descriptor that only ever answers EINTR
// must fail the operation with EINTR after a bounded number of retries
// (internal/posix retries 1024 times), not spin forever.
func TestFaultPersistentEINTR(t *testing.T) {
	hook := func(l *relFaultLayer, c relCall) (int, error) {
		if l.spins == nil {
			l.spins = map[[2]int64]int{}
		}
		k := [2]int64{int64(c.fd), c.off}
		l.spins[k]++
		l.fault()
		if l.spins[k] > 100000 {
			return -1, errRelSpin
		}
		return -1, syscall.EINTR
	}
	for _, tc := range []struct {
		name   string
		direct bool
		shift  int
	}{
		{name: "buffered"},
		{name: "O_DIRECT aligned buffer", direct: true},
		{name: "O_DIRECT bounce buffer", direct: true, shift: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(relTestSeed(t), 6))
			path := filepath.Join(t.TempDir(), "eintr")
			if err := os.WriteFile(path, randomBytes(rng, 4*relTestPageSize), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := kvik.Open(path, "r+", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			relInstallFaults(t, f, 1, hook)
			c := relPropConfig{threads: 1, taskSize: 1 << 20, bounce: 1 << 20, directRead: tc.direct, directWrite: tc.direct}
			buf := relNewGuarded(rng, 2*relTestPageSize, tc.shift)
			relWithConfig(t, c, func() {
				for _, write := range []bool{false, true} {
					var n int
					var err error
					if write {
						n, err = f.WriteAt(buf.buf(), int64(relTestPageSize))
					} else {
						n, err = f.ReadAt(buf.buf(), int64(relTestPageSize))
					}
					if errors.Is(err, errRelSpin) {
						t.Fatalf("write=%v: retried EINTR 100000 times without giving up", write)
					}
					if n != 0 || !errors.Is(err, syscall.EINTR) {
						t.Fatalf("write=%v: (%d, %v), want (0, EINTR)", write, n, err)
					}
				}
			})
		})
	}
}

// TestENOSPCOnSmallTmpfs fills a real 1 MiB tmpfs: writes that do not fit
// must fail with ENOSPC (never succeed), with a count whose bytes are
// really in the file; writes that fit must still work afterwards.
func TestENOSPCOnSmallTmpfs(t *testing.T) {
	dir := tmpfstest.Mount(t, "1m", "real ENOSPC untested; TestFaultInjection/ENOSPC covers the logic")
	rng := rand.New(rand.NewPCG(relTestSeed(t), 8))
	cases := []struct {
		name string
		cfg  relPropConfig
		off  int64
		api  int
	}{
		{"buffered", relPropConfig{threads: 1, taskSize: 4 << 20, bounce: 1 << 20}, 0, 0},
		{"buffered unaligned offset", relPropConfig{threads: 1, taskSize: 4 << 20, bounce: 1 << 20}, 777, 1},
		{"O_DIRECT", relPropConfig{threads: 1, taskSize: 4 << 20, bounce: 1 << 20, directWrite: true}, 0, 0},
		{"O_DIRECT unaligned offset", relPropConfig{threads: 2, taskSize: 4 << 20, bounce: 8192, directWrite: true}, 4097, 2},
		{"parallel tasks", relPropConfig{threads: 4, taskSize: 64 << 10, bounce: 1 << 20, directWrite: true}, 100, 2},
		{"parallel small tasks buffered", relPropConfig{threads: 8, taskSize: 12345, bounce: 1 << 20}, 3, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "big")
			defer os.Remove(path)
			f, err := kvik.Open(path, "w+", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if c.cfg.directWrite && f.FdDirect() < 0 {
				t.Logf("tmpfs refused O_DIRECT: the write runs buffered")
			}
			src := relNewGuarded(rng, 2<<20+123, c.api)
			var op string
			var n int
			relWithConfig(t, c.cfg, func() { op, n, err = relKvikWrite(f, c.api, src.buf(), c.off) })
			what := fmt.Sprintf("%s of %d bytes at %d into a 1 MiB tmpfs", op, len(src.buf()), c.off)
			if err == nil {
				t.Fatalf("%s: succeeded (n = %d)", what, n)
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("%s: err = %v, want ENOSPC", what, err)
			}
			if n < 0 || n >= len(src.buf()) {
				t.Fatalf("%s: n = %d with ENOSPC", what, n)
			}
			disk, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if int64(len(disk)) < c.off+int64(n) {
				t.Fatalf("%s: n = %d, but the file holds only %d bytes", what, n, len(disk))
			}
			if got := disk[c.off : c.off+int64(n)]; !bytes.Equal(got, src.buf()[:n]) {
				t.Fatalf("%s: n = %d, but the file differs from the source at byte %d", what, n, relFirstDiff(got, src.buf()[:n]))
			}
			t.Logf("%s: %d bytes reported, %d-byte file, %v", what, n, len(disk), err)
		})
	}
	t.Run("full file system", func(t *testing.T) {
		// Fill the file system, then even a tiny write to a new file fails.
		filler := filepath.Join(dir, "filler")
		fw, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = fw.Write(randomBytes(rng, 64<<10))
		}
		fw.Close()
		defer os.Remove(filler)
		f, err := kvik.Open(filepath.Join(dir, "tiny"), "w", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if n, err := f.WriteAt([]byte("hello"), 10); n != 0 || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write to a full file system: (%d, %v), want (0, ENOSPC)", n, err)
		}
	})
	t.Run("fits after ENOSPC", func(t *testing.T) {
		path := filepath.Join(dir, "fits")
		f, err := kvik.Open(path, "w+", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		src := randomBytes(rng, 512<<10+5)
		relWithConfig(t, relPropConfig{threads: 4, taskSize: 100 << 10, bounce: 1 << 20, directWrite: true, directRead: true}, func() {
			if n, err := f.WriteAt(src, 3); n != len(src) || err != nil {
				t.Fatalf("write that fits: %d, %v", n, err)
			}
			back := make([]byte, len(src))
			if n, err := f.ReadAt(back, 3); n != len(src) || err != nil || !bytes.Equal(back, src) {
				t.Fatalf("read back: %d, %v", n, err)
			}
		})
	})
}
