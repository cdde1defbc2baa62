package kvik_test

// Saves keep the identity of what they replace: mode, owner, symbolic
// links; hard links are documented to split; long names, bad paths and
// the temporaries of dead processes.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
)

// save writes data as path through SaveFile, in two pieces.
func save(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := kvik.SaveFile(context.Background(), path, []kvik.Piece{{Data: data[:len(data)/2]}, {Data: data[len(data)/2:]}}); err != nil {
		t.Fatalf("SaveFile(%s): %v", path, err)
	}
}

// contents fails t unless path holds want.
func contents(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s holds %q (%v), want %q", path, got, err, want)
	}
}

func TestSaveFileKeepsMode(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o600, 0o755, 0o640, 0o444, 0o777} {
		path := filepath.Join(dir, "f-"+strconv.FormatUint(uint64(mode), 8))
		if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // no umask
			t.Fatal(err)
		}
		want := []byte("new contents of " + path)
		save(t, path, want)
		contents(t, path, want)
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%v file replaced: mode %v (%v)", mode, fi.Mode(), err)
		}
	}
	// A new file gets what os.Create gives.
	path := filepath.Join(dir, "new")
	save(t, path, []byte("fresh file"))
	if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o666&^umask() {
		t.Errorf("new file: mode %v (%v), want %v", fi.Mode(), err, 0o666&^umask())
	}
	noPending(t, dir)
}

func TestSaveFileKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file another owner")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "owned")
	if err := os.WriteFile(path, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	save(t, path, []byte("new contents"))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 5678 || fi.Mode() != 0o640 {
		t.Errorf("replaced file: owner %d:%d, mode %v; want 1234:5678, -rw-r-----", st.Uid, st.Gid, fi.Mode())
	}
}

// TestSaveFileThroughSymlink saves through a Hugging Face cache's link
// (snapshots/REV/model -> ../../blobs/SHA), through a chain of links and
// through a dangling link: each link stays as it was and the file it
// points to holds the new contents.
func TestSaveFileThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	blobs, snap := filepath.Join(dir, "blobs"), filepath.Join(dir, "snapshots", "rev1")
	for _, d := range []string{blobs, snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	blob := filepath.Join(blobs, "3f2a9c")
	if err := os.WriteFile(blob, []byte("old weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(snap, "model.safetensors")
	chain := filepath.Join(dir, "latest")
	dangling := filepath.Join(dir, "dangling")
	for _, l := range [][2]string{{"../../blobs/3f2a9c", link}, {"snapshots/rev1/model.safetensors", chain}, {"blobs/missing", dangling}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	for i, via := range []string{link, chain} {
		want := []byte("new weights " + strconv.Itoa(i))
		save(t, via, want)
		for l, target := range map[string]string{link: "../../blobs/3f2a9c", chain: "snapshots/rev1/model.safetensors"} {
			if got, err := os.Readlink(l); err != nil || got != target {
				t.Fatalf("after saving through %s: %s is %q (%v), want a link to %s", via, l, got, err, target)
			}
		}
		contents(t, blob, want)
		contents(t, link, want)
		if fi, err := os.Stat(blob); err != nil || fi.Mode() != 0o600 {
			t.Fatalf("blob mode %v (%v), want 0600", fi.Mode(), err)
		}
	}
	save(t, dangling, []byte("through a dangling link"))
	if got, err := os.Readlink(dangling); err != nil || got != "blobs/missing" {
		t.Fatalf("dangling link is %q (%v)", got, err)
	}
	contents(t, filepath.Join(blobs, "missing"), []byte("through a dangling link"))
	for _, d := range []string{dir, blobs, snap} {
		noPending(t, d)
	}
}

// TestSaveFileHardLink pins the documented behaviour: the name saved gets
// the new file, other hard links keep the old one (an atomic rename
// cannot update them).
func TestSaveFileHardLink(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(a, []byte("shared old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	save(t, a, []byte("new contents"))
	contents(t, a, []byte("new contents"))
	contents(t, b, []byte("shared old"))
	fa, _ := os.Stat(a)
	fb, _ := os.Stat(b)
	if os.SameFile(fa, fb) || fa.Mode() != 0o600 {
		t.Fatalf("a and b still one file, or a's mode %v changed", fa.Mode())
	}
}

// TestSaveFileLongName saves files whose names are as long as the file
// system takes (os.WriteFile writes them): the temporary name must fit
// too.
func TestSaveFileLongName(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		strings.Repeat("n", 242), strings.Repeat("x", 250) + ".bin", strings.Repeat("y", 255),
		strings.Repeat("é", 127) + "z", // 255 bytes of two-byte characters
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatalf("os.WriteFile of a %d-byte name: %v", len(name), err)
		}
		want := []byte("new " + name[:10])
		save(t, path, want)
		contents(t, path, want)
		os.Remove(path)
		save(t, path, want) // a new file
		contents(t, path, want)
	}
	noPending(t, dir)
}

// TestSaveFileBadPaths checks the typed errors of paths that name no
// file, and that nothing is written.
func TestSaveFileBadPaths(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "tosub")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		isDir bool
	}{
		{"", false}, {dir + "/", true}, {sub, true}, {sub + "/", true}, {filepath.Join(dir, "tosub"), true},
		{filepath.Join(dir, "missing") + "/", true}, {filepath.Join(sub, ".."), true}, {".", true},
	} {
		err := kvik.SaveFile(context.Background(), c.path, []kvik.Piece{{Data: []byte("data")}})
		if !errors.Is(err, kvik.ErrInvalidArgument) || c.isDir != errors.Is(err, syscall.EISDIR) {
			t.Errorf("SaveFile(%q): %v, want ErrInvalidArgument (EISDIR %v)", c.path, err, c.isDir)
		}
		if _, err := kvik.CreatePending(c.path, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
			t.Errorf("CreatePending(%q): %v, want ErrInvalidArgument", c.path, err)
		}
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Fatalf("directory replaced: %v %v", fi, err)
	}
	for _, d := range []string{dir, sub} {
		noPending(t, d)
	}
}

// TestSaveFileRemovesStale leaves temporary files as a process killed
// mid-save does, and checks that the next save of the file removes the
// stale ones (their process dead, unlocked; those of other files only
// once older than StalePendingAge) and keeps those that may be in use:
// of a live process, locked, or young and of another file. A FIFO named
// as a stale temporary is left alone and does not hang the save (opening
// it to lock it blocked).
func TestSaveFileRemovesStale(t *testing.T) {
	dead := deadPid(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "x.bin")
	tmp := func(file string, pid, n int) string {
		return filepath.Join(dir, "."+file+".kvik-tmp-"+strconv.Itoa(pid)+"-"+strconv.Itoa(n))
	}
	old := time.Now().Add(-2 * kvik.StalePendingAge)
	mk := func(p string, backdate bool) {
		if err := os.WriteFile(p, bytes.Repeat([]byte("partial "), 1000), 0o600); err != nil {
			t.Fatal(err)
		}
		if backdate {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	stale, young, staleOther := tmp("x.bin", dead, 1), tmp("x.bin", dead, 2), tmp("y.bin", dead, 3)
	youngOther, live, locked := tmp("y.bin", dead, 4), tmp("x.bin", os.Getppid(), 5), tmp("x.bin", dead, 6)
	fifo := tmp("x.bin", dead, 7)
	mk(stale, true)
	mk(young, false)
	mk(staleOther, true)
	mk(youngOther, false)
	mk(live, true)
	mk(locked, true)
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	lockFile(t, locked)
	errc := make(chan error, 1)
	go func() {
		errc <- kvik.SaveFile(context.Background(), path, []kvik.Piece{{Data: []byte("saved after a crash")}})
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("save hung on a FIFO named as a stale temporary file")
	}
	contents(t, path, []byte("saved after a crash"))
	for _, gone := range []string{stale, young, staleOther} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temporary %s of dead pid %d left: %v", filepath.Base(gone), dead, err)
		}
	}
	for _, keep := range []string{youngOther, live, locked, fifo} {
		if _, err := os.Lstat(keep); err != nil {
			t.Errorf("temporary %s that may be in use removed: %v", filepath.Base(keep), err)
		}
	}
}

// deadPid returns the process id of a process that has exited, or skips
// the test if the id names a process again already.
func deadPid(t *testing.T) int {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	dead := child.Process.Pid // waited for, so no such process now
	if err := unix.Kill(dead, 0); err != unix.ESRCH {
		t.Skipf("pid %d reused already (%v)", dead, err)
	}
	return dead
}
