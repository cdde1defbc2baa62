// Package liblz4 is a thin binding of the part of the LZ4 library's API
// (lz4.h) that kvik's codecs need: block compression with the fast
// algorithm, LZ4_compress_fast.
//
// The library, liblz4.so.1, is opened at run time on first use, with no
// cgo and no headers; KVIK_LIBLZ4_PATH names an exact path instead. A
// library older than MinVersion counts as missing. Without a usable
// library every function returns an error matching ErrNotFound, so
// callers can fall back to a Go implementation (pierrec/lz4, whose
// CompressorCCompat writes the blocks LZ4_compress_fast writes, at about
// three quarters of its speed).
package liblz4

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/kvikgo/kvik/internal/dl"
)

// LibraryEnv names the environment variable that, when set, holds the
// exact path of the LZ4 library to load instead of searching for
// liblz4.so.1.
const LibraryEnv = "KVIK_LIBLZ4_PATH"

// MinVersion is the oldest library accepted, as LZ4_versionNumber gives
// it (major*10000 + minor*100 + release): 1.7.0, the first with
// LZ4_compress_fast.
const MinVersion = 10700

// MaxInput is the largest block LZ4 compresses (LZ4_MAX_INPUT_SIZE).
const MaxInput = 0x7E000000

// ErrNotFound is matched (errors.Is) by every error that reports the
// library, one of its symbols, or a new enough version of it, missing.
var ErrNotFound = dl.ErrNotFound

// ErrNoRoom reports a block whose compressed form does not fit the
// destination (LZ4_compress_fast returned 0): incompressible data, for
// a destination smaller than CompressBound.
var ErrNoRoom = errors.New("liblz4: compressed block does not fit the destination")

var lib = &dl.Library{Sonames: []string{"liblz4.so.1"}, EnvVar: LibraryEnv, What: "LZ4 library"}

func fn(name string) *dl.Func { return &dl.Func{Lib: lib, Name: name} }

// The C functions, resolved on first use.
var (
	procVersionNumber = fn("LZ4_versionNumber")
	procCompressFast  = fn("LZ4_compress_fast")
	procCompressBound = fn("LZ4_compressBound")

	binding = &dl.Binding{Lib: lib, VersionNumber: procVersionNumber, Min: MinVersion,
		Funcs: []*dl.Func{procVersionNumber, procCompressFast, procCompressBound}}
)

// Load opens the library if it is not open yet and checks its version.
// Every function here loads it on demand; Load lets callers test
// availability up front. The error matches ErrNotFound when the library
// or one of its functions is missing (LoadError or SymbolError of
// internal/dl, listing the paths tried) or when it is too old
// (dl.VersionError).
func Load() error { return binding.Load() }

// LibraryPath returns the path the library was loaded from, or "" when
// Load fails.
func LibraryPath() string { return binding.Path() }

// Version returns the library's version ("1.9.4"), or "" when Load
// fails.
func Version() string { return binding.Version() }

// CompressBound returns the largest block CompressFast may write for n
// bytes (LZ4_compressBound), or 0 when n is negative or past MaxInput.
func CompressBound(n int) (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	if n < 0 || n > MaxInput {
		return 0, nil
	}
	r, _ := procCompressBound.Call(uintptr(n))
	return int(int32(r)), nil
}

// CompressFast compresses src as one LZ4 block into dst and returns its
// size (LZ4_compress_fast). acceleration trades ratio for speed as LZ4's
// does: 1 (the default, and what smaller values mean) compresses most,
// each step up faster. A block that does not fit len(dst) fails with
// ErrNoRoom, having written nothing past len(dst); a src longer than
// MaxInput fails too. src and dst must not overlap.
func CompressFast(dst, src []byte, acceleration int) (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	if len(src) > MaxInput {
		return 0, fmt.Errorf("liblz4: a block of %d bytes, more than LZ4's %d", len(src), MaxInput)
	}
	acceleration = min(max(acceleration, 1), 1<<16)
	if len(dst) == 0 {
		return 0, ErrNoRoom
	}
	if len(src) == 0 {
		src = make([]byte, 1)[:0] // a pointer, not NULL, for no bytes
	}
	r, _ := procCompressFast.Call(uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(unsafe.Pointer(unsafe.SliceData(dst))),
		uintptr(len(src)), uintptr(min(len(dst), MaxInput+MaxInput/255+16)), uintptr(acceleration))
	if n := int(int32(r)); n > 0 {
		return n, nil
	}
	return 0, ErrNoRoom
}
