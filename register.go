package kvik

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/devmem"
)

// cuFileActive reports whether the cuFile driver is open and usable, so
// that registrations can be made.
func cuFileActive() bool { return ProbeCuFile().Usable }

// BufferRegister registers size bytes of device memory at buf with cuFile
// (cuFileBufRegister), which saves cuFile from staging transfers through
// its own buffers. It does nothing where cuFile cannot be used, as KvikIO's
// buffer_register does in compat mode.
func BufferRegister(buf cuda.DevicePtr, size int) error {
	if !cuFileActive() {
		return nil
	}
	r, err := devmem.Resolve(buf, size, 0)
	if err != nil {
		return err
	}
	return cuda.WithContext(r.Ctx, func() error { return cufile.BufRegister(buf, size, 0) })
}

// BufferDeregister undoes BufferRegister.
func BufferDeregister(buf cuda.DevicePtr) error {
	if !cuFileActive() {
		return nil
	}
	r, err := devmem.Resolve(buf, 0, 0)
	if err != nil {
		return err
	}
	return cuda.WithContext(r.Ctx, func() error { return cufile.BufDeregister(buf) })
}

// MemoryRegister registers the whole allocation that contains buf.
func MemoryRegister(buf cuda.DevicePtr) error {
	return withAllocation(buf, func(base cuda.DevicePtr, size int) error {
		return cufile.BufRegister(base, size, 0)
	})
}

// MemoryDeregister undoes MemoryRegister.
func MemoryDeregister(buf cuda.DevicePtr) error {
	return withAllocation(buf, func(base cuda.DevicePtr, _ int) error {
		return cufile.BufDeregister(base)
	})
}

// withAllocation finds the allocation that contains buf and, where cuFile
// is usable, calls f on it with the allocation's context current.
func withAllocation(buf cuda.DevicePtr, f func(base cuda.DevicePtr, size int) error) error {
	r, err := devmem.Resolve(buf, 0, 0)
	if err != nil {
		return err
	}
	return cuda.WithContext(r.Ctx, func() error {
		base, size, err := cuda.MemGetAddressRange(buf)
		if err != nil || !cuFileActive() {
			return err
		}
		return f(base, size)
	})
}

// ReadFileToDevice reads a whole file into new device memory, allocated in
// the calling thread's current context or else device 0's primary
// context. A context made current by the caller counts only if the
// goroutine is locked to its thread (runtime.LockOSThread). The caller
// closes the buffer.
func ReadFileToDevice(path string) (*cuda.DeviceBuffer, error) {
	f, err := Open(path, "r", 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: empty file: device memory cannot be empty", ErrInvalidArgument)}
	}
	ctx, err := currentOrPrimary()
	if err != nil {
		return nil, err
	}
	var buf *cuda.DeviceBuffer
	if err := cuda.WithContext(ctx, func() (err error) { buf, err = cuda.MemAlloc(int(size)); return err }); err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	n, err := f.ReadDevice(buf.Ptr(), int(size), 0, 0)
	if err == io.EOF {
		err = &fs.PathError{Op: "read", Path: path, Err: io.ErrUnexpectedEOF} // the file shrank
	}
	if err != nil {
		buf.Close()
		return nil, err
	}
	if n != int(size) {
		buf.Close()
		return nil, &fs.PathError{Op: "read", Path: path, Err: io.ErrUnexpectedEOF}
	}
	return buf, nil
}

// WriteFileFromDevice writes the contents of buf as the file at path
// through SaveFile: atomically, synced to storage before it returns, and
// leaving any old file at path intact if it fails.
func WriteFileFromDevice(path string, buf *cuda.DeviceBuffer) error {
	return SaveFile(context.Background(), path, []Piece{{Ptr: buf.Ptr(), Size: int64(buf.Size())}})
}

func currentOrPrimary() (cuda.Context, error) {
	if err := cuda.Init(); err != nil {
		return 0, err
	}
	if c, err := cuda.CtxGetCurrent(); err == nil && c != 0 {
		return c, nil
	}
	return devmem.PrimaryContext(0)
}

// DriverProperties returns the cuFile driver's properties, opening the
// driver if needed. GPUDirect Storage is available when NVFSAvailable
// reports true.
func DriverProperties() (cufile.DriverProperties, error) {
	st := ProbeCuFile()
	if !st.Usable {
		return cufile.DriverProperties{}, fmt.Errorf("%w: %s", ErrCuFileRequired, st.Reason)
	}
	return cufile.DriverGetProperties()
}

// SetDriverPollMode turns cuFile's polling for small I/O on or off
// (cuFileDriverSetPollMode); thresholdKB is the largest polled I/O.
func SetDriverPollMode(poll bool, thresholdKB int) error {
	return withDriver(func() error { return cufile.DriverSetPollMode(poll, thresholdKB) })
}

// SetDriverMaxCacheSize sets cuFile's GPU bounce-buffer space per device.
func SetDriverMaxCacheSize(kb int) error {
	return withDriver(func() error { return cufile.DriverSetMaxCacheSize(kb) })
}

// SetDriverMaxPinnedMemSize sets the most GPU memory cuFile pins per device.
func SetDriverMaxPinnedMemSize(kb int) error {
	return withDriver(func() error { return cufile.DriverSetMaxPinnedMemSize(kb) })
}

func withDriver(f func() error) error {
	if st := ProbeCuFile(); !st.Usable {
		return fmt.Errorf("%w: %s", ErrCuFileRequired, st.Reason)
	}
	return f()
}
