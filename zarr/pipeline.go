package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// pipeline is an array's codec chain: array-to-array codecs, one
// array-to-bytes codec, bytes-to-bytes codecs, in encoding order.
type pipeline struct {
	dt   DataType
	fill []byte
	aa   []arrayCodec
	ab   arrayBytesCodec
	bb   []bytesCodec
}

// raw reports whether chunks are stored as plain little-endian C-order
// elements, so that stored bytes can go straight to their destination.
func (p *pipeline) raw() bool {
	b, ok := p.ab.(bytesCodecAB)
	return ok && len(p.aa) == 0 && len(p.bb) == 0 && (!b.big || b.unit == 1)
}

// plainThen returns the chain's one bytes-to-bytes codec where the chain
// is plain little-endian C-order elements (as raw's) followed by it: the
// chunks the GPU's kernels decode and encode.
func (p *pipeline) plainThen() (bytesCodec, bool) {
	b, ok := p.ab.(bytesCodecAB)
	if !ok || len(p.aa) > 0 || len(p.bb) != 1 || (b.big && b.unit > 1) {
		return nil, false
	}
	return p.bb[0], true
}

// sharded returns the sharding codec when it is the whole chain.
func (p *pipeline) sharded() *shardingCodec {
	s, ok := p.ab.(*shardingCodec)
	if ok && len(p.aa) == 0 && len(p.bb) == 0 {
		return s
	}
	return nil
}

func (p *pipeline) shapes(shape []int) [][]int {
	s := [][]int{shape}
	for _, c := range p.aa {
		shape = c.encodedShape(shape)
		s = append(s, shape)
	}
	return s
}

// decode turns stored bytes into a chunk of the given shape. dst, if large
// enough, may receive the result.
func (p *pipeline) decode(b []byte, shape []int, dst []byte) (chunkArray, error) {
	b, err := p.decodeBytes(b, 0, numElements(shape)*p.dt.Size, dst)
	if err != nil {
		return chunkArray{}, err
	}
	shapes := p.shapes(shape)
	a, err := p.ab.decode(b, shapes[len(shapes)-1])
	if err != nil {
		return chunkArray{}, err
	}
	for i := len(p.aa) - 1; i >= 0; i-- {
		a = p.aa[i].decode(a, shapes[i], p.dt.Size)
	}
	return a, nil
}

// decodeBytes runs the chain's bytes codecs, from the last down to the
// to-th, on b, the stored bytes of a chunk of n decoded bytes. dst, if
// large enough, may receive the first codec's output.
func (p *pipeline) decodeBytes(b []byte, to, n int, dst []byte) ([]byte, error) {
	_, plain := p.ab.(bytesCodecAB)
	for i := len(p.bb) - 1; i >= to; i-- {
		var hint []byte
		if i == 0 && len(p.aa) == 0 {
			hint = dst
		}
		limit := 2*n + 1<<20
		if _, v := p.vlen(); v {
			limit = maxVarChunk
		}
		if i == 0 && plain {
			// The bytes codec takes exactly the chunk's bytes: no more
			// may be produced, and a destination of that size is
			// decoded into in place (gzip and zlib streams included).
			limit = n
		}
		var err error
		if b, err = p.bb[i].decode(b, hint, limit); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// bloscFirst returns the chain's Blosc codec where it is the first bytes
// codec over plain little-endian elements (no array codec before): its
// blocks are then the chunk's bytes in C order, and shuffling them reads
// (unshuffling writes) each element once, where it lies in a region.
func (p *pipeline) bloscFirst() (bloscCodec, bool) {
	ab, plain := p.ab.(bytesCodecAB)
	if len(p.aa) > 0 || !plain || (ab.big && ab.unit > 1) || len(p.bb) == 0 {
		return bloscCodec{}, false
	}
	bl, ok := p.bb[0].(bloscCodec)
	return bl, ok
}

// decodeRuns is decode of the stored bytes b of a whole chunk of shape
// into dst's runs (its place in a region), where the chain's decoding
// ends with Blosc over plain little-endian bytes: its blocks are
// unshuffled straight into the rows. ok is false where the chunk must be
// decoded into a buffer of its own and copied.
func (p *pipeline) decodeRuns(b []byte, shape []int, dst runList) (ok bool, err error) {
	bl, ok := p.bloscFirst()
	if !ok {
		return false, nil
	}
	if b, err = p.decodeBytes(b, 1, numElements(shape)*p.dt.Size, nil); err != nil {
		return true, err
	}
	return true, bl.decodeRuns(b, dst)
}

// decodeShuffled is decode of the stored bytes b of a whole chunk into
// dst, exactly its bytes, where the chain ends with Blosc over plain
// little-endian elements (bloscFirst), with byte-shuffled Blosc blocks
// left shuffled for the GPU (bloscCodec.decodeShuffled).
func (p *pipeline) decodeShuffled(b, dst []byte) (shuffled, error) {
	bl, ok := p.bloscFirst()
	if !ok {
		return shuffled{}, fmt.Errorf("%w: no Blosc codec to leave shuffled", ErrUnsupportedCodec)
	}
	b, err := p.decodeBytes(b, 1, len(dst), nil)
	if err != nil {
		return shuffled{}, err
	}
	return bl.decodeShuffled(b, dst)
}

// encode turns a chunk into its stored bytes. The last codec may use
// dst's capacity for them (see bytesCodec); the result may also be
// a.data itself (plain little-endian bytes).
func (p *pipeline) encode(a chunkArray, dst []byte) ([]byte, error) {
	for _, c := range p.aa {
		a = c.encode(a, p.dt.Size)
	}
	var abDst []byte
	if len(p.bb) == 0 {
		abDst = dst
	}
	b, err := p.ab.encode(a, abDst)
	if err != nil {
		return nil, err
	}
	return p.encodeBytes(b, 0, dst)
}

// encodeBytes runs the chain's bytes codecs from the from-th on b, the
// last into dst's capacity where it fits.
func (p *pipeline) encodeBytes(b []byte, from int, dst []byte) ([]byte, error) {
	for i := from; i < len(p.bb); i++ {
		var out []byte
		if i == len(p.bb)-1 {
			out = dst
		}
		var err error
		if b, err = p.bb[i].encode(b, out); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// encodeFrom is encode of the whole chunk of count elements at src's
// position (a region being written), read where it lies, where the chain
// can: a Blosc codec first shuffles its rows from there (the shuffle is
// the gather), a shard gathers its inner chunks from there. ok is false
// where the chunk must be gathered and given to encode.
func (p *pipeline) encodeFrom(src view, count []int, dst []byte) (b []byte, ok bool, err error) {
	if s := p.sharded(); s != nil {
		b, err = s.encodeView(src, dst)
		return b, true, err
	}
	bl, ok := p.bloscFirst()
	if !ok {
		return nil, false, nil
	}
	var out []byte
	if len(p.bb) == 1 {
		out = dst
	}
	if b, err = bl.encodeRuns(runsOf(src, count), out); err == nil {
		b, err = p.encodeBytes(b, 1, dst)
	}
	if err != nil {
		return nil, true, err
	}
	return b, true, nil
}

// writable fails with ErrUnsupportedCodec when a codec of the chain,
// inside shards included, can read but not write.
func (p *pipeline) writable() error {
	for _, c := range p.bb {
		if w, ok := c.(interface{ writable() error }); ok {
			if err := w.writable(); err != nil {
				return err
			}
		}
	}
	if s, ok := p.ab.(*shardingCodec); ok {
		return s.codecs.writable()
	}
	return nil
}

// newPipelineV3 builds the chain of a v3 codec list for chunks of shape.
func newPipelineV3(codecs []Codec, dt DataType, fill []byte, shape []int) (*pipeline, error) {
	p := &pipeline{dt: dt, fill: fill}
	var filters []bytesCodec // numcodecs' array-to-array codecs
	for _, c := range codecs {
		cfg := c.Configuration
		if id, ok := numcodecsFilter(c.Name); ok {
			if p.ab != nil {
				return nil, fmt.Errorf("%w: %s after the array-to-bytes codec", ErrInvalidMetadata, c.Name)
			}
			f, err := newV3Filter(id, cfg, dt, fill)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			filters = append(filters, f)
			continue
		}
		switch c.Name {
		case "transpose":
			if p.ab != nil {
				return nil, fmt.Errorf("%w: transpose after the array-to-bytes codec", ErrInvalidMetadata)
			}
			t, err := newTranspose(cfg, len(shape))
			if err != nil {
				return nil, err
			}
			p.aa = append(p.aa, t)
		case "bytes", "endian":
			e, err := cfgString(cfg, "endian", "little")
			if err != nil {
				return nil, err
			}
			if e != "little" && e != "big" {
				return nil, fmt.Errorf("%w: endian %q", ErrInvalidMetadata, e)
			}
			if err := p.setAB(newBytesAB(dt, e == "big")); err != nil {
				return nil, err
			}
		case "vlen-utf8", "vlen-bytes":
			if dt.Kind != vlenKinds[c.Name] {
				return nil, fmt.Errorf("%w: codec %s for %v elements", ErrInvalidMetadata, c.Name, dt)
			}
			if err := p.setAB(vlenCodec{utf8: dt.Kind == VarString}); err != nil {
				return nil, err
			}
		case "sharding_indexed":
			inner := shape
			if len(p.aa) > 0 {
				inner = p.shapes(shape)[len(p.aa)]
			}
			s, err := newSharding(cfg, dt, fill, inner)
			if err != nil {
				return nil, err
			}
			if err := p.setAB(s); err != nil {
				return nil, err
			}
		default:
			bc, err := newBytesCodec(c, dt, true)
			if err != nil {
				return nil, err
			}
			if p.ab == nil {
				return nil, fmt.Errorf("%w: bytes-to-bytes codec %q before the array-to-bytes codec", ErrInvalidMetadata, c.Name)
			}
			p.bb = append(p.bb, bc)
		}
	}
	if p.ab == nil {
		return nil, fmt.Errorf("%w: no array-to-bytes codec (bytes or sharding_indexed)", ErrInvalidMetadata)
	}
	if len(filters) > 0 {
		if err := p.checkFilters(filters); err != nil {
			return nil, err
		}
		p.bb = append(filters, p.bb...)
	}
	if dt.Variable() {
		if err := p.checkVar(shape); err != nil {
			return nil, err
		}
		return p, nil
	}
	if p.sharded() == nil { // a shard is read by inner chunk, each checked here
		if err := checkChunkBytes(shape, dt.Size); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// numcodecsFilter returns the numcodecs id of a v3 codec that is one of
// numcodecs' array-to-array filters: "numcodecs.delta" as numcodecs.zarr3
// and zarr-python's first copies of it (zarr.codecs.numcodecs) name it,
// or "delta" as its later ones write it (reading both).
func numcodecsFilter(name string) (string, bool) {
	id := strings.TrimPrefix(name, "numcodecs.")
	switch id {
	case "delta", "fixedscaleoffset", "quantize", "bitround", "astype", "packbits":
		return id, true
	}
	return "", false
}

// newV3Filter builds numcodecs' filter id from its v3 configuration: the
// v2 one, but for data types that may be v3 names ("int16") where v2 has
// NumPy's ("<i2"), and a missing dtype that is the array's. It runs on
// the little-endian bytes of the array's elements, after the bytes codec
// (checkFilters), the place of a v2 filter; fill is the array's.
func newV3Filter(id string, cfg map[string]any, dt DataType, fill []byte) (bytesCodec, error) {
	c := make(map[string]any, len(cfg)+1)
	for k, v := range cfg {
		if s, ok := v.(string); ok && (strings.HasSuffix(k, "dtype") || k == "astype") {
			if t, ok := v3Types[s]; ok {
				v = t.NumPy()
			}
		}
		c[k] = v
	}
	key := map[string]string{"delta": "dtype", "fixedscaleoffset": "dtype", "quantize": "dtype", "astype": "decode_dtype"}[id]
	if _, ok := c[key]; key != "" && !ok {
		c[key] = dt.NumPy()
	}
	f, err := newBytesCodec(Codec{Name: id, Configuration: c}, dt, false)
	if err != nil {
		return nil, err
	}
	return withFill(f, fill), nil
}

// checkFilters checks the place of numcodecs' filters in p's chain: they
// run on the bytes codec's output, which is their input only where it
// is the elements' little-endian bytes, not shards (and only where their
// own output, which may be of a wider type, needs no swap); and delta and
// packbits, which work on the elements in the order they are given,
// only where no transpose comes before or after them.
func (p *pipeline) checkFilters(filters []bytesCodec) error {
	ab, ok := p.ab.(bytesCodecAB)
	if !ok || ab.big {
		return fmt.Errorf("%w: numcodecs filters before other than a little-endian bytes codec", ErrUnsupportedCodec)
	}
	for _, f := range filters {
		switch f.(type) {
		case deltaCodec, packBitsCodec:
			if len(p.aa) > 0 {
				return fmt.Errorf("%w: numcodecs' delta or packbits with a transpose", ErrUnsupportedCodec)
			}
		}
	}
	return nil
}

// checkChunkBytes fails for chunks of shape whose decoded size, which a
// read allocates at once, passes maxChunkBytes or overflows.
func checkChunkBytes(shape []int, es int) error {
	n := int64(max(es, 1))
	for _, d := range shape {
		if d < 0 || d > 0 && int64(d) > maxChunkBytes/n {
			return fmt.Errorf("%w: chunks of shape %v and %d-byte elements exceed %d bytes", ErrInvalidMetadata, shape, es, int64(maxChunkBytes))
		}
		n *= int64(max(d, 1))
	}
	return nil
}

func (p *pipeline) setAB(c arrayBytesCodec) error {
	if p.ab != nil {
		return fmt.Errorf("%w: two array-to-bytes codecs", ErrInvalidMetadata)
	}
	p.ab = c
	return nil
}

// newBytesCodec builds a bytes-to-bytes codec, v3 or v2 (a compressor or
// filter). numcodecs' codecs go by their ids, and in v3 also by
// "numcodecs.<id>", the names numcodecs.zarr3 gave them (zarr-python's
// own copies of them write the ids and read both).
func newBytesCodec(c Codec, dt DataType, v3 bool) (bytesCodec, error) {
	cfg := c.Configuration
	switch c.Name {
	case "gzip", "zlib", "numcodecs.zlib":
		lvl, err := cfgNumber(cfg, "level", 6)
		if err != nil {
			return nil, err
		}
		if lvl < -1 || lvl > 9 {
			return nil, fmt.Errorf("%w: %s level %d", ErrInvalidMetadata, c.Name, lvl)
		}
		if _, err := deflateNow(); err != nil {
			return nil, err
		}
		if c.Name == "gzip" {
			return gzipCodec{lvl}, nil
		}
		return zlibCodec{lvl}, nil
	case "bz2", "numcodecs.bz2":
		if lvl, err := cfgNumber(cfg, "level", 1); err != nil || lvl < 1 || lvl > 9 {
			return nil, fmt.Errorf("%w: %s level %v (1 to 9)", ErrInvalidMetadata, c.Name, cfg["level"])
		}
		return bz2Codec{}, nil
	case "lz4", "numcodecs.lz4":
		acc, err := cfgNumber(cfg, "acceleration", 1)
		if err != nil {
			return nil, err
		}
		return lz4Codec{acceleration: acc}, nil
	case "zstd":
		lvl, err := cfgNumber(cfg, "level", 0)
		if err != nil {
			return nil, err
		}
		ck, _ := cfg["checksum"].(bool)
		if _, err := zstdNow(); err != nil {
			return nil, err
		}
		return zstdCodec{level: lvl, checksum: ck}, nil
	case "blosc":
		return newBlosc(cfg, dt.Size, v3)
	case "crc32c":
		return crc32cCodec, nil
	case "shuffle", "numcodecs.shuffle":
		return newShuffle(cfg)
	case "fixedscaleoffset":
		return newFixedScaleOffset(cfg)
	case "quantize":
		return newQuantize(cfg)
	case "bitround":
		return newBitRound(cfg, dt)
	case "astype":
		return newAsType(cfg)
	case "packbits":
		if dt.Kind != Bool {
			return nil, fmt.Errorf("%w: packbits of %v", ErrInvalidMetadata, dt)
		}
		return packBitsCodec{}, nil
	case "crc32", "adler32", "fletcher32", "numcodecs.crc32", "numcodecs.adler32", "numcodecs.fletcher32":
		return newChecksum(strings.TrimPrefix(c.Name, "numcodecs."), cfg)
	case "delta":
		return newDelta(cfg, dt)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnsupportedCodec, c.Name)
}

// newPipelineV2 builds the chain of a v2 array: F order as a transpose,
// the dtype's byte order, then filters and the compressor.
func newPipelineV2(m *Metadata) (*pipeline, error) {
	p := &pipeline{dt: m.DataType, fill: m.fill, ab: newBytesAB(m.DataType, m.BigEndian)}
	filters := m.Filters
	if m.DataType.Variable() {
		// The object codec, first of the filters, is the array's
		// array-to-bytes codec.
		if len(filters) == 0 || vlenKinds[filters[0].Name] != m.DataType.Kind {
			return nil, fmt.Errorf("%w: %v elements without their object codec as the first filter", ErrInvalidMetadata, m.DataType)
		}
		p.ab = vlenCodec{utf8: m.DataType.Kind == VarString}
		filters = filters[1:]
	}
	if m.Order == 'F' && len(m.ChunkShape) > 1 {
		t := transposeCodec{order: make([]int, len(m.ChunkShape))}
		for i := range t.order {
			t.order[i] = len(t.order) - 1 - i
		}
		p.aa = append(p.aa, t)
	}
	for _, f := range filters {
		c, err := newBytesCodec(f, m.DataType, false)
		if err != nil {
			return nil, fmt.Errorf("filter: %w", err)
		}
		if _, ok := c.(bitRoundCodec); ok && m.BigEndian { // numcodecs' BitRound takes only native floats (KeyError '>f8')
			return nil, fmt.Errorf("filter: %w: bitround of big-endian %v", ErrUnsupportedCodec, m.DataType)
		}
		p.bb = append(p.bb, withFill(c, storedFill(m)))
	}
	if m.Compressor != nil {
		c, err := newBytesCodec(*m.Compressor, m.DataType, false)
		if err != nil {
			return nil, fmt.Errorf("compressor: %w", err)
		}
		p.bb = append(p.bb, c)
	}
	if m.DataType.Variable() {
		if err := p.checkVar(m.ChunkShape); err != nil {
			return nil, err
		}
		return p, nil
	}
	if err := checkChunkBytes(m.ChunkShape, m.DataType.Size); err != nil {
		return nil, err
	}
	return p, nil
}

// storedFill returns m's fill value as a v2 filter sees it: one element
// in the array's stored byte order.
func storedFill(m *Metadata) []byte {
	b := append([]byte(nil), m.fill...)
	if m.BigEndian {
		swapInto(b, m.fill, m.DataType.swapUnit())
	}
	return b
}

// checkVar checks the chain of an array of variable-length elements in
// chunks of shape: the vlen codec of its kind as the array-to-bytes
// codec, or sharding whose inner chain has it (and nothing around the
// shards, which are read whole); chunks whose framing fits maxVarChunk.
func (p *pipeline) checkVar(shape []int) error {
	if s, ok := p.ab.(*shardingCodec); ok {
		if p.sharded() == nil {
			return fmt.Errorf("%w: codecs around the shards of %v elements", ErrUnsupportedCodec, p.dt)
		}
		if _, ok := s.codecs.vlen(); !ok {
			return fmt.Errorf("%w: %v elements in shards of other than vlen-utf8 or vlen-bytes chunks", ErrUnsupportedCodec, p.dt)
		}
	} else if _, ok := p.vlen(); !ok {
		return fmt.Errorf("%w: %v elements need the vlen-utf8 or vlen-bytes codec", ErrInvalidMetadata, p.dt)
	}
	if err := checkChunkBytes(shape, 1); err != nil {
		return err
	}
	return checkVarChunk(numElements(shape))
}

// deltaCodec is numcodecs' delta filter: the first element, then the
// differences of consecutive elements, stored as astype. numcodecs
// encodes with np.diff in dtype and decodes with np.cumsum(enc, out=dec),
// which sums floats in the wider of dtype and astype (integers in 64
// bits) and rounds each partial sum to dtype; decode does the same.
// encode matches numcodecs byte for byte except for floats with an
// astype wider than dtype: numcodecs rounds the differences to dtype, so
// the sums drift; encode stores each element's difference from the
// running sum the decoder will hold, rounded to astype, so nothing
// accumulates and the chunk reads back exactly (here and in numcodecs)
// wherever astype holds the differences.
type deltaCodec struct {
	dt, as       DataType
	dtBig, asBig bool
}

func newDelta(cfg map[string]any, arr DataType) (bytesCodec, error) {
	ds, err := cfgString(cfg, "dtype", "")
	if err != nil {
		return nil, err
	}
	as, err := cfgString(cfg, "astype", ds)
	if err != nil {
		return nil, err
	}
	d := deltaCodec{}
	if d.dt, d.dtBig, err = parseV2Type(ds); err != nil {
		return nil, fmt.Errorf("delta dtype: %w", err)
	}
	if d.as, d.asBig, err = parseV2Type(as); err != nil {
		return nil, fmt.Errorf("delta astype: %w", err)
	}
	numeric := func(t DataType) bool { return t.Kind == Int || t.Kind == Uint || t.Kind == Float }
	if !numeric(d.dt) || !numeric(d.as) || (d.dt.Kind == Float) != (d.as.Kind == Float) {
		return nil, fmt.Errorf("%w: delta from %s to %s", ErrUnsupportedCodec, ds, as)
	}
	return d, nil
}

func loadUint(b []byte, big bool) uint64 {
	var u uint64
	n := len(b)
	for i := range b {
		if big {
			u |= uint64(b[n-1-i]) << (8 * i)
		} else {
			u |= uint64(b[i]) << (8 * i)
		}
	}
	return u
}

func storeUint(b []byte, u uint64, big bool) {
	n := len(b)
	for i := range b {
		if big {
			b[n-1-i] = byte(u >> (8 * i))
		} else {
			b[i] = byte(u >> (8 * i))
		}
	}
}

func loadFloat(b []byte, big bool) float64 {
	u := loadUint(b, big)
	switch len(b) {
	case 2:
		return Float16ToFloat64(uint16(u))
	case 4:
		return float64(math.Float32frombits(uint32(u)))
	}
	return math.Float64frombits(u)
}

func storeFloat(b []byte, f float64, big bool) {
	var u uint64
	switch len(b) {
	case 2:
		u = uint64(Float16FromFloat64(f))
	case 4:
		u = uint64(math.Float32bits(float32(f)))
	default:
		u = math.Float64bits(f)
	}
	storeUint(b, u, big)
}

// signExtend interprets the low 8*size bits of u as a signed integer.
func signExtend(u uint64, size int) uint64 {
	s := 64 - 8*size
	return uint64(int64(u<<s) >> s)
}

// roundFloat rounds f to a float of size bytes. Arithmetic in a
// narrower float is the float64 result rounded: for +, - this equals the
// narrower type's own rounding (float16 in NumPy goes through float32,
// which is as exact).
func roundFloat(f float64, size int) float64 {
	switch size {
	case 2:
		return Float16ToFloat64(Float16FromFloat64(f))
	case 4:
		return float64(float32(f))
	}
	return f
}

func (d deltaCodec) encode(src, _ []byte) ([]byte, error) {
	n := len(src) / d.dt.Size
	out := make([]byte, n*d.as.Size)
	var prevU uint64
	var prev, acc float64
	for i := 0; i < n; i++ {
		e := src[i*d.dt.Size : (i+1)*d.dt.Size]
		o := out[i*d.as.Size : (i+1)*d.as.Size]
		if d.dt.Kind == Float {
			f := loadFloat(e, d.dtBig)
			if d.as.Size > d.dt.Size {
				diff := roundFloat(f-acc, d.as.Size)
				acc = roundFloat(acc+diff, d.as.Size) // as decode sums
				storeFloat(o, diff, d.asBig)
				continue
			}
			// np.diff in dtype, then cast to astype.
			storeFloat(o, roundFloat(f-prev, d.dt.Size), d.asBig)
			prev = f
			continue
		}
		// Integer differences wrap in dtype, then convert to astype
		// as NumPy casts (sign-extended from a signed dtype).
		u := loadUint(e, d.dtBig)
		diff := (u - prevU) & (math.MaxUint64 >> (64 - 8*d.dt.Size))
		if d.dt.Kind == Int {
			diff = signExtend(diff, d.dt.Size)
		}
		storeUint(o, diff, d.asBig)
		prevU = u
	}
	return out, nil
}

func (d deltaCodec) decode(src, _ []byte, limit int) ([]byte, error) {
	if len(src)%d.as.Size != 0 {
		return nil, fmt.Errorf("%w: delta input of %d bytes", ErrCorruptChunk, len(src))
	}
	n := len(src) / d.as.Size
	if n*d.dt.Size > limit {
		return nil, fmt.Errorf("%w: delta output exceeds %d bytes", ErrCorruptChunk, limit)
	}
	out := make([]byte, n*d.dt.Size)
	wide := max(d.dt.Size, d.as.Size)
	var accU uint64
	var acc float64
	for i := 0; i < n; i++ {
		e := src[i*d.as.Size : (i+1)*d.as.Size]
		o := out[i*d.dt.Size : (i+1)*d.dt.Size]
		if d.dt.Kind == Float {
			// The running sum is kept in the wider type, each
			// partial sum rounded to dtype on its way out.
			acc = roundFloat(acc+loadFloat(e, d.asBig), wide)
			storeFloat(o, acc, d.dtBig)
			continue
		}
		u := loadUint(e, d.asBig)
		if d.as.Kind == Int {
			u = signExtend(u, d.as.Size)
		}
		accU += u
		storeUint(o, accU, d.dtBig)
	}
	return out, nil
}

// chunkFill returns a chunk of shape full of the fill value.
func chunkFill(fill []byte, shape []int) []byte {
	n := numElements(shape)
	b := make([]byte, n*len(fill))
	fillRepeat(b, fill)
	return b
}

// fillRepeat fills b with copies of the element e.
func fillRepeat(b, e []byte) {
	if len(e) == 0 || len(b) == 0 {
		return
	}
	if !slices.ContainsFunc(e, func(x byte) bool { return x != 0 }) {
		clear(b)
		return
	}
	n := copy(b, e)
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}

// isFill reports whether every whole element of b equals fill. Once the
// first one does, b is compared with its own checked start in spans that
// double, at memequal's speed rather than a byte at a time.
func isFill(b, fill []byte) bool {
	es := len(fill)
	if es == 0 || len(b) < es {
		return true
	}
	n := len(b) - len(b)%es
	if !bytes.Equal(b[:es], fill) {
		return false
	}
	for k := es; k < n; {
		m := min(k, n-k)
		if !bytes.Equal(b[k:k+m], b[:m]) {
			return false
		}
		k += m
	}
	return true
}

// viewIsFill reports whether every element of the box count at v's
// position equals fill.
func viewIsFill(v view, count []int, fill []byte) bool {
	return v.runs(count, func(off, n int) error {
		if !isFill(v.buf[off:off+n], fill) {
			return errNotFill
		}
		return nil
	}) == nil
}

// errNotFill stops viewIsFill's walk at the first run that differs.
var errNotFill = errors.New("not the fill value")

var _ = binary.LittleEndian
