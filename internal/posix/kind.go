package posix

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// FileKind names the type of file in mode ("a FIFO", "a directory"), for
// errors about files that are not what an operation takes.
func FileKind(mode fs.FileMode) string {
	switch mode.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a FIFO"
	case fs.ModeSocket:
		return "a socket"
	case fs.ModeDevice:
		return "a block device"
	case fs.ModeDevice | fs.ModeCharDevice:
		return "a character device"
	}
	return "an irregular file"
}

// StatMode returns the type bits of a stat(2) st_mode as an fs.FileMode,
// as os.Stat reports them.
func StatMode(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFBLK:
		return fs.ModeDevice
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	}
	return fs.ModeIrregular
}
