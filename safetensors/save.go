package safetensors

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// SaveTensor is one tensor to write: its bytes are at Ptr in device
// memory when Ptr is not 0, else in Data.
type SaveTensor struct {
	Name  string
	Dtype Dtype
	Shape []int64
	Ptr   cuda.DevicePtr
	Data  []byte
}

func (t *SaveTensor) size() (int64, error) {
	n, err := t.bytes()
	if err == nil && t.Ptr == 0 && int64(len(t.Data)) != n {
		err = fmt.Errorf("%w: tensor %q: %d bytes of data for %d", ErrInvalidArgument, t.Name, len(t.Data), n)
	}
	return n, err
}

// bytes returns the size that the tensor's dtype and shape call for.
func (t *SaveTensor) bytes() (int64, error) {
	if !t.Dtype.Valid() {
		return 0, fmt.Errorf("%w: tensor %q has dtype %q", ErrUnknownDtype, t.Name, t.Dtype)
	}
	nbits := int64(t.Dtype.Bits())
	for _, d := range t.Shape {
		if d < 0 || (d > 0 && nbits > (1<<62)/d) {
			return 0, fmt.Errorf("%w: tensor %q: bad shape %v", ErrInvalidArgument, t.Name, t.Shape)
		}
		nbits *= d
	}
	if nbits%8 != 0 {
		return 0, fmt.Errorf("%w: tensor %q: %d bits is not a whole number of bytes", ErrInvalidArgument, t.Name, nbits)
	}
	return nbits / 8, nil
}

// Save writes tensors (and metadata, if not nil) to a new safetensors file
// at path, in parallel, and syncs it. Tensors are stored by descending
// element size, then by name, as the reference library does; the header
// is padded with spaces to a multiple of 8 bytes.
func Save(path string, tensors []SaveTensor, metadata map[string]string) error {
	hdr, offs, err := encodeHeader(tensors, metadata)
	if err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	f, err := kvik.Open(path, "w", 0o644)
	if err != nil {
		return err
	}
	err = writeAll(f, hdr, tensors, offs)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func encodeHeader(ts []SaveTensor, meta map[string]string) ([]byte, []int64, error) {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if d := ts[b].Dtype.align() - ts[a].Dtype.align(); d != 0 {
			return d
		}
		return cmpString(ts[a].Name, ts[b].Name)
	})
	var buf bytes.Buffer
	buf.WriteString("{")
	if meta != nil {
		mb, err := json.Marshal(meta)
		if err != nil {
			return nil, nil, err
		}
		buf.WriteString(`"__metadata__":`)
		buf.Write(mb)
	}
	offs := make([]int64, len(ts))
	seen := map[string]bool{}
	var at int64
	for _, i := range order {
		t := &ts[i]
		if t.Name == "__metadata__" || seen[t.Name] {
			return nil, nil, fmt.Errorf("%w: duplicate or reserved tensor name %q", ErrInvalidArgument, t.Name)
		}
		seen[t.Name] = true
		n, err := t.size()
		if err != nil {
			return nil, nil, err
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		entry, _ := json.Marshal(map[string]any{"dtype": t.Dtype, "shape": shape, "data_offsets": [2]int64{at, at + n}})
		name, _ := json.Marshal(t.Name)
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		buf.Write(name)
		buf.WriteByte(':')
		buf.Write(entry)
		offs[i] = at
		at += n
	}
	buf.WriteString("}")
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	out := make([]byte, 8, 8+buf.Len())
	binary.LittleEndian.PutUint64(out, uint64(buf.Len()))
	return append(out, buf.Bytes()...), offs, nil
}

func writeAll(f *kvik.FileHandle, hdr []byte, ts []SaveTensor, offs []int64) error {
	ctx := context.Background()
	futs := []*kvik.Future{f.PWrite(ctx, hdr, 0)}
	want := []int{len(hdr)}
	base := int64(len(hdr))
	for i := range ts {
		t := &ts[i]
		n, _ := t.size()
		if n == 0 {
			continue
		}
		if t.Ptr != 0 {
			futs = append(futs, f.PWriteDevice(ctx, t.Ptr, int(n), base+offs[i], 0))
		} else {
			futs = append(futs, f.PWrite(ctx, t.Data, base+offs[i]))
		}
		want = append(want, int(n))
	}
	var first error
	for i, fu := range futs {
		n, err := fu.Get()
		if err == nil && n != want[i] {
			err = fmt.Errorf("short write: %d of %d bytes", n, want[i])
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
