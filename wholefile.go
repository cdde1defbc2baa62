package kvik

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
)

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
