package npy

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
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

// Options places an array that Load reads. The zero value loads onto
// device 0.
type Options struct {
	// Devices are the CUDA device ordinals to load onto (default [0]). An
	// array is one allocation, on Devices[0]: more than one device is an
	// error matching ErrInvalidArgument.
	Devices []int
}

// device returns the ordinal that o places an array on.
func (o *Options) device() (int, error) {
	if o == nil || len(o.Devices) == 0 {
		return 0, nil
	}
	if len(o.Devices) > 1 {
		return 0, fmt.Errorf("%w: %d devices for one array", ErrInvalidArgument, len(o.Devices))
	}
	return o.Devices[0], nil
}

// ReadHeader reads and validates the header of the .npy file at name, a
// local path or a URL (s3://, http(s)://; see kvik.OpenReader) opened
// with opts, without reading the data: a remote file's header comes in
// one ranged GET. o may be nil; no option changes how a header is read
// (gguf's do), it is there so that every format's ReadHeader takes the
// same arguments.
func ReadHeader(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Header, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Header, error) { return ReadHeaderReader(ctx, r, o) })
}

// ReadHeaderReader is ReadHeader from a file the caller opened (any kvik
// handle); r stays open.
func ReadHeaderReader(ctx context.Context, r kvik.Reader, o *Options) (*Header, error) {
	size, err := r.Size()
	if err == nil {
		var h *Header
		if h, err = DecodeHeader(tensorload.ReaderAt(ctx, r), size); err == nil {
			return h, nil
		}
	}
	return nil, readErr(r, err)
}

// Load reads the .npy file at name, a path or URL as for ReadHeader, into
// new memory on the CUDA device that o names (device 0 when o is nil),
// in parallel reads (ranged GETs for a URL). An empty array gets no
// memory (Ptr 0). Cancelling ctx abandons the requests and copies in
// flight, frees the memory and returns ctx.Err().
func Load(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Array, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Array, error) { return LoadReader(ctx, r, o) })
}

// LoadHost is Load into host memory (Data); o is ignored.
func LoadHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Array, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Array, error) { return LoadHostReader(ctx, r, o) })
}

// LoadReader is Load from a file the caller opened (any kvik handle); r
// stays open.
func LoadReader(ctx context.Context, r kvik.Reader, o *Options) (*Array, error) {
	device, err := o.device()
	if err != nil {
		return nil, readErr(r, err)
	}
	return tensorload.Whole(r, func() (*Array, error) {
		h, err := ReadHeaderReader(ctx, r, o)
		if err != nil {
			return nil, err
		}
		return loadDevice(ctx, r, h, device)
	})
}

// LoadHostReader is LoadHost from a file the caller opened; r stays open.
func LoadHostReader(ctx context.Context, r kvik.Reader, o *Options) (*Array, error) {
	return tensorload.Whole(r, func() (*Array, error) { return loadHostReader(ctx, r, o) })
}

func loadHostReader(ctx context.Context, r kvik.Reader, o *Options) (*Array, error) {
	h, err := ReadHeaderReader(ctx, r, o)
	if err != nil {
		return nil, err
	}
	// The size comes from the file (and a server's claim of its length):
	// one the machine cannot hold is an error, not a fatal allocation.
	if err := hostmem.Check(h.Size(), "array"); err != nil {
		return nil, readErr(r, err)
	}
	a := &Array{Header: *h, Data: make([]byte, h.Size()), Device: -1}
	n, err := r.PRead(ctx, a.Data, h.DataOffset).Get()
	if err == nil && n != len(a.Data) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, readErr(r, ctxErr(ctx, err))
	}
	return a, nil
}

// ctxErr returns ctx's error in place of err when ctx is done: what a
// cancelled read reports may wrap it or not.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// newDeviceArray returns an array of h with new memory of its size on
// device (none for an empty one: Ptr 0) and the context that holds it.
func newDeviceArray(h *Header, device int) (*Array, cuda.Context, error) {
	a := &Array{Header: *h, Device: device}
	if err := cuda.Init(); err != nil {
		return nil, 0, err
	}
	var err error
	if a.dev, err = cuda.DeviceGet(device); err != nil {
		return nil, 0, err
	}
	cctx, err := a.dev.PrimaryCtxRetain()
	if err != nil {
		return nil, 0, err
	}
	size := int(h.Size())
	if size == 0 {
		a.dev.PrimaryCtxRelease()
		return a, cctx, nil
	}
	if err := cuda.WithContext(cctx, func() (err error) { a.buf, err = cuda.MemAlloc(size); return err }); err != nil {
		a.dev.PrimaryCtxRelease()
		return nil, 0, err
	}
	a.Ptr = a.buf.Ptr()
	return a, cctx, nil
}

func loadDevice(ctx context.Context, r kvik.Reader, h *Header, device int) (*Array, error) {
	a, _, err := newDeviceArray(h, device)
	if err != nil {
		return nil, readErr(r, err)
	}
	size := int(h.Size())
	if size == 0 {
		return a, nil
	}
	n, err := r.PReadDevice(ctx, a.Ptr, size, h.DataOffset, 0).Get()
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		a.Close()
		return nil, readErr(r, ctxErr(ctx, err))
	}
	return a, nil
}

func checkShape(d Dtype, shape []int64) (int64, error) {
	if p, err := ParseDtype(d.String()); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	} else if p != d {
		return 0, fmt.Errorf("%w: dtype %q is spelled %q", ErrInvalidArgument, d, p)
	}
	n := int64(d.Size())
	for _, s := range shape {
		if s < 0 || (s > 0 && n > (1<<62)/s) {
			return 0, fmt.Errorf("%w: shape %v", ErrInvalidArgument, shape)
		}
		n *= s
	}
	return n, nil
}

// SaveArray is the array that Save writes: its bytes are at Ptr in
// device memory when Ptr is not 0, else in Data. Fortran says they are in
// column-major order.
type SaveArray struct {
	Dtype   Dtype
	Shape   []int64
	Fortran bool
	Ptr     cuda.DevicePtr
	Data    []byte
}

// Save writes a as a .npy file at path (version 1.0, or 2.0 for a very
// long header) through kvik.SaveFile: atomically, so that a failed save
// leaves no partial file and any old file at path intact; a device array
// is read with kvik's parallel device path. path may also be an s3://
// URL, uploaded with opts; a local file is synced unless opts hold
// kvik.WithoutSync. Cancelling ctx stops the writes: the old file
// (or object) stays, or none.
func Save(ctx context.Context, path string, a SaveArray, opts ...kvik.RemoteOption) error {
	n, err := checkShape(a.Dtype, a.Shape)
	var body kvik.Piece
	if err == nil {
		body, err = a.body(n)
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: kvik.RedactURL(path), Err: err}
	}
	hdr := encodeHeader(a.Dtype, a.Shape, a.Fortran)
	return kvik.SaveFile(ctx, path, []kvik.Piece{{Data: hdr}, body}, opts...)
}

// body is the piece that holds a's n bytes: at Ptr in device memory
// (none for no bytes), else Data, which must hold n bytes.
func (a SaveArray) body(n int64) (kvik.Piece, error) {
	switch {
	case a.Ptr != 0 && n > 0:
		return kvik.Piece{Ptr: a.Ptr, Size: n}, nil
	case a.Ptr != 0:
		return kvik.Piece{}, nil
	case n != int64(len(a.Data)):
		return kvik.Piece{}, fmt.Errorf("%w: %d bytes of data for shape %v of %s", ErrInvalidArgument, len(a.Data), a.Shape, a.Dtype)
	}
	return kvik.Piece{Data: a.Data}, nil
}

// readErr names r's file in err, unless a kvik handle already did.
func readErr(r kvik.Reader, err error) error {
	if _, ok := err.(*fs.PathError); ok {
		return err
	}
	return &fs.PathError{Op: "read", Path: r.Name(), Err: err}
}
