package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
)

// randomPieces returns host pieces of random sizes (some empty) and
// their concatenation.
func randomPieces(rng *rand.Rand, n, maxLen int) ([]kvik.Piece, []byte) {
	var all []byte
	ps := make([]kvik.Piece, n)
	for i := range ps {
		b := make([]byte, rng.IntN(maxLen+1))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ps[i] = kvik.Piece{Data: b}
		all = append(all, b...)
	}
	return ps, all
}

// noPending fails the test if dir holds a CreatePending temporary file.
func noPending(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if kvik.IsPendingName(e.Name()) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// saveWays runs f twice: with a task size smaller than the saves, which
// go through a FileHandle and the engine, and with one larger, which
// the calling goroutine writes through the temporary file's descriptor
// (a save of host pieces of at most one task).
func saveWays(t *testing.T, small int, f func(t *testing.T)) {
	for _, w := range []struct {
		name string
		task int
	}{{"engine", small}, {"plain", 64 << 20}} {
		t.Run(w.name, func(t *testing.T) {
			smallTasks(t, w.task)
			f(t)
		})
	}
}

func TestSaveFileLocal(t *testing.T) {
	saveWays(t, 64<<10, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(relTestSeed(t), 1))
		dir := t.TempDir()
		path := filepath.Join(dir, "f.bin")
		for round := range 4 { // the first creates, the others replace
			ps, want := randomPieces(rng, 1+rng.IntN(20), 300<<10)
			if err := kvik.SaveFile(context.Background(), path, ps); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d: read back %d bytes (%v), want %d", round, len(got), err, len(want))
			}
		}
		// A cancelled save leaves the file as it was.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		old, _ := os.ReadFile(path)
		ps, _ := randomPieces(rng, 1+rng.IntN(4), 100<<10)
		ps = append(ps, kvik.Piece{Data: []byte{1}})
		if err := kvik.SaveFile(ctx, path, ps); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled save: %v, want context.Canceled", err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
			t.Fatalf("a cancelled save changed the file")
		}
		noPending(t, dir)
	})
}

func TestPendingFileAbortAndCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	if err := os.WriteFile(path, []byte("old contents"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := kvik.CreatePending(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if !kvik.IsPendingName(p.Name()) || filepath.Dir(p.Name()) != dir || p.Target() != path {
		t.Fatalf("temporary %q for %q", p.Name(), p.Target())
	}
	if err := p.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("Commit after Abort: %v, want ErrClosed", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old contents" {
		t.Fatalf("target after Abort: %q", b)
	}
	noPending(t, dir)

	p, err = kvik.CreatePending(path, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abort() // does nothing after Commit
	if _, err := p.WriteAt([]byte("new contents"), 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "new contents" || err != nil || st.Mode().Perm() != 0o640&^umask() {
		t.Fatalf("target after Commit: %q, mode %v (%v)", b, st.Mode(), err)
	}
	noPending(t, dir)
	if _, err := kvik.CreatePending(filepath.Join(dir, "missing", "f"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("CreatePending in a missing directory: %v, want ErrNotExist", err)
	}
}

func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

// TestSaveFileWriteErrorKeepsOld injects EIO into the writes of a save
// over an existing file, at a random point: the save must fail with EIO,
// the old file must be intact and no temporary file left.
func TestSaveFileWriteErrorKeepsOld(t *testing.T) {
	saveWays(t, 32<<10, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(relTestSeed(t), 2))
		dir := t.TempDir()
		path := filepath.Join(dir, "model.bin")
		oldPs, old := randomPieces(rng, 3, 100<<10)
		if err := kvik.SaveFile(context.Background(), path, oldPs); err != nil {
			t.Fatal(err)
		}
		for round := range 10 {
			ps, want := randomPieces(rng, 2+rng.IntN(10), 200<<10)
			budget := int64(rng.IntN(len(want) + 1)) // bytes written before the failure
			var written atomic.Int64
			saved := posix.CurrentSyscalls()
			fail := func(real func(int, []byte, int64) (int, error)) func(int, []byte, int64) (int, error) {
				return func(fd int, p []byte, off int64) (int, error) {
					if written.Add(int64(len(p))) > budget {
						return 0, syscall.EIO
					}
					return real(fd, p, off)
				}
			}
			restore := posix.SetSyscalls(posix.Syscalls{Pread: saved.Pread, Pwrite: fail(saved.Pwrite)})
			err := kvik.SaveFile(context.Background(), path, ps)
			restore()
			if len(want) == 0 || budget >= int64(len(want)) {
				continue // nothing to fail
			}
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("round %d: save of %d bytes failing after %d: %v, want EIO", round, len(want), budget, err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
				t.Fatalf("round %d: the old file changed (%d bytes, want %d)", round, len(got), len(old))
			}
			noPending(t, dir)
		}
	})
}

// TestSaveFileReserves checks that a save reserves the file's size before
// it writes (fallocate, on file systems on disk only): one call for the
// whole size, a refusal with ENOSPC failing the save before any write
// with the old file intact, and a file system without fallocate
// (EOPNOTSUPP) saving as before.
func TestSaveFileReserves(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 9))
	smallTasks(t, 32<<10)
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	memFS := st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
	path := filepath.Join(dir, "model.bin")
	oldPs, old := randomPieces(rng, 3, 100<<10)
	if err := kvik.SaveFile(context.Background(), path, oldPs); err != nil {
		t.Fatal(err)
	}
	saved := posix.CurrentSyscalls()
	for _, refuse := range []error{nil, syscall.ENOSPC, syscall.EOPNOTSUPP} {
		ps, want := randomPieces(rng, 2+rng.IntN(8), 300<<10)
		for len(want) <= 32<<10 {
			// A save of one task is written plainly, unreserved (see
			// PendingFile.Reserve): draw a larger one.
			ps, want = randomPieces(rng, 2+rng.IntN(8), 300<<10)
		}
		var calls, writes atomic.Int64
		var asked atomic.Int64
		restore := posix.SetSyscalls(posix.Syscalls{
			Pread: saved.Pread,
			Pwrite: func(fd int, p []byte, off int64) (int, error) {
				writes.Add(1)
				return saved.Pwrite(fd, p, off)
			},
			Fallocate: func(fd int, mode uint32, off, n int64) error {
				calls.Add(1)
				asked.Store(n)
				if refuse != nil {
					return refuse
				}
				return unix.Fallocate(fd, mode, off, n)
			},
		})
		err := kvik.SaveFile(context.Background(), path, ps)
		restore()
		switch {
		case memFS && calls.Load() != 0:
			t.Fatalf("%v: fallocate called %d times on a memory file system", refuse, calls.Load())
		case memFS:
		case calls.Load() != 1 || asked.Load() != int64(len(want)):
			t.Fatalf("%v: fallocate called %d times, last for %d bytes; want once for %d", refuse, calls.Load(), asked.Load(), len(want))
		case refuse == syscall.ENOSPC:
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("save with fallocate refusing ENOSPC: %v", err)
			}
			if writes.Load() != 0 {
				t.Fatalf("%d writes after fallocate refused", writes.Load())
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
				t.Fatalf("the old file changed (%d bytes, want %d)", len(got), len(old))
			}
			noPending(t, dir)
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", refuse, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
			t.Fatalf("%v: the saved file reads back %d bytes, want %d (or different bytes)", refuse, len(got), len(want))
		}
		old = want
	}
}

// TestPendingReserve: Reserve makes a pending file on a disk file system
// as long as asked, with its blocks allocated, and leaves one on a
// memory file system alone; after Commit it fails with ErrClosed.
func TestPendingReserve(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 10))
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	memFS := st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
	if !memFS && !canFallocate(t, dir) {
		memFS = true // a file system without fallocate is left alone too
	}
	n := int64(1 + rng.IntN(8<<20))
	p, err := kvik.CreatePending(filepath.Join(dir, "f.bin"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Abort()
	if err := p.Reserve(n); err != nil {
		t.Fatal(err)
	}
	var fst unix.Stat_t
	if err := unix.Stat(p.Name(), &fst); err != nil {
		t.Fatal(err)
	}
	switch {
	case memFS && fst.Size != 0:
		t.Fatalf("memory file system (or one without fallocate): size %d after Reserve, want 0", fst.Size)
	case !memFS && (fst.Size != n || fst.Blocks*512 < n):
		t.Fatalf("size %d with %d bytes allocated after Reserve(%d)", fst.Size, fst.Blocks*512, n)
	}
	want := randomBytes(rng, int(n))
	if _, err := p.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p.Target()); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want %d", len(got), n)
	}
	if err := p.Reserve(n); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("Reserve after Commit: %v, want ErrClosed", err)
	}
}

// canFallocate reports whether the file system of dir takes fallocate.
func canFallocate(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "falloc")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return unix.Fallocate(int(f.Fd()), 0, 0, 4096) == nil
}

// TestSaveFileFullFilesystem saves over a good file on a 1 MiB tmpfs with
// more than fits: ENOSPC, the old file intact, nothing left behind, and a
// save that fits still works afterwards.
func TestSaveFileFullFilesystem(t *testing.T) {
	dir := tmpfstest.Mount(t, "1m", "TestSaveFileWriteErrorKeepsOld covers the logic")
	rng := rand.New(rand.NewPCG(relTestSeed(t), 3))
	path := filepath.Join(dir, "ckpt.bin")
	oldPs, old := randomPieces(rng, 2, 200<<10)
	if err := kvik.SaveFile(context.Background(), path, oldPs); err != nil {
		t.Fatal(err)
	}
	big, _ := randomPieces(rng, 3, 1<<20)
	big = append(big, kvik.Piece{Data: make([]byte, 1<<20)})
	err := kvik.SaveFile(context.Background(), path, big)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save of more than fits: %v, want ENOSPC", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
		t.Fatalf("the old file changed (%d bytes, want %d)", len(got), len(old))
	}
	noPending(t, dir)
	small, want := randomPieces(rng, 2, 100<<10)
	if err := kvik.SaveFile(context.Background(), path, small); err != nil {
		t.Fatalf("save that fits after ENOSPC: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatal("save after ENOSPC reads back different bytes")
	}
}

// TestSaveFileConcurrent saves different contents to one path from many
// goroutines: the file must end up whole, equal to one of them.
func TestSaveFileConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 4))
	smallTasks(t, 16<<10)
	dir := t.TempDir()
	path := filepath.Join(dir, "shared.bin")
	const writers = 8
	contents := make([][]byte, writers)
	pieces := make([][]kvik.Piece, writers)
	for i := range writers {
		pieces[i], contents[i] = randomPieces(rng, 1+rng.IntN(6), 150<<10)
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() { errs[i] = kvik.SaveFile(context.Background(), path, pieces[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range contents {
		found = found || bytes.Equal(got, c)
	}
	if !found {
		t.Fatalf("the file (%d bytes) is none of the %d saves: torn", len(got), writers)
	}
	noPending(t, dir)
}

// TestSaveFileS3 uploads pieces as one object, in one PUT and in a
// multipart upload, and compares the stored bytes.
func TestSaveFileS3(t *testing.T) {
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 5))
	for _, max := range []int{64 << 10, 3 << 20} { // one PUT; several 5 MiB parts
		ps, want := randomPieces(rng, 2+rng.IntN(8), max)
		if max > 1<<20 { // at least two parts
			big, b := randomPieces(rng, 1, 0)
			big[0].Data = make([]byte, 6<<20+rng.IntN(1000))
			for i := range big[0].Data {
				big[0].Data[i] = byte(i * 7)
			}
			ps, want, _ = append(ps, big[0]), append(want, big[0].Data...), b
		}
		key := fmt.Sprintf("dir/obj-%d.bin", max)
		if err := kvik.SaveFile(context.Background(), v.URLOf(key), ps, v.Opts()...); err != nil {
			t.Fatalf("%d bytes: %v", len(want), err)
		}
		if got, ok := v.Object(key); !ok || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: stored %d bytes (present %v)", len(want), len(got), ok)
		}
	}
	// A cancelled save leaves no object.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ps, _ := randomPieces(rng, 4, 4<<20)
	if err := kvik.SaveFile(ctx, v.URLOf("cancelled.bin"), ps, v.Opts()...); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled save: %v, want context.Canceled", err)
	}
	if _, ok := v.Object("cancelled.bin"); ok {
		t.Fatal("a cancelled save left an object")
	}
}

func TestSaveFileBadPiece(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	err := kvik.SaveFile(context.Background(), path, []kvik.Piece{{Ptr: 1, Size: -1}})
	if !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("negative device size: %v, want ErrInvalidArgument", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused save created the file: %v", err)
	}
}

// TestSaveFileDevicePieces saves host and device pieces mixed, to a local
// file in each compat mode and to S3 when versitygw is there.
func TestSaveFileDevicePieces(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(relTestSeed(t), 6))
	smallTasks(t, 1<<20)
	ps, want := randomPieces(rng, 7, 3<<20)
	var off int
	for i := range ps {
		n := len(ps[i].Data)
		if i%2 == 1 && n > 0 { // every other piece from device memory
			dev := devAlloc(t, ctx, n+100)
			toDevice(t, ctx, dev.Ptr()+50, ps[i].Data)
			ps[i] = kvik.Piece{Ptr: dev.Ptr() + 50, Size: int64(n)}
		}
		off += n
	}
	dir := testDir(t)
	for _, mode := range gpuCompatModes(t, dir) {
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.CompatMode = mode })
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "mixed-"+mode.String())
		err = kvik.SaveFile(context.Background(), path, ps)
		restore()
		if err != nil {
			t.Fatalf("%v: %v", mode, err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v: read back %d of %d bytes (%v) or different bytes", mode, len(got), len(want), err)
		}
	}
	if os.Getenv("KVIK_TEST_VERSITYGW") == "" {
		return
	}
	v := s3test.Start(t)
	if err := kvik.SaveFile(context.Background(), v.URLOf("mixed.bin"), ps, v.Opts()...); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Object("mixed.bin"); !bytes.Equal(got, want) {
		t.Fatalf("S3 object of %d bytes differs from the %d saved", len(got), len(want))
	}
}

// TestMkdirAll checks that MkdirAll makes every missing directory of a
// path and syncs the directory each was made in (one sync per directory
// made, each logged), none with WithoutSync, in a memory file system or
// where the path exists; that directories made by goroutines at once
// all succeed; and that a file in the way fails with ENOTDIR.
func TestMkdirAll(t *testing.T) {
	disk := t.TempDir()
	if kvik.DirInMemory(disk) {
		disk = tmpfstest.MountExt4(t, "32M", "none: the syncs of a disk's file system")
	}
	mem := tmpfstest.Mount(t, "1m", "none: the syncs skipped in tmpfs")
	var syncs atomic.Int64
	defer kvik.CountSyncs(&syncs)()
	logs := captureLogs(t, kvik.LevelDebug)
	rng := rand.New(rand.NewPCG(5, 3))
	for _, c := range []struct {
		root   string
		opts   []kvik.RemoteOption
		synced bool
	}{{disk, nil, true}, {disk, []kvik.RemoteOption{kvik.WithoutSync()}, false}, {mem, nil, false}} {
		depth := 1 + rng.IntN(4)
		path := c.root
		var want []string
		for i := range depth {
			path = filepath.Join(path, fmt.Sprintf("d%d-%d", i, rng.IntN(1000)))
			want = append(want, path)
		}
		syncs.Store(0)
		logs.Reset()
		if err := kvik.MkdirAll(path, 0o755, c.opts...); err != nil {
			t.Fatal(err)
		}
		if n := syncs.Load(); c.synced && n != int64(depth) || !c.synced && n != 0 {
			t.Errorf("%s (WithoutSync %v): %d syncs for %d directories made", path, c.opts != nil, n, depth)
		}
		recs := logs.Find("kvik: mkdir")
		if len(recs) != depth {
			t.Fatalf("%s: %d mkdir records for %d directories: %v", path, len(recs), depth, recs)
		}
		for i, r := range recs {
			if r.Attrs["path"] != want[i] || r.Attrs["synced"] != fmt.Sprint(c.synced) || r.Attrs["memory_fs"] != fmt.Sprint(c.root == mem) {
				t.Errorf("record %d: %v, want path %s synced %v", i, r.Attrs, want[i], c.synced)
			}
		}
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Fatalf("%s not made: %v", path, err)
		}
		syncs.Store(0)
		logs.Reset()
		if err := kvik.MkdirAll(path, 0o755, c.opts...); err != nil || syncs.Load() != 0 || len(logs.Find("kvik: mkdir")) != 0 {
			t.Errorf("%s again: %v, %d syncs, %d records", path, err, syncs.Load(), len(logs.Find("kvik: mkdir")))
		}
		// A save in the new directory syncs it too (SaveFile's part).
		if err := kvik.SaveFile(context.Background(), filepath.Join(path, "f"), []kvik.Piece{{Data: []byte{byte(depth)}}}, c.opts...); err != nil {
			t.Fatal(err)
		}
	}
	shared := filepath.Join(disk, "p", "q", "r")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = kvik.MkdirAll(shared, 0o755) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", i, err)
		}
	}
	file := filepath.Join(disk, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(file, "sub", "dir")} {
		if err := kvik.MkdirAll(p, 0o755); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("MkdirAll(%s) over a file: %v, want ENOTDIR", p, err)
		}
	}
}

// TestSaveFileWithoutSync checks on a disk's file system that SaveFile
// syncs a new or replaced file and its directory, and that with
// WithoutSync it syncs nothing and still leaves the file whole, with its
// contents and mode and no temporary file, each save's DEBUG record
// saying which: through the calling
// goroutine (a small save) and through the engine (more than a task).
func TestSaveFileWithoutSync(t *testing.T) {
	dir := t.TempDir()
	if kvik.DirInMemory(dir) {
		dir = tmpfstest.MountExt4(t, "32M", "none: TestCommitInMemory checks that the syncs are skipped in tmpfs only")
	}
	var syncs atomic.Int64
	defer kvik.CountSyncs(&syncs)()
	logs := captureLogs(t, kvik.LevelDebug)
	d, err := kvik.GetDefaults()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 7))
	for _, size := range []int{1 + rng.IntN(64<<10), d.TaskSize + 1 + rng.IntN(d.TaskSize)} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		path := filepath.Join(dir, fmt.Sprintf("f%d.bin", size))
		for i, c := range []struct {
			opts      []kvik.RemoteOption
			wantSyncs bool
		}{{nil, true}, {[]kvik.RemoteOption{kvik.WithoutSync()}, false}, {[]kvik.RemoteOption{kvik.WithoutSync()}, false}, {nil, true}} {
			syncs.Store(0)
			if err := kvik.SaveFile(context.Background(), path, []kvik.Piece{{Data: data}}, c.opts...); err != nil {
				t.Fatal(err)
			}
			if n := syncs.Load(); (n >= 2) != c.wantSyncs || (!c.wantSyncs && n != 0) {
				t.Errorf("%d bytes, save %d (WithoutSync %v): %d syncs", size, i, !c.wantSyncs, n)
			}
			if recs := logs.Find("kvik: save"); len(recs) == 0 || recs[len(recs)-1].Attrs["path"] != path ||
				recs[len(recs)-1].Attrs["synced"] != fmt.Sprint(c.wantSyncs) || recs[len(recs)-1].Attrs["memory_fs"] != "false" {
				t.Errorf("%d bytes, save %d: save records %v", size, i, recs)
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%d bytes, save %d: saved file differs (%v)", size, i, err)
			}
			if i == 0 {
				if err := os.Chmod(path, 0o640); err != nil {
					t.Fatal(err)
				}
			} else if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o640 {
				t.Fatalf("%d bytes, save %d: mode %v (%v), want the replaced file's 0640", size, i, st.Mode(), err)
			}
			data = data[:len(data)-1-rng.IntN(len(data)/2)]
		}
	}
	noPending(t, dir)
}
