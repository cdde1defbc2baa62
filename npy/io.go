package npy

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/hostmem"
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

// open opens name (a path or URL) and reads its header.
func open(name string, opts []kvik.RemoteOption) (kvik.Reader, *Header, error) {
	r, err := kvik.OpenReader(context.Background(), name, opts...)
	if err != nil {
		return nil, nil, err
	}
	h, err := readerHeader(r)
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	return r, h, nil
}

func readerHeader(r kvik.Reader) (*Header, error) {
	size, err := r.Size()
	if err == nil {
		var h *Header
		if h, err = ReadHeader(r, size); err == nil {
			return h, nil
		}
	}
	return nil, readErr(r, err)
}

// ReadFileHeader reads and validates the header of the .npy file at name,
// a local path or a URL (s3://, http(s)://; see kvik.OpenReader) opened
// with opts. A remote file's header comes in one ranged GET.
func ReadFileHeader(name string, opts ...kvik.RemoteOption) (*Header, error) {
	r, h, err := open(name, opts)
	if err != nil {
		return nil, err
	}
	r.Close()
	return h, nil
}

// Load reads the .npy file at name, a path or URL as for ReadFileHeader,
// into host memory.
func Load(name string, opts ...kvik.RemoteOption) (*Array, error) {
	r, h, err := open(name, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return loadHost(r, h)
}

// LoadReader is Load from a file the caller opened (any kvik handle); r
// stays open.
func LoadReader(r kvik.Reader) (*Array, error) {
	h, err := readerHeader(r)
	if err != nil {
		return nil, err
	}
	return loadHost(r, h)
}

func loadHost(r kvik.Reader, h *Header) (*Array, error) {
	// The size comes from the file (and a server's claim of its length):
	// one the machine cannot hold is an error, not a fatal allocation.
	if err := hostmem.Check(h.Size(), "array"); err != nil {
		return nil, readErr(r, err)
	}
	a := &Array{Header: *h, Data: make([]byte, h.Size()), Device: -1}
	if err := readFull(r, a.Data, h.DataOffset); err != nil {
		return nil, readErr(r, err)
	}
	return a, nil
}

// LoadDevice reads the .npy file at name, a path or URL as for
// ReadFileHeader, into new memory on the CUDA device with the given
// ordinal, in parallel reads (ranged GETs for a URL). An empty array gets
// no memory (Ptr 0).
func LoadDevice(name string, device int, opts ...kvik.RemoteOption) (*Array, error) {
	r, h, err := open(name, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return loadDevice(r, h, device)
}

// LoadDeviceReader is LoadDevice from a file the caller opened; r stays
// open.
func LoadDeviceReader(r kvik.Reader, device int) (*Array, error) {
	h, err := readerHeader(r)
	if err != nil {
		return nil, err
	}
	return loadDevice(r, h, device)
}

func loadDevice(r kvik.Reader, h *Header, device int) (*Array, error) {
	a := &Array{Header: *h, Device: device}
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	var err error
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
		return nil, readErr(r, err)
	}
	a.Ptr = a.buf.Ptr()
	n, err := r.ReadDevice(a.Ptr, size, h.DataOffset, 0)
	if err == nil && n != size {
		err = &fs.PathError{Op: "read", Path: r.Name(), Err: io.ErrUnexpectedEOF}
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

// readErr names r's file in err, unless a kvik handle already did.
func readErr(r kvik.Reader, err error) error {
	if _, ok := err.(*fs.PathError); ok {
		return err
	}
	return &fs.PathError{Op: "read", Path: r.Name(), Err: err}
}
