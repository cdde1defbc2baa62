package posix

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/testkit/fskinds"
)

// TestFileKind makes a path of every kind fskinds makes (device nodes
// where mknod is allowed; /dev/null always) and checks that os.Lstat's
// mode and its stat(2) mode, through StatMode, both give the name errors
// give for that kind.
func TestFileKind(t *testing.T) {
	names := map[string]string{
		"regular": "a regular file", "dir": "a directory", "fifo": "a FIFO", "socket": "a socket",
		"char-device": "a character device", "block-device": "a block device",
	}
	dests := append(fskinds.Make(t, t.TempDir(), []byte("old")), fskinds.Dest{Kind: "char-device", Path: "/dev/null", Target: "/dev/null"})
	checked := map[string]bool{}
	for _, d := range dests {
		want, ok := names[d.Kind]
		if d.Path != d.Target || d.Kind == "loop" {
			want, ok = "a symbolic link", true
		}
		fi, err := os.Lstat(d.Path)
		if !ok || err != nil {
			continue // a missing file or parent
		}
		var st unix.Stat_t
		if err := unix.Lstat(d.Path, &st); err != nil {
			t.Fatal(err)
		}
		if got := FileKind(fi.Mode()); got != want {
			t.Errorf("%s (%s): os.Lstat's mode names %q, want %q", d.Kind, d.Path, got, want)
		}
		if got := FileKind(StatMode(st.Mode)); got != want {
			t.Errorf("%s (%s): st_mode %#o names %q, want %q", d.Kind, d.Path, st.Mode, got, want)
		}
		checked[want] = true
	}
	for _, w := range []string{"a regular file", "a directory", "a FIFO", "a socket", "a symbolic link", "a character device"} {
		if !checked[w] {
			t.Errorf("no path of %s was checked", w)
		}
	}
	if got := FileKind(StatMode(unix.S_IFBLK | 0o600)); got != "a block device" {
		t.Errorf("S_IFBLK names %q", got)
	}
	if got := FileKind(StatMode(0o600)); got != "an irregular file" {
		t.Errorf("no type bits name %q", got)
	}
}
