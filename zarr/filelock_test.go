package zarr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestProcessLocksAcrossProcesses: processes write random disjoint sets
// of elements of one chunk (one shard) at once, each run its own
// WriteRegion, with WithProcessLocks: through DirStores (half of them
// through a symbolic link to the directory), and through RemoteStores
// on an S3 bucket that honours conditional writes (condBucket) and on
// versitygw. Every
// element must hold what its writer wrote. The same writers without the
// option are run too, and the elements they lose are logged (not
// asserted: a race that may not happen): what the option prevents.
// List never shows the lock files; the remote writers' conditions are
// refused and the writes done again where they met.
func TestProcessLocksAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	gzip := []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 1}}}
	metas := []struct {
		name string
		m    Metadata
	}{
		{"v3 gzip", Metadata{Shape: []int{23, 70}, ChunkShape: []int{10, 32}, DataType: DataType{Kind: Uint, Size: 2}, Codecs: gzip}},
		{"sharded", Metadata{Shape: []int{19, 40}, ChunkShape: []int{8, 16}, DataType: DataType{Kind: Float, Size: 4}, Codecs: shardCodecs([]int{4, 4}, false, gzip)}},
	}
	rng := rand.New(rand.NewPCG(43, 7))
	for _, where := range []string{"dir", "s3", "versitygw"} {
		for _, c := range metas {
			for _, locks := range []bool{true, false} {
				name := where + "/" + c.name + "/locks"
				if !locks {
					name = where + "/" + c.name + "/no locks"
				}
				seed := rng.Uint64()
				t.Run(name, func(t *testing.T) {
					processWrites(t, rand.New(rand.NewPCG(seed, 2)), c.m, locks, where)
				})
			}
		}
	}
}

// lockChildPlan is what a child of TestProcessLocksAcrossProcesses
// writes: its runs, into the array at Path of the store at Root (a
// directory, or with S3 set an s3:// URL of a bucket served there).
type lockChildPlan struct {
	Root, Path, Go, S3 string
	Signed, Locks      bool // Signed: with s3test's credentials
	Runs               []partialRun
	Rounds             int
}

// open opens the plan's store.
func (p lockChildPlan) open() (Store, error) {
	var opts []StoreOption
	if p.Locks {
		opts = append(opts, WithProcessLocks())
	}
	switch {
	case p.Signed:
		opts = append(opts, WithRemoteOptions(kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(p.S3)))
		return OpenURL(bg, p.Root, opts...)
	case p.S3 != "":
		return OpenURL(bg, p.Root, s3Options(p.S3, opts...)...)
	}
	return NewDirStore(p.Root, opts...)
}

// processWrites runs the writers of TestProcessLocksAcrossProcesses
// against where: "dir", "s3" (a condBucket) or "versitygw".
func processWrites(t *testing.T, rng *rand.Rand, m Metadata, locks bool, where string) {
	tmp := t.TempDir()
	plan := lockChildPlan{Root: filepath.Join(tmp, "a.zarr"), Path: "g/x", Go: filepath.Join(tmp, "go"), Locks: locks, Rounds: 4}
	link := filepath.Join(tmp, "link.zarr")
	if err := os.Symlink(plan.Root, link); err != nil {
		t.Fatal(err)
	}
	var bkt *condBucket
	remote := where != "dir"
	switch where {
	case "s3":
		bkt = newCondBucket(t)
		plan.Root, plan.S3 = "s3://bkt/a.zarr", bkt.URL
	case "versitygw":
		v := s3test.Start(t)
		plan.Root, plan.S3, plan.Signed = v.URLOf("a.zarr"), v.URL, true
	}
	s, err := plan.open()
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.(io.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	a, err := Create(bg, s, plan.Path, m)
	if err != nil {
		t.Fatal(err)
	}
	writers := 3 + rng.IntN(4)
	want, p := partialPlanOf(rng, m, writers)
	if err := a.WriteRegion(bg, make([]int, 2), m.Shape, p.initial); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, writers)
	outs := make([]bytes.Buffer, writers)
	for w := range writers {
		// Each child writes its runs several times over (the same
		// values), so that its writes overlap the others' for longer.
		wp := plan
		wp.Runs = p.runs[w]
		if w%2 == 1 && !remote {
			wp.Root = link
		}
		b, err := json.Marshal(wp)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(tmp, "plan-"+strconv.Itoa(w))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		cmds[w] = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestProcessLocksChild$", "-test.count=1", "-test.timeout=90s")
		cmds[w].Env = append(os.Environ(), "KVIK_ZARR_LOCK_PLAN="+f)
		cmds[w].Stdout, cmds[w].Stderr = &outs[w], &outs[w]
		if err := cmds[w].Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(plan.Go, nil, 0o644); err != nil { // all start at once
		t.Fatal(err)
	}
	var errs []error
	for w, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, err)
			t.Errorf("writer %d: %v\n%s", w, err, outs[w].Bytes())
		}
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	lost := lostElements(t, a, want)
	switch {
	case locks && lost > 0:
		t.Fatalf("%d processes with WithProcessLocks: %d elements of %d differ from what was written", writers, lost, len(want.buf)/want.es)
	case !locks:
		t.Logf("%d processes without locks: %d elements of %d lost", writers, lost, len(want.buf)/want.es)
	}
	if remote {
		if locks && bkt != nil {
			if bkt.conditional.Load() == 0 {
				t.Errorf("no conditional write reached the bucket")
			}
			t.Logf("%d conditional writes, %d refused and done again", bkt.conditional.Load(), bkt.refused.Load())
		}
		return
	}
	keys, err := s.List(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if path.Base(k) == lockName {
			t.Errorf("List shows lock file %s", k)
		}
	}
}

// TestProcessLocksChild is a writer of TestProcessLocksAcrossProcesses,
// run in a process of its own; it does nothing otherwise.
func TestProcessLocksChild(t *testing.T) {
	f := os.Getenv("KVIK_ZARR_LOCK_PLAN")
	if f == "" {
		t.Skip("a child of TestProcessLocksAcrossProcesses")
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var plan lockChildPlan
	if err := json.Unmarshal(b, &plan); err != nil {
		t.Fatal(err)
	}
	s, err := plan.open()
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	a, err := Open(bg, s, plan.Path)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(plan.Go); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never told to start")
		}
	}
	p := partialPlan{runs: [][]partialRun{plan.Runs}}
	for range plan.Rounds {
		if err := p.write(a, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLockFile: the lock of a chunk is held by one caller at a time,
// also through two opens in one process (an open file description lock
// is not a process's), while other chunks of the array lock freely; a
// waiter gives up when its context ends; the lock file stays, hidden
// from List; a FIFO, a directory or a link at its name fails the lock at
// once (never a hang, never a file created through the link).
func TestLockFile(t *testing.T) {
	dir := t.TempDir()
	const key = "c/0/1"
	release, err := lockFile(bg, dir, key)
	if err != nil {
		t.Fatal(err)
	}
	lp, _ := lockTarget(dir, key)
	if _, err := os.Lstat(lp); err != nil {
		t.Fatalf("no lock file while held: %v", err)
	}
	for _, other := range []string{"c/0/0", "c/0/2", "c/1/1", "c/0/10", "0.1"} {
		r, err := lockFile(bg, dir, other)
		if err != nil {
			t.Fatalf("lock of %s beside a held one: %v", other, err)
		}
		r()
	}
	heldAlone(t, release, func(ctx context.Context) (func(), error) { return lockFile(ctx, dir, key) })

	// Not a regular file at the lock's name: an error, at once.
	ctx2, cancel2 := context.WithTimeout(bg, 5*time.Second)
	defer cancel2()
	for _, c := range []struct {
		name  string
		plant func(lp string) error
		want  error
	}{
		{"fifo", func(lp string) error { return syscall.Mkfifo(lp, 0o644) }, kvik.ErrNotRegular},
		{"dir", func(lp string) error { return os.Mkdir(lp, 0o755) }, syscall.EISDIR},
		{"link", func(lp string) error { return os.Symlink(filepath.Join(dir, "elsewhere"), lp) }, syscall.ELOOP},
	} {
		d := filepath.Join(dir, c.name)
		lp, _ := lockTarget(d, "0")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := c.plant(lp); err != nil {
			t.Fatal(err)
		}
		if _, err := lockFile(ctx2, d, "0"); !errors.Is(err, c.want) {
			t.Fatalf("lock with a %s at its name: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a lock created the target of a link at its name: %v", err)
	}

	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(bg, "c/0/1", []byte{1}); err != nil {
		t.Fatal(err)
	}
	keys, err := s.List(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "c/0/1" {
		t.Fatalf("List beside a lock file: %q, want [c/0/1]", keys)
	}
}

// BenchmarkProcessLocks measures what WithProcessLocks costs a write:
// each iteration writes the 64 MiB zstd array of 256 KiB chunks (a
// smooth field plus noise) into a new DirStore without the option and
// then with it; locked/plain is the second's time over the first's.
func BenchmarkProcessLocks(b *testing.B) {
	const side = 4096
	shape := []int{side, side}
	src := fielddata.Float32(side, side, 1)
	m := Metadata{Shape: shape, ChunkShape: []int{256, 256}, DataType: DataType{Kind: Float, Size: 4},
		Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}}
	root := b.TempDir()
	write := func(opts ...StoreOption) time.Duration {
		dir := filepath.Join(root, "a")
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		s, err := NewDirStore(dir, opts...)
		if err != nil {
			b.Fatal(err)
		}
		a, err := Create(bg, s, "a", m)
		if err != nil {
			b.Fatal(err)
		}
		t := time.Now()
		if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	var plain, locked time.Duration
	for b.Loop() {
		plain += write()
		locked += write(WithProcessLocks())
	}
	n := float64(len(src)) * float64(b.N)
	b.ReportMetric(n/plain.Seconds()/1e6, "plain-MB/s")
	b.ReportMetric(n/locked.Seconds()/1e6, "locked-MB/s")
	b.ReportMetric(locked.Seconds()/plain.Seconds(), "locked/plain")
}
