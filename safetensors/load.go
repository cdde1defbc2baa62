package safetensors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"unsafe"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// Alignment is the alignment of every tensor's address in memory that
// Load and LoadHost return (cudaMalloc's guarantee for a fresh allocation).
const Alignment = 256

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
	bufs     []*cuda.DeviceBuffer
	devs     []cuda.Device
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
	for _, b := range m.bufs {
		errs = append(errs, b.Close())
	}
	for _, d := range m.devs {
		errs = append(errs, d.PrimaryCtxRelease())
	}
	m.bufs, m.devs = nil, nil
	return errors.Join(errs...)
}

// piece is one contiguous byte range to read into one memory slot.
type piece struct {
	tensor, part int   // index into the model's Tensors and the tensor's Parts (-1: whole)
	slot         int   // index into Devices (or 0 for host)
	off, size    int64 // file offset relative to the data area
	memOff       int64 // offset in the slot's allocation
}

// run is a contiguous file range read into contiguous memory.
type run struct {
	slot                int
	fileOff, memOff, sz int64
}

// Load reads the selected tensors of the safetensors file at name into
// device memory: one allocation per device and one parallel read per
// contiguous range. The header is validated before any allocation. name
// is a local path or a URL (s3://, http(s)://; see kvik.OpenReader),
// opened with opts: a remote file's header comes in one ranged GET and
// its tensors in parallel ranged GETs into device memory.
func Load(name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return load(name, o, false, opts)
}

// LoadHost is Load into host memory: each Tensor's Data holds its bytes
// (aligned to Alignment); placement options are ignored.
func LoadHost(name string, o *Options, opts ...kvik.RemoteOption) (*Model, error) {
	return load(name, o, true, opts)
}

// LoadReader is Load from a file the caller opened (any kvik handle); r
// stays open.
func LoadReader(r kvik.Reader, o *Options) (*Model, error) {
	return loadReader(r, o, false)
}

// LoadHostReader is LoadHost from a file the caller opened; r stays open.
func LoadHostReader(r kvik.Reader, o *Options) (*Model, error) {
	return loadReader(r, o, true)
}

func load(name string, o *Options, host bool, opts []kvik.RemoteOption) (*Model, error) {
	r, err := kvik.OpenReader(context.Background(), name, opts...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return loadReader(r, o, host)
}

func loadReader(r kvik.Reader, o *Options, host bool) (*Model, error) {
	if o == nil {
		o = &Options{}
	}
	size, err := r.Size()
	if err != nil {
		return nil, err
	}
	h, err := ReadHeader(r, size)
	if err == nil {
		var m *Model
		if m, err = loadFrom(r, h, o, host); err == nil {
			return m, nil
		}
	}
	return nil, readErr(r, err)
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

func loadFrom(f kvik.Reader, h *Header, o *Options, host bool) (*Model, error) {
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
	pieces, err := plan(m.Tensors, o, len(devices), host)
	if err != nil {
		return nil, err
	}
	runs, totals := layout(pieces, len(devices))
	if host {
		return m, readHost(f, h, m, pieces, runs, totals[0])
	}
	if err := readDevices(f, h, m, devices, pieces, runs, totals); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// plan assigns each tensor (or each part of a split tensor) to a slot.
func plan(ts []Tensor, o *Options, ndev int, host bool) ([]piece, error) {
	var total int64
	for _, t := range ts {
		total += t.Size()
	}
	var ps []piece
	var cum int64
	for i := range ts {
		t := &ts[i].TensorInfo
		switch {
		case host:
			ps = append(ps, piece{tensor: i, part: -1, off: t.Begin, size: t.Size()})
		case o.Split != nil && o.Split(t) && ndev > 1:
			// Cut at multiples of Alignment, and of 3 bytes (4 elements)
			// for 6-bit types, so no element straddles two parts.
			unit := int64(Alignment)
			if t.Dtype.Bits()%4 != 0 {
				unit *= 3
			}
			share := alignUp((t.Size()+int64(ndev)-1)/int64(ndev), unit)
			for d, at := 0, int64(0); d < ndev && at < t.Size(); d, at = d+1, at+share {
				n := min(share, t.Size()-at)
				ts[i].Parts = append(ts[i].Parts, Part{Offset: at, Size: n})
				ps = append(ps, piece{tensor: i, part: len(ts[i].Parts) - 1, slot: d, off: t.Begin + at, size: n})
			}
		default:
			slot := 0
			if o.Place != nil {
				slot = o.Place(t)
				if slot < 0 || slot >= ndev {
					return nil, fmt.Errorf("%w: Place put %q on device index %d of %d", ErrInvalidArgument, t.Name, slot, ndev)
				}
			} else if ndev > 1 && total > 0 {
				// Contiguous balanced shares keep each device's reads long.
				slot = int(min((cum+t.Size()/2)*int64(ndev)/total, int64(ndev-1)))
			}
			ps = append(ps, piece{tensor: i, part: -1, slot: slot, off: t.Begin, size: t.Size()})
		}
		cum += t.Size()
	}
	return ps, nil
}

// layout gives each piece an aligned offset in its slot and merges
// pieces that are adjacent in the file and stay aligned into runs.
func layout(ps []piece, nslot int) ([]run, []int64) {
	totals := make([]int64, nslot)
	last := make([]int, nslot) // index+1 of each slot's open run
	var runs []run
	for i := range ps {
		p := &ps[i]
		if p.size == 0 {
			continue // an empty tensor points at its slot's (aligned) base
		}
		cur := totals[p.slot]
		if r := last[p.slot]; r > 0 && runs[r-1].fileOff+runs[r-1].sz == p.off && runs[r-1].memOff+runs[r-1].sz == cur && cur%Alignment == 0 {
			p.memOff = cur
			runs[r-1].sz += p.size
		} else {
			p.memOff = alignUp(cur, Alignment)
			runs = append(runs, run{slot: p.slot, fileOff: p.off, memOff: p.memOff, sz: p.size})
			last[p.slot] = len(runs)
		}
		totals[p.slot] = p.memOff + p.size
	}
	return runs, totals
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

func readHost(f kvik.Reader, h *Header, m *Model, ps []piece, runs []run, total int64) error {
	raw := make([]byte, total+Alignment)
	pad := int64((Alignment - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%Alignment) % Alignment)
	mem := raw[pad : pad+total]
	err := readRuns(runs, func(ctx context.Context, r run) *kvik.Future {
		return f.PRead(ctx, mem[r.memOff:r.memOff+r.sz], h.DataOffset+r.fileOff)
	})
	if err != nil {
		return err
	}
	for _, p := range ps {
		m.Tensors[p.tensor].Data = mem[p.memOff : p.memOff+p.size : p.memOff+p.size]
	}
	return nil
}

func readDevices(f kvik.Reader, h *Header, m *Model, devices []int, ps []piece, runs []run, totals []int64) error {
	if err := cuda.Init(); err != nil {
		return err
	}
	bases := make([]cuda.DevicePtr, len(devices))
	for s, ord := range devices {
		dev, err := cuda.DeviceGet(ord)
		if err != nil {
			return err
		}
		ctx, err := dev.PrimaryCtxRetain()
		if err != nil {
			return err
		}
		m.devs = append(m.devs, dev)
		if totals[s] == 0 {
			continue
		}
		var b *cuda.DeviceBuffer
		if err := cuda.WithContext(ctx, func() (err error) { b, err = cuda.MemAlloc(int(totals[s])); return err }); err != nil {
			return fmt.Errorf("allocating %d bytes on device %d: %w", totals[s], ord, err)
		}
		m.bufs = append(m.bufs, b)
		bases[s] = b.Ptr()
	}
	err := readRuns(runs, func(ctx context.Context, r run) *kvik.Future {
		return f.PReadDevice(ctx, bases[r.slot], int(r.sz), h.DataOffset+r.fileOff, r.memOff)
	})
	if err != nil {
		return err
	}
	for _, p := range ps {
		t := &m.Tensors[p.tensor]
		ptr := bases[p.slot] + cuda.DevicePtr(p.memOff)
		if p.part < 0 {
			t.Device, t.Ptr = devices[p.slot], ptr
		} else {
			t.Parts[p.part].Device, t.Parts[p.part].Ptr = devices[p.slot], ptr
		}
	}
	return nil
}

// readRuns starts every run's read at once and collects them all, so
// none is left running. It reports the first failure or short read (by
// position) and cancels the reads still running once it has one.
func readRuns(runs []run, start func(context.Context, run) *kvik.Future) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	futs := make([]*kvik.Future, len(runs))
	for i, r := range runs {
		futs[i] = start(ctx, r)
	}
	var first error
	for i, fu := range futs {
		n, err := fu.Get()
		if err == nil && int64(n) != runs[i].sz {
			err = io.ErrUnexpectedEOF
		}
		if err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// readErr names r's file in err, unless a kvik handle already did.
func readErr(r kvik.Reader, err error) error {
	if _, ok := err.(*fs.PathError); ok {
		return err
	}
	return &fs.PathError{Op: "read", Path: r.Name(), Err: err}
}
