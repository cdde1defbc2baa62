package npy

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// Array is a loaded array: its header and its bytes in host memory (Data)
// or device memory (Ptr, on Device). Close frees device memory.
type Array struct {
	Header
	Data   []byte
	Ptr    cuda.DevicePtr
	Device int
	buf    *cuda.DeviceBuffer
	dev    cuda.Device
}

// Close frees the array's device memory; it does nothing for a host array.
func (a *Array) Close() error {
	if a.buf == nil {
		return nil
	}
	err := a.buf.Close()
	if rerr := a.dev.PrimaryCtxRelease(); err == nil {
		err = rerr
	}
	a.buf = nil
	return err
}

func open(path string) (*kvik.FileHandle, *Header, error) {
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		return nil, nil, err
	}
	size, err := f.Size()
	if err == nil {
		var h *Header
		if h, err = ReadHeader(f, size); err == nil {
			return f, h, nil
		}
	}
	f.Close()
	return nil, nil, &fs.PathError{Op: "read", Path: path, Err: err}
}

// ReadFileHeader reads and validates the header of the .npy file at path.
func ReadFileHeader(path string) (*Header, error) {
	f, h, err := open(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	return h, nil
}

// Load reads the .npy file at path into host memory.
func Load(path string) (*Array, error) {
	f, h, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &Array{Header: *h, Data: make([]byte, h.Size()), Device: -1}
	n, err := f.ReadAt(a.Data, h.DataOffset)
	if err == nil && n != len(a.Data) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// LoadDevice reads the .npy file at path into new memory on the CUDA
// device with the given ordinal. An empty array gets no memory (Ptr 0).
func LoadDevice(path string, device int) (*Array, error) {
	f, h, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a := &Array{Header: *h, Device: device}
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	if a.dev, err = cuda.DeviceGet(device); err != nil {
		return nil, err
	}
	ctx, err := a.dev.PrimaryCtxRetain()
	if err != nil {
		return nil, err
	}
	size := int(h.Size())
	if size == 0 {
		a.dev.PrimaryCtxRelease()
		return a, nil
	}
	if err := cuda.WithContext(ctx, func() (err error) { a.buf, err = cuda.MemAlloc(size); return err }); err != nil {
		a.dev.PrimaryCtxRelease()
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	a.Ptr = a.buf.Ptr()
	n, err := f.ReadDevice(a.Ptr, size, h.DataOffset, 0)
	if err == nil && n != size {
		err = &fs.PathError{Op: "read", Path: path, Err: io.ErrUnexpectedEOF}
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

func checkShape(d Dtype, shape []int64) (int64, error) {
	if _, err := ParseDtype(d.String()); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	n := int64(d.Size)
	for _, s := range shape {
		if s < 0 || (s > 0 && n > (1<<62)/s) {
			return 0, fmt.Errorf("%w: shape %v", ErrInvalidArgument, shape)
		}
		n *= s
	}
	return n, nil
}

// Save writes data, an array of the given dtype and shape, as a .npy file
// at path (version 1.0, or 2.0 for a very long header) through
// kvik.SaveFile: atomically, so that a failed save leaves no partial file
// and any old file at path intact. path may also be an s3:// URL,
// uploaded with opts.
func Save(path string, d Dtype, shape []int64, fortran bool, data []byte, opts ...kvik.RemoteOption) error {
	n, err := checkShape(d, shape)
	if err == nil && n != int64(len(data)) {
		err = fmt.Errorf("%w: %d bytes of data for shape %v of %s", ErrInvalidArgument, len(data), shape, d)
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	return save(path, d, shape, fortran, kvik.Piece{Data: data}, opts)
}

// SaveDevice writes the array at src in device memory as a .npy file at
// path, as Save does, reading it with kvik's parallel device path.
func SaveDevice(path string, d Dtype, shape []int64, fortran bool, src cuda.DevicePtr, opts ...kvik.RemoteOption) error {
	n, err := checkShape(d, shape)
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	body := kvik.Piece{Ptr: src, Size: n}
	if n == 0 {
		body = kvik.Piece{}
	}
	return save(path, d, shape, fortran, body, opts)
}

func save(path string, d Dtype, shape []int64, fortran bool, body kvik.Piece, opts []kvik.RemoteOption) error {
	hdr := encodeHeader(d, shape, fortran)
	return kvik.SaveFile(context.Background(), path, []kvik.Piece{{Data: hdr}, body}, opts...)
}
