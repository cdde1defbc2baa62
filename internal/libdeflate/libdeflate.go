// Package libdeflate is a thin binding of the part of libdeflate's API
// (libdeflate.h) that kvik's codecs need: whole-buffer decompression of
// gzip members, zlib streams and raw DEFLATE data, the output's size
// known in advance.
//
// The library, libdeflate.so.0, is opened at run time on first use, with
// no cgo and no headers; KVIK_LIBDEFLATE_PATH names an exact path
// instead. The functions it needs (the _ex decompressors, libdeflate 1.5
// and newer) must all resolve. Without a usable library every function
// returns an error matching ErrNotFound, so callers can fall back to a Go
// implementation (klauspost/compress, which decodes the chunks of a
// smooth float32 field about a quarter as fast).
//
// Decompressors are C memory: each call takes one from a bounded free
// list (at most GOMAXPROCS idle ones, extras freed at once).
package libdeflate

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/kvikgo/kvik/internal/dl"
)

// LibraryEnv names the environment variable that, when set, holds the
// exact path of the library to load instead of searching for
// libdeflate.so.0.
const LibraryEnv = "KVIK_LIBDEFLATE_PATH"

// ErrNotFound is matched (errors.Is) by every error that reports the
// library or one of its functions missing.
var ErrNotFound = dl.ErrNotFound

// ErrNoMemory reports a decompressor the library could not allocate.
var ErrNoMemory = errors.New("libdeflate: cannot allocate a decompressor")

// Result is a failed decompression's libdeflate_result; errors.Is
// matches it.
type Result int

// The results of libdeflate.h other than success.
const (
	BadData           Result = 1 // LIBDEFLATE_BAD_DATA: invalid, corrupt or unsupported data
	ShortOutput       Result = 2 // LIBDEFLATE_SHORT_OUTPUT (not returned here: sizes are always asked for)
	InsufficientSpace Result = 3 // LIBDEFLATE_INSUFFICIENT_SPACE: more output than the buffer holds
)

func (r Result) Error() string {
	switch r {
	case BadData:
		return "libdeflate: invalid or corrupt data"
	case ShortOutput:
		return "libdeflate: shorter output than expected"
	case InsufficientSpace:
		return "libdeflate: output larger than the buffer"
	}
	return fmt.Sprintf("libdeflate: result %d", int(r))
}

var lib = &dl.Library{Sonames: []string{"libdeflate.so.0"}, EnvVar: LibraryEnv, What: "libdeflate"}

func fn(name string) *dl.Func { return &dl.Func{Lib: lib, Name: name} }

// The C functions, resolved on first use.
var (
	procAlloc = fn("libdeflate_alloc_decompressor")
	procFree  = fn("libdeflate_free_decompressor")
	procGzip  = fn("libdeflate_gzip_decompress_ex")
	procZlib  = fn("libdeflate_zlib_decompress_ex")
	procRaw   = fn("libdeflate_deflate_decompress_ex")

	// libdeflate has no version function: the symbols are the check.
	binding = &dl.Binding{Lib: lib, Funcs: []*dl.Func{procAlloc, procFree, procGzip, procZlib, procRaw}}
)

var decompressors = dl.NewObjectList(procAlloc, procFree, func() error { return ErrNoMemory })

// Load opens the library if it is not open yet. Every function here
// loads it on demand; Load lets callers test availability up front. The
// error matches ErrNotFound when the library or one of its functions is
// missing (LoadError or SymbolError of internal/dl, listing the paths
// tried).
func Load() error { return binding.Load() }

// LibraryPath returns the path the library was loaded from, or "" when
// Load fails.
func LibraryPath() string { return binding.Path() }

// GzipDecompress decodes the first gzip member of src (its CRC-32 and
// size checked) into dst and returns how many bytes of src it took and
// how many of dst it filled (libdeflate_gzip_decompress_ex). Output
// that would pass len(dst) fails with InsufficientSpace, invalid data
// with BadData; nothing is written past len(dst) either way.
func GzipDecompress(dst, src []byte) (in, out int, err error) {
	return decompress(procGzip, dst, src)
}

// ZlibDecompress is GzipDecompress for a zlib stream (its Adler-32
// checked): libdeflate_zlib_decompress_ex.
func ZlibDecompress(dst, src []byte) (in, out int, err error) {
	return decompress(procZlib, dst, src)
}

// DeflateDecompress is GzipDecompress for raw DEFLATE data (a ZIP
// member's; no checksum): libdeflate_deflate_decompress_ex.
func DeflateDecompress(dst, src []byte) (in, out int, err error) {
	return decompress(procRaw, dst, src)
}

func decompress(f *dl.Func, dst, src []byte) (in, out int, err error) {
	if err := Load(); err != nil {
		return 0, 0, err
	}
	d, err := decompressors.Get()
	if err != nil {
		return 0, 0, err
	}
	defer decompressors.Put(d)
	var nIn, nOut uintptr
	// Pointers, not NULL, for empty buffers.
	if len(src) == 0 {
		src = make([]byte, 1)[:0]
	}
	if len(dst) == 0 {
		dst = make([]byte, 1)[:0]
	}
	r, _ := f.Call(d, uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)),
		uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(len(dst)),
		uintptr(unsafe.Pointer(&nIn)), uintptr(unsafe.Pointer(&nOut)))
	if res := Result(int32(uint32(r))); res != 0 {
		return 0, 0, res
	}
	return int(nIn), int(nOut), nil
}

// Trim frees the idle decompressors, as after a burst of work that will
// not come again soon; later calls make new ones.
func Trim() { decompressors.Trim() }
