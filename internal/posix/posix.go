// Package posix does positioned reads and writes that complete: it retries
// EINTR and short transfers, and reports end of file and lack of progress as
// errors, so that callers never mistake a partial transfer for a whole one.
package posix

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Syscalls holds the system calls used, so that tests can inject faults
// (short transfers, EINTR, EIO, ENOSPC) beneath the library.
type Syscalls struct {
	Pread  func(fd int, p []byte, off int64) (int, error)
	Pwrite func(fd int, p []byte, off int64) (int, error)
	// Fallocate is fallocate(2); nil is unix.Fallocate, so that a set
	// that replaces only the transfers keeps the real one.
	Fallocate func(fd int, mode uint32, off, n int64) error
	// Preadv is preadv(2); nil is unix.Preadv, as for Fallocate.
	Preadv func(fd int, iovs [][]byte, off int64) (int, error)
}

// sys is the active set of system calls.
var sys = Syscalls{Pread: unix.Pread, Pwrite: unix.Pwrite}

// SetSyscalls puts s in force and returns the function that restores the
// previous set. Only tests call it (fault injection), before any I/O is
// in flight.
func SetSyscalls(s Syscalls) (restore func()) {
	old := sys
	sys = s
	return func() { sys = old }
}

// CurrentSyscalls returns the set in force.
func CurrentSyscalls() Syscalls { return sys }

// Pread is one pread(2) through the set in force.
func Pread(fd int, p []byte, off int64) (int, error) { return sys.Pread(fd, p, off) }

// Pwrite is one pwrite(2) through the set in force.
func Pwrite(fd int, p []byte, off int64) (int, error) { return sys.Pwrite(fd, p, off) }

// Fallocate is one fallocate(2) through the set in force, retrying EINTR
// (a bounded number of times).
func Fallocate(fd int, mode uint32, off, n int64) error {
	call := sys.Fallocate
	if call == nil {
		call = unix.Fallocate
	}
	for i := 0; ; i++ {
		err := call(fd, mode, off, n)
		if !errors.Is(err, syscall.EINTR) || i == maxRetries {
			return err
		}
	}
}

// Open is open(2) of path with flags and perm (the mode of a file it
// creates), retrying EINTR (a bounded number of times), which an open on
// a network or FUSE file system returns when a signal, such as the
// runtime's preemption, arrives (os.OpenFile retries it too).
func Open(path string, flags int, perm uint32) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Open(path, flags, perm)
		if !errors.Is(err, syscall.EINTR) || i == maxRetries {
			return fd, err
		}
	}
}

// OpenStat is Open with O_NONBLOCK, so that opening a FIFO cannot wait
// for its other end, and returns the file's fstat(2) for the caller to
// refuse the kinds of file it does not take. O_NONBLOCK is then cleared,
// unless flag has it, keeping the other status flags (O_DIRECT). An open
// that a lease delays (EWOULDBLOCK, which only a regular file gives) is
// retried blocking, as without O_NONBLOCK. When the open fails with ENXIO
// (a socket, a FIFO opened for writing without a reader, a device node
// without a driver) or EISDIR, st is the stat(2) of path, or zero if that
// fails too, so that the caller can name what path is.
func OpenStat(path string, flag int, perm uint32) (fd int, st unix.Stat_t, err error) {
	fd, err = Open(path, flag|unix.O_NONBLOCK, perm)
	if errors.Is(err, unix.EWOULDBLOCK) {
		fd, err = Open(path, flag, perm)
	}
	if err != nil {
		if (errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EISDIR)) && unix.Stat(path, &st) != nil {
			st = unix.Stat_t{}
		}
		return -1, st, err
	}
	if err = unix.Fstat(fd, &st); err != nil {
		err = os.NewSyscallError("fstat", err)
	} else if flag&unix.O_NONBLOCK == 0 {
		err = setBlocking(fd)
	}
	if err != nil {
		unix.Close(fd)
		return -1, unix.Stat_t{}, err
	}
	return fd, st, nil
}

// SizeOf returns the size of fd's file, whose fstat(2) is st: st.Size,
// but for a block device, whose st_size is 0, the device's size
// (BLKGETSIZE64, which leaves the descriptor's offset alone).
func SizeOf(fd int, st *unix.Stat_t) (int64, error) {
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return st.Size, nil
	}
	var n uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, os.NewSyscallError("ioctl BLKGETSIZE64", e)
	}
	return int64(n), nil
}

// OpenKind is OpenStat that refuses a file of a type that ok does not
// take with an error wrapping refused and naming the type ("a FIFO"),
// also where the open itself failed on one (a socket, a FIFO without a
// reader, a directory opened to write: that error is wrapped too).
func OpenKind(path string, flag int, perm uint32, ok func(fs.FileMode) bool, refused error) (int, unix.Stat_t, error) {
	fd, st, err := OpenStat(path, flag, perm)
	if err != nil && st.Mode == 0 {
		return -1, st, err
	}
	mode := StatMode(st.Mode)
	switch {
	case ok(mode):
		return fd, st, err // err: a device node without a driver
	case err != nil:
		return -1, st, fmt.Errorf("%w: %s (%w)", refused, FileKind(mode), err)
	}
	unix.Close(fd)
	return -1, st, fmt.Errorf("%w: %s", refused, FileKind(mode))
}

// setBlocking clears O_NONBLOCK of fd's open file, keeping its other
// status flags.
func setBlocking(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil && fl&unix.O_NONBLOCK != 0 {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewSyscallError("fcntl", err)
}

// maxRetries bounds consecutive EINTR retries so that a broken fault layer
// cannot spin forever.
const maxRetries = 1 << 10

// ReadFull reads len(p) bytes at off, looping over short reads. It returns
// io.EOF with the bytes read when the file ends first.
func ReadFull(fd int, p []byte, off int64) (int, error) {
	return full(sys.Pread, fd, p, off, io.EOF)
}

// WriteFull writes all of p at off, looping over short writes. A write
// that makes no progress without an error gives io.ErrShortWrite.
func WriteFull(fd int, p []byte, off int64) (int, error) {
	return full(sys.Pwrite, fd, p, off, io.ErrShortWrite)
}

// iovMax is the most buffers one preadv(2) takes (IOV_MAX).
const iovMax = 1024

// ReadvFull fills bufs, in order, from consecutive bytes of the file at
// off with preadv(2), looping over short reads and over IOV_MAX buffers
// at a time: one system call scatters what many pread calls would. It
// returns io.EOF with the bytes read when the file ends first.
func ReadvFull(fd int, bufs [][]byte, off int64) (int, error) {
	call := sys.Preadv
	if call == nil {
		call = unix.Preadv
	}
	bufs = append([][]byte(nil), bufs...) // the caller's stay whole
	more := func(int) bool {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		return len(bufs) > 0
	}
	return loop(more, func(done int) (int, error) {
		n, err := call(fd, bufs[:min(len(bufs), iovMax)], off+int64(done))
		for m := n; m > 0; { // drop what was filled
			k := min(m, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			m -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
		return n, err
	}, io.EOF)
}

// full repeats call until p is done, retrying EINTR (a bounded number of
// times in a row); a call that moves nothing ends it with noProgress.
func full(call func(int, []byte, int64) (int, error), fd int, p []byte, off int64, noProgress error) (int, error) {
	more := func(done int) bool { return done < len(p) }
	return loop(more, func(done int) (int, error) { return call(fd, p[done:], off+int64(done)) }, noProgress)
}

// loop calls step while more reports work left (each given the bytes
// done so far), retrying EINTR a bounded number of times in a row; a step that
// moves nothing ends it with noProgress.
func loop(more func(done int) bool, step func(done int) (int, error), noProgress error) (int, error) {
	done, eintr := 0, 0
	for more(done) {
		n, err := step(done)
		if n > 0 {
			done += n
		}
		switch {
		case errors.Is(err, syscall.EINTR) && eintr < maxRetries:
			eintr++
			continue
		case err != nil:
			return done, err
		case n <= 0:
			return done, noProgress
		}
		eintr = 0
	}
	return done, nil
}
