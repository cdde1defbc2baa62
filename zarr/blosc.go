package zarr

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The Blosc 1 container (c-blosc's documented chunk format): a 16-byte
// header (version, versionlz, flags, typesize, nbytes, blocksize, cbytes,
// little-endian), then unless the chunk is a plain copy, one int32 start
// offset per block and, for each block, one or typesize "splits", each an
// int32 compressed size and that many bytes (stored raw when the size
// equals the split's uncompressed size). Flags: bit 0 byte shuffle, bit 1
// plain copy, bit 2 bit shuffle, bit 4 blocks not split, bits 5-7 the
// compressor (0 blosclz, 1 lz4/lz4hc, 2 snappy, 3 zlib, 4 zstd).

const (
	bloscHeader     = 16
	bloscShuffle    = 0x1
	bloscMemcpy     = 0x2
	bloscBitShuffle = 0x4
	bloscDontSplit  = 0x10
	bloscMaxSplits  = 16
	bloscMinBuffer  = 128
)

var bloscCompressors = map[string]int{"blosclz": 0, "lz4": 1, "lz4hc": 1, "snappy": 2, "zlib": 3, "zstd": 4}

// bloscCodec is v3 "blosc" and v2 "blosc".
type bloscCodec struct {
	cname     string
	clevel    int
	shuffle   int // 0 none, 1 byte, 2 bit
	typesize  int
	blocksize int
	zstd      zstdImpl // nil: the one ZstdEnv picks
	lz4       lz4Impl  // nil: the one LZ4Env picks
}

func newBlosc(cfg map[string]any, es int, v3 bool) (bloscCodec, error) {
	c := bloscCodec{typesize: es}
	var err error
	if c.cname, err = cfgString(cfg, "cname", "lz4"); err != nil {
		return c, err
	}
	if _, ok := bloscCompressors[c.cname]; !ok {
		return c, fmt.Errorf("%w: blosc compressor %q", ErrUnsupportedCodec, c.cname)
	}
	switch c.cname {
	case "zstd":
		if _, err := zstdNow(); err != nil {
			return c, err
		}
	case "zlib":
		if _, err := deflateNow(); err != nil {
			return c, err
		}
	}
	if c.clevel, err = cfgNumber(cfg, "clevel", 5); err != nil {
		return c, err
	}
	if c.blocksize, err = cfgNumber(cfg, "blocksize", 0); err != nil {
		return c, err
	}
	if ts, err := cfgNumber(cfg, "typesize", es); err == nil && ts > 0 {
		c.typesize = ts
	}
	if v3 {
		s, err := cfgString(cfg, "shuffle", "noshuffle")
		if err != nil {
			return c, err
		}
		switch s {
		case "noshuffle":
		case "shuffle":
			c.shuffle = 1
		case "bitshuffle":
			c.shuffle = 2
		default:
			return c, fmt.Errorf("%w: blosc shuffle %q", ErrInvalidMetadata, s)
		}
	} else {
		if c.shuffle, err = cfgNumber(cfg, "shuffle", 1); err != nil {
			return c, err
		}
		if c.shuffle == -1 { // AUTOSHUFFLE: bit shuffle for bytes, else byte shuffle
			c.shuffle = 1
			if es == 1 {
				c.shuffle = 2
			}
		}
		if c.shuffle < 0 || c.shuffle > 2 {
			return c, fmt.Errorf("%w: blosc shuffle %d", ErrInvalidMetadata, c.shuffle)
		}
	}
	return c, nil
}

func bloscErr(format string, a ...any) error {
	return fmt.Errorf("%w: blosc: %s", ErrCorruptChunk, fmt.Sprintf(format, a...))
}

// decode decompresses one Blosc 1 chunk.
func (c bloscCodec) decode(src, dst []byte, limit int) ([]byte, error) {
	h, err := parseBlosc(src, limit)
	if err != nil {
		return nil, err
	}
	if cap(dst) < h.nbytes {
		dst = make([]byte, h.nbytes)
	}
	dst = dst[:h.nbytes]
	return dst, c.decodeTo(h, runList{buf: dst, runs: []int{0, h.nbytes}, n: h.nbytes})
}

// decodeRuns is decode of src into the runs of dst, one after the other
// (a chunk's rows in the region read), which must hold the chunk's
// bytes exactly: byte-shuffled blocks are unshuffled straight into them,
// others decoded into scratch and copied, not the chunk decoded whole
// into a buffer of its own first.
func (c bloscCodec) decodeRuns(src []byte, dst runList) error {
	h, err := parseBlosc(src, dst.n)
	if err != nil {
		return err
	}
	if h.nbytes != dst.n {
		return bloscErr("%d bytes for a chunk of %d", h.nbytes, dst.n)
	}
	return c.decodeTo(h, dst)
}

// bloscChunk is a parsed Blosc 1 header and the chunk it heads.
type bloscChunk struct {
	src                         []byte // the chunk, cut to its compressed size
	flags                       byte
	typesize, nbytes, blocksize int
	format, nblocks             int
}

// parseBlosc checks a Blosc 1 header against the chunk it heads and a
// limit on the decoded size.
func parseBlosc(src []byte, limit int) (bloscChunk, error) {
	if len(src) < bloscHeader {
		return bloscChunk{}, bloscErr("%d bytes is shorter than the header", len(src))
	}
	version, flags, typesize := src[0], src[2], int(src[3])
	nbytes := int(binary.LittleEndian.Uint32(src[4:]))
	blocksize := int(binary.LittleEndian.Uint32(src[8:]))
	cbytes := int(binary.LittleEndian.Uint32(src[12:]))
	if version == 0 || version > 2 {
		return bloscChunk{}, fmt.Errorf("%w: blosc format version %d", ErrUnsupportedCodec, version)
	}
	if nbytes > limit || nbytes < 0 {
		return bloscChunk{}, bloscErr("%d bytes exceed the limit %d", nbytes, limit)
	}
	if cbytes > len(src) || cbytes < bloscHeader {
		return bloscChunk{}, bloscErr("compressed size %d, buffer %d", cbytes, len(src))
	}
	h := bloscChunk{src: src[:cbytes], flags: flags, typesize: typesize, nbytes: nbytes, blocksize: blocksize}
	if nbytes == 0 {
		return h, nil
	}
	if flags&bloscMemcpy != 0 {
		if cbytes != nbytes+bloscHeader {
			return bloscChunk{}, bloscErr("plain copy of %d bytes in %d", nbytes, cbytes)
		}
		return h, nil
	}
	if typesize == 0 || blocksize <= 0 || blocksize > nbytes {
		return bloscChunk{}, bloscErr("typesize %d, blocksize %d, nbytes %d", typesize, blocksize, nbytes)
	}
	h.format = int(flags >> 5)
	if h.format == 2 || h.format > 4 {
		name := map[int]string{2: "snappy"}[h.format]
		return bloscChunk{}, fmt.Errorf("%w: blosc compressor %q (format %d)", ErrUnsupportedCodec, name, h.format)
	}
	h.nblocks = (nbytes + blocksize - 1) / blocksize
	if bloscHeader+4*h.nblocks > cbytes {
		return bloscChunk{}, bloscErr("%d blocks do not fit in %d bytes", h.nblocks, cbytes)
	}
	return h, nil
}

// decodeTo decodes the parsed chunk h into dst's runs, which hold
// exactly its bytes.
func (c bloscCodec) decodeTo(h bloscChunk, dst runList) error {
	var at runCursor
	if h.nbytes == 0 {
		return nil
	}
	if h.flags&bloscMemcpy != 0 {
		at.next(dst, h.nbytes, func(off int, part []byte) { copy(part, h.src[bloscHeader+off:]) })
		return nil
	}
	sd, err := c.splitDecoder(h)
	if err != nil {
		return err
	}
	// A block is decoded into pooled scratch, then unshuffled: a new one
	// per chunk (the whole chunk, for Blosc's default block size) was a
	// zeroed, page-faulted megabyte of garbage per chunk, and a read of
	// 1 GiB ran a garbage collection with mark assists. A block that
	// spans runs is unshuffled into them (whole elements), or decoded
	// whole into more scratch and copied.
	one := len(dst.runs) == 2
	ts := h.typesize
	inPlace := h.flags&bloscShuffle != 0 && ts > 1 && dst.splits(h.blocksize, ts)
	pt := getBuf(h.blocksize)
	defer putBuf(pt)
	tmp := *pt
	var whole []byte
	if !one && !inPlace {
		pw := getBuf(h.blocksize)
		defer putBuf(pw)
		whole = *pw
	}
	for j := 0; j < h.nblocks; j++ {
		start, bsize, leftover := h.block(j)
		switch {
		case one:
			base := dst.runs[0] + j*h.blocksize
			err = sd.block(h.src, start, h.flags, h.format, ts, bsize, leftover, dst.buf[base:base+bsize], tmp[:bsize])
		case inPlace:
			if err = sd.splits(h.src, start, h.flags, h.format, ts, bsize, leftover, tmp[:bsize]); err == nil {
				at.next(dst, bsize, func(off int, part []byte) { unshufflePlanes(part, tmp[:bsize], bsize/ts, off/ts, ts) })
			}
		default:
			if err = sd.block(h.src, start, h.flags, h.format, ts, bsize, leftover, whole[:bsize], tmp[:bsize]); err == nil {
				at.next(dst, bsize, func(off int, part []byte) { copy(part, whole[off:]) })
			}
		}
		if err != nil {
			return fmt.Errorf("block %d: %w", j, err)
		}
	}
	return nil
}

// block returns where block j's splits start in h.src, its size and
// whether it is the chunk's shorter last block.
func (h bloscChunk) block(j int) (start, bsize int, leftover bool) {
	bsize = h.blocksize
	leftover = j == h.nblocks-1 && h.nbytes%h.blocksize != 0
	if leftover {
		bsize = h.nbytes % h.blocksize
	}
	return int(binary.LittleEndian.Uint32(h.src[bloscHeader+4*j:])), bsize, leftover
}

// splitDecoder returns a decoder of h's splits.
func (c bloscCodec) splitDecoder(h bloscChunk) (sd splitDecoder, err error) {
	switch h.format {
	case 3:
		sd.nativeZlib, err = deflateNow()
	case 4:
		sd.zstd, err = zstdOr(c.zstd)
	}
	return sd, err
}

// shuffled is how a Blosc chunk left byte-shuffled (decodeShuffled) is
// to be unshuffled: blocks of blocksize bytes of typesize-byte elements.
// A zero typesize means the chunk is decoded, nothing left to undo.
type shuffled struct{ blocksize, typesize int }

// undo unshuffles b, a chunk decodeShuffled left shuffled, in place on
// the CPU.
func (sh shuffled) undo(b []byte) {
	pt := getBuf(sh.blocksize)
	defer putBuf(pt)
	for off := 0; off < len(b); off += sh.blocksize {
		blk := b[off:min(off+sh.blocksize, len(b))]
		tmp := (*pt)[:len(blk)]
		copy(tmp, blk)
		unshuffle(blk, tmp, sh.typesize)
	}
}

// decodeShuffled decodes the Blosc chunk src into dst, which must hold
// exactly its bytes, leaving byte-shuffled blocks as they are for the
// GPU to unshuffle on their way to device memory (sh, the chunk's
// blocks and type size), where it costs the CPU nothing (device reads
// ran 1.08-1.10x faster than with the CPU's AVX2 unshuffle). A chunk
// not byte-shuffled is decoded whole (sh zero).
func (c bloscCodec) decodeShuffled(src, dst []byte) (sh shuffled, err error) {
	h, err := parseBlosc(src, len(dst))
	if err != nil {
		return sh, err
	}
	if h.nbytes != len(dst) {
		return sh, bloscErr("%d bytes for a chunk of %d", h.nbytes, len(dst))
	}
	if h.nbytes == 0 || h.flags&bloscMemcpy != 0 || h.flags&bloscShuffle == 0 || h.typesize <= 1 {
		return sh, c.decodeTo(h, runList{buf: dst, runs: []int{0, len(dst)}, n: len(dst)})
	}
	sd, err := c.splitDecoder(h)
	if err != nil {
		return sh, err
	}
	for j := 0; j < h.nblocks; j++ {
		start, bsize, leftover := h.block(j)
		if err := sd.splits(h.src, start, h.flags, h.format, h.typesize, bsize, leftover, dst[j*h.blocksize:j*h.blocksize+bsize]); err != nil {
			return sh, fmt.Errorf("block %d: %w", j, err)
		}
	}
	return shuffled{blocksize: h.blocksize, typesize: h.typesize}, nil
}

// splitDecoder decodes the splits of one chunk's blocks, keeping what one
// split's decoding set up for the next: a chunk may hold as many blocks
// as 4-byte offsets fit in it, all pointing at one split, and a new zlib
// reader per split made a 262 KB chunk cost 2.3 GB of allocations.
type splitDecoder struct {
	zr         io.ReadCloser // the zlib reader, reset for each split
	nativeZlib bool          // zlib splits decoded by libdeflate (DeflateEnv)
	zstd       zstdImpl      // the zstd implementation, for zstd chunks
}

// block decodes the block at src[start:] into out.
func (sd *splitDecoder) block(src []byte, start int, flags byte, format, typesize, bsize int, leftover bool, out, tmp []byte) error {
	doShuffle := flags&bloscShuffle != 0 && typesize > 1
	doBit := flags&bloscBitShuffle != 0 && bsize >= typesize
	target := out
	if doShuffle || doBit {
		target = tmp
	}
	if err := sd.splits(src, start, flags, format, typesize, bsize, leftover, target); err != nil {
		return err
	}
	switch {
	case doShuffle:
		unshuffle(out, tmp, typesize)
	case doBit:
		bitUnshuffle(out, tmp, typesize)
	}
	return nil
}

// splits decompresses the splits of the block at src[start:] into
// target, the block as stored (still shuffled, where it is).
func (sd *splitDecoder) splits(src []byte, start int, flags byte, format, typesize, bsize int, leftover bool, target []byte) error {
	nsplits := 1
	if flags&bloscDontSplit == 0 && typesize <= bloscMaxSplits && bsize/typesize >= bloscMinBuffer && !leftover {
		nsplits = typesize
	}
	neblock := bsize / nsplits
	// Splits that do not cover the block (a header whose block size is
	// not a multiple of the type size) leave the rest zero, not what
	// pooled scratch held before.
	clear(target[nsplits*neblock:])
	off := start
	for s := 0; s < nsplits; s++ {
		if off < 0 || off+4 > len(src) {
			return bloscErr("split offset %d outside %d bytes", off, len(src))
		}
		csize := int(int32(binary.LittleEndian.Uint32(src[off:])))
		off += 4
		if csize < 0 || csize > len(src)-off {
			return bloscErr("split of %d bytes at %d outside %d", csize, off, len(src))
		}
		part := target[s*neblock : (s+1)*neblock]
		in := src[off : off+csize]
		off += csize
		if csize == neblock {
			copy(part, in)
			continue
		}
		if err := sd.decompress(format, in, part); err != nil {
			return err
		}
	}
	return nil
}

// decompress fills out exactly from the compressed split in.
func (sd *splitDecoder) decompress(format int, in, out []byte) error {
	var n int
	var err error
	switch format {
	case 0:
		n, err = blosclzDecompress(in, out)
	case 1:
		n, err = lz4.UncompressBlock(in, out)
	case 3:
		n, err = sd.zlib(in, out)
	case 4:
		n, err = zstdSplit(sd.zstd, in, out)
	case 2:
		return fmt.Errorf("%w: blosc compressor snappy", ErrUnsupportedCodec)
	default:
		return fmt.Errorf("%w: blosc compressor format %d", ErrUnsupportedCodec, format)
	}
	if err != nil {
		return bloscErr("%v", err)
	}
	if n != len(out) {
		return bloscErr("split decoded to %d bytes, want %d", n, len(out))
	}
	return nil
}

// zlib decodes the zlib stream in into out, reusing sd's reader, and
// returns the bytes it filled; a stream longer than out is an error.
func (sd *splitDecoder) zlib(in, out []byte) (int, error) {
	if sd.nativeZlib {
		b, err := zlibNative(in, out[:0:len(out)], len(out))
		return len(b), err
	}
	var err error
	if sd.zr, err = zlibOn(sd.zr, in); err != nil {
		return 0, err
	}
	b, err := readLimited(sd.zr, out[:0:len(out)], len(out), "zlib")
	return len(b), err
}

// zstdSplit decodes the zstd frame in into out. Blosc writes each split
// as one frame with its content size (ZSTD_compressCCtx); a frame
// without one is refused: streaming it needs a decoder per split, and a
// chunk of many blocks all pointing at one such split made a 262 KB
// chunk take a minute.
func zstdSplit(z zstdImpl, in, out []byte) (int, error) {
	var h zstd.Header
	if err := h.Decode(in); err != nil {
		return 0, err
	}
	if !h.HasFCS || h.FrameContentSize != uint64(len(out)) {
		return 0, fmt.Errorf("zstd split of %d bytes declares %d (content size given: %v)", len(out), h.FrameContentSize, h.HasFCS)
	}
	b, err := z.decodeAll(in, out[:0:len(out)])
	if err != nil {
		return 0, err
	}
	if len(b) > 0 && &b[0] != &out[0] {
		copy(out, b)
	}
	return len(b), nil
}

const lo32 = 1<<32 - 1

// byteTranspose4 transposes two 4x4 byte matrices at once: the low and the
// high four bytes of x0..x3 are the rows of each (byte j of row k, j
// counted from the least significant). It returns their columns: the
// result k holds column k of each, low and high. Undone by itself.
func byteTranspose4(x0, x1, x2, x3 uint64) (y0, y1, y2, y3 uint64) {
	const m8, m16 = 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF
	// Swap the off-diagonal bytes of each 2x2 block of rows 0-1 and 2-3,
	x0, x1 = swapBlocks(x0, x1, 8, m8)
	x2, x3 = swapBlocks(x2, x3, 8, m8)
	// then the off-diagonal 2x2 blocks of the two row pairs.
	x0, x2 = swapBlocks(x0, x2, 16, m16)
	x1, x3 = swapBlocks(x1, x3, 16, m16)
	return x0, x1, x2, x3
}

// byteTranspose8 transposes an 8x8 byte matrix whose rows are x0..x7
// (byte j of row k counted from the least significant): it returns its
// columns. Undone by itself.
func byteTranspose8(x0, x1, x2, x3, x4, x5, x6, x7 uint64) (y0, y1, y2, y3, y4, y5, y6, y7 uint64) {
	// Two byteTranspose4 of the 4x4 blocks of bytes, then the
	// off-diagonal 4-byte blocks swapped between rows k and k+4.
	x0, x1, x2, x3 = byteTranspose4(x0, x1, x2, x3)
	x4, x5, x6, x7 = byteTranspose4(x4, x5, x6, x7)
	x0, x4 = swapBlocks(x0, x4, 32, lo32)
	x1, x5 = swapBlocks(x1, x5, 32, lo32)
	x2, x6 = swapBlocks(x2, x6, 32, lo32)
	x3, x7 = swapBlocks(x3, x7, 32, lo32)
	return x0, x1, x2, x3, x4, x5, x6, x7
}

// swapBlocks exchanges the blocks of shift bits that mask selects in b
// with those shift bits above them in a: one step of a transpose.
func swapBlocks(a, b uint64, shift uint, mask uint64) (uint64, uint64) {
	t := (a>>shift ^ b) & mask
	return a ^ t<<shift, b ^ t
}

// unshuffle undoes a byte shuffle: src holds byte k of every element, then
// byte k+1; trailing bytes that do not fill an element are unshuffled.
func unshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	unshufflePlanes(dst[:n*ts], src, n, 0, ts)
	copy(dst[n*ts:], src[n*ts:])
}

// unshufflePlanes undoes the byte shuffle of elements [i0, i0+len(dst)/ts)
// of a shuffled block of n elements in src (planes of n bytes) into dst:
// byte k of element i is src[k*n+i0+i]. A block can so be unshuffled
// into pieces that lie apart (a chunk's rows in a region).
func unshufflePlanes(dst, src []byte, n, i0, ts int) {
	m := len(dst) / ts
	plane := func(k int) []byte { return src[k*n+i0 : k*n+i0+m] }
	switch ts {
	case 2:
		r0, r1, d := plane(0), plane(1), dst[:2*m]
		for i := interleave2(d, r0, r1); i < m; i++ {
			binary.LittleEndian.PutUint16(d[2*i:], uint16(r0[i])|uint16(r1[i])<<8)
		}
	case 4:
		r0, r1, r2, r3, d := plane(0), plane(1), plane(2), plane(3), dst[:4*m]
		i := interleave4(d, r0, r1, r2, r3)
		for ; i+8 <= m; i += 8 { // eight elements at once: two 4x4 byte transposes
			le := binary.LittleEndian
			e0, e1, e2, e3 := byteTranspose4(le.Uint64(r0[i:]), le.Uint64(r1[i:]), le.Uint64(r2[i:]), le.Uint64(r3[i:]))
			o := d[4*i : 4*i+32]
			le.PutUint64(o, e0&lo32|e1<<32)
			le.PutUint64(o[8:], e2&lo32|e3<<32)
			le.PutUint64(o[16:], e0>>32|e1&^lo32)
			le.PutUint64(o[24:], e2>>32|e3&^lo32)
		}
		for ; i < m; i++ {
			binary.LittleEndian.PutUint32(d[4*i:], uint32(r0[i])|uint32(r1[i])<<8|uint32(r2[i])<<16|uint32(r3[i])<<24)
		}
	case 8:
		r0, r1, r2, r3 := plane(0), plane(1), plane(2), plane(3)
		r4, r5, r6, r7, d := plane(4), plane(5), plane(6), plane(7), dst[:8*m]
		i := interleave8(d, src, n, i0, m)
		for ; i+8 <= m; i += 8 { // eight elements at once: an 8x8 byte transpose
			le := binary.LittleEndian
			y0, y1, y2, y3, y4, y5, y6, y7 := byteTranspose8(le.Uint64(r0[i:]), le.Uint64(r1[i:]), le.Uint64(r2[i:]), le.Uint64(r3[i:]),
				le.Uint64(r4[i:]), le.Uint64(r5[i:]), le.Uint64(r6[i:]), le.Uint64(r7[i:]))
			o := d[8*i : 8*i+64]
			le.PutUint64(o, y0)
			le.PutUint64(o[8:], y1)
			le.PutUint64(o[16:], y2)
			le.PutUint64(o[24:], y3)
			le.PutUint64(o[32:], y4)
			le.PutUint64(o[40:], y5)
			le.PutUint64(o[48:], y6)
			le.PutUint64(o[56:], y7)
		}
		for ; i < m; i++ {
			lo := uint64(r0[i]) | uint64(r1[i])<<8 | uint64(r2[i])<<16 | uint64(r3[i])<<24
			hi := uint64(r4[i]) | uint64(r5[i])<<8 | uint64(r6[i])<<16 | uint64(r7[i])<<24
			binary.LittleEndian.PutUint64(d[8*i:], lo|hi<<32)
		}
	default:
		for k := 0; k < ts; k++ {
			row := plane(k)
			for i, b := range row {
				dst[i*ts+k] = b
			}
		}
	}
}

// shuffle byte-shuffles src into dst: byte k of every element, then byte
// k+1; trailing bytes that do not fill an element are copied.
func shuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	shufflePlanes(dst, n, 0, src[:n*ts], ts)
	copy(dst[n*ts:], src[n*ts:])
}

// shufflePlanes byte-shuffles the whole elements of src into elements
// [i0, i0+len(src)/ts) of a shuffled block of n elements in dst (planes
// of n bytes): byte k of element i goes to dst[k*n+i0+i]. A block can so
// be shuffled from pieces that lie apart (a chunk's rows in a region).
func shufflePlanes(dst []byte, n, i0 int, src []byte, ts int) {
	m := len(src) / ts
	plane := func(k int) []byte { return dst[k*n+i0 : k*n+i0+m] }
	switch ts {
	case 2:
		r0, r1, s := plane(0), plane(1), src[:2*m]
		for i := deinterleave2(r0, r1, s); i < m; i++ {
			v := binary.LittleEndian.Uint16(s[2*i:])
			r0[i], r1[i] = byte(v), byte(v>>8)
		}
	case 4:
		r0, r1, r2, r3, s := plane(0), plane(1), plane(2), plane(3), src[:4*m]
		i := deinterleave4(r0, r1, r2, r3, s)
		for ; i+8 <= m; i += 8 { // the transposes of unshuffle, the other way
			le := binary.LittleEndian
			in := s[4*i : 4*i+32]
			a, b, c, d := le.Uint64(in), le.Uint64(in[8:]), le.Uint64(in[16:]), le.Uint64(in[24:])
			// Elements 0-3 in the low halves, 4-7 in the high ones.
			b0, b1, b2, b3 := byteTranspose4(a&lo32|c<<32, a>>32|c&^lo32, b&lo32|d<<32, b>>32|d&^lo32)
			le.PutUint64(r0[i:], b0)
			le.PutUint64(r1[i:], b1)
			le.PutUint64(r2[i:], b2)
			le.PutUint64(r3[i:], b3)
		}
		for ; i < m; i++ {
			v := binary.LittleEndian.Uint32(s[4*i:])
			r0[i], r1[i], r2[i], r3[i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		}
	case 8:
		r0, r1, r2, r3 := plane(0), plane(1), plane(2), plane(3)
		r4, r5, r6, r7, s := plane(4), plane(5), plane(6), plane(7), src[:8*m]
		i := deinterleave8(dst, n, i0, s, m)
		for ; i+8 <= m; i += 8 { // the transpose of unshuffle, the other way
			le := binary.LittleEndian
			in := s[8*i : 8*i+64]
			y0, y1, y2, y3, y4, y5, y6, y7 := byteTranspose8(le.Uint64(in), le.Uint64(in[8:]), le.Uint64(in[16:]), le.Uint64(in[24:]),
				le.Uint64(in[32:]), le.Uint64(in[40:]), le.Uint64(in[48:]), le.Uint64(in[56:]))
			le.PutUint64(r0[i:], y0)
			le.PutUint64(r1[i:], y1)
			le.PutUint64(r2[i:], y2)
			le.PutUint64(r3[i:], y3)
			le.PutUint64(r4[i:], y4)
			le.PutUint64(r5[i:], y5)
			le.PutUint64(r6[i:], y6)
			le.PutUint64(r7[i:], y7)
		}
		for ; i < m; i++ {
			v := binary.LittleEndian.Uint64(s[8*i:])
			r0[i], r1[i], r2[i], r3[i] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
			r4[i], r5[i], r6[i], r7[i] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		}
	default:
		for k := 0; k < ts; k++ {
			row := plane(k)
			for i := range row {
				row[i] = src[i*ts+k]
			}
		}
	}
}

// transpose8 transposes the 8x8 bit matrix whose row j is byte j of x
// (little-endian) and whose column i is bit i: bit i of byte j becomes
// bit j of byte i. It is its own inverse.
func transpose8(x uint64) uint64 {
	t := (x ^ x>>7) & 0x00AA00AA00AA00AA
	x ^= t ^ t<<7
	t = (x ^ x>>14) & 0x0000CCCC0000CCCC
	x ^= t ^ t<<14
	t = (x ^ x>>28) & 0x00000000F0F0F0F0
	return x ^ t ^ t<<28
}

// bitUnshuffle undoes Blosc's bit shuffle: for n elements (a multiple of
// 8), bit row r = 8*byte+bit holds that bit of that byte of every
// element, element e at bit e%8 of row byte e/8. Blocks whose element
// count is not a multiple of 8 are stored as they are. Each byte of
// eight consecutive elements is one 8x8 bit transpose of a byte from
// each of eight rows.
func bitUnshuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	rowLen := n / 8
	for b := 0; b < ts; b++ {
		plane := src[b*n : (b+1)*n] // the 8 rows of byte b
		for m := 0; m < rowLen; m++ {
			var x uint64
			for bit := 0; bit < 8; bit++ {
				x |= uint64(plane[bit*rowLen+m]) << (8 * bit)
			}
			x = transpose8(x)
			out := dst[8*m*ts:]
			for i := 0; i < 8; i++ {
				out[i*ts+b] = byte(x >> (8 * i))
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

func bitShuffle(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	rowLen := n / 8
	for b := 0; b < ts; b++ {
		plane := dst[b*n : (b+1)*n]
		for m := 0; m < rowLen; m++ {
			in := src[8*m*ts:]
			var x uint64
			for i := 0; i < 8; i++ {
				x |= uint64(in[i*ts+b]) << (8 * i)
			}
			x = transpose8(x)
			for bit := 0; bit < 8; bit++ {
				plane[bit*rowLen+m] = byte(x >> (8 * bit))
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// writable fails for the compressors that have no encoder here: blosclz
// and snappy.
func (c bloscCodec) writable() error {
	if c.cname == "blosclz" || c.cname == "snappy" {
		return fmt.Errorf("%w: writing blosc with compressor %q (reading is supported)", ErrUnsupportedCodec, c.cname)
	}
	if c.clevel < 0 || c.clevel > 9 {
		// c-blosc refuses to compress at such a level too.
		return fmt.Errorf("%w: writing blosc at clevel %d (Blosc takes 0 to 9; reading is supported)", ErrInvalidMetadata, c.clevel)
	}
	return nil
}

// encode writes a Blosc 1 chunk with unsplit blocks.
func (c bloscCodec) encode(src, dst []byte) ([]byte, error) {
	return c.encodeRuns(runList{buf: src, runs: []int{0, len(src)}, n: len(src)}, dst)
}

// typeSize is the element size the shuffles work with.
func (c bloscCodec) typeSize() int {
	if c.typesize <= 0 || c.typesize > 255 {
		return 1
	}
	return c.typesize
}

// encodeRuns is encode of the bytes of src's runs, one after the other.
// A block is shuffled from the runs where they lie (a chunk's rows in
// the region written), not from a copy of the chunk gathered first,
// where blocks hold whole elements of the runs (else they are gathered).
func (c bloscCodec) encodeRuns(src runList, dst []byte) ([]byte, error) {
	format := bloscCompressors[c.cname]
	if err := c.writable(); err != nil {
		return nil, err
	}
	ts := c.typeSize()
	nbytes := src.n
	bs := c.blocksize
	if bs <= 0 {
		bs = 256 << 10
	}
	bs = min(bs, nbytes)
	if bs > ts {
		bs -= bs % ts
	}
	out := outBuf(dst, bloscHeader+nbytes/2)[:bloscHeader] // every byte set below
	out[0], out[1], out[3] = 2, 1, byte(ts)
	flags := byte(bloscDontSplit | format<<5)
	if c.shuffle == 1 && ts > 1 {
		flags |= bloscShuffle
	}
	if c.shuffle == 2 {
		flags |= bloscBitShuffle
	}
	binary.LittleEndian.PutUint32(out[4:], uint32(nbytes))
	binary.LittleEndian.PutUint32(out[8:], uint32(bs))
	if nbytes == 0 || c.clevel <= 0 {
		// Level 0 stores the bytes as they are, as Blosc does.
		out = src.appendTo(out)
		out[2] = flags | bloscMemcpy
		binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
		return out, nil
	}
	if len(src.runs) > 2 && (flags&bloscBitShuffle != 0 || !src.splits(bs, ts)) {
		src = runList{buf: src.appendTo(make([]byte, 0, nbytes)), runs: []int{0, nbytes}, n: nbytes}
	}
	nblocks := (nbytes + bs - 1) / bs
	out = append(out, make([]byte, 4*nblocks)...)
	// The shuffled block and its compressed form are scratch, pooled
	// (new ones were half a megabyte of zeroed garbage per chunk).
	pt, pc := getBuf(bs), getBuf(lz4.CompressBlockBound(bs)+64)
	defer putBuf(pt)
	defer putBuf(pc)
	tmp, comp := *pt, *pc
	at := runCursor{ahead: true} // rows of a region: see prefetchAhead
	for j := 0; j < nblocks; j++ {
		blen := min(bs, nbytes-j*bs)
		in := c.blockInput(&at, src, j*bs, blen, flags, ts, tmp[:blen])
		binary.LittleEndian.PutUint32(out[bloscHeader+4*j:], uint32(len(out)))
		out = append(out, 0, 0, 0, 0) // the block's stored size, set below
		// The block is compressed straight into out where out has the
		// room for its bound (a copy of every block saved), else into
		// comp.
		buf, room := comp, out[len(out):cap(out)]
		if len(room) >= len(comp) {
			buf = room
		}
		z, err := c.compress(format, in, buf)
		if err != nil {
			return nil, err
		}
		if len(z) == 0 || len(z) >= len(in) {
			z = in // stored raw: its size equals the uncompressed size
		}
		binary.LittleEndian.PutUint32(out[len(out)-4:], uint32(len(z)))
		if len(room) > 0 && &z[0] == &room[0] {
			out = out[:len(out)+len(z)]
		} else {
			out = append(out, z...)
		}
	}
	if len(out) >= nbytes+bloscHeader {
		// Plain copy is smaller.
		out = src.appendTo(out[:bloscHeader])
		flags |= bloscMemcpy
	}
	out[2] = flags
	binary.LittleEndian.PutUint32(out[12:], uint32(len(out)))
	return out, nil
}

// blockInput returns the blen bytes of src from start (where at stands),
// as a block is compressed: shuffled into tmp, or where no shuffle
// applies the bytes themselves (gathered into tmp when they span runs).
func (c bloscCodec) blockInput(at *runCursor, src runList, start, blen int, flags byte, ts int, tmp []byte) []byte {
	if len(src.runs) == 2 { // one run: the block lies whole in it
		block := src.buf[src.runs[0]+start : src.runs[0]+start+blen]
		switch {
		case flags&bloscShuffle != 0:
			shuffle(tmp, block, ts)
		case flags&bloscBitShuffle != 0 && len(block) >= ts:
			bitShuffle(tmp, block, ts)
		default:
			return block
		}
		return tmp
	}
	at.next(src, blen, func(off int, part []byte) {
		if flags&bloscShuffle != 0 {
			shufflePlanes(tmp, blen/ts, off/ts, part, ts)
		} else {
			copy(tmp[off:], part)
		}
	})
	return tmp
}

// compress compresses one block in format, into buf's memory where it
// fits.
func (c bloscCodec) compress(format int, in, buf []byte) ([]byte, error) {
	switch format {
	case 1:
		var n int
		var err error
		if c.cname == "lz4hc" {
			n, err = lz4.CompressBlockHC(in, buf, lz4hcDepth(c.clevel), nil, nil)
		} else {
			l, lerr := lz4Or(c.lz4)
			if lerr != nil {
				return nil, lerr
			}
			n, err = lz4Fast(l, in, buf, c.clevel)
		}
		if err != nil {
			return nil, nil // incompressible: caller stores raw
		}
		return buf[:n], nil
	case 3:
		return zlibCodec{level: min(max(c.clevel, 0), 9)}.encode(in, buf)
	case 4:
		return zstdCodec{level: bloscZstdLevel(c.clevel), impl: c.zstd}.encode(in, buf)
	}
	return nil, fmt.Errorf("%w: blosc compressor %q", ErrUnsupportedCodec, c.cname)
}

// lz4Fast compresses in into buf with l as Blosc's "lz4" does at level
// clevel: LZ4's fast algorithm with an acceleration of 10 - clevel (1 at
// level 9 and above), which is c-blosc's.
func lz4Fast(l lz4Impl, in, buf []byte, clevel int) (int, error) {
	return l.compressFast(buf, in, max(10-clevel, 1))
}

// lz4hcDepth is how many earlier matches Blosc's "lz4hc" at level
// clevel (1-9) tries at each position: c-blosc hands clevel to LZ4's
// high-compression mode as its level, which tries 2 at levels 1 and 2
// and twice as many at each level from 4 at level 3 (256 at 9). As the
// depth of pierrec/lz4's search, clevel itself tried 5 at level 5, not
// 16: chunks 19% larger than c-blosc's, 14% at 16 (a smooth field plus
// noise, byte-shuffled float32), still at 1.7x c-blosc's speed.
func lz4hcDepth(clevel int) lz4.CompressionLevel {
	clevel = min(max(clevel, 1), 9)
	if clevel <= 2 {
		return 2
	}
	return lz4.CompressionLevel(1 << (clevel - 1))
}

// bloscZstdLevel is the zstd level of Blosc's "zstd" at level clevel
// (1-9), as c-blosc sets it: 2 clevel - 1, and zstd's highest (22) at 9.
func bloscZstdLevel(clevel int) int {
	if clevel >= 9 {
		return 22
	}
	return max(2*clevel-1, 1)
}

// blosclzDecompress decodes a BloscLZ stream (a FastLZ-style LZ77 format)
// into out and returns the bytes produced. A control byte below 32 starts
// a literal run of ctrl+1 bytes; otherwise its top 3 bits are a match
// length-2 (7 means more length bytes follow, each added, until one is not
// 255) and its low 5 bits the high bits of the distance, whose low byte
// follows; a low byte of 255 with high bits 31 means a 16-bit distance
// follows, counted from 8191.
func blosclzDecompress(in, out []byte) (int, error) {
	if len(in) == 0 {
		return 0, nil
	}
	bad := func(what string) (int, error) { return 0, bloscErr("blosclz: %s", what) }
	ip, op := 0, 0
	ctrl := int(in[ip] & 31)
	ip++
	for {
		if ctrl >= 32 {
			length := ctrl>>5 - 1
			ofs := (ctrl & 31) << 8
			if length == 6 {
				for {
					if ip+1 >= len(in) {
						return bad("truncated match length")
					}
					code := int(in[ip])
					ip++
					length += code
					if code != 255 {
						break
					}
				}
			} else if ip+1 >= len(in) {
				return bad("truncated match")
			}
			code := int(in[ip])
			ip++
			length += 3
			dist := ofs + code
			if code == 255 && ofs == 31<<8 {
				if ip+1 >= len(in) {
					return bad("truncated far distance")
				}
				dist = int(in[ip])<<8 | int(in[ip+1])
				dist += 8191
				ip += 2
			}
			ref := op - dist - 1
			if op+length > len(out) || ref < 0 {
				return bad("match outside the output")
			}
			for i := 0; i < length; i++ { // overlapping copies repeat bytes
				out[op+i] = out[ref+i]
			}
			op += length
			if ip >= len(in) {
				break
			}
			ctrl = int(in[ip])
			ip++
		} else {
			n := ctrl + 1
			if op+n > len(out) || ip+n > len(in) {
				return bad("literal run outside the buffers")
			}
			copy(out[op:], in[ip:ip+n])
			op += n
			ip += n
			if ip >= len(in) {
				break
			}
			ctrl = int(in[ip])
			ip++
		}
	}
	return op, nil
}
