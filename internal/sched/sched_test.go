package sched

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func checkSplit(t testing.TB, off int64, size, taskSize int) {
	tasks := Split(off, size, taskSize)
	if len(tasks) == 0 {
		t.Fatalf("Split(%d, %d, %d): no tasks", off, size, taskSize)
	}
	next := 0
	for i, tk := range tasks {
		if tk.BufOff != next || tk.Off != off+int64(next) {
			t.Fatalf("Split(%d, %d, %d): task %d = %+v, want BufOff %d", off, size, taskSize, i, tk, next)
		}
		if tk.Len < 0 || (taskSize > 0 && tk.Len > taskSize) || (tk.Len == 0 && size != 0) {
			t.Fatalf("Split(%d, %d, %d): task %d has bad length %d", off, size, taskSize, i, tk.Len)
		}
		next += tk.Len
	}
	if next != size {
		t.Fatalf("Split(%d, %d, %d): tasks cover %d bytes", off, size, taskSize, next)
	}
}

func checkSegments(t testing.TB, off int64, n, align int, direct bool) {
	segs := Segments(off, n, align, direct)
	pos := 0
	for i, s := range segs {
		if s.Len <= 0 || s.BufOff != pos || s.Off != off+int64(pos) {
			t.Fatalf("Segments(%d, %d, %d, %v): segment %d = %+v at %d", off, n, align, direct, i, s, pos)
		}
		if s.Direct {
			if !direct || s.Off%int64(align) != 0 || s.Len%align != 0 {
				t.Fatalf("Segments(%d, %d, %d, %v): unaligned direct segment %+v", off, n, align, direct, s)
			}
		} else if direct && align > 0 && len(segs) > 1 && s.Len >= 2*align {
			t.Fatalf("Segments(%d, %d, %d, %v): buffered segment %+v holds an aligned page", off, n, align, direct, s)
		}
		pos += s.Len
	}
	if pos != max(n, 0) {
		t.Fatalf("Segments(%d, %d, %d, %v): cover %d bytes", off, n, align, direct, pos)
	}
}

func TestSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range [][3]int{{0, 0, 10}, {5, 1, 10}, {0, 10, 10}, {3, 11, 10}, {0, 100, 0}, {7, 4097, 199}} {
		checkSplit(t, int64(c[0]), c[1], c[2])
	}
	for range 1000 {
		checkSplit(t, rng.Int64N(1<<40), rng.IntN(1<<20), rng.IntN(1<<16))
	}
	if got := Split(10, 25, 10); len(got) != 3 || got[2] != (Task{Off: 30, BufOff: 20, Len: 5}) {
		t.Fatalf("Split(10, 25, 10) = %+v", got)
	}
}

// checkSplitAligned checks SplitAligned against Split: the same number of
// tasks covering the range in order, every boundary between tasks on a
// multiple of align, no task empty or longer than taskSize+align-1.
func checkSplitAligned(t testing.TB, off int64, size, taskSize, align int) {
	tasks := SplitAligned(off, size, taskSize, align)
	plain := Split(off, size, taskSize)
	if len(tasks) != len(plain) {
		t.Fatalf("SplitAligned(%d, %d, %d, %d): %d tasks, Split makes %d", off, size, taskSize, align, len(tasks), len(plain))
	}
	aligned := align > 1 && taskSize >= align
	next := 0
	for i, tk := range tasks {
		if tk.BufOff != next || tk.Off != off+int64(next) {
			t.Fatalf("SplitAligned(%d, %d, %d, %d): task %d = %+v, want BufOff %d", off, size, taskSize, align, i, tk, next)
		}
		if tk.Len < 0 || (tk.Len == 0 && size != 0) || (taskSize > 0 && tk.Len > taskSize+max(align-1, 0)) {
			t.Fatalf("SplitAligned(%d, %d, %d, %d): task %d has bad length %d", off, size, taskSize, align, i, tk.Len)
		}
		if i > 0 && aligned && tk.Off%int64(align) != 0 {
			t.Fatalf("SplitAligned(%d, %d, %d, %d): task %d starts at unaligned %d", off, size, taskSize, align, i, tk.Off)
		}
		if !aligned && tk != plain[i] {
			t.Fatalf("SplitAligned(%d, %d, %d, %d) = %+v, want Split's %+v", off, size, taskSize, align, tasks, plain)
		}
		next += tk.Len
	}
	if next != size {
		t.Fatalf("SplitAligned(%d, %d, %d, %d): tasks cover %d bytes", off, size, taskSize, align, next)
	}
}

func TestSplitAligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range [][4]int{{0, 0, 10, 4}, {3, 11, 10, 4}, {4095, 3 * 4096, 4096, 4096}, {1, 100, 3, 4}, {7, 4097, 199, 512}, {0, 100, 0, 4096}} {
		checkSplitAligned(t, int64(c[0]), c[1], c[2], c[3])
	}
	for range 2000 {
		align := 1 << rng.IntN(13)
		checkSplitAligned(t, rng.Int64N(1<<40), rng.IntN(1<<20), rng.IntN(1<<16), align)
	}
	// A read of 10 MiB at offset 100 in 4 MiB tasks: boundaries at 4 MiB
	// and 8 MiB instead of 4 MiB+100 and 8 MiB+100.
	got := SplitAligned(100, 10<<20, 4<<20, 4096)
	want := []Task{{Off: 100, Len: 4<<20 - 100}, {Off: 4 << 20, BufOff: 4<<20 - 100, Len: 4 << 20}, {Off: 8 << 20, BufOff: 8<<20 - 100, Len: 2<<20 + 100}}
	if len(got) != len(want) {
		t.Fatalf("SplitAligned(100, 10 MiB, 4 MiB, 4096) = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("SplitAligned(100, 10 MiB, 4 MiB, 4096) = %+v, want %+v", got, want)
		}
	}
}

func TestSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		checkSegments(t, rng.Int64N(1<<20), rng.IntN(1<<16), 4096, rng.IntN(2) == 0)
	}
	segs := Segments(4095, 4096*3+2, 4096, true)
	want := []Segment{{Off: 4095, Len: 1}, {Off: 4096, BufOff: 1, Len: 3 * 4096, Direct: true}, {Off: 4 * 4096, BufOff: 1 + 3*4096, Len: 1}}
	if len(segs) != len(want) {
		t.Fatalf("Segments = %+v, want %+v", segs, want)
	}
	for i := range want {
		if segs[i] != want[i] {
			t.Fatalf("Segments = %+v, want %+v", segs, want)
		}
	}
	if s := Segments(1, 4096, 4096, true); len(s) != 1 || s[0].Direct {
		t.Fatalf("no aligned middle: got %+v", s)
	}
}

func FuzzSegments(f *testing.F) {
	f.Add(int64(0), 4096, 4096, true)
	f.Add(int64(4095), 8194, 4096, true)
	f.Add(int64(1), 1, 512, false)
	f.Fuzz(func(t *testing.T, off int64, n, align int, direct bool) {
		if off < 0 || off > 1<<50 || n > 1<<26 || align > 1<<20 || align < 0 {
			t.Skip()
		}
		checkSegments(t, off, n, align, direct)
	})
}

func FuzzSplit(f *testing.F) {
	f.Add(int64(0), 100, 7)
	f.Add(int64(99), 0, 0)
	f.Fuzz(func(t *testing.T, off int64, size, taskSize int) {
		if off < 0 || off > 1<<50 || size < 0 || size > 1<<24 || (taskSize > 0 && size/taskSize > 1<<16) {
			t.Skip()
		}
		checkSplit(t, off, size, taskSize)
		checkSplitAligned(t, off, size, taskSize, 4096)
	})
}

func TestPoolBoundsConcurrencyAndResizes(t *testing.T) {
	p := NewPool(3)
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	gate := make(chan struct{})
	var ran atomic.Int32
	for range 40 {
		wg.Add(1)
		p.Submit(func() {
			defer wg.Done()
			r := running.Add(1)
			for {
				old := peak.Load()
				if r <= old || peak.CompareAndSwap(old, r) {
					break
				}
			}
			<-gate
			running.Add(-1)
			ran.Add(1)
		})
	}
	waitFor(t, func() bool { return running.Load() == 3 })
	if p.Pending() != 37 {
		t.Fatalf("pending = %d, want 37", p.Pending())
	}
	p.SetLimit(8)
	waitFor(t, func() bool { return running.Load() == 8 })
	p.SetLimit(1) // shrinking must not drop queued work
	close(gate)
	wg.Wait()
	if ran.Load() != 40 {
		t.Fatalf("ran %d of 40", ran.Load())
	}
	if peak.Load() != 8 {
		t.Fatalf("peak concurrency %d, want 8", peak.Load())
	}
	waitFor(t, func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.running == 0 })
}

func TestZeroPoolRunsOneAtATime(t *testing.T) {
	var p Pool
	var running atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		p.Submit(func() {
			defer wg.Done()
			if running.Add(1) > 1 {
				t.Error("two functions ran at once")
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
		})
	}
	wg.Wait()
}

// TestPoolThread checks the Thread hook: each worker calls it once as it
// starts and its release once as it stops, every function runs on a
// thread its worker's hook prepared (here: locked, its id recorded), and
// no worker is left once the work is done.
func TestPoolThread(t *testing.T) {
	p := NewPool(3)
	var mu sync.Mutex
	prepared := map[int]bool{}
	var starts, releases atomic.Int32
	p.Thread = func() func() {
		starts.Add(1)
		runtime.LockOSThread()
		tid := unix.Gettid()
		mu.Lock()
		prepared[tid] = true
		mu.Unlock()
		return func() {
			mu.Lock()
			delete(prepared, tid)
			mu.Unlock()
			runtime.UnlockOSThread()
			releases.Add(1)
		}
	}
	var wg sync.WaitGroup
	for round := range 3 {
		for range 20 {
			wg.Add(1)
			p.Submit(func() {
				defer wg.Done()
				mu.Lock()
				ok := prepared[unix.Gettid()]
				mu.Unlock()
				if !ok {
					t.Error("a function ran on a thread its worker's hook did not prepare")
				}
				time.Sleep(100 * time.Microsecond)
			})
		}
		wg.Wait()
		waitFor(t, func() bool { return starts.Load() == releases.Load() })
		if n := starts.Load(); n < int32(round+1) || n > int32(3*(round+1)) {
			t.Errorf("round %d: %d workers started for 3 at a time", round, n)
		}
	}
	q := NewPool(2)
	q.Thread = func() func() { return nil } // nothing to undo
	wg.Add(1)
	q.Submit(wg.Done)
	wg.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func runOp(p *Pool, ctx context.Context, tasks []Task, fn TaskFunc) (int, error) {
	ch := make(chan struct {
		n   int
		err error
	}, 1)
	calls := 0
	Run(ctx, p, tasks, fn, func(n int, err error) {
		calls++
		ch <- struct {
			n   int
			err error
		}{n, err}
	})
	r := <-ch
	if calls != 1 {
		panic("done called more than once")
	}
	return r.n, r.err
}

func TestRunAggregatesPrefix(t *testing.T) {
	p := NewPool(4)
	tasks := Split(0, 100, 10)
	n, err := runOp(p, context.Background(), tasks, func(_ context.Context, t Task) (int, error) { return t.Len, nil })
	if n != 100 || err != nil {
		t.Fatalf("full: %d, %v", n, err)
	}
	// A short read in task 3 ends the operation at 30+4 bytes with io.EOF.
	n, err = runOp(p, context.Background(), tasks, func(_ context.Context, t Task) (int, error) {
		switch {
		case t.Off < 30:
			return t.Len, nil
		case t.Off == 30:
			return 4, io.EOF
		}
		return 0, io.EOF
	})
	if n != 34 || err != io.EOF {
		t.Fatalf("short: %d, %v", n, err)
	}
	boom := errors.New("boom")
	n, err = runOp(p, context.Background(), tasks, func(_ context.Context, t Task) (int, error) {
		if t.Off == 50 {
			return 3, boom
		}
		return t.Len, nil
	})
	if n != 53 || !errors.Is(err, boom) {
		t.Fatalf("error: %d, %v", n, err)
	}
	// A task that returns less without an error is reported, not trusted.
	n, err = runOp(nil, context.Background(), tasks[:1], func(_ context.Context, t Task) (int, error) { return 1, nil })
	if n != 1 || err == nil {
		t.Fatalf("silent short: %d, %v", n, err)
	}
	n, err = runOp(p, context.Background(), tasks, func(_ context.Context, t Task) (int, error) {
		if t.Off == 20 {
			panic("bad task")
		}
		return t.Len, nil
	})
	if n != 20 || err == nil {
		t.Fatalf("panic: %d, %v", n, err)
	}
}

func TestRunCancel(t *testing.T) {
	p := NewPool(1)
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	n, err := runOp(p, ctx, Split(0, 100, 10), func(_ context.Context, t Task) (int, error) {
		if started.Add(1) == 2 {
			cancel()
		}
		return t.Len, nil
	})
	if !errors.Is(err, context.Canceled) || n != 20 {
		t.Fatalf("cancel: %d, %v", n, err)
	}
	if started.Load() != 2 {
		t.Fatalf("%d tasks started after cancel", started.Load())
	}
}

func TestSpread(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		size, taskSize, workers, minTask int
		wantTasks, wantLen               int
	}{
		{16 * mib, 4 * mib, 16, mib, 16, mib},          // below one task per worker: all 16 work
		{64 * mib, 4 * mib, 16, mib, 16, 4 * mib},      // one task per worker already
		{1 << 30, 4 * mib, 16, mib, 256, 4 * mib},      // large: as Split
		{mib, 4 * mib, 16, mib, 1, mib},                // never below minTask
		{16 * mib, 4 * mib, 1, mib, 4, 4 * mib},        // one worker: as Split
		{5*mib + 3, 4 * mib, 16, mib, 6, mib},          // rounded up to whole tasks
		{10*mib + 1, 4 * mib, 4, 64 << 10, 4, 2625536}, // ceil(size/4) rounded up to a page
	} {
		tasks := Spread(7, c.size, c.taskSize, c.workers, c.minTask, 4096)
		if len(tasks) != c.wantTasks || tasks[0].Len != c.wantLen {
			t.Errorf("Spread(%d, %d, %d workers, min %d): %d tasks of %d, want %d of %d",
				c.size, c.taskSize, c.workers, c.minTask, len(tasks), tasks[0].Len, c.wantTasks, c.wantLen)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		off := rng.Int64N(1 << 40)
		size := rng.IntN(64 << 20)
		taskSize := 1 + rng.IntN(8<<20)
		workers := 1 + rng.IntN(32)
		minTask := 1 + rng.IntN(2<<20)
		align := 1 << rng.IntN(13)
		tasks := Spread(off, size, taskSize, workers, minTask, align)
		checkSplit(t, off, size, tasks[0].Len) // contiguous, complete, equal tasks
		if tasks[0].Len > max(taskSize, 0) && size > taskSize {
			t.Fatalf("Spread(%d, %d, %d, %d, %d): task of %d", size, taskSize, workers, minTask, align, tasks[0].Len)
		}
		if size >= workers*taskSize && len(tasks) != len(Split(off, size, taskSize)) {
			t.Fatalf("Spread(%d, %d, %d, ...) differs from Split for a large operation", size, taskSize, workers)
		}
		if len(tasks) > max(workers, len(Split(off, size, taskSize))) && tasks[0].Len > minTask && tasks[0].Len > align {
			t.Fatalf("Spread(%d, %d, %d workers, min %d, align %d): %d tasks of %d", size, taskSize, workers, minTask, align, len(tasks), tasks[0].Len)
		}
	}
}

func TestSpreadNearMaxInt(t *testing.T) {
	tasks := Spread(0, math.MaxInt-5, math.MaxInt, 16, 1, 4096)
	checkSplit(t, 0, math.MaxInt-5, tasks[0].Len)
	if len(tasks) != 16 {
		t.Fatalf("%d tasks", len(tasks))
	}
}

// TestBatch merges random aligned splits: the batches cover the same bytes
// in the same order, each at most k tasks of the split, the last tail
// tasks alone, and there are as few as k allows; a gap between tasks
// starts a new batch.
func TestBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for range 500 {
		off := int64(rng.IntN(1 << 20))
		size := rng.IntN(1<<22) + 1
		taskSize := rng.IntN(1<<18) + 1
		k := rng.IntN(6)
		tasks := SplitAligned(off, size, taskSize, 4096)
		tail := rng.IntN(len(tasks) + 2)
		got := Batch(tasks, k, tail)
		if k <= 1 {
			if len(got) != len(tasks) {
				t.Fatalf("k=%d changed %d tasks into %d", k, len(tasks), len(got))
			}
			continue
		}
		head := max(len(tasks)-tail, 0)
		if want := (head+k-1)/k + len(tasks) - head; len(got) != want {
			t.Fatalf("%d tasks, k=%d, tail %d: %d batches, want %d", len(tasks), k, tail, len(got), want)
		}
		for j := range len(tasks) - head {
			if got[len(got)-1-j] != tasks[len(tasks)-1-j] {
				t.Fatalf("tail task %d batched", j)
			}
		}
		next, i := 0, 0
		for _, b := range got {
			if b.BufOff != next || b.Off != off+int64(next) {
				t.Fatalf("batch at buffer offset %d (file %d), want %d", b.BufOff, b.Off, next)
			}
			// b is tasks[i:i+m] for some 1 <= m <= k.
			end, m := b.BufOff, 0
			for end < b.BufOff+b.Len {
				end += tasks[i].Len
				i++
				m++
			}
			if end != b.BufOff+b.Len || m > k {
				t.Fatalf("batch [%d, +%d) is not at most %d whole tasks", b.BufOff, b.Len, k)
			}
			next += b.Len
		}
		if next != size {
			t.Fatalf("batches cover %d of %d bytes", next, size)
		}
	}
	gap := []Task{{Off: 0, Len: 10}, {Off: 10, BufOff: 10, Len: 10}, {Off: 30, BufOff: 20, Len: 10}, {Off: 40, BufOff: 30, Len: 10}}
	if got := Batch(gap, 4, 0); len(got) != 2 || got[0].Len != 20 || got[1].Off != 30 || got[1].Len != 20 {
		t.Fatalf("gap in the file: batches %+v", got)
	}
}
