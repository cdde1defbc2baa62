package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"math/bits"
)

// chunkArray is a decoded chunk: C order, little-endian elements.
type chunkArray struct {
	shape []int
	data  []byte
}

// arrayCodec transforms an array into an array (transpose).
type arrayCodec interface {
	encodedShape(shape []int) []int
	encode(a chunkArray, es int) chunkArray
	decode(a chunkArray, shape []int, es int) chunkArray
}

// bytesCodec transforms bytes into bytes (compressors, checksums).
// encode and decode may use dst's capacity for their output (dst does
// not overlap src); limit bounds the size of what decode may produce.
type bytesCodec interface {
	encode(src, dst []byte) ([]byte, error)
	decode(src, dst []byte, limit int) ([]byte, error)
}

// arrayBytesCodec serializes an array (bytes, sharding_indexed); encode
// may use dst's capacity as bytesCodec's does.
type arrayBytesCodec interface {
	encode(a chunkArray, dst []byte) ([]byte, error)
	decode(b []byte, shape []int) (chunkArray, error)
}

func cfgNumber(cfg map[string]any, key string, def int) (int, error) {
	v, ok := cfg[key]
	if !ok || v == nil {
		return def, nil
	}
	switch x := v.(type) {
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			return 0, fmt.Errorf("%w: %s = %v", ErrInvalidMetadata, key, v)
		}
		return int(n), nil
	case int:
		return x, nil
	case int64:
		return int(x), nil
	case float64:
		if x == float64(int(x)) {
			return int(x), nil
		}
	}
	return 0, fmt.Errorf("%w: %s = %v", ErrInvalidMetadata, key, v)
}

func cfgString(cfg map[string]any, key, def string) (string, error) {
	v, ok := cfg[key]
	if !ok || v == nil {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s = %v", ErrInvalidMetadata, key, v)
	}
	return s, nil
}

func cfgInts(cfg map[string]any, key string) ([]int, error) {
	v, ok := cfg[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s missing", ErrInvalidMetadata, key)
	}
	switch l := v.(type) {
	case []int:
		return l, nil
	case []any:
		out := make([]int, len(l))
		for i := range l {
			n, err := cfgNumber(map[string]any{key: l[i]}, key, 0)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: %s = %v", ErrInvalidMetadata, key, v)
}

// cfgCodecs reads a nested codec list (sharding's codecs, index_codecs).
func cfgCodecs(cfg map[string]any, key string) ([]Codec, error) {
	v, ok := cfg[key]
	if !ok {
		return nil, fmt.Errorf("%w: %s missing", ErrInvalidMetadata, key)
	}
	if l, ok := v.([]Codec); ok {
		return l, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a list", ErrInvalidMetadata, key)
	}
	out := make([]Codec, len(l))
	for i, x := range l {
		switch c := x.(type) {
		case string:
			out[i] = Codec{Name: c}
		case map[string]any:
			name, _ := c["name"].(string)
			if name == "" {
				return nil, fmt.Errorf("%w: %s[%d] has no name", ErrInvalidMetadata, key, i)
			}
			out[i].Name = name
			if conf, ok := c["configuration"].(map[string]any); ok {
				out[i].Configuration = conf
			} else if c["configuration"] != nil {
				return nil, fmt.Errorf("%w: %s[%d] configuration", ErrInvalidMetadata, key, i)
			}
		case Codec:
			out[i] = c
		default:
			return nil, fmt.Errorf("%w: %s[%d]", ErrInvalidMetadata, key, i)
		}
	}
	return out, nil
}

// bytesCodecAB is the v3 "bytes" codec: elements in a byte order.
type bytesCodecAB struct {
	es   int
	unit int // the bytes big-endian order reverses: es, or half a complex's
	big  bool
}

// newBytesAB returns the bytes codec of elements of dt, big-endian or not.
func newBytesAB(dt DataType, big bool) bytesCodecAB {
	return bytesCodecAB{es: dt.Size, unit: dt.swapUnit(), big: big}
}

func (c bytesCodecAB) encode(a chunkArray, dst []byte) ([]byte, error) {
	if !c.big || c.unit == 1 {
		return a.data, nil
	}
	out := outBuf(dst, len(a.data))[:len(a.data)]
	swapInto(out, a.data, c.unit)
	return out, nil
}

func (c bytesCodecAB) decode(b []byte, shape []int) (chunkArray, error) {
	n := numElements(shape) * c.es
	if len(b) != n {
		return chunkArray{}, fmt.Errorf("%w: %d bytes for a %v chunk of %d-byte elements", ErrCorruptChunk, len(b), shape, c.es)
	}
	if c.big && c.unit > 1 {
		out := make([]byte, n)
		swapInto(out, b, c.unit)
		b = out
	}
	return chunkArray{shape: shape, data: b}, nil
}

// swapInto reverses the byte order of each es-byte element.
func swapInto(dst, src []byte, es int) {
	switch es {
	case 2:
		for i := 0; i+1 < len(src); i += 2 {
			binary.LittleEndian.PutUint16(dst[i:], bits.ReverseBytes16(binary.LittleEndian.Uint16(src[i:])))
		}
	case 4:
		for i := 0; i+3 < len(src); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], bits.ReverseBytes32(binary.LittleEndian.Uint32(src[i:])))
		}
	case 8:
		for i := 0; i+7 < len(src); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], bits.ReverseBytes64(binary.LittleEndian.Uint64(src[i:])))
		}
	default:
		copy(dst, src)
	}
}

// transposeCodec is the v3 "transpose" codec (and a v2 F-order array).
type transposeCodec struct{ order []int }

func newTranspose(cfg map[string]any, ndim int) (transposeCodec, error) {
	if s, ok := cfg["order"].(string); ok {
		// Early v3 drafts spelled C and F orders as strings.
		p := make([]int, ndim)
		for i := range p {
			p[i] = i
			if s == "F" {
				p[i] = ndim - 1 - i
			}
		}
		if s != "C" && s != "F" {
			return transposeCodec{}, fmt.Errorf("%w: transpose order %q", ErrInvalidMetadata, s)
		}
		return transposeCodec{p}, nil
	}
	p, err := cfgInts(cfg, "order")
	if err != nil {
		return transposeCodec{}, err
	}
	if len(p) != ndim {
		return transposeCodec{}, fmt.Errorf("%w: transpose order %v for %d dimensions", ErrInvalidMetadata, p, ndim)
	}
	seen := make([]bool, ndim)
	for _, x := range p {
		if x < 0 || x >= ndim || seen[x] {
			return transposeCodec{}, fmt.Errorf("%w: transpose order %v is not a permutation", ErrInvalidMetadata, p)
		}
		seen[x] = true
	}
	return transposeCodec{p}, nil
}

func (t transposeCodec) encodedShape(shape []int) []int {
	out := make([]int, len(shape))
	for i, p := range t.order {
		out[i] = shape[p]
	}
	return out
}

func (t transposeCodec) encode(a chunkArray, es int) chunkArray {
	eshape := t.encodedShape(a.shape)
	out := make([]byte, len(a.data))
	// Encoded axis i walks source axis order[i].
	src := cStrides(a.shape)
	perm := make([]int, len(eshape))
	for i, p := range t.order {
		perm[i] = src[p]
	}
	gather(out, a.data, eshape, perm, es)
	return chunkArray{shape: eshape, data: out}
}

func (t transposeCodec) decode(a chunkArray, shape []int, es int) chunkArray {
	out := make([]byte, len(a.data))
	// Decoded axis order[i] walks encoded axis i.
	enc := cStrides(a.shape)
	perm := make([]int, len(shape))
	for i, p := range t.order {
		perm[p] = enc[i]
	}
	gather(out, a.data, shape, perm, es)
	return chunkArray{shape: shape, data: out}
}

// gather fills dst (C order, shape) from src, whose element for index x
// is at sum(x[i]*strides[i]) (strides in elements).
func gather(dst, src []byte, shape, strides []int, es int) {
	n := numElements(shape)
	if n == 0 {
		return
	}
	idx := make([]int, len(shape))
	off := 0
	last := len(shape) - 1
	for i := 0; i < n; i++ {
		copy(dst[i*es:(i+1)*es], src[off*es:off*es+es])
		for d := last; d >= 0; d-- {
			idx[d]++
			off += strides[d]
			if idx[d] < shape[d] {
				break
			}
			off -= strides[d] * shape[d]
			idx[d] = 0
		}
	}
}

func cStrides(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = n
		n *= shape[i]
	}
	return s
}

func numElements(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksumCodec keeps a little-endian 32-bit checksum of the bytes
// beside them: v3's crc32c after them; numcodecs' crc32 and adler32
// (zlib's) before them, or after with "location": "end"; numcodecs'
// fletcher32 (HDF5's Fletcher-32) after them.
type checksumCodec struct {
	name string
	sum  func([]byte) uint32
	end  bool
}

// crc32cCodec is v3's crc32c codec (also a shard index's).
var crc32cCodec = checksumCodec{name: "crc32c", sum: func(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }, end: true}

// newChecksum builds numcodecs' crc32, adler32 or fletcher32 codec.
func newChecksum(id string, cfg map[string]any) (bytesCodec, error) {
	switch id {
	case "fletcher32":
		return checksumCodec{name: id, sum: fletcher32, end: true}, nil
	}
	c := checksumCodec{name: id, sum: crc32.ChecksumIEEE}
	if id == "adler32" {
		c.sum = adler32.Checksum
	}
	loc, err := cfgString(cfg, "location", "start")
	if err != nil {
		return nil, err
	}
	if loc != "start" && loc != "end" {
		return nil, fmt.Errorf("%w: %s location %q", ErrInvalidMetadata, id, loc)
	}
	c.end = loc == "end"
	return c, nil
}

func (c checksumCodec) encode(src, dst []byte) ([]byte, error) {
	dst = outBuf(dst, len(src)+4)
	if c.end {
		return binary.LittleEndian.AppendUint32(append(dst, src...), c.sum(src)), nil
	}
	return append(binary.LittleEndian.AppendUint32(dst, c.sum(src)), src...), nil
}

// shuffleCodec is numcodecs' Shuffle filter (v2 "shuffle", v3
// "numcodecs.shuffle"), netCDF-4/HDF5's shuffle: the bytes of elements
// of size bytes transposed, byte 0 of every element first (as Blosc's
// byte shuffle does within a block). size 1 or less leaves the bytes.
type shuffleCodec struct{ size int }

// newShuffle builds a shuffle of elementsize bytes (default 4, as
// numcodecs'; at most maxStringSize).
func newShuffle(cfg map[string]any) (bytesCodec, error) {
	n, err := cfgNumber(cfg, "elementsize", 4)
	if err != nil {
		return nil, err
	}
	if n > maxStringSize {
		return nil, fmt.Errorf("%w: shuffle elementsize %d", ErrInvalidMetadata, n)
	}
	return shuffleCodec{size: n}, nil
}

func (c shuffleCodec) encode(src, dst []byte) ([]byte, error) {
	if c.size > 1 && len(src)%c.size != 0 {
		return nil, fmt.Errorf("%w: shuffle of %d bytes in elements of %d", ErrInvalidMetadata, len(src), c.size)
	}
	return c.apply(shuffle, src, dst), nil
}

func (c shuffleCodec) decode(src, dst []byte, limit int) ([]byte, error) {
	if len(src) > limit || c.size > 1 && len(src)%c.size != 0 {
		return nil, fmt.Errorf("%w: %d shuffled bytes in elements of %d (at most %d)", ErrCorruptChunk, len(src), c.size, limit)
	}
	return c.apply(unshuffle, src, dst), nil
}

// apply runs f, shuffle or unshuffle, from src into dst's capacity where
// it fits; a copy where elements are single bytes.
func (c shuffleCodec) apply(f func(dst, src []byte, size int), src, dst []byte) []byte {
	out := outBuf(dst, len(src))[:len(src)]
	if c.size <= 1 {
		copy(out, src)
	} else {
		f(out, src, c.size)
	}
	return out
}

// fletcher32 is HDF5's Fletcher-32 of b (H5_checksum_fletcher32, which
// numcodecs follows): sums of big-endian 16-bit words, folded every 360
// words, a last odd byte the high byte of a word.
func fletcher32(b []byte) uint32 {
	var s1, s2 uint32
	fold := func() {
		s1 = s1&0xffff + s1>>16
		s2 = s2&0xffff + s2>>16
	}
	for len(b) >= 2 {
		n := min(len(b)/2, 360)
		for i := 0; i < 2*n; i += 2 {
			s1 += uint32(b[i])<<8 | uint32(b[i+1])
			s2 += s1
		}
		b = b[2*n:]
		fold()
	}
	if len(b) == 1 {
		s1 += uint32(b[0]) << 8
		s2 += s1
		fold()
	}
	fold()
	return s2<<16 | s1
}

// outBuf returns dst emptied, to encode into, or where it holds fewer
// than n bytes (the expected output) a new buffer of n.
func outBuf(dst []byte, n int) []byte {
	if cap(dst) < n {
		return make([]byte, 0, n)
	}
	return dst[:0]
}

func (c checksumCodec) decode(src, _ []byte, _ int) ([]byte, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a %s checksum", ErrCorruptChunk, len(src), c.name)
	}
	body, stored := src[:len(src)-4], src[len(src)-4:]
	if !c.end {
		body, stored = src[4:], src[:4]
	}
	if got, want := c.sum(body), binary.LittleEndian.Uint32(stored); got != want {
		return nil, fmt.Errorf("%w: %s %#08x, stored %#08x", ErrCorruptChunk, c.name, got, want)
	}
	return body, nil
}
