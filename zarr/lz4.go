package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"

	"github.com/kvikgo/kvik/internal/formatkit/codecpick"
	"github.com/kvikgo/kvik/internal/liblz4"
)

// LZ4Env names the environment variable that picks the implementation
// of LZ4 compression (Blosc's "lz4", numcodecs' LZ4): "auto" (the
// default) is the system's liblz4.so.1 where it loads and is 1.7.0 or
// newer, else pierrec/lz4; "native" is liblz4, an error where it cannot
// be used; "go" is pierrec/lz4. Both write the blocks of LZ4_compress_fast, liblz4 about
// 1.3x as fast (a byte-shuffled float32 field). Decoding, and Blosc's
// "lz4hc", are pierrec/lz4's either way (its decoder is as fast). It is
// read once, at the first write of an LZ4 block; a bad value fails that
// write with kvik.ErrBadEnv.
const LZ4Env = "KVIK_LZ4"

// lz4Impl compresses a block as LZ4_compress_fast does, into dst (at
// least CompressBlockBound bytes: else 0, nil for a block that does not
// fit), at an acceleration of 1 or more.
type lz4Impl interface {
	compressFast(dst, src []byte, acceleration int) (int, error)
}

// lz4Now returns the implementation LZ4Env picks.
var lz4Now = sync.OnceValues(func() (lz4Impl, error) {
	native, err := codecpick.NativeNow(LZ4Env, liblz4.Load)
	switch {
	case err != nil:
		return nil, err
	case native:
		return nativeLZ4{}, nil
	}
	return goLZ4{}, nil
})

// lz4Or returns l, or where it is nil the implementation LZ4Env picks.
func lz4Or(l lz4Impl) (lz4Impl, error) {
	if l != nil {
		return l, nil
	}
	return lz4Now()
}

// LZ4Implementation says which implementation compresses LZ4 blocks
// (Blosc's, numcodecs'), as LZ4Env picks it: "native (liblz4 1.9.4,
// PATH)", or "go (pierrec/lz4)" followed by why liblz4 is not used.
// The error is LZ4Env's when its value is bad or asks for a library
// that cannot be used; every write of a Blosc-lz4 or LZ4 chunk fails
// with it then.
func LZ4Implementation() (string, error) {
	l, err := lz4Now()
	if err != nil {
		return "", err
	}
	if _, ok := l.(nativeLZ4); ok {
		return fmt.Sprintf("native (liblz4 %s, %s)", liblz4.Version(), liblz4.LibraryPath()), nil
	}
	return "go (pierrec/lz4; " + codecpick.GoReason(LZ4Env, liblz4.Load) + ")", nil
}

// goLZ4 is pierrec/lz4's CompressorCCompat.
type goLZ4 struct{}

// lz4Compressors hold pierrec/lz4's compressors (48 KiB of tables each),
// reused rather than made per block.
var lz4Compressors = sync.Pool{New: func() any { return new(lz4.CompressorCCompat) }}

func (goLZ4) compressFast(dst, src []byte, acceleration int) (int, error) {
	c := lz4Compressors.Get().(*lz4.CompressorCCompat)
	defer lz4Compressors.Put(c)
	c.Acceleration = acceleration
	return c.CompressBlock(src, dst)
}

// nativeLZ4 is liblz4's LZ4_compress_fast.
type nativeLZ4 struct{}

func (nativeLZ4) compressFast(dst, src []byte, acceleration int) (int, error) {
	n, err := liblz4.CompressFast(dst, src, acceleration)
	if errors.Is(err, liblz4.ErrNoRoom) {
		return 0, nil // as pierrec/lz4 says it
	}
	return n, err
}

// lz4Codec is numcodecs' LZ4 compressor (v2 "lz4", v3 "numcodecs.lz4"):
// the decoded size as a little-endian 32-bit integer, then one LZ4
// block, written as LZ4_compress_fast writes it at acceleration (1, the
// default, compresses most; LZ4Env picks liblz4 or pierrec/lz4).
type lz4Codec struct {
	acceleration int
	impl         lz4Impl // nil: LZ4Env's
}

// lz4MaxBlock is the largest block LZ4 compresses (LZ4_MAX_INPUT_SIZE);
// numcodecs' LZ4 cannot hold a larger chunk either.
const lz4MaxBlock = liblz4.MaxInput

func (c lz4Codec) encode(src, dst []byte) ([]byte, error) {
	if len(src) > lz4MaxBlock {
		return nil, fmt.Errorf("%w: lz4: a chunk of %d bytes, more than one LZ4 block holds (%d)", ErrUnsupportedCodec, len(src), lz4MaxBlock)
	}
	l, err := lz4Or(c.impl)
	if err != nil {
		return nil, err
	}
	need := 4 + lz4.CompressBlockBound(len(src))
	out := dst[:0]
	if cap(out) < need {
		out = make([]byte, need)
	}
	out = out[:need]
	binary.LittleEndian.PutUint32(out, uint32(len(src)))
	n, err := l.compressFast(out[4:], src, max(c.acceleration, 1))
	if err == nil && n == 0 {
		err = errors.New("no room in a buffer of the block's bound")
	}
	if err != nil {
		return nil, fmt.Errorf("zarr: lz4: %w", err)
	}
	return out[:4+n], nil
}

// decode checks the size header against limit before it allocates, and
// that the block decodes to exactly that size.
func (lz4Codec) decode(src, dst []byte, limit int) ([]byte, error) {
	if len(src) < 4 {
		return nil, fmt.Errorf("%w: lz4: %d bytes, shorter than the size header", ErrCorruptChunk, len(src))
	}
	size := int64(binary.LittleEndian.Uint32(src))
	if size > int64(limit) || size > lz4MaxBlock {
		return nil, fmt.Errorf("%w: lz4: a block of %d bytes exceeds %d", ErrCorruptChunk, size, min(int64(limit), lz4MaxBlock))
	}
	if size == 0 {
		// The one block of nothing, LZ4's empty token; pierrec/lz4 must
		// not see a nil destination (its decoder then dereferences nil).
		if !bytes.Equal(src[4:], []byte{0}) {
			return nil, fmt.Errorf("%w: lz4: a block of %d bytes for none", ErrCorruptChunk, len(src)-4)
		}
		return dst[:0], nil
	}
	out := dst[:0]
	if int64(cap(out)) < size {
		out = make([]byte, size)
	}
	out = out[:size]
	n, err := lz4.UncompressBlock(src[4:], out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptChunk, err) // pierrec/lz4's errors say "lz4: "
	}
	if int64(n) != size {
		return nil, fmt.Errorf("%w: lz4: %d bytes decoded, the header says %d", ErrCorruptChunk, n, size)
	}
	return out, nil
}
