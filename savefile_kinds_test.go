package kvik_test

// Saves replace regular files only: every kind of destination a file
// system has, the destination changing kind before the commit, links in
// /proc, and the temporaries a killed save leaves on a full disk.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/fskinds"
	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
)

// saver is one way of saving a file: it saves random contents at path
// and returns the bytes the file must then hold.
type saver struct {
	name string
	save func(rng *rand.Rand, path string) ([]byte, error)
}

// formatBytes returns what save writes, saved once to a scratch file.
func formatBytes(t *testing.T, save func(string) error) []byte {
	ref := filepath.Join(t.TempDir(), "ref")
	if err := save(ref); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func savers(t *testing.T) []saver {
	ctx := context.Background()
	data := func(rng *rand.Rand) []byte {
		b := make([]byte, 1+rng.IntN(200<<10))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	return []saver{
		{"SaveFile", func(rng *rand.Rand, path string) ([]byte, error) {
			ps, all := randomPieces(rng, 1+rng.IntN(4), 100<<10)
			return all, kvik.SaveFile(ctx, path, ps)
		}},
		{"SaveFile WithoutSync", func(rng *rand.Rand, path string) ([]byte, error) {
			ps, all := randomPieces(rng, 1+rng.IntN(4), 100<<10)
			return all, kvik.SaveFile(ctx, path, ps, kvik.WithoutSync())
		}},
		{"CreatePending", func(rng *rand.Rand, path string) ([]byte, error) {
			return pendingSave(data(rng), path, (*kvik.PendingFile).Commit)
		}},
		{"CommitWithoutSync", func(rng *rand.Rand, path string) ([]byte, error) {
			return pendingSave(data(rng), path, (*kvik.PendingFile).CommitWithoutSync)
		}},
		{"npy.Save", func(rng *rand.Rand, path string) ([]byte, error) {
			b := data(rng)
			save := func(p string) error {
				return npy.Save(ctx, p, npy.SaveArray{Dtype: npy.Uint8, Shape: []int64{int64(len(b))}, Data: b})
			}
			return formatBytes(t, save), save(path)
		}},
		{"npy.SaveNpz", func(rng *rand.Rand, path string) ([]byte, error) {
			b := data(rng)
			save := func(p string) error {
				return npy.SaveNpz(ctx, p, []npy.NpzArray{{Name: "a", SaveArray: npy.SaveArray{Dtype: npy.Uint8, Shape: []int64{int64(len(b))}, Data: b}}})
			}
			return formatBytes(t, save), save(path)
		}},
		{"safetensors.Save", func(rng *rand.Rand, path string) ([]byte, error) {
			b := data(rng)
			save := func(p string) error {
				return safetensors.Save(ctx, p, []safetensors.SaveTensor{{Name: "w", Dtype: safetensors.U8, Shape: []int64{int64(len(b))}, Data: b}}, nil)
			}
			return formatBytes(t, save), save(path)
		}},
	}
}

// pendingSave writes b through CreatePending at path and commits it.
func pendingSave(b []byte, path string, commit func(*kvik.PendingFile) error) ([]byte, error) {
	p, err := kvik.CreatePending(path, 0)
	if err != nil {
		return b, err
	}
	defer p.Abort()
	if _, err := p.WriteAt(b, 0); err != nil {
		return b, err
	}
	return b, commit(p)
}

// TestSaveFileDestinationKinds is the property that a save replaces
// nothing but a regular file (or the regular file a link leads to):
// each way of saving is pointed at every kind of path a file system has
// (fskinds), with random contents, and the whole tree is compared
// before and after. A save at a regular file, a new name or a link to
// either replaces just that file, keeping its mode and the link; at a
// directory, device node, FIFO, socket or a link to one it fails with
// ErrNotRegular naming the path; at a loop of links, under a missing or
// read-only directory it fails with the system's error; and no
// temporary file is left.
func TestSaveFileDestinationKinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(relTestSeed(t), 11))
	for _, s := range savers(t) {
		t.Run(s.name, func(t *testing.T) {
			root := t.TempDir()
			old := []byte("old contents " + strconv.Itoa(rng.IntN(1000)))
			dests := fskinds.Make(t, root, old)
			rng.Shuffle(len(dests), func(i, j int) { dests[i], dests[j] = dests[j], dests[i] })
			for _, d := range dests {
				before := fskinds.Snapshot(t, root)
				want, err := s.save(rng, d.Path)
				changed := fskinds.Changed(before, fskinds.Snapshot(t, root))
				checkSave(t, d, err, before[d.Target], want, changed)
			}
		})
	}
}

// checkSave checks the outcome of a save at d: its error, the paths
// that changed, and the file it wrote.
func checkSave(t *testing.T, d fskinds.Dest, err error, was fskinds.State, want []byte, changed []string) {
	t.Helper()
	switch d.Want {
	case fskinds.Replace:
		if err != nil {
			t.Errorf("%s: %v", d.Kind, err)
			return
		}
		if len(changed) != 1 || changed[0] != d.Target {
			t.Errorf("%s: changed %q, want just %s", d.Kind, changed, d.Target)
		}
		fi, err := os.Lstat(d.Target)
		got, _ := os.ReadFile(d.Target)
		if err != nil || !fi.Mode().IsRegular() || !bytes.Equal(got, want) {
			t.Errorf("%s: target %v (%v), %d bytes, want a regular file of the %d bytes saved", d.Kind, fi.Mode(), err, len(got), len(want))
		} else if was.Mode != 0 && fi.Mode() != was.Mode {
			t.Errorf("%s: mode %v, want %v kept", d.Kind, fi.Mode(), was.Mode)
		}
	case fskinds.NotRegular:
		if !errors.Is(err, kvik.ErrNotRegular) || !strings.Contains(fmt.Sprint(err), d.Path) {
			t.Errorf("%s: %v, want ErrNotRegular naming %s", d.Kind, err, d.Path)
		}
	case fskinds.Fails:
		if !errorIsOne(err, d.Err) {
			t.Errorf("%s: %v, want one of %v", d.Kind, err, d.Err)
		}
	}
	if d.Want != fskinds.Replace && len(changed) > 0 {
		t.Errorf("%s: a failed save changed %q", d.Kind, changed)
	}
}

func errorIsOne(err error, targets []error) bool {
	for _, e := range targets {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestCommitNotRegular makes the target something other than a regular
// file between CreatePending and Commit: Commit fails with
// ErrNotRegular, leaves what is there and removes its temporary file.
func TestCommitNotRegular(t *testing.T) {
	for _, c := range []struct {
		name     string
		existing bool // a regular file at CreatePending
		make     func(path string) error
	}{
		{"new name, then a FIFO", false, func(p string) error { return unix.Mkfifo(p, 0o600) }},
		{"new name, then a directory", false, func(p string) error { return os.Mkdir(p, 0o700) }},
		{"file, then a FIFO", true, func(p string) error { return unix.Mkfifo(p, 0o600) }},
		{"file, then a link to a file", true, func(p string) error { return os.Symlink("elsewhere", p) }},
		{"file, then a socket", true, func(p string) error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			return unix.Bind(fd, &unix.SockaddrUnix{Name: p})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(filepath.Join(dir, "elsewhere"), []byte("other file"), 0o600); err != nil {
				t.Fatal(err)
			}
			if c.existing {
				if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p, err := kvik.CreatePending(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.WriteAt([]byte("new contents"), 0); err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			if err := c.make(path); err != nil {
				t.Fatal(err)
			}
			before := fskinds.Snapshot(t, dir)
			if err := p.Commit(); !errors.Is(err, kvik.ErrNotRegular) {
				t.Fatalf("Commit: %v, want ErrNotRegular", err)
			}
			after := fskinds.Snapshot(t, dir)
			for _, ch := range fskinds.Changed(before, after) {
				if ch != p.Name() { // the temporary, removed
					t.Errorf("Commit changed %s", ch)
				}
			}
			noPending(t, dir)
		})
	}
}

// TestSaveFileProcLinks saves through links whose text names no path:
// /proc/self/fd/N of a pipe (what /dev/stderr is, through a pipe) is a
// FIFO, refused with ErrNotRegular, and of a deleted file
// ("/tmp/x (deleted)") is refused with ErrInvalidArgument rather than
// creating a file of that name.
func TestSaveFileProcLinks(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	gone := filepath.Join(dir, "gone")
	g, err := os.Create(gone)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.Remove(gone)
	for _, c := range []struct {
		fd   uintptr
		want error
	}{{w.Fd(), kvik.ErrNotRegular}, {g.Fd(), kvik.ErrInvalidArgument}} {
		link := filepath.Join(dir, "link"+strconv.Itoa(int(c.fd)))
		if err := os.Symlink("/proc/self/fd/"+strconv.Itoa(int(c.fd)), link); err != nil {
			t.Fatal(err)
		}
		if err := kvik.SaveFile(context.Background(), link, []kvik.Piece{{Data: []byte("data")}}); !errors.Is(err, c.want) {
			t.Errorf("save through a link to fd %d: %v, want %v", c.fd, err, c.want)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "link") {
			t.Errorf("%s made", e.Name())
		}
	}
	if fi, err := g.Stat(); err != nil || fi.Size() != 0 {
		t.Errorf("the deleted file was written: %v, %v", fi, err)
	}
}

// pendingOf is the name of a temporary file of path of process pid.
func pendingOf(path string, pid int) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".kvik-tmp-"+strconv.Itoa(pid)+"-1")
}

// lockFile holds an exclusive flock on path until the test ends, as the
// writer of a temporary file does.
func lockFile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
}

// TestSaveAfterKill is the retry after a save killed (kill -9) once it
// had reserved its size: its temporary fills the disk, so the next save
// of the same file fits only once it is gone. A process's first save in
// the directory removes it whatever its age; a process that looked at
// the directory already removes it on ENOSPC and tries again; the
// temporary of a save that may still run (its process alive, its lock
// held) stays, and the save fails with ENOSPC naming it and its size.
// On tmpfs the ENOSPC comes from a write (tmpfs is not reserved), on an
// ext4 image from Reserve's fallocate.
func TestSaveAfterKill(t *testing.T) {
	dead := deadPid(t)
	for _, fsys := range []struct {
		name  string
		mount func(t *testing.T) string
	}{
		{"tmpfs", func(t *testing.T) string {
			return tmpfstest.Mount(t, "1m", "TestSaveFileRemovesStale covers the removal")
		}},
		{"ext4", func(t *testing.T) string {
			return tmpfstest.MountExt4(t, "8M", "TestSaveFileRemovesStale covers the removal")
		}},
	} {
		t.Run(fsys.name, func(t *testing.T) {
			dir := fsys.mount(t)
			rng := rand.New(rand.NewPCG(relTestSeed(t), 12))
			save := func(path string) ([]byte, error) {
				want := randomBytes(rng, 400<<10+rng.IntN(200<<10)) // fits only without the temporary
				return want, kvik.SaveFile(context.Background(), path, splitPieces(rng, want))
			}
			for _, name := range []string{"first.bin", "second.bin"} {
				path := filepath.Join(dir, name)
				tmp := pendingOf(path, dead)
				tmpfstest.Fill(t, tmp, 300<<10)
				want, err := save(path)
				if err != nil {
					t.Fatalf("save of %s after a killed save: %v", name, err)
				}
				contents(t, path, want)
				if _, err := os.Lstat(tmp); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the killed save's temporary is still there: %v", err)
				}
				os.Remove(path)
			}
			path := filepath.Join(dir, "third.bin")
			tmp := pendingOf(path, os.Getppid())
			tmpfstest.Fill(t, tmp, 300<<10)
			lockFile(t, tmp)
			fi, err := os.Lstat(tmp)
			if err != nil {
				t.Fatal(err)
			}
			_, err = save(path)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), tmp+" ("+strconv.FormatInt(fi.Size(), 10)+" bytes)") {
				t.Fatalf("save beside a live save's temporary: %v, want ENOSPC naming %s", err, tmp)
			}
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a failed save made %s: %v", path, err)
			}
			noPendingBut(t, dir, filepath.Base(tmp))
		})
	}
}

// splitPieces splits b into two pieces at a random place.
func splitPieces(rng *rand.Rand, b []byte) []kvik.Piece {
	i := rng.IntN(len(b) + 1)
	return []kvik.Piece{{Data: b[:i]}, {Data: b[i:]}}
}

// noPendingBut fails the test if dir holds a CreatePending temporary
// file other than keep.
func noPendingBut(t *testing.T, dir, keep string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if kvik.IsPendingName(e.Name()) && e.Name() != keep {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestMkdirAllDestinationKinds points MkdirAll at every kind of path a
// file system has (fskinds), and at a directory below each: a directory
// or a link to one is used as it is, a missing path is made (each of its
// directories, and nothing else); a regular file, device node, FIFO or
// socket, or a link to one, in the way fails with ENOTDIR without being
// opened; a dangling link, a loop of links or a read-only parent fails;
// and only what was made changes in the tree.
func TestMkdirAllDestinationKinds(t *testing.T) {
	kinds := len(fskinds.Make(t, t.TempDir(), nil))
	for i := range kinds {
		for _, sub := range []bool{false, true} {
			root := t.TempDir() // a tree of its own: a case must not meet another's directories
			d := fskinds.Make(t, root, []byte("old"))[i]
			path := d.Path
			if sub {
				path = filepath.Join(d.Path, "sub")
			}
			before := fskinds.Snapshot(t, root)
			err := kvik.MkdirAll(path, 0o755)
			changed := fskinds.Changed(before, fskinds.Snapshot(t, root))
			var made []string // the directories the call must make: path and its parents up to one there before
			for p := path; ; p = filepath.Dir(p) {
				if _, ok := before[p]; ok {
					break
				}
				made = append(made, p)
			}
			switch {
			case d.Kind == "dir" || d.Kind == "link-to-dir" || d.Kind == "missing" || d.Kind == "missing-parent":
				want := made
				if d.Kind == "link-to-dir" && path != d.Path {
					want = []string{filepath.Join(d.Target, "sub")} // made where the link leads
				}
				slices.Sort(want)
				if fi, serr := os.Stat(path); err != nil || serr != nil || !fi.IsDir() || !slices.Equal(changed, want) {
					t.Errorf("%s: MkdirAll(%s): %v; changed %q, want %q", d.Kind, path, err, changed, want)
				}
			case d.Kind == "loop" || d.Kind == "link-to-missing" || d.Kind == "read-only-parent":
				if err == nil || len(changed) > 0 {
					t.Errorf("%s: MkdirAll(%s): %v, changed %q; want an error and no change", d.Kind, path, err, changed)
				}
			default:
				if !errors.Is(err, syscall.ENOTDIR) || len(changed) > 0 {
					t.Errorf("%s: MkdirAll(%s): %v, changed %q; want ENOTDIR and no change", d.Kind, path, err, changed)
				}
			}
		}
	}
}
