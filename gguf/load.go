package gguf

import (
	"context"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// Alignment is the alignment of every tensor's address in memory that
// Load and LoadHost return (cudaMalloc's guarantee for a fresh allocation).
const Alignment = tensorload.Alignment

// Options selects and places the tensors that Load reads, as
// safetensors.Options does. The zero value loads every tensor onto
// device 0.
type Options struct {
	// Names, if set, are the only tensors loaded; a missing one is an
	// error matching ErrNotFound.
	Names []string
	// Filter, if set, loads only the tensors it returns true for.
	Filter func(t *TensorInfo) bool
	// Devices are the CUDA device ordinals to load onto (default [0]).
	Devices []int
	// Place maps a tensor to an index into Devices. When nil and there are
	// several devices, tensors are balanced by size: each device gets a
	// contiguous share of about the same number of bytes.
	Place func(t *TensorInfo) int
	// Split, if set, selects tensors that are cut by byte range into one
	// part per device (at multiples of Alignment that are whole blocks of
	// the tensor's type, so no block is cut) instead of being placed
	// whole. Their Parts field lists the pieces.
	Split func(t *TensorInfo) bool
	// Replicate loads every selected tensor onto every device in Devices
	// (data-parallel serving): each byte is read from storage once, by
	// one device, and copied device to device to the others (over NVLink
	// where the GPUs have it). Each Tensor's Replicas lists the copies;
	// Device and Ptr are the first. Place and Split must be nil.
	Replicate bool
	// AllowUnknownTypes loads tensors of a type this package does not
	// know as raw bytes, from their offset to the next tensor's data (or
	// the end of the file), instead of failing with ErrUnknownType.
	AllowUnknownTypes bool
}

// Placement is where a loaded tensor is: Device and Ptr for a whole
// tensor on a device (Device is -1 for host memory or a split tensor),
// Data for a host load, Parts for a split tensor, Replicas for a load
// with Options.Replicate (every device's copy, in the order of
// Options.Devices, the first the same as Device and Ptr).
type Placement = tensorload.Placement

// Part is the piece of a split tensor held by one device: bytes
// [Offset, Offset+Size) of the tensor at Ptr.
type Part = tensorload.Part

// Replica is one device's copy of a tensor loaded with Options.Replicate.
type Replica = tensorload.Replica

// Tensor is a loaded tensor: its description in the header (Name, Type,
// Shape, Offset) and where it is (Device, Ptr, Data, Parts, Replicas).
type Tensor struct {
	TensorInfo
	Placement
}

// Model is a set of loaded tensors with the file's metadata. Close frees
// their memory.
type Model struct {
	// Tensors in file order.
	Tensors  []Tensor
	Metadata Metadata
	// Version and Alignment are the file's.
	Version   uint32
	Alignment int64
	byName    map[string]int
	mem       *tensorload.Memory
}

// Tensor returns the loaded tensor called name, or nil.
func (m *Model) Tensor(name string) *Tensor {
	t, _ := tensorload.Find(m.Tensors, m.byName, name)
	return t
}

// Close frees the model's device memory and releases the contexts it
// retained. Pointers into it are invalid afterwards.
func (m *Model) Close() error {
	if m.mem == nil {
		return nil
	}
	err := m.mem.Close()
	m.mem = nil
	return err
}

// Load reads the selected tensors of the GGUF file name (a path, or a
// URL as kvik.OpenReader takes, opened with opts) into device memory:
// one allocation per device and one parallel read per contiguous range.
// The header is read and validated before any allocation. Cancelling ctx
// abandons the requests and copies in flight, frees the memory and
// returns ctx.Err().
func Load(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return loadName(ctx, name, o, false, opts)
}

// LoadHost is Load into host memory: each Tensor's Data holds its bytes
// (aligned to Alignment); placement options are ignored.
func LoadHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return loadName(ctx, name, o, true, opts)
}

// LoadReader is Load from an open kvik.Reader (a FileHandle, MmapHandle
// or RemoteHandle), which it leaves open.
func LoadReader(ctx context.Context, r kvik.Reader, o *Options) (*Model, error) {
	return loadReader(ctx, r, o, false)
}

// LoadHostReader is LoadHost from an open kvik.Reader.
func LoadHostReader(ctx context.Context, r kvik.Reader, o *Options) (*Model, error) {
	return loadReader(ctx, r, o, true)
}

// ReadHeader reads and validates the header of the GGUF file name (a
// path, or a URL opened with opts), without reading any tensor; o may be
// nil, only its AllowUnknownTypes counts.
func ReadHeader(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Header, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Header, error) { return ReadHeaderReader(ctx, r, o) })
}

// ReadHeaderReader is ReadHeader from an open kvik.Reader, which it
// leaves open.
func ReadHeaderReader(ctx context.Context, r kvik.Reader, o *Options) (*Header, error) {
	h, err := readerHeader(ctx, r, o)
	if err != nil {
		return nil, tensorload.PathError(r, err)
	}
	return h, nil
}

func readerHeader(ctx context.Context, r kvik.Reader, o *Options) (*Header, error) {
	size, err := r.Size()
	if err != nil {
		return nil, err
	}
	return readHeader(tensorload.ReaderAt(ctx, r), size, o != nil && o.AllowUnknownTypes)
}

func loadName(ctx context.Context, name string, o *Options, host bool, opts []kvik.RemoteOption) (*Model, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Model, error) { return loadReader(ctx, r, o, host) })
}

func loadReader(ctx context.Context, r kvik.Reader, o *Options, host bool) (*Model, error) {
	if o == nil {
		o = &Options{}
	}
	return tensorload.WholeHeader(r, func() (*Header, error) { return readerHeader(ctx, r, o) },
		func(h *Header) (*Model, error) { return load(ctx, r, h, o, host) })
}

func load(ctx context.Context, r kvik.Reader, h *Header, o *Options, host bool) (*Model, error) {
	res, err := tensorload.Load(ctx, r, &tensorload.Request[TensorInfo]{
		Tensors: h.Tensors,
		Name:    func(t *TensorInfo) string { return t.Name },
		Range:   func(t *TensorInfo) (int64, int64) { return h.DataOffset + t.Offset, t.size },
		Unit:    func(t *TensorInfo) int64 { return splitUnit(t.Type) },
		Options: tensorload.Options[TensorInfo]{Names: o.Names, Filter: o.Filter, Devices: o.Devices, Place: o.Place, Split: o.Split,
			Replicate: o.Replicate},
		Host:     host,
		NotFound: ErrNotFound, InvalidArgument: ErrInvalidArgument,
	})
	if err != nil {
		return nil, err
	}
	m := &Model{Metadata: h.Metadata, Version: h.Version, Alignment: h.Alignment, mem: res.Mem,
		byName: make(map[string]int, len(res.Tensors))}
	for i, t := range res.Tensors {
		m.byName[t.Name] = i
		m.Tensors = append(m.Tensors, Tensor{TensorInfo: t, Placement: res.Placed[i]})
	}
	return m, nil
}

// splitUnit is the smallest multiple of Alignment that is whole blocks of
// t (Alignment for an unknown type, whose bytes are raw).
func splitUnit(t Type) int64 {
	b := t.TypeSize()
	if b == 0 {
		return Alignment
	}
	return Alignment / gcd(Alignment, b) * b
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
