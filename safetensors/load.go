package safetensors

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/tensorload"
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

// Load reads the selected tensors of the safetensors file at path into
// device memory: one allocation per device and one parallel read per
// contiguous range. The header is validated before any allocation.
func Load(path string, o *Options) (*Model, error) {
	return load(path, o, false)
}

// LoadHost is Load into host memory: each Tensor's Data holds its bytes
// (aligned to Alignment); placement options are ignored.
func LoadHost(path string, o *Options) (*Model, error) {
	return load(path, o, true)
}

func load(path string, o *Options, host bool) (*Model, error) {
	if o == nil {
		o = &Options{}
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	h, err := ReadHeader(f, size)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	m, err := loadFrom(f, h, o, host)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return m, nil
}

// selected returns the header's tensors that o selects, in file order.
func selected(h *Header, o *Options) ([]TensorInfo, error) {
	want := map[string]bool{}
	for _, n := range o.Names {
		if _, ok := h.Lookup(n); !ok {
			return nil, fmt.Errorf("%w: %q", ErrNotFound, n)
		}
		want[n] = true
	}
	var out []TensorInfo
	for i := range h.Tensors {
		t := &h.Tensors[i]
		if (len(o.Names) > 0 && !want[t.Name]) || (o.Filter != nil && !o.Filter(t)) {
			continue
		}
		out = append(out, *t)
	}
	return out, nil
}

func loadFrom(f *kvik.FileHandle, h *Header, o *Options, host bool) (*Model, error) {
	ts, err := selected(h, o)
	if err != nil {
		return nil, err
	}
	devices := o.Devices
	if len(devices) == 0 || host {
		devices = []int{0}
	}
	m := &Model{Metadata: h.Metadata, byName: make(map[string]int, len(ts))}
	for _, t := range ts {
		m.byName[t.Name] = len(m.Tensors)
		m.Tensors = append(m.Tensors, Tensor{TensorInfo: t, Device: -1})
	}
	p, err := plan(m.Tensors, h.DataOffset, o, len(devices), host)
	if err != nil {
		return nil, err
	}
	if host {
		mem, err := p.ReadHost(f)
		if err != nil {
			return nil, err
		}
		for _, pc := range p.Pieces {
			m.Tensors[pc.Tensor].Data = mem[pc.MemOff : pc.MemOff+pc.Size : pc.MemOff+pc.Size]
		}
		return m, nil
	}
	mem, err := p.ReadDevices(f, devices)
	if err != nil {
		return nil, err
	}
	m.mems = append(m.mems, mem)
	for _, pc := range p.Pieces {
		t := &m.Tensors[pc.Tensor]
		ptr := mem.Bases[pc.Slot] + cuda.DevicePtr(pc.MemOff)
		if pc.Part < 0 {
			t.Device, t.Ptr = devices[pc.Slot], ptr
		} else {
			t.Parts = append(t.Parts, Part{Device: devices[pc.Slot], Ptr: ptr, Offset: pc.PartOff, Size: pc.Size})
		}
	}
	return m, nil
}

// plan places each tensor (or each part of a split tensor) in a slot; the
// data area starts at file offset base.
func plan(ts []Tensor, base int64, o *Options, ndev int, host bool) (*tensorload.Plan, error) {
	specs := make([]tensorload.Tensor, len(ts))
	for i := range ts {
		t := &ts[i].TensorInfo
		s := tensorload.Tensor{Off: base + t.Begin, Size: t.Size(), Slot: tensorload.Balanced}
		switch {
		case host:
			s.Slot = 0
		case o.Split != nil && o.Split(t) && ndev > 1:
			// Cut at multiples of Alignment, and of 3 bytes (4 elements)
			// for 6-bit types, so no element straddles two parts.
			s.SplitUnit = Alignment
			if t.Dtype.Bits()%4 != 0 {
				s.SplitUnit *= 3
			}
		case o.Place != nil:
			s.Slot = o.Place(t)
			if s.Slot < 0 || s.Slot >= ndev {
				return nil, fmt.Errorf("%w: Place put %q on device index %d of %d", ErrInvalidArgument, t.Name, s.Slot, ndev)
			}
		}
		specs[i] = s
	}
	return tensorload.New(specs, ndev), nil
}
