package zarr

import "fmt"

// DecodeChunk decodes stored, the stored bytes of one chunk of a (a
// whole shard of a sharded array), into dst, which must hold the
// chunk's decoded bytes: its shape's elements, C order, little-endian.
// It is what a region read does with each chunk it fetches, without the
// store: for chunks fetched another way, and for measuring the codecs
// alone. It is safe to call concurrently.
func (a *Array) DecodeChunk(stored, dst []byte) error {
	if a.meta.DataType.Variable() {
		return vlenCodec{}.refuse()
	}
	if n := numElements(a.meta.ChunkShape) * a.meta.DataType.Size; len(dst) != n {
		return fmt.Errorf("%w: buffer of %d bytes for a %d-byte chunk", ErrInvalidRegion, len(dst), n)
	}
	shape := a.meta.ChunkShape
	pc := piece{key: "chunk", n: int64(len(stored)), pipe: a.pipe, shape: shape, sel: box{start: make([]int, len(shape)), count: shape}, dstStart: make([]int, len(shape))}
	return a.decodeStored(pc, stored, view{buf: dst, shape: shape, es: a.meta.DataType.Size, start: make([]int, len(shape))}, dst)
}

// EncodeChunk encodes chunk, one chunk's decoded bytes (its shape's
// elements, C order, little-endian), as a stores it: what a write does
// with each chunk before storing it. It returns a new slice, never chunk
// itself. It is safe to call concurrently.
func (a *Array) EncodeChunk(chunk []byte) ([]byte, error) {
	return a.AppendEncodedChunk(nil, chunk)
}

// AppendEncodedChunk is EncodeChunk appending the stored bytes to dst:
// the encoders write into dst's spare capacity where they fit, so that a
// loop handing back the same buffer encodes without allocating (as a
// write's pooled buffers do). On error dst is returned unchanged.
func (a *Array) AppendEncodedChunk(dst, chunk []byte) ([]byte, error) {
	if a.meta.DataType.Variable() {
		return dst, vlenCodec{}.refuse()
	}
	if n := numElements(a.meta.ChunkShape) * a.meta.DataType.Size; len(chunk) != n {
		return dst, fmt.Errorf("%w: buffer of %d bytes for a %d-byte chunk", ErrInvalidRegion, len(chunk), n)
	}
	tail := dst[len(dst):]
	b, err := a.pipe.encode(chunkArray{shape: a.meta.ChunkShape, data: chunk}, tail)
	if err != nil {
		return dst, err
	}
	switch {
	case len(b) > 0 && cap(tail) > 0 && &b[0] == &tail[:1][0]:
		return dst[:len(dst)+len(b)], nil // encoded in place
	case dst == nil && len(b) > 0 && &b[0] != &chunk[0]:
		return b, nil // a buffer the encoders made (a chain of no codec but bytes returns chunk)
	}
	return append(dst, b...), nil
}
