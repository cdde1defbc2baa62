package cufile

import (
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// HandleRegister registers the open file descriptor fd with cuFile
// (cuFileHandleRegister with a CU_FILE_HANDLE_TYPE_OPAQUE_FD descriptor)
// and returns its handle. The descriptor stays the caller's: close it only
// after HandleDeregister. cuFile refuses files it cannot serve, for
// example with ErrHandleNotRegistered where the udev data it needs about
// the block device (/run/udev) is missing, or ErrIONotSupported on a file
// system it does not support.
func HandleRegister(fd int) (Handle, error) {
	if fd < 0 {
		return 0, invalid("HandleRegister", "negative file descriptor %d", fd)
	}
	d := cDescr{typ: fileHandleTypeOpaqueFD, handle: uintptr(uint32(int32(fd)))}
	var h Handle
	if err := callStatus(fnHandleRegister, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d))); err != nil {
		return 0, err
	}
	return h, nil
}

// HandleDeregister releases a handle from HandleRegister
// (cuFileHandleDeregister, which reports nothing). No I/O may be in flight
// on it. A zero handle is ignored.
func HandleDeregister(h Handle) {
	if h == 0 {
		return
	}
	_ = callVoid(fnHandleDeregister, uintptr(h))
}

// BufRegister registers size bytes of memory at p (device memory from
// cuMemAlloc, or host memory) for cuFile I/O (cuFileBufRegister). Reads
// and writes into a registered buffer must pass p itself as the base and
// select the place with the buffer offset. flags is 0 or a combination of
// RDMARegister and RDMARelaxedOrdering.
func BufRegister(p cuda.DevicePtr, size int, flags int) error {
	if p == 0 {
		return invalid("BufRegister", "nil pointer")
	}
	if size < 0 {
		return invalid("BufRegister", "negative size %d", size)
	}
	return callStatus(fnBufRegister, uintptr(p), uintptr(size), uintptr(int64(int32(flags))))
}

// BufDeregister releases a registration made by BufRegister
// (cuFileBufDeregister).
func BufDeregister(p cuda.DevicePtr) error {
	if p == 0 {
		return invalid("BufDeregister", "nil pointer")
	}
	return callStatus(fnBufDeregister, uintptr(p))
}

func checkIO(name string, h Handle, buf cuda.DevicePtr, size int, fileOffset, bufOffset int64) error {
	switch {
	case h == 0:
		return invalid(name, "nil handle")
	case buf == 0:
		return invalid(name, "nil buffer")
	case size < 0:
		return invalid(name, "negative size %d", size)
	case fileOffset < 0:
		return invalid(name, "negative file offset %d", fileOffset)
	case bufOffset < 0:
		return invalid(name, "negative buffer offset %d", bufOffset)
	}
	return nil
}

// Read reads size bytes at fileOffset of the file into the memory at
// buf+bufOffset (cuFileRead) and returns the number of bytes read, fewer
// than size at the end of the file, without an error: unlike io.ReaderAt,
// a short count is not an error here. It blocks until the data are in
// place; it is not ordered with work on any CUDA stream. buf must be valid
// in the CUDA context current on the calling thread.
//
// Failures are *Error values: a result of -1 carries the errno
// (errors.Is(err, syscall.EIO)); others carry the OpError.
func Read(h Handle, buf cuda.DevicePtr, size int, fileOffset, bufOffset int64) (int, error) {
	if err := checkIO("Read", h, buf, size, fileOffset, bufOffset); err != nil {
		return 0, err
	}
	ret, errno, err := callSSize(fnRead, uintptr(h), uintptr(buf), uintptr(size), uintptr(fileOffset), uintptr(bufOffset))
	if err != nil {
		return 0, err
	}
	return decodeSSize(ret, errno)
}

// Write writes size bytes from the memory at buf+bufOffset to fileOffset of
// the file (cuFileWrite) and returns the number of bytes written. It
// behaves like Read otherwise.
func Write(h Handle, buf cuda.DevicePtr, size int, fileOffset, bufOffset int64) (int, error) {
	if err := checkIO("Write", h, buf, size, fileOffset, bufOffset); err != nil {
		return 0, err
	}
	ret, errno, err := callSSize(fnWrite, uintptr(h), uintptr(buf), uintptr(size), uintptr(fileOffset), uintptr(bufOffset))
	if err != nil {
		return 0, err
	}
	return decodeSSize(ret, errno)
}
