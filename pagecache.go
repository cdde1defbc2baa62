package kvik

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/posix"
)

// pageCacheWindow is the most bytes of a file that PageCacheInfo maps at a
// time, which bounds the mapping and the mincore vector for huge files.
// Tests shrink it.
var pageCacheWindow int64 = 1 << 30

// pageCacheDropPath is the file that DropSystemPageCache writes; tests
// replace it.
var pageCacheDropPath = "/proc/sys/vm/drop_caches"

// PageCacheInfo reports how much of the byte range [offset, offset+length)
// of the file at path is in the page cache: resident is the number of pages
// of the range that are cached, and total the number of pages the range
// spans. The range is widened to page boundaries and clamped to the size of
// the file; a length of zero or less means "to the end of the file", and an
// offset at or past the end gives (0, 0, nil). A negative offset is an
// error that matches ErrInvalidArgument. A directory, FIFO or socket is
// an error that matches ErrNotRegular.
//
// Errors are of type *fs.PathError with Op "pagecacheinfo".
func PageCacheInfo(path string, offset, length int64) (resident, total int, err error) {
	fd, err := pcOpen(path)
	if err != nil {
		return 0, 0, &fs.PathError{Op: "pagecacheinfo", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return pcInfo(fd, path, offset, length)
}

// PageCacheInfoFd is PageCacheInfo for the open file fd, which must be open
// for reading; it refuses the kinds of file PageCacheInfo refuses. Errors
// name the file as "fd N".
func PageCacheInfoFd(fd int, offset, length int64) (resident, total int, err error) {
	return pcInfo(fd, pcFdName(fd), offset, length)
}

// DropFilePageCache asks the kernel to drop the pages of the byte range
// [offset, offset+length) of the file at path from the page cache. It first
// writes the file's dirty data to storage (fdatasync), since dirty pages
// cannot be dropped, then advises POSIX_FADV_DONTNEED on the range. A
// length of zero or less means "to the end of the file". The kernel may
// keep pages that are in use or that share a large folio with data outside
// the range, and file systems that live in memory, such as tmpfs, keep all
// of them. A directory, FIFO or socket is an error that matches
// ErrNotRegular; a character device (which has no page cache) succeeds.
//
// Errors are of type *fs.PathError with Op "dropfilepagecache".
func DropFilePageCache(path string, offset, length int64) error {
	fd, err := pcOpen(path)
	if err != nil {
		return &fs.PathError{Op: "dropfilepagecache", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return pcDrop(fd, path, offset, length)
}

// DropFilePageCacheFd is DropFilePageCache for the open file fd; it
// refuses the kinds of file DropFilePageCache refuses. Errors name the
// file as "fd N".
func DropFilePageCacheFd(fd int, offset, length int64) error {
	return pcDrop(fd, pcFdName(fd), offset, length)
}

// DropSystemPageCache writes all dirty data of the system to storage (sync)
// and then drops the clean page cache of every file, through
// /proc/sys/vm/drop_caches. If reclaimDentriesAndInodes is true, it also
// frees the cached directory entries and inodes (the value 3 rather than
// 1). It needs root (CAP_SYS_ADMIN); without it, it returns an error that
// matches fs.ErrPermission.
func DropSystemPageCache(reclaimDentriesAndInodes bool) error {
	unix.Sync()
	value := "1"
	if reclaimDentriesAndInodes {
		value = "3"
	}
	f, err := os.OpenFile(pageCacheDropPath, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("kvik: dropping the system page cache needs root (CAP_SYS_ADMIN): %w", err)
	case errors.Is(err, unix.EROFS):
		// Containers mount /proc/sys read-only for unprivileged users.
		return fmt.Errorf("kvik: dropping the system page cache needs root (CAP_SYS_ADMIN): %w: %w", fs.ErrPermission, err)
	}
	return err
}

// pcInfo implements PageCacheInfoFd; name names the file in errors.
func pcInfo(fd int, name string, offset, length int64) (resident, total int, err error) {
	resident, total, _, err = pcInfoSize(fd, name, offset, length)
	return resident, total, err
}

// pcInfoSize is pcInfo that also returns the file's size (a block
// device's own, posix.SizeOf), which it takes anyway.
func pcInfoSize(fd int, name string, offset, length int64) (resident, total int, size int64, err error) {
	const op = "pagecacheinfo"
	if offset < 0 {
		return 0, 0, 0, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)}
	}
	st, err := pcStat(fd)
	if err != nil {
		return 0, 0, 0, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if size, err = posix.SizeOf(fd, &st); err != nil {
		return 0, 0, 0, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if offset >= size {
		return 0, 0, size, nil
	}
	end := rangeEnd(size, offset, length)

	ps := int64(unix.Getpagesize())
	start := offset / ps * ps
	window := max(pageCacheWindow/ps*ps, ps)
	vec := make([]byte, (min(end-start, window)+ps-1)/ps)
	for off := start; off < end; off += window {
		n, err := pcResident(fd, off, min(end-off, window), vec)
		if err != nil {
			return 0, 0, 0, &fs.PathError{Op: op, Path: name, Err: err}
		}
		resident += n
	}
	return resident, int((end - start + ps - 1) / ps), size, nil
}

// rangeEnd returns where the range of length bytes at offset ends in a
// file of size bytes: at its end where length <= 0 or runs past it.
func rangeEnd(size, offset, length int64) int64 {
	if length > 0 && length < size-offset {
		return offset + length
	}
	return size
}

// pcResident maps length bytes of fd at the page-aligned offset and returns
// how many of their pages are in the page cache. vec must have room for one
// byte per page.
func pcResident(fd int, offset, length int64, vec []byte) (int, error) {
	data, err := unix.Mmap(fd, offset, int(length), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, os.NewSyscallError("mmap", err)
	}
	defer unix.Munmap(data)

	ps := int64(unix.Getpagesize())
	vec = vec[:(length+ps-1)/ps]
	if err := pcMincore(data, vec); err != nil {
		return 0, os.NewSyscallError("mincore", err)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}

// pcMincore calls mincore(2) for the mapping b, filling one byte of vec per
// page; golang.org/x/sys/unix has no wrapper for it on Linux.
func pcMincore(b, vec []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// pcDrop implements DropFilePageCacheFd; name names the file in errors.
func pcDrop(fd int, name string, offset, length int64) error {
	const op = "dropfilepagecache"
	if offset < 0 {
		return &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, offset)}
	}
	st, err := pcStat(fd)
	if err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	// A character device has nothing to write back (its fdatasync(2)
	// fails with EINVAL) and no page cache: PageCacheInfo counts none.
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		if err := pcIgnoringEINTR(func() error { return unix.Fdatasync(fd) }); err != nil {
			return &fs.PathError{Op: op, Path: name, Err: os.NewSyscallError("fdatasync", err)}
		}
	}
	if err := unix.Fadvise(fd, offset, max(length, 0), unix.FADV_DONTNEED); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: os.NewSyscallError("fadvise", err)}
	}
	return nil
}

// pcStat returns fd's stat, or for a file that pcOpen refuses (a
// directory, FIFO or socket: no page cache of its own) ErrNotRegular
// naming it, so that the Fd functions take the files their path
// functions take.
func pcStat(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, os.NewSyscallError("fstat", err)
	}
	if mode := posix.StatMode(st.Mode); !regularOrDevice(mode) {
		return st, fmt.Errorf("%w: %s", ErrNotRegular, posix.FileKind(mode))
	}
	return st, nil
}

// pcOpen opens path read-only and returns its file descriptor. A
// directory, FIFO or socket fails with ErrNotRegular; a FIFO cannot block
// the open.
func pcOpen(path string) (int, error) {
	fd, _, err := openKind(path, unix.O_RDONLY|unix.O_CLOEXEC, 0, regularOrDevice)
	return fd, err
}

// pcIgnoringEINTR calls fn until it fails with an error other than EINTR.
func pcIgnoringEINTR(fn func() error) error {
	for {
		if err := fn(); err != unix.EINTR {
			return err
		}
	}
}

// pcFdName names the file descriptor fd in errors.
func pcFdName(fd int) string { return "fd " + strconv.Itoa(fd) }

// populateRead asks the kernel to fault in the pages of b (page-aligned)
// in one call. Kernels before 5.14 lack MADV_POPULATE_READ: the copy then
// faults the pages in itself.
func populateRead(b []byte) error {
	err := unix.Madvise(b, unix.MADV_POPULATE_READ)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}
