package kvik

import (
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/posix"
)

// ParseOpenFlags converts KvikIO's open flags to os.O_* flags: "r"
// (read), "r+" (read and write), "w" (write, create, truncate) and "w+"
// (read and write, create, truncate). A "b" anywhere after the first
// character is ignored, as in C's fopen.
func ParseOpenFlags(flags string) (int, error) {
	s := flags
	if len(s) > 1 {
		s = s[:1] + strings.ReplaceAll(s[1:], "b", "")
	}
	switch s {
	case "r":
		return os.O_RDONLY, nil
	case "r+":
		return os.O_RDWR, nil
	case "w":
		return os.O_WRONLY | os.O_CREATE | os.O_TRUNC, nil
	case "w+":
		return os.O_RDWR | os.O_CREATE | os.O_TRUNC, nil
	}
	return 0, fmt.Errorf("%w: open flags %q (want r, r+, w or w+)", ErrInvalidArgument, flags)
}

// openKind opens path with flag and perm without waiting on a FIFO, and
// refuses a file of a type that ok does not take with ErrNotRegular,
// naming the type (posix.OpenKind). It returns the descriptor and the
// file's stat.
func openKind(path string, flag int, perm uint32, ok func(fs.FileMode) bool) (int, unix.Stat_t, error) {
	return posix.OpenKind(path, flag, perm, ok, ErrNotRegular)
}

// regularOrDevice takes regular files and device nodes, block or
// character, which are read and written like them.
func regularOrDevice(mode fs.FileMode) bool { return mode.IsRegular() || mode&fs.ModeDevice != 0 }
