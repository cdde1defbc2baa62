// Package gguf reads and writes GGUF, the model format of llama.cpp and
// the local LLM servers built on it (a header of typed key/value metadata
// and tensor descriptions, then the tensors' data, aligned and often
// block-quantized), between files or S3 objects and GPU or host memory
// through kvik.
//
// Versions 2 and 3 are read, little-endian only (a big-endian file is
// ErrBigEndian); Save writes version 3. Every header is validated before
// any tensor byte is read: every count, length and offset is bounded by
// what is left of the file (and the header by MaxHeaderSize) before
// anything is allocated for it; metadata keys and tensor names are unique;
// general.alignment, if present, is a uint32 power of two; every tensor
// type is known (see Type), its shape is at most 4 dimensions whose first
// is a whole number of blocks and whose byte size does not overflow, and
// its data lies inside the file at an aligned offset, overlapping no other
// tensor's. A file that breaks any of these gets an error matching one of
// the sentinels below.
package gguf

import "errors"

// Errors returned (wrapped, with context) by this package; test with errors.Is.
var (
	// ErrInvalidHeader reports a header that is truncated, too long, not
	// GGUF, or not of the format's shape (a bad value type, a duplicate
	// key or tensor name, a bad alignment, too many dimensions...).
	ErrInvalidHeader = errors.New("gguf: invalid header")
	// ErrVersion reports a GGUF version other than 2 or 3.
	ErrVersion = errors.New("gguf: unsupported version")
	// ErrBigEndian reports a big-endian GGUF file, which this package
	// does not read.
	ErrBigEndian = errors.New("gguf: big-endian file")
	// ErrUnknownType reports a tensor type this package does not know
	// (Options.AllowUnknownTypes loads such tensors as raw bytes).
	ErrUnknownType = errors.New("gguf: unknown tensor type")
	// ErrInvalidTensor reports a tensor whose shape does not fit its type
	// or whose data is misaligned, overlaps another's or lies outside the
	// file.
	ErrInvalidTensor = errors.New("gguf: invalid tensor")
	// ErrNotFound reports a tensor name or metadata key the file lacks.
	ErrNotFound = errors.New("gguf: not found")
	// ErrValueType reports a metadata value of another type than asked for.
	ErrValueType = errors.New("gguf: wrong metadata value type")
	// ErrInvalidArgument reports a bad option, value or tensor given to
	// Load, Metadata.Set or Save.
	ErrInvalidArgument = errors.New("gguf: invalid argument")
)
