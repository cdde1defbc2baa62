package safetensors

import (
	"context"
	"errors"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// Alignment is the alignment of every tensor's address in memory that
// Load and LoadHost return (cudaMalloc's guarantee for a fresh allocation).
const Alignment = tensorload.Alignment

// Options selects and places the tensors that Load reads. The zero value
// loads every tensor onto device 0. Its fields (tensorload.Options has
// their documentation) are:
//
//	Names     []string               only these tensors; a missing one is ErrNotFound
//	Filter    func(*TensorInfo) bool only the tensors it returns true for
//	Devices   []int                  the CUDA ordinals to load onto (default [0])
//	Place     func(*TensorInfo) int  a tensor's index into Devices; nil: balanced by size
//	Split     func(*TensorInfo) bool tensors cut by byte range into one part per device
//	Replicate bool                   every tensor onto every device, each byte read once
//
// Split cuts at multiples of Alignment, and of 768 bytes for 6-bit
// dtypes, so no element is cut. Filter, Place and Split may be called
// from several goroutines at once (LoadIndex loads its shards
// concurrently): they must be safe for concurrent use, as pure functions
// of their argument are.
type Options = tensorload.Options[TensorInfo]

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

// Tensor is a loaded tensor: its description in the header (Name, Dtype,
// Shape, ...) and where it is (Device, Ptr, Data, Parts, Replicas).
type Tensor struct {
	TensorInfo
	Placement
}

// Model is a set of loaded tensors. Close frees their memory.
type Model struct {
	// Tensors in file order (for an index, file by file).
	Tensors []Tensor
	// Metadata is the __metadata__ map (for an index, its "metadata").
	Metadata map[string]string
	byName   map[string]int
	mems     []*tensorload.Memory
}

// Tensor returns the loaded tensor called name, or nil.
func (m *Model) Tensor(name string) *Tensor {
	t, _ := tensorload.Find(m.Tensors, m.byName, name)
	return t
}

// Close frees the model's device memory and releases the contexts it
// retained. Pointers into it are invalid afterwards.
func (m *Model) Close() error {
	var errs []error
	for _, mem := range m.mems {
		errs = append(errs, mem.Close())
	}
	m.mems = nil
	return errors.Join(errs...)
}

// Load reads the selected tensors of the safetensors file at name into
// device memory: one allocation per device and one parallel read per
// contiguous range. The header is validated before any allocation. name
// is a local path or a URL (s3://, http(s)://; see kvik.OpenReader),
// opened with opts: a remote file's header comes in one ranged GET and
// its tensors in parallel ranged GETs into device memory. Cancelling ctx
// abandons the requests and copies in flight, frees the memory and
// returns ctx.Err().
func Load(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return load(ctx, name, o, false, opts)
}

// LoadHost is Load into host memory: each Tensor's Data holds its bytes
// (aligned to Alignment); placement options are ignored.
func LoadHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return load(ctx, name, o, true, opts)
}

// LoadReader is Load from a file the caller opened (any kvik handle); r
// stays open.
func LoadReader(ctx context.Context, r kvik.Reader, o *Options) (*Model, error) {
	return loadReader(ctx, r, o, false)
}

// LoadHostReader is LoadHost from a file the caller opened; r stays open.
func LoadHostReader(ctx context.Context, r kvik.Reader, o *Options) (*Model, error) {
	return loadReader(ctx, r, o, true)
}

// ReadHeader reads and validates the header of the safetensors file at
// name, a path or URL opened with opts as Load does, without reading any
// tensor: one ranged GET for most remote files. o may be nil; no option
// changes how a safetensors header is read (gguf's do), it is there so
// that every format's ReadHeader takes the same arguments.
func ReadHeader(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Header, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Header, error) { return ReadHeaderReader(ctx, r, o) })
}

// ReadHeaderReader is ReadHeader from a file the caller opened; r stays
// open.
func ReadHeaderReader(ctx context.Context, r kvik.Reader, o *Options) (*Header, error) {
	h, err := readerHeader(ctx, r)
	if err != nil {
		return nil, tensorload.PathError(r, err)
	}
	return h, nil
}

func readerHeader(ctx context.Context, r kvik.Reader) (*Header, error) {
	size, err := r.Size()
	if err != nil {
		return nil, err
	}
	return DecodeHeader(tensorload.ReaderAt(ctx, r), size)
}

func load(ctx context.Context, name string, o *Options, host bool, opts []kvik.RemoteOption) (*Model, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Model, error) { return loadReader(ctx, r, o, host) })
}

func loadReader(ctx context.Context, r kvik.Reader, o *Options, host bool) (*Model, error) {
	if o == nil {
		o = &Options{}
	}
	return tensorload.WholeHeader(r, func() (*Header, error) { return readerHeader(ctx, r) },
		func(h *Header) (*Model, error) { return loadFrom(ctx, r, h, o, host) })
}

func loadFrom(ctx context.Context, f kvik.Reader, h *Header, o *Options, host bool) (*Model, error) {
	res, err := tensorload.Load(ctx, f, &tensorload.Request[TensorInfo]{
		Tensors:  h.Tensors,
		Name:     func(t *TensorInfo) string { return t.Name },
		Range:    func(t *TensorInfo) (int64, int64) { return h.DataOffset + t.Begin, t.Size() },
		Unit:     splitUnit,
		Options:  *o,
		Host:     host,
		NotFound: ErrNotFound, InvalidArgument: ErrInvalidArgument,
	})
	if err != nil {
		return nil, err
	}
	m := &Model{Metadata: h.Metadata, byName: make(map[string]int, len(res.Tensors))}
	if res.Mem != nil {
		m.mems = append(m.mems, res.Mem)
	}
	for i, t := range res.Tensors {
		m.byName[t.Name] = i
		m.Tensors = append(m.Tensors, Tensor{TensorInfo: t, Placement: res.Placed[i]})
	}
	return m, nil
}

// splitUnit cuts a split tensor at multiples of Alignment, and of 3 bytes
// (4 elements) for 6-bit types, so no element straddles two parts.
func splitUnit(t *TensorInfo) int64 {
	if t.Dtype.Bits()%4 != 0 {
		return 3 * Alignment
	}
	return Alignment
}
