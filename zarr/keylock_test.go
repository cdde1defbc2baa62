package zarr

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestConcurrentPartialWrites: goroutines write random disjoint sets of
// elements of one chunk (of one shard, for a sharded array) at once,
// element runs of random lengths each a WriteRegion of its own. Every
// element must hold what its writer wrote, and the elements nobody
// wrote their earlier value: each read-modify-write of the chunk waits
// for the others. Writers share one Array, or each opens its own on the
// store's directory (some through a symbolic link to it), or share a
// store that is neither a DirStore nor a RemoteStore.
func TestConcurrentPartialWrites(t *testing.T) {
	gzip := []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 1}}}
	metas := []struct {
		name string
		m    Metadata
	}{
		{"v3 gzip", Metadata{Shape: []int{17, 40}, ChunkShape: []int{6, 16}, DataType: DataType{Kind: Uint, Size: 2}, Codecs: gzip}},
		{"v2", Metadata{ZarrFormat: 2, Shape: []int{17, 40}, ChunkShape: []int{6, 16}, DataType: DataType{Kind: Int, Size: 4}, FillValue: 7}},
		{"sharded", Metadata{Shape: []int{17, 40}, ChunkShape: []int{8, 16}, DataType: DataType{Kind: Float, Size: 4}, Codecs: shardCodecs([]int{4, 4}, false, gzip)}},
	}
	rng := rand.New(rand.NewPCG(39, 3))
	for _, c := range metas {
		for _, how := range []string{"one array", "an array each", "map store"} {
			t.Run(c.name+"/"+how, func(t *testing.T) {
				concurrentPartialWrites(t, rand.New(rand.NewPCG(rng.Uint64(), 1)), c.m, how)
			})
		}
	}
}

func concurrentPartialWrites(t *testing.T, rng *rand.Rand, m Metadata, how string) {
	dir := filepath.Join(t.TempDir(), "a.zarr")
	link := filepath.Join(t.TempDir(), "link.zarr")
	var s Store = &memStore{m: map[string][]byte{}}
	if how != "map store" {
		var err error
		if s, err = NewDirStore(dir); err != nil {
			t.Fatal(err)
		}
	}
	a, err := Create(bg, s, "g/x", m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil && how == "an array each" {
		t.Fatal(err)
	}
	want, p := partialPlanOf(rng, m, 4+rng.IntN(9))
	origin := make([]int, 2)
	if err := a.WriteRegion(bg, origin, m.Shape, p.initial); err != nil {
		t.Fatal(err)
	}
	writers := len(p.runs)
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Go(func() {
			b := a
			if how == "an array each" {
				root := dir
				if w%2 == 1 {
					root = link
				}
				s, err := NewDirStore(root)
				if err == nil {
					b, err = Open(bg, s, "g/x")
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
			errs[w] = p.write(b, w)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if lost := lostElements(t, a, want); lost > 0 {
		t.Fatalf("%d writers, %d elements of %d differ from what was written", writers, lost, len(want.buf)/want.es)
	}
}

// partialRun is one WriteRegion of a partialPlan: one row's run of
// elements.
type partialRun struct {
	Start, Stop []int
	Data        []byte
}

// partialPlan is an array's first contents and, per writer, the runs it
// writes of one chunk.
type partialPlan struct {
	initial []byte
	runs    [][]partialRun
}

// partialPlanOf gives each of writers random elements of chunk (1, 1) of
// a 2-D array of metadata m (whole inside it), in row-major runs of
// random lengths, and leaves some elements to nobody. It returns the
// plan and the array as it must be once the initial contents and then
// every run are written, in any order.
func partialPlanOf(rng *rand.Rand, m Metadata, writers int) (model, partialPlan) {
	es := m.DataType.Size
	want := model{shape: m.Shape, es: es, buf: randValues(rng, m.DataType, numElements(m.Shape))}
	p := partialPlan{initial: bytes.Clone(want.buf), runs: make([][]partialRun, writers)}
	owner := make([]int, numElements(m.ChunkShape))
	for i := range owner {
		owner[i] = rng.IntN(writers+1) - 1 // -1: nobody's
	}
	cols := m.ChunkShape[1]
	for i := 0; i < len(owner); {
		j := i + 1
		for j < len(owner) && owner[j] == owner[i] && j%cols != 0 && rng.IntN(4) != 0 {
			j++
		}
		if w := owner[i]; w >= 0 {
			r, c := m.ChunkShape[0]+i/cols, cols+i%cols
			run := partialRun{[]int{r, c}, []int{r + 1, c + j - i}, randValues(rng, m.DataType, j-i)}
			p.runs[w] = append(p.runs[w], run)
			want.write(run.Start, run.Stop, run.Data)
		}
		i = j
	}
	return want, p
}

// write writes the runs of writer w to a, in order.
func (p partialPlan) write(a *Array, w int) error {
	for _, r := range p.runs[w] {
		if err := a.WriteRegion(bg, r.Start, r.Stop, r.Data); err != nil {
			return err
		}
	}
	return nil
}

// lostElements reads a whole and counts the elements that differ from
// want.
func lostElements(t *testing.T, a *Array, want model) int {
	t.Helper()
	got := make([]byte, len(want.buf))
	if err := a.ReadRegion(bg, make([]int, len(want.shape)), want.shape, got); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i := 0; i < len(got); i += want.es {
		if !bytes.Equal(got[i:i+want.es], want.buf[i:i+want.es]) {
			lost++
		}
	}
	return lost
}

// heldAlone checks the lock that lock takes, held now (release frees it):
// another lock gives up when its context ends, and one that waits takes
// it only once it is released.
func heldAlone(t *testing.T, release func(), lock func(ctx context.Context) (func(), error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if _, err := lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock of a held lock: %v, want DeadlineExceeded", err)
	}
	got := make(chan error)
	go func() {
		r, err := lock(bg)
		if err == nil {
			r()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a second holder while the first holds: %v", err)
	case <-time.After(30 * time.Millisecond):
	}
	release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestKeyedMutex: a lock is held by one caller at a time, a waiter gives
// up when its context ends, and no name is kept once nobody holds or
// awaits it.
func TestKeyedMutex(t *testing.T) {
	k := keyedMutex{m: map[any]*keyLock{}}
	unlock, err := k.lock(bg, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := k.lock(bg, "b") // another name: not blocked
	if err != nil {
		t.Fatal(err)
	}
	other()
	heldAlone(t, unlock, func(ctx context.Context) (func(), error) { return k.lock(ctx, "a") })
	if len(k.m) != 0 {
		t.Fatalf("%d names kept after every lock was released", len(k.m))
	}
}

// TestLockNames: one file's lock name whatever the path's spelling
// (relative, through a link, before the directory exists), one object's
// whatever the key's case in a normalizing store.
func TestLockNames(t *testing.T) {
	tmp := t.TempDir()
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(filepath.Join(tmp, "real"), link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	names := map[any]bool{}
	for _, root := range []string{filepath.Join(tmp, "real", "s.zarr"), filepath.Join(link, "s.zarr"), filepath.Join(tmp, "real", "..", "link", "s.zarr")} {
		s, err := NewDirStore(root, WithNormalizeKeys(true))
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"c/0/1", "C/0/1"} {
			names[(&Array{store: s}).lockName(key)] = true
		}
	}
	if len(names) != 1 {
		t.Fatalf("one file under %d lock names: %v", len(names), names)
	}
	ms := &memStore{m: map[string][]byte{}}
	a, b := &Array{store: ms}, &Array{store: ms}
	if a.lockName("k") != b.lockName("k") || a.lockName("k") == a.lockName("l") {
		t.Fatalf("memStore lock names: %v %v %v", a.lockName("k"), b.lockName("k"), a.lockName("l"))
	}
}
