package posix

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/testkit/fskinds"
)

// TestFileKind makes a file of each type and checks that its stat(2)
// mode, through StatMode, names the kind os.Lstat's mode does, and that
// the names are the ones errors give.
func TestFileKind(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := map[string]string{
		reg: "a regular file", dir: "a directory", fifo: "a FIFO", link: "a symbolic link",
		sock: "a socket", "/dev/null": "a character device",
	}
	for p, w := range want {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if got := FileKind(fi.Mode()); got != w {
			t.Errorf("%s: os.Lstat's mode names %q, want %q", p, got, w)
		}
		if got := FileKind(StatMode(st.Mode)); got != w {
			t.Errorf("%s: st_mode %#o names %q, want %q", p, st.Mode, got, w)
		}
	}
	// Every kind fskinds makes (device nodes too, where mknod is allowed).
	for _, d := range fskinds.Make(t, t.TempDir(), []byte("old")) {
		fi, err := os.Lstat(d.Path)
		if err != nil {
			continue // a missing file or parent
		}
		var st unix.Stat_t
		if err := unix.Lstat(d.Path, &st); err != nil {
			t.Fatal(err)
		}
		if a, b := FileKind(fi.Mode()), FileKind(StatMode(st.Mode)); a != b || a == "an irregular file" {
			t.Errorf("%s (%s): os.Lstat's mode names %q, st_mode %#o %q", d.Kind, d.Path, a, st.Mode, b)
		}
	}
	if got := FileKind(StatMode(unix.S_IFBLK | 0o600)); got != "a block device" {
		t.Errorf("S_IFBLK names %q", got)
	}
	if got := FileKind(StatMode(0o600)); got != "an irregular file" {
		t.Errorf("no type bits name %q", got)
	}
}
