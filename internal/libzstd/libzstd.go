// Package libzstd is a thin binding of the part of the Zstandard
// library's API (zstd.h) that kvik's codecs need: one-shot compression
// and decompression of whole frames with explicit contexts.
//
// The library, libzstd.so.1, is opened at run time on first use, with no
// cgo and no headers; KVIK_LIBZSTD_PATH names an exact path instead. A
// library older than MinVersion counts as missing. Without a usable
// library every function returns an error matching ErrNotFound, so
// callers can fall back to a Go implementation.
//
// Contexts are C memory: each call takes one from a bounded free list
// (at most GOMAXPROCS idle ones per kind, extras freed at once), so calls
// from many goroutines run in parallel, each on its own context.
package libzstd

import (
	"fmt"
	"unsafe"

	"github.com/kvikgo/kvik/internal/dl"
)

// LibraryEnv names the environment variable that, when set, holds the
// exact path of the zstd library to load instead of searching for
// libzstd.so.1.
const LibraryEnv = "KVIK_LIBZSTD_PATH"

// MinVersion is the oldest library accepted, as ZSTD_versionNumber gives
// it (major*10000 + minor*100 + release): 1.4.0, the first whose
// ZSTD_compress2 and parameter API are stable.
const MinVersion = 10400

// ErrNotFound is matched (errors.Is) by every error that reports the
// library, one of its symbols, or a new enough version of it, missing.
var ErrNotFound = dl.ErrNotFound

var lib = &dl.Library{Sonames: []string{"libzstd.so.1"}, EnvVar: LibraryEnv, What: "zstd library"}

func fn(name string) *dl.Func { return &dl.Func{Lib: lib, Name: name} }

// The C functions, resolved on first use.
var (
	procVersionNumber  = fn("ZSTD_versionNumber")
	procIsError        = fn("ZSTD_isError")
	procGetErrorName   = fn("ZSTD_getErrorName")
	procGetErrorCode   = fn("ZSTD_getErrorCode")
	procCreateDCtx     = fn("ZSTD_createDCtx")
	procFreeDCtx       = fn("ZSTD_freeDCtx")
	procDecompressDCtx = fn("ZSTD_decompressDCtx")
	procCreateCCtx     = fn("ZSTD_createCCtx")
	procFreeCCtx       = fn("ZSTD_freeCCtx")
	procCCtxSetParam   = fn("ZSTD_CCtx_setParameter")
	procCCtxReset      = fn("ZSTD_CCtx_reset")
	procCompress2      = fn("ZSTD_compress2")
	procCompressBound  = fn("ZSTD_compressBound")

	binding = &dl.Binding{Lib: lib, VersionNumber: procVersionNumber, Min: MinVersion,
		Funcs: []*dl.Func{procVersionNumber, procIsError, procGetErrorName, procGetErrorCode, procCreateDCtx, procFreeDCtx,
			procDecompressDCtx, procCreateCCtx, procFreeCCtx, procCCtxSetParam, procCCtxReset, procCompress2, procCompressBound}}
)

// Values of zstd.h's enums (the same in every release since 1.4.0).
const (
	cCompressionLevel        = 100 // ZSTD_c_compressionLevel
	cContentSizeFlag         = 200 // ZSTD_c_contentSizeFlag
	cChecksumFlag            = 201 // ZSTD_c_checksumFlag
	resetSessionAndParameter = 3   // ZSTD_reset_session_and_parameters
)

// VersionError reports a library older than MinVersion. It matches
// ErrNotFound: such a library is as good as missing.
type VersionError = dl.VersionError

// Load opens the library if it is not open yet and checks its version.
// Every function here loads it on demand; Load lets callers test
// availability up front. The error matches ErrNotFound when the library
// or one of its functions is missing (LoadError or SymbolError of
// internal/dl, listing the paths tried) or when it is too old
// (VersionError).
func Load() error { return binding.Load() }

// LibraryPath returns the path the library was loaded from, or "" when
// Load fails.
func LibraryPath() string { return binding.Path() }

// Version returns the library's version ("1.5.4"), or "" when Load
// fails.
func Version() string { return binding.Version() }

// Code is a zstd error code (zstd_errors.h's ZSTD_ErrorCode). Errors of
// this package match their Code with errors.Is.
type Code int

// The codes callers test for, with the values of zstd_errors.h.
const (
	CorruptionDetected Code = 20 // ZSTD_error_corruption_detected
	ChecksumWrong      Code = 22 // ZSTD_error_checksum_wrong
	MemoryAllocation   Code = 64 // ZSTD_error_memory_allocation
	DstSizeTooSmall    Code = 70 // ZSTD_error_dstSize_tooSmall
	SrcSizeWrong       Code = 72 // ZSTD_error_srcSize_wrong
)

func (c Code) Error() string { return fmt.Sprintf("zstd error code %d", int(c)) }

// Error reports a failed call: the function, the library's error code
// and its text for it (ZSTD_getErrorName).
type Error struct {
	Func string
	Code Code
	Text string
}

func (e *Error) Error() string { return e.Func + ": " + e.Text }

// Is reports whether target is e's Code.
func (e *Error) Is(target error) bool { c, ok := target.(Code); return ok && c == e.Code }

// check turns the size_t result r of the C function name into an error
// when ZSTD_isError says it is one.
func check(name string, r uintptr) error {
	if bad, _ := procIsError.Call(r); uint32(bad) == 0 {
		return nil
	}
	code, _ := procGetErrorCode.Call(r)
	text, _ := procGetErrorName.Call(r)
	return &Error{Func: name, Code: Code(int32(uint32(code))), Text: dl.GoString(*(**byte)(unsafe.Pointer(&text)))}
}

// CompressBound returns the largest frame Compress may write for n bytes
// (ZSTD_compressBound).
func CompressBound(n int) (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	r, _ := procCompressBound.Call(uintptr(n))
	if err := check("ZSTD_compressBound", r); err != nil {
		return 0, err
	}
	return int(r), nil
}

// Decompress decodes every frame of src, skipping skippable ones, into
// dst[:cap(dst)] and returns the decoded bytes (ZSTD_decompressDCtx).
// Output that would pass cap(dst) fails with DstSizeTooSmall: the one-shot
// decoder keeps its window in dst, so what it allocates does not depend
// on src. src and dst must not overlap.
func Decompress(dst, src []byte) ([]byte, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	d, err := dctxs.Get()
	if err != nil {
		return nil, err
	}
	dst = dst[:cap(dst)]
	r, _ := procDecompressDCtx.Call(d, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(len(dst)),
		uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)))
	dctxs.Put(d)
	if err := check("ZSTD_decompressDCtx", r); err != nil {
		return nil, err
	}
	return dst[:r], nil
}

// Compress appends src to dst as one frame (ZSTD_compress2) at level
// (libzstd's levels: negative ones are faster, 0 is the library's
// default, 3; levels past the maximum are clamped to it) with a content
// checksum when checksum is set. The frame declares its content size.
// dst grows to hold the frame's bound first when it has less room.
func Compress(dst, src []byte, level int, checksum bool) ([]byte, error) {
	bound, err := CompressBound(len(src))
	if err != nil {
		return nil, err
	}
	if cap(dst)-len(dst) < bound {
		dst = append(make([]byte, 0, len(dst)+bound), dst...)
	}
	c, err := cctxs.Get()
	if err != nil {
		return nil, err
	}
	defer cctxs.Put(c)
	if err := setParams(c, level, checksum); err != nil {
		return nil, err
	}
	out := dst[len(dst):cap(dst)]
	r, _ := procCompress2.Call(c, uintptr(unsafe.Pointer(unsafe.SliceData(out))), uintptr(len(out)),
		uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)))
	if err := check("ZSTD_compress2", r); err != nil {
		return nil, err
	}
	return dst[:len(dst)+int(r)], nil
}

// setParams resets c's session and parameters, then sets the level, the
// checksum flag and the content size flag.
func setParams(c uintptr, level int, checksum bool) error {
	r, _ := procCCtxReset.Call(c, resetSessionAndParameter)
	if err := check("ZSTD_CCtx_reset", r); err != nil {
		return err
	}
	ck := uintptr(0)
	if checksum {
		ck = 1
	}
	for _, p := range [][2]uintptr{{cCompressionLevel, uintptr(level)}, {cChecksumFlag, ck}, {cContentSizeFlag, 1}} {
		r, _ := procCCtxSetParam.Call(c, p[0], p[1])
		if err := check("ZSTD_CCtx_setParameter", r); err != nil {
			return err
		}
	}
	return nil
}
