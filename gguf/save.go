package gguf

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"unicode/utf8"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// SaveTensor is one tensor to write: its bytes are at Ptr in device
// memory when Ptr is not 0, else in Data.
type SaveTensor struct {
	Name  string
	Type  Type
	Shape []int64 // ggml order, as TensorInfo.Shape
	Ptr   cuda.DevicePtr
	Data  []byte
}

// Save writes metadata and tensors as a GGUF version 3 file at name, the
// tensors in parallel, through kvik.SaveFile: atomically, so that a failed
// save leaves no partial file and any old file at name intact. name may
// also be an s3:// URL, uploaded with opts; a local file is synced unless
// opts hold kvik.WithoutSync. The metadata is written in
// its order and the tensors in theirs; a general.alignment key (a UINT32
// power of two) sets the alignment, else it is DefaultAlignment; each
// tensor's data is padded with zeros to the alignment, as gguf-py's
// writer does, so the same metadata and tensors make the same bytes.
// Metadata keys and tensor names must be valid UTF-8, as the format
// says and as other readers (gguf-py) decode them; string values are
// written byte for byte (some vocabularies hold raw bytes).
// Cancelling ctx stops the writes: the old file (or object) stays, or
// none.
func Save(ctx context.Context, name string, tensors []SaveTensor, meta Metadata, opts ...kvik.RemoteOption) error {
	ps, err := pieces(tensors, meta)
	if err != nil {
		return &fs.PathError{Op: "write", Path: kvik.RedactURL(name), Err: err}
	}
	return kvik.SaveFile(ctx, name, ps, opts...)
}

// pieces lays out the file: the header, then each tensor and its padding.
func pieces(ts []SaveTensor, meta Metadata) ([]kvik.Piece, error) {
	align := int64(DefaultAlignment)
	seen := make(map[string]bool, len(meta))
	for _, kv := range meta {
		if kv.Key == "" || seen[kv.Key] {
			return nil, fmt.Errorf("%w: empty or duplicate metadata key %q", ErrInvalidArgument, kv.Key)
		}
		if !utf8.ValidString(kv.Key) {
			return nil, fmt.Errorf("%w: metadata key %q is not valid UTF-8", ErrInvalidArgument, kv.Key)
		}
		seen[kv.Key] = true
		if err := kv.Value.check(); err != nil {
			return nil, fmt.Errorf("metadata key %q: %w", kv.Key, err)
		}
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("%w: general.alignment %v is not a UINT32 power of two", ErrInvalidArgument, kv.Value)
			}
			align = int64(a)
		}
	}
	sizes := make([]int64, len(ts))
	names := make(map[string]bool, len(ts))
	for i, t := range ts {
		if names[t.Name] {
			return nil, fmt.Errorf("%w: duplicate tensor name %q", ErrInvalidArgument, t.Name)
		}
		if !utf8.ValidString(t.Name) {
			return nil, fmt.Errorf("%w: tensor name %q is not valid UTF-8", ErrInvalidArgument, t.Name)
		}
		names[t.Name] = true
		n, err := nbytes(t.Type, t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		if t.Ptr == 0 && int64(len(t.Data)) != n {
			return nil, fmt.Errorf("%w: tensor %q: %d bytes of data for %d", ErrInvalidArgument, t.Name, len(t.Data), n)
		}
		sizes[i] = n
	}
	hdr := encodeHeader(ts, sizes, meta, align)
	zeros := make([]byte, align)
	ps := make([]kvik.Piece, 0, 1+2*len(ts))
	ps = append(ps, kvik.Piece{Data: hdr})
	for i, t := range ts {
		if t.Ptr != 0 {
			ps = append(ps, kvik.Piece{Ptr: t.Ptr, Size: sizes[i]})
		} else {
			ps = append(ps, kvik.Piece{Data: t.Data})
		}
		if pad := alignUp(sizes[i], align) - sizes[i]; pad > 0 {
			ps = append(ps, kvik.Piece{Data: zeros[:pad]})
		}
	}
	return ps, nil
}

// encodeHeader encodes the header, padded to the alignment.
func encodeHeader(ts []SaveTensor, sizes []int64, meta Metadata, align int64) []byte {
	le := binary.LittleEndian
	b := []byte("GGUF")
	b = le.AppendUint32(b, 3)
	b = le.AppendUint64(b, uint64(len(ts)))
	b = le.AppendUint64(b, uint64(len(meta)))
	for _, kv := range meta {
		b = appendString(b, kv.Key)
		b = le.AppendUint32(b, uint32(kv.Value.typ))
		b = appendValue(b, kv.Value)
	}
	var off int64
	for i, t := range ts {
		b = appendString(b, t.Name)
		b = le.AppendUint32(b, uint32(len(t.Shape)))
		for _, d := range t.Shape {
			b = le.AppendUint64(b, uint64(d))
		}
		b = le.AppendUint32(b, uint32(t.Type))
		b = le.AppendUint64(b, uint64(off))
		off += alignUp(sizes[i], align)
	}
	for int64(len(b))%align != 0 {
		b = append(b, 0)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes v without its type (the caller wrote that).
func appendValue(b []byte, v Value) []byte {
	le := binary.LittleEndian
	if v.typ == ValueArray {
		b = le.AppendUint32(b, uint32(v.elem))
		b = le.AppendUint64(b, uint64(v.Len()))
		switch a := v.v.(type) {
		case []string:
			for _, s := range a {
				b = appendString(b, s)
			}
		case []Value:
			for _, e := range a {
				b = appendValue(b, e)
			}
		default:
			for i := range v.Len() {
				b = appendScalar(b, elemAt(a, i))
			}
		}
		return b
	}
	if s, ok := v.v.(string); ok {
		return appendString(b, s)
	}
	return appendScalar(b, v.v)
}

func elemAt(a any, i int) any {
	switch a := a.(type) {
	case []float32:
		return a[i]
	case []float64:
		return a[i]
	}
	return index(a, i)
}

func appendScalar(b []byte, x any) []byte {
	le := binary.LittleEndian
	switch x := x.(type) {
	case uint8:
		return append(b, x)
	case int8:
		return append(b, byte(x))
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case uint16:
		return le.AppendUint16(b, x)
	case int16:
		return le.AppendUint16(b, uint16(x))
	case uint32:
		return le.AppendUint32(b, x)
	case int32:
		return le.AppendUint32(b, uint32(x))
	case float32:
		return le.AppendUint32(b, math.Float32bits(x))
	case uint64:
		return le.AppendUint64(b, x)
	case int64:
		return le.AppendUint64(b, uint64(x))
	case float64:
		return le.AppendUint64(b, math.Float64bits(x))
	}
	panic(fmt.Sprintf("gguf: no scalar encoding for %T", x))
}
