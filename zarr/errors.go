package zarr

import (
	"errors"
	"io/fs"

	"github.com/kvikgo/kvik"
)

// Errors returned (wrapped, with context) by this package; test with errors.Is.
// A missing key is reported with an error that matches fs.ErrNotExist.
var (
	// ErrInvalidMetadata reports array metadata that is not valid JSON or
	// breaks the Zarr specification (a negative shape, a zero chunk size,
	// a chunk shape of the wrong rank, a fill value of the wrong kind).
	ErrInvalidMetadata = errors.New("zarr: invalid metadata")
	// ErrUnsupportedCodec reports a codec, compressor or filter this package
	// does not implement; the error names it.
	ErrUnsupportedCodec = errors.New("zarr: unsupported codec")
	// ErrUnsupportedDataType reports a data type this package does not
	// implement (variable-length strings, structured types); the error
	// names it.
	ErrUnsupportedDataType = errors.New("zarr: unsupported data type")
	// ErrCorruptChunk reports stored bytes that do not decode: a bad
	// compressed stream, a checksum mismatch, a chunk of the wrong size, a
	// shard index that points outside its shard.
	ErrCorruptChunk = errors.New("zarr: corrupt chunk")
	// ErrInvalidKey reports a store key that cannot name a file or object
	// below the store's root (empty, absolute, or with empty, "." or ".."
	// segments); it is kvik.ErrInvalidKey, which remote stores get from
	// kvik.RemotePrefix too, always before any request.
	ErrInvalidKey = kvik.ErrInvalidKey
	// ErrUnsupportedExtension reports a Zarr v3 metadata field this
	// package does not know and may not ignore: per the v3 specification,
	// any unknown field except an object with "must_understand": false.
	// The error names it.
	ErrUnsupportedExtension = errors.New("zarr: unsupported extension")
	// ErrInvalidRegion reports a region of the wrong rank, with start >
	// stop or outside the array, or a buffer of the wrong size for it;
	// also a string that does not fit its type (DataType.AppendStrings).
	ErrInvalidRegion = errors.New("zarr: invalid region")
)

// ErrNoStore reports a store with no Zarr metadata at its root: no
// zarr.json, .zgroup, .zarray, .zattrs or .zmetadata (a mistyped path, an
// empty or plain directory). It also matches fs.ErrNotExist.
var ErrNoStore error = noStoreError{}

type noStoreError struct{}

func (noStoreError) Error() string {
	return "zarr: no Zarr metadata (zarr.json, .zgroup, .zarray, .zattrs or .zmetadata) at the store's root"
}

func (noStoreError) Is(target error) bool { return target == fs.ErrNotExist }

// ErrExists reports a Create at a path that already holds an array or a
// group (a zarr.json, .zarray or .zgroup document): the new array's
// metadata over an old array would read its old chunks as the new
// array's. Delete the node first to replace it. It also matches
// fs.ErrExist.
var ErrExists error = existsError{}

type existsError struct{}

func (existsError) Error() string { return "zarr: an array or group exists at the path" }

func (existsError) Is(target error) bool { return target == fs.ErrExist }
