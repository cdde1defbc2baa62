package safetensors

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"unicode/utf8"

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

// Save writes tensors (and metadata, if not nil) as a safetensors file at
// path, in parallel, through kvik.SaveFile: atomically, so that a failed
// save leaves no partial file and any old file at path intact. path may
// also be an s3:// URL, uploaded with opts; a local file is synced unless
// opts hold kvik.WithoutSync. Tensors are stored as the reference
// library stores them (its dtypes' order, largest elements first, then
// by name), the header written as it writes it and padded with spaces to
// a multiple of 8 bytes: the file of the same tensors and metadata is
// save_file's, byte for byte (metadata of one key at least; the
// reference library's order of several keys varies). Cancelling
// ctx stops the writes: the old file (or object) stays, or none.
func Save(ctx context.Context, path string, tensors []SaveTensor, metadata map[string]string, opts ...kvik.RemoteOption) error {
	ps, err := Encode(tensors, metadata)
	if err != nil {
		return &fs.PathError{Op: "write", Path: kvik.RedactURL(path), Err: err}
	}
	return kvik.SaveFile(ctx, path, ps, opts...)
}

// Encode lays out the safetensors file of tensors and metadata as Save
// writes it: its header, then every tensor's bytes (from host or device
// memory), as pieces for kvik.SaveFile or a kvik.PendingFile's
// WritePieces (a caller that reads the file back before committing it).
// Bad tensors or metadata are errors matching ErrInvalidArgument.
func Encode(tensors []SaveTensor, metadata map[string]string) ([]kvik.Piece, error) {
	hdr, offs, err := encodeHeader(tensors, metadata, true)
	if err != nil {
		return nil, err
	}
	return pieces(hdr, tensors, offs), nil
}

// EncodeHeader returns the header of the file Encode lays out for
// tensors and metadata, and where each tensor's bytes start in that
// file, for a writer that streams the bytes itself (kvik cp converting a
// checkpoint larger than memory): the tensors' Data and Ptr are not
// looked at, their sizes follow from Dtype and Shape. The tensors' bytes
// lie back to back from the header's end to the file's.
func EncodeHeader(tensors []SaveTensor, metadata map[string]string) (header []byte, offsets []int64, err error) {
	hdr, offs, err := encodeHeader(tensors, metadata, false)
	if err != nil {
		return nil, nil, err
	}
	for i := range offs {
		offs[i] += int64(len(hdr))
	}
	return hdr, offs, nil
}

// pieces lays out the file: the header, then each tensor at its offset
// (offsets are contiguous, so the order of offs is the file's order).
func pieces(hdr []byte, ts []SaveTensor, offs []int64) []kvik.Piece {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(offs[a], offs[b]) })
	ps := make([]kvik.Piece, 0, len(ts)+1)
	ps = append(ps, kvik.Piece{Data: hdr})
	for _, i := range order {
		t := &ts[i]
		n, _ := t.size()
		if t.Ptr != 0 {
			ps = append(ps, kvik.Piece{Ptr: t.Ptr, Size: n})
		} else {
			ps = append(ps, kvik.Piece{Data: t.Data})
		}
	}
	return ps
}

// encodeHeader lays out ts and meta; with data, each tensor's Data must
// hold its bytes where Ptr is 0.
func encodeHeader(ts []SaveTensor, meta map[string]string, data bool) ([]byte, []int64, error) {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if d := ts[b].Dtype.rank() - ts[a].Dtype.rank(); d != 0 {
			return d
		}
		return cmp.Compare(ts[a].Name, ts[b].Name)
	})
	if err := checkMetadata(meta); err != nil {
		return nil, nil, err
	}
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
	seen := tensorNames{}
	var at int64
	for _, i := range order {
		t := &ts[i]
		if err := seen.add(t.Name); err != nil {
			return nil, nil, err
		}
		size := t.bytes
		if data {
			size = t.size
		}
		n, err := size()
		if err != nil {
			return nil, nil, err
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		entry, _ := json.Marshal(headerEntry{t.Dtype, shape, [2]int64{at, at + n}})
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

// headerEntry is a tensor's entry in the header, its fields in the
// reference library's order.
type headerEntry struct {
	Dtype   Dtype    `json:"dtype"`
	Shape   []int64  `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// tensorNames are the names of the tensors a save has checked so far.
type tensorNames map[string]bool

// add checks name and records it: a name twice, the reserved
// "__metadata__" or a name that is not valid UTF-8 is ErrInvalidArgument.
// JSON holds only UTF-8: encoding/json would write U+FFFD in place of
// each bad byte, saving the tensor under another name (and two such
// names under one, which no reader accepts).
func (seen tensorNames) add(name string) error {
	switch {
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: tensor name %q is not valid UTF-8", ErrInvalidArgument, name)
	case name == "__metadata__" || seen[name]:
		return fmt.Errorf("%w: duplicate or reserved tensor name %q", ErrInvalidArgument, name)
	}
	seen[name] = true
	return nil
}

// checkMetadata refuses metadata keys and values that are not valid
// UTF-8 (ErrInvalidArgument), which JSON cannot hold either.
func checkMetadata(meta map[string]string) error {
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: metadata %q = %q is not valid UTF-8", ErrInvalidArgument, k, v)
		}
	}
	return nil
}
