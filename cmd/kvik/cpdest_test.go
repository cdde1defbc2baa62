package main

// kvik cp replaces regular files only, from a local file or a URL, at
// every kind of destination; a killed copy's temporary does not block
// the retry; a tensor download is checked before it replaces anything.

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/fskinds"
	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
)

// TestCpDestinationKinds points kvik cp at every kind of path a file
// system has (fskinds), from a local file of random size, a URL and a
// .npy URL (loaded by format), with and without --sync, and compares the
// tree before and after: a regular file, a new name or a link to either
// gets the copy (the link stays); a directory, or a link to one, receives it under SRC's
// base name; a missing directory is made; a device node, FIFO, socket
// or a link to one is refused with a one-line "not a regular file"
// error, as are a loop of links and a read-only directory, and nothing
// changes.
func TestCpDestinationKinds(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	src := randomFile(t, 1+rng.IntN(300<<10))
	local, _ := os.ReadFile(src)
	npyURL := serveDir(t, testdata("npy")) + "/a042.npy"
	npyData, err := os.ReadFile(testdata("npy", "a042.npy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []struct {
		name, src string
		data      []byte
	}{
		{"local", src, local},
		{"URL", serveDir(t, filepath.Dir(src)) + "/" + filepath.Base(src), local},
		{"npy URL", npyURL, npyData},
	} {
		for _, sync := range []string{"--sync=true", "--sync=false"} {
			t.Run(from.name+" "+sync, func(t *testing.T) {
				root := t.TempDir()
				for _, d := range fskinds.Make(t, root, []byte("old contents")) {
					before := fskinds.Snapshot(t, root)
					r := runKvik(t, nil, "cp", "--memory", "host", sync, from.src, d.Path)
					changed := fskinds.Changed(before, fskinds.Snapshot(t, root))
					checkCp(t, d, r, from.src, from.data, changed)
				}
			})
		}
	}
}

// checkCp checks the outcome of a kvik cp of data from src to d.
func checkCp(t *testing.T, d fskinds.Dest, r result, src string, data []byte, changed []string) {
	t.Helper()
	into := "" // where the copy must be
	switch {
	case d.Kind == "dir" || d.Kind == "link-to-dir":
		into = filepath.Join(d.Target, filepath.Base(src))
	case d.Kind == "missing-parent" || d.Want == fskinds.Replace:
		into = d.Target
	}
	if into == "" {
		if r.code != exitFailure {
			t.Errorf("%s: exit %d, want %d; stdout %q", d.Kind, r.code, exitFailure, r.stdout)
		}
		if d.Want == fskinds.NotRegular {
			r.oneLineError(t, "not a regular file", d.Path)
		}
		if len(changed) > 0 {
			t.Errorf("%s: a refused copy changed %q", d.Kind, changed)
		}
		return
	}
	if r.code != exitOK {
		t.Errorf("%s: exit %d: %s", d.Kind, r.code, r.stderr)
		return
	}
	got, err := os.ReadFile(into)
	if fi, lerr := os.Lstat(into); err != nil || lerr != nil || !fi.Mode().IsRegular() || string(got) != string(data) {
		t.Errorf("%s: %s is not a regular file of the %d bytes copied (%v, %v)", d.Kind, into, len(data), err, lerr)
	}
	for _, c := range changed {
		if c != into && !strings.HasPrefix(into, c+"/") { // made directories
			t.Errorf("%s: the copy to %s changed %s too", d.Kind, into, c)
		}
	}
}

// deadPid returns the process id of a process that has exited, or skips
// the test if the id names a process again already.
func deadPid(t *testing.T) int {
	t.Helper()
	child := exec.Command(kvikBin, "version")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	if err := unix.Kill(pid, 0); err != unix.ESRCH {
		t.Skipf("pid %d reused already (%v)", pid, err)
	}
	return pid
}

// TestCpAfterKill is the retry after a copy killed (kill -9) once it had
// reserved its destination's size: the killed copy's temporary fills
// the disk (an ext4 image, which takes fallocate), the retry removes it
// and succeeds; a temporary whose process lives and holds its lock stays,
// and the copy fails naming it.
func TestCpAfterKill(t *testing.T) {
	dir := tmpfstest.MountExt4(t, "8M", "the library's TestSaveAfterKill covers the removal")
	src := randomFile(t, 2<<20+12345)
	dst := filepath.Join(dir, "dst.bin")
	tmp := func(pid int) string {
		return filepath.Join(dir, ".dst.bin.kvik-tmp-"+strconv.Itoa(pid)+"-1")
	}
	dead := tmp(deadPid(t))
	tmpfstest.Fill(t, dead, 1<<20)
	runKvik(t, nil, "cp", "--memory", "host", src, dst).expect(t, exitOK)
	sameFile(t, src, dst)
	if _, err := os.Lstat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed copy's temporary is still there: %v", err)
	}
	os.Remove(dst)

	live := tmp(os.Getpid())
	tmpfstest.Fill(t, live, 1<<20)
	lf, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	runKvik(t, nil, "cp", "--memory", "host", src, dst).expect(t, exitFailure).oneLineError(t, "no space left on device", live+" (")
	if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed copy made %s: %v", dst, err)
	}
}

// TestCpTensorsVerifiedBeforeCommit makes the check of a tensor download
// fail (the bytes received read as other than the file written): the
// old destination stays and no temporary is left; with the real check
// the download replaces it.
func TestCpTensorsVerifiedBeforeCommit(t *testing.T) {
	url := serveDir(t, testdata("npy")) + "/a042.npy"
	dir := t.TempDir()
	dst := filepath.Join(dir, "a.npy")
	old := []byte("the old array")
	if err := os.WriteFile(dst, old, 0o644); err != nil {
		t.Fatal(err)
	}
	f := tensorFile{formatNpy, url, dst}
	check := receivedCRC
	defer func() { receivedCRC = check }()
	receivedCRC = func(ps []kvik.Piece, g *gpuDevice) (uint32, error) {
		sum, err := check(ps, g)
		return sum ^ 1, err // one bit off, as a torn write would read
	}
	if _, _, err := downloadTensors(context.Background(), memoryChoice{}, f, true, true); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("download whose check fails: %v, want a verify error", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != string(old) {
		t.Fatalf("a failed check replaced the destination (%d bytes)", len(got))
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if kvik.IsPendingName(e.Name()) {
			t.Fatalf("temporary %s left", e.Name())
		}
	}
	receivedCRC = check
	if _, _, err := downloadTensors(context.Background(), memoryChoice{}, f, true, true); err != nil {
		t.Fatal(err)
	}
	sameFile(t, testdata("npy", "a042.npy"), dst)
}

// TestCpSourceFIFO: kvik cp from a FIFO (or a link to one) with no writer
// is refused at once with a one-line "not a regular file" error; opening
// it first blocked until a writer came.
func TestCpSourceFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{fifo, link} {
		dst := filepath.Join(dir, "dst-"+filepath.Base(src))
		r := runKvikWithin(t, 20*time.Second, nil, "cp", "--memory", "host", src, dst)
		if r.code != exitFailure {
			t.Errorf("kvik cp %s: exit %d, want %d", src, r.code, exitFailure)
		}
		r.oneLineError(t, "not a regular file: a FIFO", src)
		if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("kvik cp %s made %s (%v)", src, dst, err)
		}
	}
}
