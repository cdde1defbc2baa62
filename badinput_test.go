package kvik_test

// Bad input: every misuse gives a typed error (errors.Is with the kvik
// sentinels), completes its Future, moves no byte, and never panics.
// TestBadUse (hostio_test.go) already covers: ReadAt at -1 and -4096,
// ReadAt of 2 bytes at 1<<63-1, ReadAt on a "w" handle, WriteAt on an "r"
// handle, ReadAt/PRead/Size after Close, the flags "", "a", "x", "rw",
// "r++", "+" and O_WRONLY|O_APPEND; TestReadWriteShapes covers Read with
// size > len(buf). Those are not repeated here.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
)

// relBadOp is one call on a handle; it returns the count and the error.
type relBadOp func(f *kvik.FileHandle) (int, error)

func relReadAt(n int, off int64) relBadOp {
	return func(f *kvik.FileHandle) (int, error) { return f.ReadAt(make([]byte, n), off) }
}
func relWriteAt(n int, off int64) relBadOp {
	return func(f *kvik.FileHandle) (int, error) { return f.WriteAt(bytes.Repeat([]byte{7}, n), off) }
}
func relRead(bufLen, size int, off int64) relBadOp {
	return func(f *kvik.FileHandle) (int, error) { return f.Read(make([]byte, bufLen), size, off) }
}
func relWrite(bufLen, size int, off int64) relBadOp {
	return func(f *kvik.FileHandle) (int, error) { return f.Write(bytes.Repeat([]byte{7}, bufLen), size, off) }
}
func relPRead(n int, off int64) relBadOp {
	return func(f *kvik.FileHandle) (int, error) {
		return f.PRead(context.Background(), make([]byte, n), off).Get()
	}
}
func relPWrite(n int, off int64) relBadOp {
	return func(f *kvik.FileHandle) (int, error) {
		return f.PWrite(context.Background(), bytes.Repeat([]byte{7}, n), off).Get()
	}
}

// TestBadArguments table-drives misuse of the I/O entry points on "r+",
// "r", "w" and closed handles.
func TestBadArguments(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(11, 12))
	const size = 10000
	path, data := writeRandomFile(t, rng, dir, size)
	woPath := filepath.Join(dir, "wo")
	open := func(p, flags string) *kvik.FileHandle {
		f, err := kvik.Open(p, flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	rw, ro, wo := open(path, "r+"), open(path, "r"), open(woPath, "w")
	closed := open(path, "r+")
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	handles := map[string]*kvik.FileHandle{"r+": rw, "r": ro, "w": wo, "closed": closed}
	const maxI64 = math.MaxInt64
	inv, clo, nrd, nwr := kvik.ErrInvalidArgument, kvik.ErrClosed, kvik.ErrNotReadable, kvik.ErrNotWritable
	cases := []struct {
		name   string
		handle string
		op     relBadOp
		want   error
		pathOp string // the fs.PathError's Op
	}{
		// Negative offsets.
		{"WriteAt at -1", "r+", relWriteAt(10, -1), inv, "write"},
		{"WriteAt at MinInt64", "r+", relWriteAt(10, math.MinInt64), inv, "write"},
		{"ReadAt at MinInt64", "r+", relReadAt(10, math.MinInt64), inv, "read"},
		{"ReadAt of 0 bytes at -1", "r+", relReadAt(0, -1), inv, "read"},
		{"WriteAt of 0 bytes at -1", "r+", relWriteAt(0, -1), inv, "write"},
		{"Read at -1", "r+", relRead(10, 10, -1), inv, "read"},
		{"Write at -1", "r+", relWrite(10, 10, -1), inv, "write"},
		{"PRead at -1", "r+", relPRead(10, -1), inv, "read"},
		{"PWrite at -1", "r+", relPWrite(10, -1), inv, "write"},
		{"PRead at MinInt64", "r", relPRead(1, math.MinInt64), inv, "read"},
		// Negative sizes.
		{"Read size -1", "r+", relRead(10, -1, 0), inv, "read"},
		{"Read size MinInt", "r+", relRead(10, math.MinInt, 0), inv, "read"},
		{"Write size -1", "r+", relWrite(10, -1, 0), inv, "write"},
		{"Write size MinInt", "r+", relWrite(10, math.MinInt, 0), inv, "write"},
		// Sizes larger than the buffer.
		{"Write size len+1", "r+", relWrite(10, 11, 0), inv, "write"},
		{"Write size 1 of a nil buffer", "r+", relWrite(0, 1, 0), inv, "write"},
		{"Read size 1 of a nil buffer", "r+", relRead(0, 1, 0), inv, "read"},
		{"Read size MaxInt", "r+", relRead(10, math.MaxInt, 0), inv, "read"},
		{"Write size MaxInt", "r+", relWrite(10, math.MaxInt, 0), inv, "write"},
		// offset + size overflows int64.
		{"ReadAt overflow", "r+", relReadAt(10, maxI64-5), inv, "read"},
		{"WriteAt overflow", "r+", relWriteAt(10, maxI64-5), inv, "write"},
		{"WriteAt of 1 byte at MaxInt64", "r+", relWriteAt(1, maxI64), inv, "write"},
		{"PRead overflow", "r+", relPRead(10, maxI64), inv, "read"},
		{"PWrite overflow", "r+", relPWrite(2, maxI64-1), inv, "write"},
		{"Read overflow", "r+", relRead(20, 10, maxI64-9), inv, "read"},
		{"Write overflow", "r+", relWrite(20, 10, maxI64-9), inv, "write"},
		// Read on write-only, write on read-only.
		{"Read on w", "w", relRead(10, 10, 0), nrd, "read"},
		{"PRead on w", "w", relPRead(10, 0), nrd, "read"},
		{"ReadAt of 0 bytes on w", "w", relReadAt(0, 0), nrd, "read"},
		{"Write on r", "r", relWrite(10, 10, 0), nwr, "write"},
		{"PWrite on r", "r", relPWrite(10, 0), nwr, "write"},
		{"WriteAt of 0 bytes on r", "r", relWriteAt(0, 0), nwr, "write"},
		// Closed handle.
		{"WriteAt after Close", "closed", relWriteAt(10, 0), clo, "write"},
		{"Write after Close", "closed", relWrite(10, 10, 0), clo, "write"},
		{"PWrite after Close", "closed", relPWrite(10, 0), clo, "write"},
		{"Read after Close", "closed", relRead(10, 10, 0), clo, "read"},
		{"ReadAt of 0 bytes after Close", "closed", relReadAt(0, 0), clo, "read"},
		{"PWrite of 0 bytes after Close", "closed", relPWrite(0, 0), clo, "write"},
		{"Sync after Close", "closed", func(f *kvik.FileHandle) (int, error) { return 0, f.Sync() }, clo, "sync"},
		{"Size after Close (PathError)", "closed", func(f *kvik.FileHandle) (int, error) { _, err := f.Size(); return 0, err }, clo, "stat"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := handles[c.handle]
			n, err := c.op(f)
			if n != 0 || !errors.Is(err, c.want) {
				t.Fatalf("(%d, %v), want (0, an error matching %q)", n, err, c.want)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != f.Name() || pe.Op != c.pathOp {
				t.Fatalf("error %#v is not a *fs.PathError{Op: %q, Path: %q}", err, c.pathOp, f.Name())
			}
		})
	}
	// No failed write reached either file.
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the r+ file changed after rejected writes (%v)", err)
	}
	if st, err := os.Stat(woPath); err != nil || st.Size() != 0 {
		t.Fatalf("the w file: %v, %v", st, err)
	}
}

// TestBadOpen: bad flag strings, O_APPEND and bad compat modes are
// ErrInvalidArgument in a *fs.PathError naming the path, and create no
// file and leak no descriptor.
func TestBadOpen(t *testing.T) {
	dir := t.TempDir()
	fds0 := relOpenFds(t)
	newPath := filepath.Join(dir, "must-not-exist")
	for _, flags := range []string{"a+", "R", "W", " r", "r ", "w+x", "rw+", "b", "bw", "+r", "r\x00", "rb+x", "ww", "r+r", "w++", "rt"} {
		_, err := kvik.Open(newPath, flags, 0)
		var pe *fs.PathError
		if !errors.Is(err, kvik.ErrInvalidArgument) || !errors.As(err, &pe) || pe.Path != newPath {
			t.Fatalf("flags %q: %v, want ErrInvalidArgument in a PathError for %s", flags, err, newPath)
		}
	}
	for _, flag := range []int{os.O_RDWR | os.O_APPEND, os.O_RDWR | os.O_CREATE | os.O_APPEND, os.O_WRONLY | os.O_CREATE | os.O_TRUNC | os.O_APPEND, os.O_RDONLY | os.O_APPEND} {
		if _, err := kvik.OpenFile(newPath, flag, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Fatalf("OpenFile flag %#x: %v", flag, err)
		}
	}
	for _, m := range []kvik.CompatMode{3, -1, 1 << 20} {
		if _, err := kvik.Open(newPath, "w+", 0, kvik.WithCompatMode(m)); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Fatalf("compat mode %d: %v", int(m), err)
		}
	}
	if _, err := os.Stat(newPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a rejected open created %s (%v)", newPath, err)
	}
	if fds1 := relOpenFds(t); fds1 != fds0 {
		t.Fatalf("rejected opens leaked descriptors: %d before, %d after", fds0, fds1)
	}
}

// TestBadDefaults: every out-of-range setting is refused with
// ErrInvalidArgument and leaves the settings as they were.
func TestBadDefaults(t *testing.T) {
	before, err := kvik.GetDefaults()
	if err != nil {
		t.Skipf("environment holds bad KVIKIO_* values: %v", err)
	}
	for name, change := range map[string]func(d *kvik.Defaults){
		"NumThreads 0":           func(d *kvik.Defaults) { d.NumThreads = 0 },
		"NumThreads -1":          func(d *kvik.Defaults) { d.NumThreads = -1 },
		"NumThreads MinInt":      func(d *kvik.Defaults) { d.NumThreads = math.MinInt },
		"TaskSize 0":             func(d *kvik.Defaults) { d.TaskSize = 0 },
		"TaskSize -4096":         func(d *kvik.Defaults) { d.TaskSize = -4096 },
		"BounceBufferSize 0":     func(d *kvik.Defaults) { d.BounceBufferSize = 0 },
		"BounceBufferSize -1":    func(d *kvik.Defaults) { d.BounceBufferSize = -1 },
		"GDSThreshold -1":        func(d *kvik.Defaults) { d.GDSThreshold = -1 },
		"CompatMode 3":           func(d *kvik.Defaults) { d.CompatMode = 3 },
		"CompatMode -1":          func(d *kvik.Defaults) { d.CompatMode = -1 },
		"several at once":        func(d *kvik.Defaults) { d.NumThreads, d.TaskSize = 0, 0 },
		"valid then invalid":     func(d *kvik.Defaults) { d.NumThreads, d.BounceBufferSize = 3, 0 },
		"TaskSize MinInt":        func(d *kvik.Defaults) { d.TaskSize = math.MinInt },
		"BounceBufferSize -4096": func(d *kvik.Defaults) { d.BounceBufferSize = -4096 },
	} {
		restore, err := kvik.UpdateDefaults(change)
		if !errors.Is(err, kvik.ErrInvalidArgument) {
			restore()
			t.Fatalf("%s: %v, want ErrInvalidArgument", name, err)
		}
		restore() // a no-op, which must not disturb anything either
		if d, err := kvik.GetDefaults(); d != before || err != nil {
			t.Fatalf("%s: settings changed to %+v (%v)", name, d, err)
		}
	}
}

// TestHugeOffsets: offsets that are valid int64s but beyond what the file
// system allows must give os.File's answer, (0, io.EOF) for reads and an
// error for writes (EFBIG here), with and without O_DIRECT, not a crash
// or a recovered panic.
func TestHugeOffsets(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeRandomFile(t, rand.New(rand.NewPCG(13, 14)), dir, 5000)
	ref, f := openWithReference(t, path)
	p := int64(relTestPageSize)
	offsets := []int64{1 << 62, math.MaxInt64/p*p - p, math.MaxInt64 - 2*p - 1}
	near := []int64{math.MaxInt64 - 10, math.MaxInt64 - p + 1, math.MaxInt64 - p - 5}
	for _, direct := range []bool{false, true} {
		for _, off := range append(offsets, near...) {
			t.Run(fmt.Sprintf("direct=%v/off=%d", direct, off), func(t *testing.T) {
				setDefaults(t, func(d *kvik.Defaults) { d.AutoDirectIORead, d.AutoDirectIOWrite = direct, direct })
				n := int(min(2*p+10, math.MaxInt64-off))
				wantN, wantErr := ref.ReadAt(make([]byte, n), off)
				got, err := f.ReadAt(make([]byte, n), off)
				if got != wantN || (err == io.EOF) != (wantErr == io.EOF) || (err == nil) != (wantErr == nil) {
					t.Fatalf("ReadAt of %d bytes: (%d, %v), os.File gives (%d, %v)", n, got, err, wantN, wantErr)
				}
				wn, werr := ref.WriteAt(make([]byte, n), off)
				got, err = f.WriteAt(bytes.Repeat([]byte{9}, n), off)
				if werr == nil {
					t.Skipf("this file system accepts a write at %d", off)
				}
				if got != wn || err == nil || strings.Contains(err.Error(), "panic") {
					t.Fatalf("WriteAt: (%d, %v), os.File gives (%d, %v)", got, err, wn, werr)
				}
				if errors.Is(werr, syscall.EFBIG) && !errors.Is(err, syscall.EFBIG) {
					t.Fatalf("WriteAt: %v, want EFBIG like os.File", err)
				}
			})
		}
	}
}

// TestNilContext: a nil context is a caller's mistake, but it must not
// crash the process: PRead and PWrite must either treat it as
// context.Background() or fail with ErrInvalidArgument. Run in a child
// process, since the crash happens on a worker goroutine, where no
// recover can catch it.
func TestNilContext(t *testing.T) {
	if os.Getenv("KVIK_TEST_CHILD") == "nilctx" {
		path := os.Getenv("KVIK_TEST_FILE")
		setDefaults(t, func(d *kvik.Defaults) { d.TaskSize, d.NumThreads = 4096, 2 })
		// No deferred Close: after a panic with the handle in use it
		// would wait for ever instead of letting the process die.
		f, err := kvik.Open(path, "r+", 0)
		if err != nil {
			t.Fatal(err)
		}
		var nilCtx context.Context
		for _, n := range []int{100, 64 << 10} { // one task, several tasks
			got, err := f.PRead(nilCtx, make([]byte, n), 0).Get()
			if !(got == n && err == nil) && !errors.Is(err, kvik.ErrInvalidArgument) {
				t.Fatalf("PRead(nil ctx) of %d bytes: (%d, %v)", n, got, err)
			}
			got, err = f.PWrite(nilCtx, make([]byte, n), 0).Get()
			if !(got == n && err == nil) && !errors.Is(err, kvik.ErrInvalidArgument) {
				t.Fatalf("PWrite(nil ctx) of %d bytes: (%d, %v)", n, got, err)
			}
		}
		f.Close()
		return
	}
	path, _ := writeRandomFile(t, rand.New(rand.NewPCG(15, 16)), t.TempDir(), 64<<10)
	runChild(t, "TestNilContext", "KVIK_TEST_CHILD=nilctx", "KVIK_TEST_FILE="+path)
}
