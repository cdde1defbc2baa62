package zarr

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/pierrec/lz4/v4"

	"github.com/kvikgo/kvik/internal/liblz4"
)

// LZ4Env names the environment variable that picks the implementation
// of Blosc's "lz4" compression: "auto" (the default) is the system's
// liblz4.so.1 where it loads and is 1.7.0 or newer, else pierrec/lz4;
// "native" is liblz4, an error where it cannot be used; "go" is
// pierrec/lz4. Both write the blocks of LZ4_compress_fast, liblz4 about
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
	v, set := os.LookupEnv(LZ4Env)
	native, err := pickNative(LZ4Env, v, set, liblz4.Load)
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

// LZ4Implementation says which implementation compresses Blosc's LZ4
// blocks, as LZ4Env picks it: "native (liblz4 1.9.4, PATH)", or "go
// (pierrec/lz4)" followed by why liblz4 is not used. The error is
// LZ4Env's when its value is bad or asks for a library that cannot be
// used; every write of a Blosc-lz4 chunk fails with it then.
func LZ4Implementation() (string, error) {
	l, err := lz4Now()
	if err != nil {
		return "", err
	}
	if _, ok := l.(nativeLZ4); ok {
		return fmt.Sprintf("native (liblz4 %s, %s)", liblz4.Version(), liblz4.LibraryPath()), nil
	}
	return "go (pierrec/lz4; " + goReason(LZ4Env, liblz4.Load) + ")", nil
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
