package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
)

func writeRandomFile(t testing.TB, rng *rand.Rand, dir string, n int) (string, []byte) {
	t.Helper()
	data := randomBytes(rng, n)
	path := filepath.Join(dir, fmt.Sprintf("data-%d", n))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// setDefaults applies change for the rest of the test.
func setDefaults(t testing.TB, change func(d *kvik.Defaults)) {
	t.Helper()
	restore, err := kvik.UpdateDefaults(change)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}

type config struct {
	threads, taskSize, bounce int
	direct                    bool
}

func (c config) String() string {
	return fmt.Sprintf("threads=%d/task=%d/bounce=%d/direct=%v", c.threads, c.taskSize, c.bounce, c.direct)
}

func (c config) apply(d *kvik.Defaults) {
	d.NumThreads, d.TaskSize, d.BounceBufferSize = c.threads, c.taskSize, c.bounce
	d.AutoDirectIORead, d.AutoDirectIOWrite = c.direct, c.direct
	d.CompatMode = kvik.CompatOn
}

func configs() []config {
	var cs []config
	for _, th := range []int{1, 3, 4, 16} {
		for _, ts := range []int{199, 3*4096 + 512, 4 << 20} { // below, above and at whole pages
			for _, bb := range []int{1, 2 * 4096, 16 << 20} {
				for _, direct := range []bool{false, true} {
					cs = append(cs, config{th, ts, bb, direct})
				}
			}
		}
	}
	return cs
}

// compareRead reads [off, off+n) with kvik and with os.File and compares
// bytes, counts and errors; the kvik buffer starts at an unaligned address
// when shift > 0.
func compareRead(t *testing.T, f *kvik.FileHandle, ref *os.File, off int64, n, shift int, rng *rand.Rand) {
	t.Helper()
	want := make([]byte, n)
	wn, werr := ref.ReadAt(want, off)
	backing := randomBytes(rng, n+shift)
	got := backing[shift:]
	gn, gerr := f.ReadAt(got, off)
	if gn != wn || (werr == nil) != (gerr == nil) || (werr == io.EOF) != (gerr == io.EOF) {
		t.Fatalf("ReadAt(%d bytes at %d): got (%d, %v), os.File gives (%d, %v)", n, off, gn, gerr, wn, werr)
	}
	if !bytes.Equal(got[:gn], want[:wn]) {
		i := 0
		for i < gn && got[i] == want[i] {
			i++
		}
		t.Fatalf("ReadAt(%d bytes at %d): first difference at byte %d", n, off, i)
	}
}

func TestReadAtMatchesOSFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	dir := t.TempDir()
	size := 8<<20 + rng.IntN(1<<20) + 1
	if !testing.Short() {
		size = 40<<20 + 123
	}
	path, _ := writeRandomFile(t, rng, dir, size)
	ref, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, c := range configs() {
		t.Run(c.String(), func(t *testing.T) {
			setDefaults(t, c.apply)
			f, err := kvik.Open(path, "r", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			maxLen := 1 << 20
			if c.taskSize < 4096 {
				maxLen = 64 << 10 // keep the task count sane under -race
			}
			for _, n := range []int{0, 1, 4095, 4096, 4097, 3*4096 + 17, rng.IntN(maxLen) + 1} {
				compareRead(t, f, ref, rng.Int64N(int64(size)), n, rng.IntN(4096), rng)
				compareRead(t, f, ref, int64(rng.IntN(8)*4096), n, 0, rng)
			}
			// Ranges crossing and past the end of the file.
			compareRead(t, f, ref, int64(size)-100, 5000, 3, rng)
			compareRead(t, f, ref, int64(size)-4096*2-1, 3*4096, 0, rng)
			compareRead(t, f, ref, int64(size), 10, 0, rng)
			compareRead(t, f, ref, int64(size)+4096, 10, 0, rng)
			if c.taskSize == 4<<20 && c.bounce != 1 {
				compareRead(t, f, ref, 0, size, 1, rng)
			}
		})
	}
}

func TestWriteAtMatchesOSFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 17))
	dir := t.TempDir()
	for i, c := range configs() {
		if i%3 != 0 && testing.Short() {
			continue
		}
		t.Run(c.String(), func(t *testing.T) {
			setDefaults(t, c.apply)
			size := 3<<20 + rng.IntN(1<<20)
			if c.taskSize < 4096 {
				size = 256<<10 + rng.IntN(4096)
			}
			data := randomBytes(rng, size+4096)
			path := filepath.Join(dir, "w-"+fmt.Sprint(i))
			f, err := kvik.Open(path, "w+", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// Shuffled chunks of random sizes, written concurrently from
			// unaligned source slices.
			type chunk struct{ off, n int }
			var chunks []chunk
			for off := 0; off < size; {
				n := min(rng.IntN(300<<10)+1, size-off)
				chunks = append(chunks, chunk{off, n})
				off += n
			}
			rng.Shuffle(len(chunks), func(i, j int) { chunks[i], chunks[j] = chunks[j], chunks[i] })
			shift := rng.IntN(4096)
			src := data[shift : shift+size]
			var wg sync.WaitGroup
			futures := make([]*kvik.Future, len(chunks))
			for i, ch := range chunks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					futures[i] = f.PWrite(context.Background(), src[ch.off:ch.off+ch.n], int64(ch.off))
				}()
			}
			wg.Wait()
			for i, fut := range futures {
				if n, err := fut.Get(); n != chunks[i].n || err != nil {
					t.Fatalf("PWrite chunk %+v: %d, %v", chunks[i], n, err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) {
				t.Fatalf("file differs from what was written (len %d vs %d)", len(got), len(src))
			}
			// Read back through kvik in one call at an unaligned offset.
			back := make([]byte, size-1)
			if n, err := f.ReadAt(back, 1); n != size-1 || err != nil || !bytes.Equal(back, src[1:]) {
				t.Fatalf("read back: %d, %v", n, err)
			}
		})
	}
}

func TestReadWriteShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	path, data := writeRandomFile(t, rng, t.TempDir(), 10000)
	f, err := kvik.Open(path, "r+b", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 20000)
	if n, err := f.Read(buf, 5000, 123); n != 5000 || err != nil || !bytes.Equal(buf[:n], data[123:5123]) {
		t.Fatalf("Read: %d, %v", n, err)
	}
	if _, err := f.Read(buf, 20001, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("Read with size > len(buf): %v", err)
	}
	if n, err := f.Read(buf, 20000, 0); n != 10000 || err != io.EOF {
		t.Fatalf("Read past EOF: %d, %v", n, err)
	}
	patch := randomBytes(rng, 777)
	if n, err := f.Write(patch, 777, 9999); n != 777 || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if sz, err := f.Size(); sz != 9999+777 || err != nil {
		t.Fatalf("Size = %d, %v", sz, err)
	}
	fut := f.PRead(context.Background(), buf[:777], 9999)
	if n, err := fut.Wait(context.Background()); n != 777 || err != nil || !bytes.Equal(buf[:777], patch) || !fut.Done() {
		t.Fatalf("PRead: %d, %v", n, err)
	}
}

func TestBadUse(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(9, 9))
	path, _ := writeRandomFile(t, rng, dir, 5000)

	if _, err := kvik.Open(filepath.Join(dir, "missing"), "r", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	for _, flags := range []string{"", "a", "x", "rw", "r++", "+"} {
		if _, err := kvik.Open(path, flags, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Fatalf("flags %q: %v", flags, err)
		}
	}
	if _, err := kvik.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("O_APPEND: %v", err)
	}

	w, err := kvik.Open(filepath.Join(dir, "w"), "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadAt(make([]byte, 10), 0); !errors.Is(err, kvik.ErrNotReadable) {
		t.Fatalf("read on w handle: %v", err)
	}
	w.Close()

	r, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte{1}, 0); !errors.Is(err, kvik.ErrNotWritable) {
		t.Fatalf("write on r handle: %v", err)
	}
	for _, off := range []int64{-1, -4096} {
		if _, err := r.ReadAt(make([]byte, 1), off); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Fatalf("negative offset: %v", err)
		}
	}
	if _, err := r.ReadAt(make([]byte, 2), 1<<63-1); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("overflowing offset: %v", err)
	}
	if n, err := r.ReadAt(make([]byte, 10), 5000); n != 0 || err != io.EOF {
		t.Fatalf("read at EOF: %d, %v", n, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := r.ReadAt(make([]byte, 10), 0); !errors.Is(err, kvik.ErrClosed) || !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	if _, err := r.PRead(context.Background(), make([]byte, 10), 0).Get(); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("PRead after close: %v", err)
	}
	if _, err := r.Size(); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("Size after close: %v", err)
	}
	if r.Fd() != -1 {
		t.Fatalf("Fd after close = %d", r.Fd())
	}
}

func TestContextCancelsTasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 3))
	path, _ := writeRandomFile(t, rng, t.TempDir(), 1<<20)
	setDefaults(t, func(d *kvik.Defaults) { d.TaskSize, d.NumThreads = 4096, 1 })
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err := f.PRead(ctx, make([]byte, 1<<20), 0).Get()
	if !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("cancelled PRead: %d, %v", n, err)
	}
}

func TestCompatAutoWithoutCuFile(t *testing.T) {
	if os.Getenv("KVIK_TEST_CHILD") == "auto" {
		path := os.Getenv("KVIK_TEST_FILE")
		f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatAuto))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.CompatMode() != kvik.CompatOn || !bytes.Contains([]byte(f.CompatReason()), []byte("libcufile")) {
			t.Fatalf("mode %v, reason %q", f.CompatMode(), f.CompatReason())
		}
		if _, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOff)); !errors.Is(err, kvik.ErrCuFileRequired) {
			t.Fatalf("CompatOff without cuFile: %v", err)
		}
		return
	}
	path, _ := writeRandomFile(t, rand.New(rand.NewPCG(2, 2)), t.TempDir(), 10)
	runChild(t, "TestCompatAutoWithoutCuFile", "KVIK_TEST_CHILD=auto", "KVIK_TEST_FILE="+path,
		"KVIK_LIBCUFILE_PATH="+filepath.Join(t.TempDir(), "no-libcufile.so"))
}
