package kvik

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
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// fakeSave is saveDeviceOps on fake device memory: context c owns the
// addresses [c<<40, c<<40+len(mem[c])), so the engine's planning, staging
// and error paths run where there is no GPU.
type fakeSave struct {
	mu        sync.Mutex
	mem       map[cuda.Context][]byte
	pools     map[cuda.Context]*sched.Pool
	synced    map[cuda.Context]int
	entered   int // operations entered and not yet left
	buffers   int // staging buffers out
	copies    int // fromDevice calls
	copyBytes int
	// onCopy, when set, runs before each fromDevice copies: an error
	// from it fails the copy.
	onCopy func(call int) error
}

var fakePinned = &staging.Pool{}

func newFakeSave(ctxs ...cuda.Context) *fakeSave {
	f := &fakeSave{mem: map[cuda.Context][]byte{}, pools: map[cuda.Context]*sched.Pool{}, synced: map[cuda.Context]int{}}
	for _, c := range ctxs {
		f.mem[c] = nil
	}
	return f
}

// alloc puts b in the memory of c and returns its address.
func (f *fakeSave) alloc(c cuda.Context, b []byte) cuda.DevicePtr {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := cuda.DevicePtr(c)<<40 + cuda.DevicePtr(len(f.mem[c]))
	f.mem[c] = append(f.mem[c], b...)
	f.mem[c] = append(f.mem[c], 0xEE, 0xEE, 0xEE) // a gap: overruns read it
	return p
}

func (f *fakeSave) resolve(p Piece) (devmem.Range, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := cuda.Context(p.Ptr >> 40)
	m, ok := f.mem[c]
	off := int64(p.Ptr - cuda.DevicePtr(c)<<40)
	if !ok || off+p.Size > int64(len(m)) {
		return devmem.Range{}, fmt.Errorf("%w: fake device pointer %#x", ErrNotDeviceMemory, uint64(p.Ptr))
	}
	return devmem.Range{Ptr: p.Ptr, Base: cuda.DevicePtr(c) << 40, Ctx: c, Primary: true}, nil
}

func (f *fakeSave) sync(c cuda.Context) error {
	f.mu.Lock()
	f.synced[c]++
	f.mu.Unlock()
	return nil
}

func (f *fakeSave) enter(cuda.Context) func() {
	f.mu.Lock()
	f.entered++
	f.mu.Unlock()
	return sync.OnceFunc(func() {
		f.mu.Lock()
		f.entered--
		f.mu.Unlock()
	})
}

func (f *fakeSave) pool(fh *FileHandle, d Defaults, c cuda.Context) *sched.Pool {
	if c == 0 {
		return fh.pool(d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pools[c] == nil {
		f.pools[c] = sched.NewPool(d.NumThreads)
	}
	return f.pools[c]
}

func (f *fakeSave) reserve(cuda.Context, int, int) error { return nil }

func (f *fakeSave) buffer(c cuda.Context, n int, d Defaults) ([]byte, func(), error) {
	if c == 0 {
		return cudaSave{}.buffer(0, n, d)
	}
	b, err := fakePinned.Get(bounceSize(d))
	if err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	f.buffers++
	f.mu.Unlock()
	for i := range b.Mem { // stale bytes, so that a byte the engine skips shows
		b.Mem[i] = 0xAB
	}
	return b.Mem, func() {
		fakePinned.Put(b)
		f.mu.Lock()
		f.buffers--
		f.mu.Unlock()
	}, nil
}

func (f *fakeSave) fromDevice(r devmem.Range, copies []devCopy) error {
	f.mu.Lock()
	f.copies++
	call, hook := f.copies, f.onCopy
	f.mu.Unlock()
	if hook != nil {
		if err := hook(call); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range copies {
		if cuda.Context(c.src>>40) != r.Ctx {
			return fmt.Errorf("copy from %#x queued in context %d", uint64(c.src), r.Ctx)
		}
		off := int(c.src - cuda.DevicePtr(r.Ctx)<<40)
		copy(c.dst, f.mem[r.Ctx][off:off+len(c.dst)])
		f.copyBytes += len(c.dst)
	}
	return nil
}

// useFake makes saves use ops, with tasks of taskSize bytes and workers
// workers, until the test ends.
func useFake(t *testing.T, ops saveDeviceOps, taskSize, workers int) {
	t.Helper()
	old := saveDevice
	saveDevice = ops
	restore, err := UpdateDefaults(func(d *Defaults) { d.TaskSize, d.NumThreads = taskSize, workers })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { saveDevice = old; restore() })
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randomLayout returns pieces of random sizes (many small, some empty,
// some spanning several tasks) in host memory and in the fake memory of
// the contexts ctxs, and their concatenation.
func randomLayout(rng *rand.Rand, f *fakeSave, ctxs []cuda.Context, n, maxLen int) ([]Piece, []byte) {
	var all []byte
	ps := make([]Piece, n)
	for i := range ps {
		size := rng.IntN(maxLen + 1)
		if rng.IntN(3) == 0 {
			size = rng.IntN(300) // a norm's weights, padding, a header
		}
		b := randBytes(rng, size)
		all = append(all, b...)
		if size > 0 && len(ctxs) > 0 && rng.IntN(3) > 0 {
			ps[i] = Piece{Ptr: f.alloc(ctxs[rng.IntN(len(ctxs))], b), Size: int64(size)}
		} else {
			ps[i] = Piece{Data: b}
		}
	}
	return ps, all
}

func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if IsPendingName(e.Name()) {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

// TestSaveStagedFakeDevices saves pieces from host memory and from the
// memory of two fake GPUs, at random sizes and task sizes, and compares
// the file with the pieces' bytes; every buffer and operation is handed
// back, and each context's default stream is waited for once.
func TestSaveStagedFakeDevices(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	dir := t.TempDir()
	for round := range 30 {
		f := newFakeSave(1, 2)
		useFake(t, f, pageSize*(1+rng.IntN(40)), 1+rng.IntN(6))
		ctxs := []cuda.Context{1, 2}[:rng.IntN(3)]
		ps, want := randomLayout(rng, f, ctxs, 1+rng.IntN(30), 5*pageSize*(1+rng.IntN(8)))
		path := filepath.Join(dir, fmt.Sprintf("f%d", round%3)) // some replace an old file
		if err := SaveFile(context.Background(), path, ps); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: read back %d of %d bytes (%v) or different bytes", round, len(got), len(want), err)
		}
		var devBytes int
		used := map[cuda.Context]bool{}
		for _, p := range ps {
			if p.Ptr != 0 {
				devBytes += int(p.Size)
				used[cuda.Context(p.Ptr>>40)] = true
			}
		}
		if f.copyBytes != devBytes || f.entered != 0 || f.buffers != 0 {
			t.Fatalf("round %d: %d of %d device bytes copied; %d operations, %d buffers not handed back", round, f.copyBytes, devBytes, f.entered, f.buffers)
		}
		for c := range used {
			if f.synced[c] != 1 {
				t.Fatalf("round %d: context %d's default stream waited for %d times, want once", round, c, f.synced[c])
			}
		}
	}
	checkNoTemp(t, dir)
}

// TestSaveStagedParallel checks that the tasks of one large device piece
// are staged by several workers at once: the first copy waits until a
// second is in flight, which a save that copies a piece whole, or its
// tasks one after another, never starts.
func TestSaveStagedParallel(t *testing.T) {
	f := newFakeSave(1)
	useFake(t, f, 4*pageSize, 4)
	data := randBytes(rand.New(rand.NewPCG(1, 2)), 64*pageSize+123)
	second := make(chan struct{})
	var once sync.Once
	f.onCopy = func(call int) error {
		if call == 2 {
			once.Do(func() { close(second) })
			return nil
		}
		if call == 1 {
			select {
			case <-second:
			case <-time.After(10 * time.Second):
				return errors.New("no second copy ran beside the first")
			}
		}
		return nil
	}
	path := filepath.Join(t.TempDir(), "big")
	hdr := []byte("header of 21 bytes ..")
	if err := SaveFile(context.Background(), path, []Piece{{Data: hdr}, {Ptr: f.alloc(1, data), Size: int64(len(data))}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, append(hdr, data...)) {
		t.Fatal("file differs")
	}
	if want := (len(hdr) + len(data) + 4*pageSize - 1) / (4 * pageSize); f.copies != want {
		t.Fatalf("%d device copies for %d tasks", f.copies, want)
	}
}

// TestSaveStagedFailure fails one device copy midway: the save reports
// that error, the old file stays as it was, no temporary file remains
// and every buffer is handed back.
func TestSaveStagedFailure(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	old := randBytes(rng, 1000)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, failAt := range []int{1, 3, 9} {
		f := newFakeSave(1, 2)
		useFake(t, f, 2*pageSize, 3)
		ps, _ := randomLayout(rng, f, []cuda.Context{1, 2}, 40, 8*pageSize)
		ps = append(ps, Piece{Ptr: f.alloc(2, randBytes(rng, 30*pageSize)), Size: 30 * int64(pageSize)})
		boom := errors.New("injected copy failure")
		f.onCopy = func(call int) error {
			if call == failAt {
				return boom
			}
			return nil
		}
		err := SaveFile(context.Background(), path, ps)
		if !errors.Is(err, boom) {
			t.Fatalf("fail at copy %d: %v, want the injected error", failAt, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
			t.Fatalf("fail at copy %d: old file changed", failAt)
		}
		if f.entered != 0 || f.buffers != 0 {
			t.Fatalf("%d operations, %d buffers not handed back", f.entered, f.buffers)
		}
		checkNoTemp(t, dir)
	}
}

// TestSaveStagedCancel cancels ctx during a save: it returns
// context.Canceled, leaves no file, and stops copying.
func TestSaveStagedCancel(t *testing.T) {
	f := newFakeSave(1)
	useFake(t, f, pageSize, 2)
	rng := rand.New(rand.NewPCG(5, 6))
	n := 200 * pageSize
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onCopy = func(call int) error {
		if call == 5 {
			cancel()
		}
		return nil
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	err := SaveFile(ctx, path, []Piece{{Ptr: f.alloc(1, randBytes(rng, n)), Size: int64(n)}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a cancelled save left %s: %v", path, err)
	}
	if f.copies > 5+2 { // the workers' tasks in flight may finish
		t.Fatalf("%d copies after cancelling at the 5th of 200", f.copies)
	}
	checkNoTemp(t, dir)
}

// TestSaveStagedBadPiece refuses a device piece outside device memory
// before anything is written.
func TestSaveStagedBadPiece(t *testing.T) {
	f := newFakeSave(1)
	useFake(t, f, pageSize, 2)
	p := f.alloc(1, make([]byte, 100))
	path := filepath.Join(t.TempDir(), "f")
	err := SaveFile(context.Background(), path, []Piece{{Data: []byte("x")}, {Ptr: p, Size: 200}})
	if !errors.Is(err, ErrNotDeviceMemory) {
		t.Fatalf("%v, want ErrNotDeviceMemory", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused save created the file: %v", err)
	}
}

// TestLayoutSpans checks spans against a byte-by-byte walk of the pieces.
func TestLayoutSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for range 200 {
		ps := make([]Piece, 1+rng.IntN(12))
		var owner []int // owner[i]: the piece of file byte i
		for i := range ps {
			ps[i] = Piece{Data: make([]byte, rng.IntN(3)*rng.IntN(20))}
			for range len(ps[i].Data) {
				owner = append(owner, i)
			}
		}
		l, err := newLayout(ps, newFakeSave())
		if err != nil {
			t.Fatal(err)
		}
		off := rng.IntN(len(owner) + 1)
		n := rng.IntN(len(owner) - off + 1)
		var got []int
		for _, s := range l.spans(int64(off), n) {
			if s.n <= 0 {
				t.Fatalf("empty span %+v", s)
			}
			start := l.ends[s.piece] - ps[s.piece].Len()
			if start+s.off != int64(off+s.bufOff) {
				t.Fatalf("span %+v at the wrong place", s)
			}
			for range s.n {
				got = append(got, s.piece)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(owner[off:off+n]) {
			t.Fatalf("spans of [%d,+%d): pieces %v, want %v", off, n, got, owner[off:off+n])
		}
	}
}

// TestRunWindowedTakesTurns runs two operations on a pool of one worker:
// each queues its next task only when one ends, so they take turns
// instead of the second waiting for all of the first (which would write
// two shards one after the other).
func TestRunWindowedTakesTurns(t *testing.T) {
	pool := sched.NewPool(1)
	tasks := sched.Split(0, 8, 1)
	var mu sync.Mutex
	var order []string
	aStarted, bQueued := make(chan struct{}), make(chan struct{})
	record := func(name string) func(sched.Task) (int, error) {
		return func(t sched.Task) (int, error) {
			if name == "a" && t.Off == 0 {
				close(aStarted)
				<-bQueued // b's first task is queued behind this one
			}
			mu.Lock()
			order = append(order, fmt.Sprint(name, t.Off))
			mu.Unlock()
			return t.Len, nil
		}
	}
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { errA = runWindowed(context.Background(), pool, tasks, record("a")) })
	<-aStarted
	wg.Go(func() { errB = runWindowed(context.Background(), pool, tasks, record("b")) })
	deadline := time.Now().Add(10 * time.Second)
	for pool.Pending() == 0 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	close(bQueued)
	wg.Wait()
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprint("a", i), fmt.Sprint("b", i))
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("order %v, want turns %v", order, want)
	}
}
