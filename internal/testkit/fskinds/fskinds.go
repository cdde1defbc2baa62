// Package fskinds makes a path of every kind a file system has (regular
// file, directory, device nodes, FIFO, socket, symbolic links to each, a
// dangling link, a loop of links, a missing or read-only parent) and
// compares a tree before and after, for tests of code that must replace
// nothing but regular files. It is imported by tests only.
package fskinds

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Want is what a save pointed at a Dest must do.
type Want int

const (
	// Replace: the save succeeds and Target becomes a regular file with
	// the new contents (its permission bits kept); Path, when a link,
	// stays the same link.
	Replace Want = iota
	// NotRegular: the save fails because Target is not a regular file,
	// and nothing changes.
	NotRegular
	// Fails: the save fails with one of Err, and nothing changes.
	Fails
)

// A Dest is one path to point a save at.
type Dest struct {
	Kind   string // "fifo", "link-to-fifo", "missing-parent", ...
	Path   string // what the save is given
	Target string // where Path's links lead; Path itself when not a link
	Want   Want
	Err    []error // for Fails: the error must be one of these
}

// Make makes one Dest of every kind in dir, a new empty directory, and
// returns them; regular files hold old. Kinds that cannot be made here
// (device nodes without CAP_MKNOD, a read-only directory as root without
// mounts) are left out and logged.
func Make(t testing.TB, dir string, old []byte) []Dest {
	t.Helper()
	var ds []Dest
	add := func(kind, path string, want Want, errs ...error) {
		ds = append(ds, Dest{Kind: kind, Path: path, Target: path, Want: want, Err: errs})
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }

	must(os.WriteFile(p("regular"), old, 0o640))
	add("regular", p("regular"), Replace)
	add("missing", p("missing"), Replace)
	must(os.Mkdir(p("dir"), 0o755))
	add("dir", p("dir"), NotRegular)
	must(unix.Mkfifo(p("fifo"), 0o644))
	add("fifo", p("fifo"), NotRegular)
	if err := makeSocket(p("socket")); err != nil {
		t.Logf("no socket kind: %v", err)
	} else {
		add("socket", p("socket"), NotRegular)
	}
	// /dev/null's numbers, and a loop device's that no driver answers:
	// harmless even if written into.
	for _, n := range []struct {
		kind string
		mode uint32
		dev  uint64
	}{{"char-device", unix.S_IFCHR, unix.Mkdev(1, 3)}, {"block-device", unix.S_IFBLK, unix.Mkdev(7, 1023)}} {
		if err := unix.Mknod(p(n.kind), n.mode|0o666, int(n.dev)); err != nil {
			t.Logf("no %s kind: mknod: %v (needs CAP_MKNOD)", n.kind, err)
			continue
		}
		add(n.kind, p(n.kind), NotRegular)
	}

	// A link to each kind made so far, plus a dangling link, a chain of
	// two links and a loop.
	for _, d := range slices.Clone(ds) {
		l := p("link-to-" + d.Kind)
		must(os.Symlink(filepath.Base(d.Path), l))
		ds = append(ds, Dest{Kind: "link-to-" + d.Kind, Path: l, Target: d.Path, Want: d.Want})
	}
	must(os.Symlink("link-to-regular", p("chain")))
	ds = append(ds, Dest{Kind: "chain-to-regular", Path: p("chain"), Target: p("regular"), Want: Replace})
	must(os.Symlink("loop", p("loop")))
	add("loop", p("loop"), Fails, syscall.ELOOP)

	add("missing-parent", p("no/such/dir/file"), Fails, fs.ErrNotExist)
	if ro, ok := readOnlyDir(t, p("read-only"), old); ok {
		add("read-only-parent", filepath.Join(ro, "file"), Fails, syscall.EROFS, syscall.EACCES)
	}
	return ds
}

// makeSocket leaves a Unix socket's file at path.
func makeSocket(path string) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Bind(fd, &unix.SockaddrUnix{Name: path})
}

// readOnlyDir makes dir read-only with a regular file holding old in it:
// a tmpfs mounted read-only where the process may mount, else (not
// root) mode 0555.
func readOnlyDir(t testing.TB, dir string, old []byte) (string, bool) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m") == nil {
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		if err := os.WriteFile(file, old, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			t.Fatalf("remounting %s read-only: %v", dir, err)
		}
		return dir, true
	}
	if os.Geteuid() == 0 {
		t.Logf("no read-only-parent kind: root writes whatever the mode, and cannot mount here")
		return "", false
	}
	if err := os.WriteFile(file, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	return dir, true
}

// State is what Snapshot records of one path.
type State struct {
	Mode fs.FileMode // type and permission bits
	Ino  uint64
	Rdev uint64
	Link string // a link's text
	Data []byte // a regular file's contents
}

func (s State) String() string {
	switch {
	case s.Mode.IsRegular():
		return fmt.Sprintf("%v inode %d, %d bytes", s.Mode, s.Ino, len(s.Data))
	case s.Mode&fs.ModeSymlink != 0:
		return fmt.Sprintf("%v inode %d -> %s", s.Mode, s.Ino, s.Link)
	}
	return fmt.Sprintf("%v inode %d rdev %#x", s.Mode, s.Ino, s.Rdev)
}

func (s State) equal(o State) bool {
	return s.Mode == o.Mode && s.Ino == o.Ino && s.Rdev == o.Rdev && s.Link == o.Link && bytes.Equal(s.Data, o.Data)
}

// Snapshot records every path under dir (dir too), without following
// links or opening anything but regular files.
func Snapshot(t testing.TB, dir string) map[string]State {
	t.Helper()
	m := map[string]State{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		s := State{Mode: fi.Mode(), Ino: st.Ino, Rdev: st.Rdev}
		switch {
		case fi.Mode().IsRegular():
			s.Data, err = os.ReadFile(path)
		case fi.Mode()&fs.ModeSymlink != 0:
			s.Link, err = os.Readlink(path)
		}
		m[path] = s
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Changed lists the paths whose state differs between two snapshots:
// changed, made or removed, sorted.
func Changed(before, after map[string]State) []string {
	var ps []string
	for p, b := range before {
		if a, ok := after[p]; !ok || !a.equal(b) {
			ps = append(ps, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// LoopDevice returns a block device whose bytes are data's (a multiple
// of 512 bytes): a loop device attached to a file of data in dir, with
// losetup(8), detached when the test ends. It skips the test, saying
// why, where no loop device can be attached (not root, no losetup, a
// container without /dev/loop-control).
func LoopDevice(t testing.TB, dir string, data []byte) string {
	t.Helper()
	img := filepath.Join(dir, "loop.img")
	if err := os.WriteFile(img, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("no loop device to test with: losetup: %v: %s", err, bytes.TrimSpace(out))
	}
	dev := string(bytes.TrimSpace(out))
	t.Cleanup(func() { exec.Command("losetup", "--detach", dev).Run() })
	return dev
}
