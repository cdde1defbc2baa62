package zarr

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kvikgo/kvik/internal/formatkit/codecpick"
	"github.com/kvikgo/kvik/internal/libdeflate"
)

// DeflateEnv names the environment variable that picks the decoder of
// gzip and zlib chunks and of Blosc's zlib blocks: "auto" (the default)
// is the system's libdeflate.so.0 where it loads (1.5 or newer), else
// klauspost/compress; "native" is libdeflate, an error where it cannot
// be used; "go" is klauspost/compress. libdeflate decodes the chunks of a
// smooth float32 field about 3.5x as fast. Encoding is klauspost's
// either way. It is read once, at the first use.
const DeflateEnv = codecpick.DeflateEnv

// deflateNow reports whether DeflateEnv picks libdeflate.
var deflateNow = sync.OnceValues(func() (bool, error) {
	return codecpick.NativeNow(DeflateEnv, libdeflate.Load)
})

// DeflateImplementation says which implementation decodes gzip and
// zlib chunks and Blosc's zlib blocks, as DeflateEnv picks it: "native
// (libdeflate, PATH)", or "go (klauspost/compress)" followed by why
// libdeflate is not used. The error is DeflateEnv's when its value is
// bad or asks for a library that cannot be used; every gzip or zlib
// array fails with it then.
func DeflateImplementation() (string, error) {
	native, err := deflateNow()
	if err != nil {
		return "", err
	}
	if native {
		return fmt.Sprintf("native (libdeflate, %s)", libdeflate.LibraryPath()), nil
	}
	return "go (klauspost/compress; " + codecpick.GoReason(DeflateEnv, libdeflate.Load) + ")", nil
}

// gzipNative decodes src, one gzip member or several back to back and
// nothing after them, as klauspost's multistream reader does, into
// dst's memory (a new buffer where it holds less than limit bytes),
// producing at most limit bytes.
func gzipNative(src, dst []byte, limit int) ([]byte, error) {
	out := limitBuf(dst, limit)
	n := 0
	for {
		in, m, err := libdeflate.GzipDecompress(out[n:], src)
		if err == nil && in == 0 {
			err = libdeflate.BadData // a member takes 18 bytes at least
		}
		if err != nil {
			return nil, deflateError("gzip", limit, err)
		}
		if src, n = src[in:], n+m; len(src) == 0 {
			return out[:n], nil
		}
	}
}

// zlibNative decodes the zlib stream at the start of src (bytes after
// it are ignored, as klauspost's reader ignores them) as gzipNative
// decodes gzip.
func zlibNative(src, dst []byte, limit int) ([]byte, error) {
	out := limitBuf(dst, limit)
	_, n, err := libdeflate.ZlibDecompress(out, src)
	if err != nil {
		return nil, deflateError("zlib", limit, err)
	}
	return out[:n], nil
}

// limitBuf returns limit bytes of dst's memory, or of a new buffer where
// dst holds fewer (limit is the caller's bound on a chunk's size).
func limitBuf(dst []byte, limit int) []byte {
	if cap(dst) >= limit {
		return dst[:limit]
	}
	return make([]byte, limit)
}

// deflateError is a failed decode's ErrCorruptChunk, worded as
// readLimited words klauspost's failures.
func deflateError(name string, limit int, err error) error {
	if errors.Is(err, libdeflate.InsufficientSpace) {
		return fmt.Errorf("%w: %s output exceeds %d bytes", ErrCorruptChunk, name, limit)
	}
	return fmt.Errorf("%w: %s: %v", ErrCorruptChunk, name, err)
}
