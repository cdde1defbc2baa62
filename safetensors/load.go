package safetensors

import (
	"context"
	"errors"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// Alignment is the alignment of every tensor's address in memory that
// Load and LoadHost return (cudaMalloc's guarantee for a fresh allocation).
const Alignment = tensorload.Alignment

// Options selects and places the tensors that Load reads. The zero value
// loads every tensor onto device 0.
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
	// part per device (at multiples of Alignment, and of 768 bytes for
	// 6-bit dtypes, so no element is cut) instead of being placed whole.
	// Their Parts field lists the pieces.
	Split func(t *TensorInfo) bool
	// Replicate loads every selected tensor onto every device in Devices
	// (data-parallel serving): each byte is read from storage once, by
	// one device, and copied device to device to the others (over NVLink
	// where the GPUs have it). Each Tensor's Replicas lists the copies;
	// Device and Ptr are the first. Place and Split must be nil.
	Replicate bool
	// Filter, Place and Split may be called from several goroutines at
	// once (LoadIndex loads its shards concurrently): they must be safe
	// for concurrent use, as pure functions of their argument are.
}

// Part is the piece of a split tensor held by one device: bytes
// [Offset, Offset+Size) of the tensor at Ptr.
type Part struct {
	Device       int
	Ptr          cuda.DevicePtr
	Offset, Size int64
}

// Tensor is a loaded tensor.
type Tensor struct {
	TensorInfo
	// Device is the CUDA ordinal holding the tensor, or -1 for host memory
	// or a split tensor.
	Device int
	// Ptr is the tensor's device address (aligned to Alignment) for a
	// whole tensor on a device; 0 otherwise.
	Ptr cuda.DevicePtr
	// Data is the tensor's bytes for a host load; nil otherwise.
	Data []byte
	// Parts lists the pieces of a split tensor, in order.
	Parts []Part
	// Replicas lists every device's copy of the tensor for a load with
	// Options.Replicate, in the order of Options.Devices; nil otherwise.
	Replicas []Replica
}

// Replica is one device's copy of a tensor loaded with Options.Replicate.
type Replica struct {
	Device int
	Ptr    cuda.DevicePtr
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
	i, ok := m.byName[name]
	if !ok {
		return nil
	}
	return &m.Tensors[i]
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
	m, err := tensorload.Whole(r, func() (*Model, error) {
		h, err := readerHeader(ctx, r)
		if err != nil {
			return nil, err
		}
		return loadFrom(ctx, r, h, o, host)
	})
	if err != nil {
		return nil, tensorload.PathError(r, err)
	}
	return m, nil
}

func loadFrom(ctx context.Context, f kvik.Reader, h *Header, o *Options, host bool) (*Model, error) {
	res, err := tensorload.Load(ctx, f, &tensorload.Request[TensorInfo]{
		Tensors: h.Tensors,
		Name:    func(t *TensorInfo) string { return t.Name },
		Range:   func(t *TensorInfo) (int64, int64) { return h.DataOffset + t.Begin, t.Size() },
		Unit:    splitUnit,
		Names:   o.Names, Filter: o.Filter, Devices: o.Devices, Place: o.Place, Split: o.Split,
		Replicate: o.Replicate,
		Host:      host,
		NotFound:  ErrNotFound, InvalidArgument: ErrInvalidArgument,
	})
	if err != nil {
		return nil, err
	}
	m := &Model{Metadata: h.Metadata, byName: make(map[string]int, len(res.Tensors))}
	if res.Mem != nil {
		m.mems = append(m.mems, res.Mem)
	}
	for i, t := range res.Tensors {
		l := &res.Loaded[i]
		m.byName[t.Name] = i
		m.Tensors = append(m.Tensors, Tensor{TensorInfo: t, Device: l.Device, Ptr: l.Ptr, Data: l.Data})
		for _, p := range l.Parts {
			m.Tensors[i].Parts = append(m.Tensors[i].Parts, Part(p))
		}
		for _, r := range l.Replicas {
			m.Tensors[i].Replicas = append(m.Tensors[i].Replicas, Replica(r))
		}
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
