package torch

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// Alignment is the alignment of every tensor's address in memory that
// Load and LoadHost return.
const Alignment = tensorload.Alignment

// Options selects and places the tensors that Load reads; the zero value
// loads every tensor onto device 0. Its fields are safetensors.Options':
//
//	Names     []string               only these tensors; a missing one is ErrNotFound
//	Filter    func(*TensorInfo) bool only the tensors it returns true for
//	Devices   []int                  the CUDA ordinals to load onto (default [0])
//	Place     func(*TensorInfo) int  a tensor's index into Devices; nil: balanced by size
//	Split     func(*TensorInfo) bool tensors cut by byte range into one part per device
//	Replicate bool                   every tensor onto every device, each byte read once
//
// Split cuts at multiples of Alignment, which no element straddles.
// Tensors that are one view of one storage (tied weights: the same
// storage, offset, dtype, shape and strides under two names) are read
// once, placed as the first of them, and share its memory; other views
// of one storage (slices) each get memory of their own.
type Options = tensorload.Options[TensorInfo]

// Placement is where a loaded tensor is (see safetensors.Placement).
type Placement = tensorload.Placement

// Part is the piece of a split tensor held by one device.
type Part = tensorload.Part

// Replica is one device's copy of a tensor loaded with Options.Replicate.
type Replica = tensorload.Replica

// Tensor is a loaded tensor: its description (Name, Dtype, Shape,
// Stride...) and where its Size bytes are (Device and Ptr, Data,
// Parts, Replicas). A tensor that is not Contiguous is loaded as it lies
// in its storage, from its first element to its last: index it by
// Stride.
type Tensor struct {
	TensorInfo
	Placement
}

// viewKey names the bytes a tensor is: its storage and how it views it.
func viewKey(t *TensorInfo) string {
	return fmt.Sprintf("%s %s %d %v %v", t.Storage, t.Dtype, t.StorageOffset, t.Shape, t.Stride)
}

// Dense returns the tensor's elements in C order from host memory (a
// LoadHost): Data itself where the tensor is Contiguous, else a copy of
// its elements gathered by Stride. A tensor loaded onto a device has no
// Data: ErrInvalidArgument.
func (t *Tensor) Dense() ([]byte, error) {
	if int64(len(t.Data)) != t.Size {
		return nil, fmt.Errorf("%w: %q is not in host memory", ErrInvalidArgument, t.Name)
	}
	if t.Contiguous() {
		return t.Data, nil
	}
	es := int64(t.Dtype.Size())
	out := make([]byte, 0, t.NumElements()*es)
	idx := make([]int64, len(t.Shape))
	for range t.NumElements() {
		var at int64
		for i, x := range idx {
			at += x * t.Stride[i]
		}
		out = append(out, t.Data[at*es:(at+1)*es]...)
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < t.Shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}

// Checkpoint is a loaded checkpoint's tensors. Close frees their memory.
type Checkpoint struct {
	// Tensors in file order.
	Tensors []Tensor
	// Skipped names the tensors not loaded (see Header.Skipped).
	Skipped []string
	byName  map[string]int
	mems    []*tensorload.Memory
}

// Tensor returns the loaded tensor called name, or nil.
func (c *Checkpoint) Tensor(name string) *Tensor {
	t, _ := tensorload.Find(c.Tensors, c.byName, name)
	return t
}

// Close frees the checkpoint's device memory and releases the contexts
// it retained. Pointers into it are invalid afterwards.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, m := range c.mems {
		errs = append(errs, m.Close())
	}
	c.mems = nil
	return errors.Join(errs...)
}

// Load reads the selected tensors of the torch.save file at name into
// device memory: the archive's directory and data.pkl first, checked
// whole, then one allocation per device and one parallel read per
// contiguous range of the file. name is a local path or a URL (s3://,
// http(s)://; see kvik.OpenReader), opened with opts. Cancelling ctx
// abandons the reads, frees the memory and returns ctx.Err().
func Load(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Checkpoint, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Checkpoint, error) { return loadReader(ctx, r, o, false) })
}

// LoadHost is Load into host memory: each Tensor's Data holds its bytes;
// placement options are ignored.
func LoadHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Checkpoint, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Checkpoint, error) { return loadReader(ctx, r, o, true) })
}

// LoadReader is Load from a file the caller opened (any kvik handle); r
// stays open.
func LoadReader(ctx context.Context, r kvik.Reader, o *Options) (*Checkpoint, error) {
	return loadReader(ctx, r, o, false)
}

// LoadHostReader is LoadHost from a file the caller opened; r stays
// open.
func LoadHostReader(ctx context.Context, r kvik.Reader, o *Options) (*Checkpoint, error) {
	return loadReader(ctx, r, o, true)
}

// ReadHeader reads the directory and data.pkl of the torch.save file at
// name, a path or URL opened with opts as Load does, and checks them,
// without reading any tensor. o may be nil and changes nothing: every
// format's ReadHeader takes the same arguments.
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

func loadReader(ctx context.Context, r kvik.Reader, o *Options, host bool) (*Checkpoint, error) {
	if o == nil {
		o = &Options{}
	}
	return tensorload.WholeHeader(r, func() (*Header, error) { return readerHeader(ctx, r) },
		func(h *Header) (*Checkpoint, error) { return loadFrom(ctx, r, h, o, host) })
}

func loadFrom(ctx context.Context, r kvik.Reader, h *Header, o *Options, host bool) (*Checkpoint, error) {
	res, err := tensorload.Load(ctx, r, &tensorload.Request[TensorInfo]{
		Tensors:  h.Tensors,
		Name:     func(t *TensorInfo) string { return t.Name },
		Range:    func(t *TensorInfo) (int64, int64) { return t.Offset, t.Size },
		Unit:     func(*TensorInfo) int64 { return Alignment }, // a multiple of every dtype's size
		Key:      viewKey,
		Options:  *o,
		Host:     host,
		NotFound: ErrNotFound, InvalidArgument: ErrInvalidArgument,
	})
	if err != nil {
		return nil, err
	}
	c := &Checkpoint{Skipped: h.Skipped, byName: make(map[string]int, len(res.Tensors))}
	if res.Mem != nil {
		c.mems = append(c.mems, res.Mem)
	}
	for i, t := range res.Tensors {
		c.byName[t.Name] = i
		c.Tensors = append(c.Tensors, Tensor{TensorInfo: t, Placement: res.Placed[i]})
	}
	return c, nil
}
