// Package posix does positioned reads and writes that complete: it retries
// EINTR and short transfers, and reports end of file and lack of progress as
// errors, so that callers never mistake a partial transfer for a whole one.
package posix

import (
	"errors"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// Syscalls holds the system calls used, so that tests can inject faults
// (short transfers, EINTR, EIO, ENOSPC) beneath the library.
type Syscalls struct {
	Pread  func(fd int, p []byte, off int64) (int, error)
	Pwrite func(fd int, p []byte, off int64) (int, error)
}

// Sys is the active set of system calls. Replace it only in tests, before
// any I/O is in flight.
var Sys = Syscalls{Pread: unix.Pread, Pwrite: unix.Pwrite}

// maxRetries bounds consecutive EINTR retries so that a broken fault layer
// cannot spin forever.
const maxRetries = 1 << 10

// ReadFull reads len(p) bytes at off, looping over short reads. It returns
// io.EOF with the bytes read when the file ends first.
func ReadFull(fd int, p []byte, off int64) (int, error) {
	return full(Sys.Pread, fd, p, off, io.EOF)
}

// WriteFull writes all of p at off, looping over short writes. A write
// that makes no progress without an error gives io.ErrShortWrite.
func WriteFull(fd int, p []byte, off int64) (int, error) {
	return full(Sys.Pwrite, fd, p, off, io.ErrShortWrite)
}

// full repeats call until p is done, retrying EINTR (a bounded number of
// times in a row); a call that moves nothing ends it with noProgress.
func full(call func(int, []byte, int64) (int, error), fd int, p []byte, off int64, noProgress error) (int, error) {
	done, eintr := 0, 0
	for done < len(p) {
		n, err := call(fd, p[done:], off+int64(done))
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
