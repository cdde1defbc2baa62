package kvik_test

// Property tests: thousands of random operations, each checked against
// os.File doing the same thing. See docs/reliability.md.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/kvikgo/kvik"
)

var relTestPageSize = os.Getpagesize()

// relTestSeed returns the seed of a randomized test: KVIK_TEST_SEED when set
// (to replay a failure), a fresh one otherwise. It is logged, so a failing
// run names the seed that reproduces it.
func relTestSeed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv("KVIK_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("KVIK_TEST_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from KVIK_TEST_SEED)", v)
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with KVIK_TEST_SEED=%d)", v, v)
	return v
}

// relGuarded is a buffer of n bytes inside a larger backing array filled with
// random non-zero bytes, so that writes outside the buffer are detected.
// With shift 0 the buffer starts on a page boundary (the O_DIRECT path
// that needs no bounce buffer); otherwise shift bytes past one.
type relGuarded struct {
	back  []byte
	saved []byte // copy of back when made
	start int
	n     int
}

func relNewGuarded(rng *rand.Rand, n, shift int) *relGuarded {
	const guard = 64
	back := randomBytes(rng, n+shift+2*relTestPageSize+2*guard)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(back)))
	pad := int((uintptr(relTestPageSize) - addr%uintptr(relTestPageSize)) % uintptr(relTestPageSize))
	if pad < guard {
		pad += relTestPageSize
	}
	g := &relGuarded{back: back, start: pad + shift, n: n}
	g.saved = append([]byte(nil), back...)
	return g
}

// buf returns the buffer, with its capacity limited to its length.
func (g *relGuarded) buf() []byte { return g.back[g.start : g.start+g.n : g.start+g.n] }

// checkGuards fails if bytes outside the buffer changed.
func (g *relGuarded) checkGuards(t testing.TB, what string) {
	t.Helper()
	if !bytes.Equal(g.back[:g.start], g.saved[:g.start]) || !bytes.Equal(g.back[g.start+g.n:], g.saved[g.start+g.n:]) {
		t.Fatalf("%s: bytes outside the %d-byte buffer were changed", what, g.n)
	}
}

// checkUnchanged fails if any byte, inside the buffer or not, changed.
func (g *relGuarded) checkUnchanged(t testing.TB, what string) {
	t.Helper()
	if !bytes.Equal(g.back, g.saved) {
		t.Fatalf("%s: the source buffer was modified", what)
	}
}

// randomBytes returns n random bytes, none of them zero, so that a buffer
// left unwritten can never pass for a written one. It draws eight bytes per
// random number, which keeps it fast under -race.
func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(v)
			if b[j] == 0 {
				b[j] = byte(j%255 + 1)
			}
			v >>= 8
		}
	}
	return b
}

// relFirstDiff returns the index of the first differing byte of a and b.
func relFirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// relPropConfig is one random choice of settings.
type relPropConfig struct {
	threads, taskSize, bounce int
	directRead, directWrite   bool
	perDevice                 bool // ThreadPoolPerBlockDevice
}

func (c relPropConfig) String() string {
	return fmt.Sprintf("threads=%d task=%d bounce=%d directRead=%v directWrite=%v perDevice=%v",
		c.threads, c.taskSize, c.bounce, c.directRead, c.directWrite, c.perDevice)
}

func relRandomConfig(rng *rand.Rand) relPropConfig {
	c := relPropConfig{
		threads:     []int{1, 2, 3, 4, 8, 16}[rng.IntN(6)],
		directRead:  rng.IntN(2) == 0,
		directWrite: rng.IntN(2) == 0,
		perDevice:   rng.IntN(4) == 0,
	}
	switch rng.IntN(6) {
	case 0:
		c.taskSize = rng.IntN(8192) + 1
	case 1:
		c.taskSize = relTestPageSize * (rng.IntN(16) + 1)
	case 2:
		c.taskSize = 64 << 10
	case 3:
		c.taskSize = 1 << 20
	default:
		c.taskSize = 4 << 20
	}
	switch rng.IntN(5) {
	case 0:
		c.bounce = 1 // rounds up to one page: many bounce chunks
	case 1:
		c.bounce = relTestPageSize * (rng.IntN(4) + 1)
	case 2:
		c.bounce = rng.IntN(64<<10) + 1
	default:
		c.bounce = 16 << 20
	}
	return c
}

// forSize keeps the task count of a size-byte operation sane under -race.
func (c relPropConfig) forSize(size int) relPropConfig {
	if size/c.taskSize > 256 {
		c.taskSize = size/256 + 1
	}
	return c
}

func (c relPropConfig) apply(d *kvik.Defaults) {
	d.NumThreads, d.TaskSize, d.BounceBufferSize = c.threads, c.taskSize, c.bounce
	d.AutoDirectIORead, d.AutoDirectIOWrite = c.directRead, c.directWrite
	d.ThreadPoolPerBlockDevice = c.perDevice
}

// relWithConfig runs fn under the settings c and restores the previous ones.
func relWithConfig(t testing.TB, c relPropConfig, fn func()) {
	t.Helper()
	restore, err := kvik.UpdateDefaults(c.apply)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	fn()
}

// relRandomSize returns an operation size: mostly small, some large.
func relRandomSize(rng *rand.Rand) int {
	switch r := rng.IntN(100); {
	case r < 5:
		return 0
	case r < 55:
		return rng.IntN(3*relTestPageSize+200) + 1
	case r < 85:
		return rng.IntN(64<<10) + 1
	case r < 97:
		return rng.IntN(512<<10) + 1
	default:
		return rng.IntN(3<<20) + 1<<20
	}
}

// relRandomOffset returns an offset in [0, limit], often on or next to a page
// boundary.
func relRandomOffset(rng *rand.Rand, limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	if rng.IntN(2) == 0 {
		return rng.Int64N(limit + 1)
	}
	p := int64(relTestPageSize)
	off := rng.Int64N(limit/p+1)*p + int64(rng.IntN(3)-1)
	return min(max(off, 0), limit)
}

func relRandomShift(rng *rand.Rand) int {
	if rng.IntN(5) < 2 {
		return 0
	}
	return rng.IntN(relTestPageSize-1) + 1
}

// relCompatModes lists the compat modes a host-memory handle can be opened
// with here: CompatOff only where cuFile is usable.
func relCompatModes() []kvik.CompatMode {
	m := []kvik.CompatMode{kvik.CompatOn, kvik.CompatAuto}
	if kvik.ProbeCuFile().Usable {
		m = append(m, kvik.CompatOff)
	}
	return m
}

// relCheckReadResult checks a read of len(want-range) bytes at off against
// os.File's result on a file with the same contents: the same count, the
// same bytes, and the io.ReaderAt error contract (non-nil when n < len,
// io.EOF itself when the file ended).
func relCheckReadResult(t testing.TB, what string, got []byte, gn int, gerr error, want []byte, wn int, werr error) {
	t.Helper()
	if werr != nil && werr != io.EOF {
		t.Fatalf("%s: reference read failed: %v", what, werr)
	}
	if gn != wn {
		t.Fatalf("%s: n = %d (err %v), os.File reads %d (err %v)", what, gn, gerr, wn, werr)
	}
	if gn < len(got) && gerr != io.EOF {
		t.Fatalf("%s: short read of %d/%d bytes with error %v, want io.EOF", what, gn, len(got), gerr)
	}
	if gn == len(got) && gerr != nil && gerr != io.EOF {
		t.Fatalf("%s: full read with error %v", what, gerr)
	}
	if !bytes.Equal(got[:gn], want[:wn]) {
		t.Fatalf("%s: bytes differ from os.File's at byte %d", what, relFirstDiff(got[:gn], want[:wn]))
	}
}

// relKvikRead reads with one of the read entry points, chosen by which.
func relKvikRead(f *kvik.FileHandle, which int, p []byte, off int64) (string, int, error) {
	switch which % 3 {
	case 0:
		n, err := f.ReadAt(p, off)
		return "ReadAt", n, err
	case 1:
		// Read takes a size and a larger buffer: hand it exactly p.
		n, err := f.Read(p, len(p), off)
		return "Read", n, err
	default:
		n, err := f.PRead(context.Background(), p, off).Get()
		return "PRead", n, err
	}
}

func relKvikWrite(f *kvik.FileHandle, which int, p []byte, off int64) (string, int, error) {
	switch which % 3 {
	case 0:
		n, err := f.WriteAt(p, off)
		return "WriteAt", n, err
	case 1:
		n, err := f.Write(p, len(p), off)
		return "Write", n, err
	default:
		n, err := f.PWrite(context.Background(), p, off).Get()
		return "PWrite", n, err
	}
}

// TestPropertyWriteReadMatchesOSFile runs random sequences of writes and
// reads through kvik under random settings (threads, task size, bounce
// size, direct I/O for reads and writes, compat mode, buffer alignment)
// and does the same writes to a reference file with os.File. Every read
// must match os.File reading the reference, every write must report the
// full count, buffers outside the requested range must stay untouched,
// and at the end of each sequence the two files must be identical.
func TestPropertyWriteReadMatchesOSFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 1))
	rounds := 400
	if testing.Short() {
		rounds = 80
	}
	dir := t.TempDir()
	modes := relCompatModes()
	ops, reads := 0, 0
	for round := range rounds {
		mode := modes[rng.IntN(len(modes))]
		path := filepath.Join(dir, fmt.Sprintf("kvik-%d", round))
		refPath := filepath.Join(dir, fmt.Sprintf("ref-%d", round))
		ref, err := os.OpenFile(refPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		// The compat mode comes from the option or from the defaults;
		// writes go through a "w+" handle, or a "w" one with reads
		// through a second, "r" handle.
		open := func(flags string) *kvik.FileHandle {
			var h *kvik.FileHandle
			var err error
			if rng.IntN(3) == 0 {
				relWithConfig(t, relPropConfig{threads: 4, taskSize: 1 << 20, bounce: 1 << 20}, func() {
					restore, _ := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.CompatMode = mode })
					defer restore()
					h, err = kvik.Open(path, flags, 0)
				})
			} else {
				h, err = kvik.Open(path, flags, 0, kvik.WithCompatMode(mode))
			}
			if err != nil {
				t.Fatalf("round %d: open %q with compat %v: %v", round, flags, mode, err)
			}
			return h
		}
		w := open("w+")
		r := w
		if rng.IntN(4) == 0 {
			w.Close()
			w = open("w")
			r = open("r")
		}
		var size int64 // current size of both files
		nops := 4 + rng.IntN(10)
		for i := range nops {
			c := relRandomConfig(rng)
			n := relRandomSize(rng)
			c = c.forSize(n)
			what := func(op string, off int64, shift int) string {
				return fmt.Sprintf("round %d op %d: %s of %d bytes at %d (buffer shift %d, compat %v, %v, file size %d)",
					round, i, op, n, off, shift, mode, c, size)
			}
			if i < 2 || rng.IntN(5) < 2 {
				// Write, possibly past the end (leaving a hole).
				off := relRandomOffset(rng, size+int64(2*relTestPageSize))
				shift := relRandomShift(rng)
				src := relNewGuarded(rng, n, shift)
				var op string
				var wn int
				var werr error
				relWithConfig(t, c, func() { op, wn, werr = relKvikWrite(w, rng.IntN(3), src.buf(), off) })
				if wn != n || werr != nil {
					t.Fatalf("%s: n = %d, err = %v", what(op, off, shift), wn, werr)
				}
				src.checkUnchanged(t, what(op, off, shift))
				if _, err := ref.WriteAt(src.buf(), off); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					size = max(size, off+int64(n))
				}
				if got, err := w.Size(); got != size || err != nil {
					t.Fatalf("%s: Size = %d, %v; want %d", what(op, off, shift), got, err, size)
				}
			} else {
				// Read, often across or beyond the end of the file.
				var off int64
				if rng.IntN(3) == 0 {
					off = max(0, size-int64(rng.IntN(3*relTestPageSize)))
					if rng.IntN(8) == 0 {
						off = size + int64(rng.IntN(2*relTestPageSize))
					}
				} else {
					off = relRandomOffset(rng, size)
				}
				shift := relRandomShift(rng)
				dst := relNewGuarded(rng, n, shift)
				want := make([]byte, n)
				wn, werr := ref.ReadAt(want, off)
				var op string
				var gn int
				var gerr error
				relWithConfig(t, c, func() { op, gn, gerr = relKvikRead(r, rng.IntN(3), dst.buf(), off) })
				relCheckReadResult(t, what(op, off, shift), dst.buf(), gn, gerr, want, wn, werr)
				dst.checkGuards(t, what(op, off, shift))
				reads++
			}
			ops++
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		ref.Close()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(refPath)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d (compat %v): file differs from the os.File reference (sizes %d and %d, first difference at %d)",
				round, mode, len(got), len(want), relFirstDiff(got, want))
		}
		os.Remove(path)
		os.Remove(refPath)
	}
	t.Logf("%d rounds, %d operations (%d reads) matched os.File", rounds, ops, reads)
}

// TestPropertyReadAcrossEOF reads many random ranges around the end of
// files of random sizes (around page multiples, and not) and checks the
// io.ReaderAt contract exactly against os.File: n, the bytes, io.EOF
// itself (not wrapped) when n < len(p).
func TestPropertyReadAcrossEOF(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 2))
	dir := t.TempDir()
	files := 12
	perFile := 120
	if testing.Short() {
		perFile = 30
	}
	cases := 0
	for i := range files {
		p := relTestPageSize
		size := []int{0, 1, p - 1, p, p + 1, 3 * p, 5*p + 7, rng.IntN(16 * p), rng.IntN(1 << 20), 2 << 20, 2<<20 - 1, rng.IntN(64) + 16*p}[i]
		path := filepath.Join(dir, fmt.Sprint("f", i))
		data := randomBytes(rng, size)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		ref, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := kvik.Open(path, "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		for range perFile {
			c := relRandomConfig(rng)
			n := rng.IntN(4*p) + 1
			if rng.IntN(10) == 0 {
				n = rng.IntN(1<<20) + 1
			}
			c = c.forSize(n)
			// Start up to 3 pages before the end, or past it.
			off := int64(size) - int64(rng.IntN(3*p+1))
			if rng.IntN(4) == 0 {
				off = int64(size) + int64(rng.IntN(2*p))
			}
			off = max(off, 0)
			if rng.IntN(3) == 0 {
				off = off / int64(p) * int64(p) // aligned start: direct path
			}
			want := make([]byte, n)
			wn, werr := ref.ReadAt(want, off)
			shift := relRandomShift(rng)
			dst := relNewGuarded(rng, n, shift)
			var op string
			var gn int
			var gerr error
			relWithConfig(t, c, func() { op, gn, gerr = relKvikRead(f, rng.IntN(3), dst.buf(), off) })
			what := fmt.Sprintf("%s of %d bytes at %d of a %d-byte file (shift %d, %v)", op, n, off, size, shift, c)
			relCheckReadResult(t, what, dst.buf(), gn, gerr, want, wn, werr)
			if gn < n && gerr != io.EOF {
				t.Fatalf("%s: io.EOF must be returned unwrapped, got %#v", what, gerr)
			}
			dst.checkGuards(t, what)
			cases++
		}
		f.Close()
		ref.Close()
	}
	t.Logf("%d reads across end of file matched os.File", cases)
}

// TestCompatOffWithoutCuFile checks that where cuFile is unusable a handle
// cannot be opened with CompatOff, with the typed error, and that
// CompatAuto then gives a working POSIX handle.
func TestCompatOffWithoutCuFile(t *testing.T) {
	if kvik.ProbeCuFile().Usable {
		t.Skip("cuFile is usable here: CompatOff opens (covered by the property tests)")
	}
	path, data := writeRandomFile(t, rand.New(rand.NewPCG(4, 4)), t.TempDir(), 10000)
	if _, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOff)); !errors.Is(err, kvik.ErrCuFileRequired) {
		t.Fatalf("CompatOff without cuFile: %v", err)
	}
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatAuto))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.CompatMode() != kvik.CompatOn {
		t.Fatalf("CompatAuto without cuFile resolved to %v (%s)", f.CompatMode(), f.CompatReason())
	}
	got := make([]byte, len(data))
	if n, err := f.ReadAt(got, 0); n != len(data) || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read: %d, %v", n, err)
	}
}
