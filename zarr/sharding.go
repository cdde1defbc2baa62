package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"unsafe"
)

// Limits on sizes taken from metadata, checked when an array is opened,
// so that no document can make a read allocate more than a caller could
// expect.
const (
	// maxShardIndex bounds the encoded index of a shard (16 bytes per
	// inner chunk): 4 Mi inner chunks per shard.
	maxShardIndex = 64 << 20
	// maxChunkBytes bounds the decoded size of what a read decodes at
	// once: a chunk, or an inner chunk of a sharded array.
	maxChunkBytes = 1 << 34
	// indexProbe is the most of a shard index read before the shard's
	// size is known: a larger index is read in two requests, the second
	// only once the shard is known to hold it.
	indexProbe = 256 << 10
)

// rangeReader reads byte ranges of one stored value (a chunk file, or a
// shard's bytes already in memory).
type rangeReader interface {
	size() (int64, error)
	readAt(off, n int64) ([]byte, error)
}

type bytesReader []byte

func (b bytesReader) size() (int64, error) { return int64(len(b)), nil }
func (b bytesReader) readAt(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > int64(len(b)) || n > int64(len(b))-off {
		return nil, fmt.Errorf("%w: range [%d, +%d) of %d bytes", ErrCorruptChunk, off, n, len(b))
	}
	return b[off : off+n], nil
}

// subReader is a range of another reader.
type subReader struct {
	r       rangeReader
	base, n int64
}

func (s subReader) size() (int64, error) { return s.n, nil }
func (s subReader) readAt(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off > s.n || n > s.n-off {
		return nil, fmt.Errorf("%w: range [%d, +%d) of %d bytes", ErrCorruptChunk, off, n, s.n)
	}
	return s.r.readAt(s.base+off, n)
}

func readAll(r rangeReader) ([]byte, error) {
	n, err := r.size()
	if err != nil {
		return nil, err
	}
	return r.readAt(0, n)
}

// shardingCodec is "sharding_indexed": a shard holds inner chunks, each
// encoded by the inner codecs, and an index of (offset, nbytes) uint64
// pairs per inner chunk in C order ((2^64-1, 2^64-1) for a missing one),
// encoded by the index codecs and placed at the start or end.
type shardingCodec struct {
	dt         DataType
	fill       []byte
	shardShape []int
	inner      []int
	perShard   []int // inner chunks per shard, per dimension
	codecs     *pipeline
	indexCRC   bool
	indexStart bool
}

const missingEntry = math.MaxUint64

func newSharding(cfg map[string]any, dt DataType, fill []byte, shard []int) (*shardingCodec, error) {
	inner, err := cfgInts(cfg, "chunk_shape")
	if err != nil {
		return nil, err
	}
	if len(inner) != len(shard) {
		return nil, fmt.Errorf("%w: inner chunk shape %v for shard shape %v", ErrInvalidMetadata, inner, shard)
	}
	s := &shardingCodec{dt: dt, fill: fill, shardShape: shard, inner: inner, perShard: make([]int, len(shard))}
	for i := range inner {
		if inner[i] <= 0 || shard[i]%inner[i] != 0 {
			return nil, fmt.Errorf("%w: inner chunk shape %v does not divide shard shape %v", ErrInvalidMetadata, inner, shard)
		}
		s.perShard[i] = shard[i] / inner[i]
	}
	n := int64(1)
	for _, p := range s.perShard {
		if int64(p) > maxShardIndex/16/n {
			return nil, fmt.Errorf("%w: shard shape %v in inner chunks of %v: more than %d inner chunks per shard", ErrInvalidMetadata, shard, inner, maxShardIndex/16)
		}
		n *= int64(p)
	}
	codecs, err := cfgCodecs(cfg, "codecs")
	if err != nil {
		return nil, err
	}
	if s.codecs, err = newPipelineV3(codecs, dt, fill, inner); err != nil {
		return nil, fmt.Errorf("sharding inner codecs: %w", err)
	}
	idx := []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}, {Name: "crc32c"}}
	if _, ok := cfg["index_codecs"]; ok {
		if idx, err = cfgCodecs(cfg, "index_codecs"); err != nil {
			return nil, err
		}
	}
	// The index must have a size known in advance to be read by range:
	// little-endian bytes, optionally followed by crc32c.
	for i, c := range idx {
		switch {
		case i == 0 && c.Name == "bytes":
			if e, _ := cfgString(c.Configuration, "endian", "little"); e != "little" {
				return nil, fmt.Errorf("%w: shard index endian %q", ErrUnsupportedCodec, e)
			}
		case i == 1 && c.Name == "crc32c":
			s.indexCRC = true
		default:
			return nil, fmt.Errorf("%w: shard index codec %q", ErrUnsupportedCodec, c.Name)
		}
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("%w: empty shard index codecs", ErrInvalidMetadata)
	}
	loc, err := cfgString(cfg, "index_location", "end")
	if err != nil {
		return nil, err
	}
	switch loc {
	case "start":
		s.indexStart = true
	case "end":
	default:
		return nil, fmt.Errorf("%w: index_location %q", ErrInvalidMetadata, loc)
	}
	return s, nil
}

func (s *shardingCodec) nInner() int { return numElements(s.perShard) }

func (s *shardingCodec) indexSize() int64 {
	n := int64(s.nInner()) * 16
	if s.indexCRC {
		n += 4
	}
	return n
}

// parseShardIndex checks and decodes an encoded index of n entries for a
// shard of shardSize bytes.
func parseShardIndex(b []byte, n int, crc bool, shardSize int64) ([][2]uint64, error) {
	if crc {
		var err error
		if b, err = crc32cCodec.decode(b, nil, 0); err != nil {
			return nil, fmt.Errorf("shard index: %w", err)
		}
	}
	if len(b) != 16*n {
		return nil, fmt.Errorf("%w: shard index of %d bytes for %d chunks", ErrCorruptChunk, len(b), n)
	}
	idx := make([][2]uint64, n)
	for i := range idx {
		off := binary.LittleEndian.Uint64(b[16*i:])
		nb := binary.LittleEndian.Uint64(b[16*i+8:])
		if off == missingEntry && nb == missingEntry {
			idx[i] = [2]uint64{off, nb}
			continue
		}
		if off > uint64(shardSize) || nb > uint64(shardSize)-off {
			return nil, fmt.Errorf("%w: shard index entry %d: [%d, +%d) outside a %d-byte shard", ErrCorruptChunk, i, off, nb, shardSize)
		}
		idx[i] = [2]uint64{off, nb}
	}
	return idx, nil
}

// readShardIndex reads and checks the index of the shard stored under
// key and returns it with the shard's size. A missing shard fails with
// an error matching fs.ErrNotExist. No more than indexProbe bytes are
// allocated before the shard's size, from the store, shows that it can
// hold its index.
func (s *shardingCodec) readShardIndex(ctx context.Context, st Store, key string) ([][2]uint64, int64, error) {
	is := s.indexSize()
	first := min(is, indexProbe)
	b := make([]byte, first)
	off := -first
	if s.indexStart {
		off = 0
	}
	size, err := st.ReadRange(ctx, key, off, b)
	if err == nil && size < is || errors.Is(err, io.ErrUnexpectedEOF) && size >= 0 && size < is {
		return nil, 0, fmt.Errorf("%w: %s: shard of %d bytes is shorter than its %d-byte index", ErrCorruptChunk, key, size, is)
	}
	if err != nil {
		return nil, 0, err
	}
	if first < is {
		full := make([]byte, is)
		rest, restOff := full[first:], first
		if s.indexStart {
			copy(full, b)
		} else {
			copy(full[is-first:], b)
			rest, restOff = full[:is-first], size-is
		}
		size2, err := st.ReadRange(ctx, key, restOff, rest)
		if err != nil {
			return nil, 0, err
		}
		if size2 != size {
			return nil, 0, fmt.Errorf("%w: %s: shard of %d bytes, then of %d", ErrCorruptChunk, key, size, size2)
		}
		b = full
	}
	idx, err := parseShardIndex(b, s.nInner(), s.indexCRC, size)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", key, err)
	}
	return idx, size, nil
}

func (s *shardingCodec) readIndex(r rangeReader) ([][2]uint64, error) {
	size, err := r.size()
	if err != nil {
		return nil, err
	}
	is := s.indexSize()
	if size < is {
		return nil, fmt.Errorf("%w: shard of %d bytes is shorter than its %d-byte index", ErrCorruptChunk, size, is)
	}
	off := size - is
	if s.indexStart {
		off = 0
	}
	b, err := r.readAt(off, is)
	if err != nil {
		return nil, err
	}
	return parseShardIndex(b, s.nInner(), s.indexCRC, size)
}

// readRegion decodes the part sel of the shard in r into dst, reading only
// the index and the inner chunks that sel touches.
func (s *shardingCodec) readRegion(r rangeReader, sel box, dst view) error {
	idx, err := s.readIndex(r)
	if err != nil {
		return err
	}
	return forChunks(s.inner, s.perShard, sel, func(t chunkTask) error {
		e := idx[flatIndex(t.coords, s.perShard)]
		d := dst.sub(t.dstStart)
		if e[0] == missingEntry {
			d.fill(t.sel.count, s.fill)
			return nil
		}
		return s.codecs.readRegion(subReader{r, int64(e[0]), int64(e[1])}, s.inner, t.sel, d)
	})
}

func (s *shardingCodec) decode(b []byte, shape []int) (chunkArray, error) {
	out := make([]byte, numElements(shape)*s.dt.Size)
	full := box{start: make([]int, len(shape)), count: shape}
	err := s.readRegion(bytesReader(b), full, view{buf: out, shape: shape, es: s.dt.Size, start: make([]int, len(shape))})
	if err != nil {
		return chunkArray{}, err
	}
	return chunkArray{shape: shape, data: out}, nil
}

// encode encodes a shard's inner chunks on up to GOMAXPROCS goroutines:
// a device write holds only a few shards at once (their pinned buffers),
// so one shard's inner chunks must keep every core encoding.
func (s *shardingCodec) encode(a chunkArray, dst []byte) ([]byte, error) {
	return s.encodeView(view{buf: a.data, shape: a.shape, es: s.dt.Size}, dst)
}

// encodeView is encode of the shard at src's position, its inner chunks
// gathered from src: a region being written needs no copy of the whole
// shard first.
func (s *shardingCodec) encodeView(src view, dst []byte) ([]byte, error) {
	n := s.nInner()
	es := s.dt.Size
	workers := min(n, runtime.GOMAXPROCS(0))
	enc := make([][]byte, n) // nil: all fill value, not stored
	scratch := make([]*[]byte, workers)
	defer func() {
		for _, p := range scratch {
			if p != nil {
				putBuf(p)
			}
		}
	}()
	err := parallel(context.Background(), n, workers, func(_ context.Context, w, i int) error {
		if scratch[w] == nil {
			scratch[w] = getBuf(numElements(s.inner) * es)
		}
		buf := *scratch[w]
		start := make([]int, len(s.inner))
		unflatten(i, s.perShard, start)
		for d := range start {
			start[d] *= s.inner[d]
		}
		copyBox(view{buf: buf, shape: s.inner, es: es, start: make([]int, len(start))}, src.sub(start), s.inner)
		if isFill(buf, s.fill) {
			return nil
		}
		e, err := s.codecs.encode(chunkArray{shape: s.inner, data: buf}, nil)
		if overlaps(e, buf) { // a codec may return (or append to) its input
			e = bytes.Clone(e)
		}
		enc[i] = e
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.assemble(enc, dst), nil
}

// assemble returns the shard of the encoded inner chunks enc (nil:
// missing) in dst's capacity where it fits: the index first, from the
// sizes, then the shard in one buffer, the index and the inner chunks
// each copied once.
func (s *shardingCodec) assemble(enc [][]byte, dst []byte) []byte {
	n := len(enc)
	base := int64(0)
	if s.indexStart {
		base = s.indexSize()
	}
	idx := make([]byte, 16*n)
	off := base
	for i, e := range enc {
		o, size := uint64(missingEntry), uint64(missingEntry)
		if e != nil {
			o, size = uint64(off), uint64(len(e))
			off += int64(len(e))
		}
		binary.LittleEndian.PutUint64(idx[16*i:], o)
		binary.LittleEndian.PutUint64(idx[16*i+8:], size)
	}
	if s.indexCRC {
		idx, _ = crc32cCodec.encode(idx, nil)
	}
	out := outBuf(dst, int(off-base)+len(idx))
	if s.indexStart {
		out = append(out, idx...)
	}
	for _, e := range enc {
		out = append(out, e...)
	}
	if !s.indexStart {
		out = append(out, idx...)
	}
	return out
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(cap(b)) && b0 < a0+uintptr(cap(a))
}

// readRegion decodes the part sel of the chunk stored in r into dst.
// Sharded chains read only what sel needs; others read the whole value.
func (p *pipeline) readRegion(r rangeReader, shape []int, sel box, dst view) error {
	if s := p.sharded(); s != nil {
		return s.readRegion(r, sel, dst)
	}
	b, err := readAll(r)
	if err != nil {
		return err
	}
	a, err := p.decode(b, shape, nil)
	if err != nil {
		return err
	}
	copyBox(dst, view{buf: a.data, shape: shape, es: p.dt.Size, start: sel.start}, sel.count)
	return nil
}
