package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/kvikgo/kvik"
)

// mmapFile writes n random bytes to a new file and returns its path and
// contents.
func mmapFile(t testing.TB, rng *rand.Rand, n int) (string, []byte) {
	t.Helper()
	data := randomBytes(rng, n)
	path := filepath.Join(t.TempDir(), "m.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// TestMmapPropertyRandom checks random reads of random regions against
// os.File.ReadAt: bytes, counts and errors, under random settings.
func TestMmapPropertyRandom(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rng := rand.New(rand.NewPCG(relTestSeed(t), 9))
	for file := range 6 {
		size := []int{1, 4095, 4097, 1 << 20, 3<<20 + 123, rng.IntN(9<<20) + 1}[file]
		path, _ := mmapFile(t, rng, size)
		ref, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		var opts []kvik.MmapOption
		lo, hi := int64(0), int64(size)
		if rng.IntN(2) == 0 && size > 1 {
			lo = rng.Int64N(int64(size - 1))
			hi = lo + 1 + rng.Int64N(int64(size)-lo)
			opts = append(opts, kvik.WithMapOffset(lo), kvik.WithMapSize(hi-lo))
		}
		h, err := kvik.OpenMmap(path, "r", opts...)
		if err != nil {
			t.Fatal(err)
		}
		if fs, err := h.Size(); err != nil || fs != int64(size) || h.MapOffset() != lo || h.MapSize() != hi-lo {
			t.Fatalf("sizes: file %d map [%d,+%d), want %d [%d,+%d)", fs, h.MapOffset(), h.MapSize(), size, lo, hi-lo)
		}
		for op := range 60 {
			c := relRandomConfig(rng)
			off := lo + rng.Int64N(hi-lo)
			n := rng.IntN(int(hi-off)) + 1
			if hi == int64(size) && rng.IntN(4) == 0 {
				n += rng.IntN(5000) // past end of file: io.EOF
			}
			g := relNewGuarded(rng, n, relRandomShift(rng))
			var got int
			var gotErr error
			relWithConfig(t, c, func() {
				if op%2 == 0 {
					got, gotErr = h.ReadAt(g.buf(), off)
				} else {
					got, gotErr = h.PRead(context.Background(), g.buf(), off).Get()
				}
			})
			want := make([]byte, n)
			wn, werr := ref.ReadAt(want, off)
			if got != wn || (gotErr == nil) != (werr == nil) || (werr == io.EOF) != (gotErr == io.EOF) {
				t.Fatalf("file %d op %d (%v): read %d at %d: got (%d, %v), os.File (%d, %v)", file, op, c, n, off, got, gotErr, wn, werr)
			}
			if i := relFirstDiff(g.buf()[:got], want[:wn]); i < got {
				t.Fatalf("file %d op %d (%v): read %d at %d: first difference at byte %d", file, op, c, n, off, i)
			}
			g.checkGuards(t, "mmap read")
		}
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMmapErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 10))
	path, data := mmapFile(t, rng, 3*4096+17)
	size := int64(len(data))
	for _, flags := range []string{"w", "r+", "w+"} {
		if _, err := kvik.OpenMmap(path, flags); !errors.Is(err, kvik.ErrNotWritable) {
			t.Errorf("flags %q: got %v, want ErrNotWritable", flags, err)
		}
	}
	if _, err := kvik.OpenMmap(path, "x"); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Errorf("flags x: got %v", err)
	}
	if _, err := kvik.OpenMmap(filepath.Join(t.TempDir(), "none"), "r"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v", err)
	}
	for _, opts := range [][]kvik.MmapOption{
		{kvik.WithMapOffset(size)}, {kvik.WithMapOffset(-1)}, {kvik.WithMapSize(0)},
		{kvik.WithMapSize(size + 1)}, {kvik.WithMapOffset(10), kvik.WithMapSize(size - 9)},
	} {
		if h, err := kvik.OpenMmap(path, "rb", opts...); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Errorf("bad region: got %v", err)
			if h != nil {
				h.Close()
			}
		}
	}
	h, err := kvik.OpenMmap(path, "r", kvik.WithMapOffset(5000), kvik.WithMapSize(4000))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	for _, off := range []int64{0, 4999, 8950, size - 10} {
		n, err := h.ReadAt(buf, off)
		if n != 0 || !errors.Is(err, kvik.ErrOutOfRange) {
			t.Errorf("read at %d outside [5000, 9000): got (%d, %v), want ErrOutOfRange", off, n, err)
		}
	}
	if n, err := h.ReadAt(buf, 5000); n != 100 || err != nil || !bytes.Equal(buf, data[5000:5100]) {
		t.Errorf("read inside the region: (%d, %v), bytes equal %v", n, err, bytes.Equal(buf, data[5000:5100]))
	}
	if _, err := h.ReadAt(buf, -1); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Errorf("negative offset: %v", err)
	}
	if _, err := h.Read(buf, 101, 5000); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Errorf("size over buffer: %v", err)
	}
	if err := h.Close(); err != nil || !h.Closed() {
		t.Fatalf("close: %v, closed %v", err, h.Closed())
	}
	if err := h.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := h.ReadAt(buf, 5000); !errors.Is(err, kvik.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := h.PRead(context.Background(), buf, 5000).Get(); !errors.Is(err, kvik.ErrClosed) {
		t.Errorf("pread after close: %v", err)
	}
}

func TestMmapEmptyFileAndEOF(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if n, err := h.ReadAt(make([]byte, 10), 0); n != 0 || err != io.EOF {
		t.Errorf("empty file: got (%d, %v), want (0, EOF)", n, err)
	}
	if n, err := h.ReadAt(nil, 0); n != 0 || err != nil {
		t.Errorf("empty read: got (%d, %v)", n, err)
	}
	// io.SectionReader over the handle reads the whole file, as over os.File.
	rng := rand.New(rand.NewPCG(relTestSeed(t), 11))
	p2, data := mmapFile(t, rng, 1<<20+333)
	h2, err := kvik.OpenMmap(p2, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	got, err := io.ReadAll(io.NewSectionReader(h2, 0, int64(len(data))+100))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("SectionReader: %d bytes, %v, equal %v", len(got), err, bytes.Equal(got, data))
	}
}

// TestMmapTruncatedFile reads a mapping whose file shrank after it was
// mapped: the lost pages must give an error, never a crash.
func TestMmapTruncatedFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 12))
	path, data := mmapFile(t, rng, 64<<10)
	h, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := os.Truncate(path, 8<<10); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if n, err := h.ReadAt(buf, 0); n != 4096 || err != nil || !bytes.Equal(buf, data[:4096]) {
		t.Fatalf("read of a page still in the file: (%d, %v)", n, err)
	}
	if n, err := h.ReadAt(buf, 32<<10); err == nil || n == len(buf) {
		t.Fatalf("read of a truncated page: got (%d, nil), want an error", n)
	}
}

// TestMmapCloseWaits closes while reads run: Close returns after them,
// and every read either completed with the right bytes or got ErrClosed.
func TestMmapCloseWaits(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rng := rand.New(rand.NewPCG(relTestSeed(t), 13))
	path, data := mmapFile(t, rng, 8<<20)
	h, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for j := 0; ; j++ {
				off := int64((i*7+j)%7) << 20
				n, err := h.ReadAt(buf, off)
				if errors.Is(err, kvik.ErrClosed) {
					return
				}
				if err != nil || n != len(buf) || !bytes.Equal(buf, data[off:off+int64(n)]) {
					t.Errorf("read at %d: (%d, %v)", off, n, err)
					return
				}
			}
		}()
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}
