// Package safetensors reads and writes the safetensors format (an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and byte range, then the tensors' bytes) between files and GPU or
// host memory through kvik.
//
// Every header is validated before any tensor byte is read: the header
// length is bounded and inside the file, the JSON is well formed with no
// duplicate or unknown keys, every dtype is known, each tensor's shape
// times its dtype size equals its byte range, and the ranges lie inside
// the data area, sorted, without overlap or gap, ending at the end of the
// file. A file that breaks any of these gets an error matching one of the
// sentinels below.
package safetensors

import "errors"

// Errors returned (wrapped, with context) by this package; test with errors.Is.
var (
	// ErrInvalidHeader reports a header that is too short, too long, not
	// inside the file, not valid JSON, or not of the format's shape.
	ErrInvalidHeader = errors.New("safetensors: invalid header")
	// ErrUnknownDtype reports a dtype this package does not know.
	ErrUnknownDtype = errors.New("safetensors: unknown dtype")
	// ErrInvalidOffsets reports tensor byte ranges that do not match their
	// shape and dtype, overlap, leave gaps, or fall outside the data area.
	ErrInvalidOffsets = errors.New("safetensors: invalid data offsets")
	// ErrNotFound reports a tensor name that the file or index lacks.
	ErrNotFound = errors.New("safetensors: tensor not found")
	// ErrInvalidIndex reports a sharded-checkpoint index that is not valid.
	ErrInvalidIndex = errors.New("safetensors: invalid index")
	// ErrInvalidArgument reports a bad option or tensor given to Load or Save.
	ErrInvalidArgument = errors.New("safetensors: invalid argument")
)
