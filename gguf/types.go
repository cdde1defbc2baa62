package gguf

import (
	"fmt"
	"math"
	"math/bits"
)

// Type is a ggml tensor type, as numbered in the file. Quantized types
// store blocks of BlockSize elements in TypeSize bytes each.
type Type uint32

// The ggml tensor types (numbers 4, 5, 31-33 and 36-38 were removed from
// ggml and are unknown here).
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// typeInfo is a type's name, elements per block and bytes per block.
type typeInfo struct {
	name        string
	block, size int64
}

// qk is the super-block of the K and IQ quantizations.
const qk = 256

var types = map[Type]typeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	Q4_0:    {"Q4_0", 32, 2 + 16},
	Q4_1:    {"Q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"Q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"Q8_0", 32, 2 + 32},
	Q8_1:    {"Q8_1", 32, 2 + 2 + 32}, // ggml's block_q8_1 (gguf-py's table still has the old 4 + 4 + 32)
	Q2_K:    {"Q2_K", qk, 2 + 2 + qk/16 + qk/4},
	Q3_K:    {"Q3_K", qk, 2 + qk/4 + qk/8 + 12},
	Q4_K:    {"Q4_K", qk, 2 + 2 + qk/2 + 12},
	Q5_K:    {"Q5_K", qk, 2 + 2 + qk/2 + qk/8 + 12},
	Q6_K:    {"Q6_K", qk, 2 + qk/2 + qk/4 + qk/16},
	Q8_K:    {"Q8_K", qk, 4 + qk + qk/8},
	IQ2_XXS: {"IQ2_XXS", qk, 2 + qk/4},
	IQ2_XS:  {"IQ2_XS", qk, 2 + qk/4 + qk/32},
	IQ3_XXS: {"IQ3_XXS", qk, 2 + qk/4 + qk/8},
	IQ1_S:   {"IQ1_S", qk, 2 + qk/8 + qk/16},
	IQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	IQ3_S:   {"IQ3_S", qk, 2 + qk/4 + qk/8 + qk/32 + 4},
	IQ2_S:   {"IQ2_S", qk, 2 + qk/4 + qk/16},
	IQ4_XS:  {"IQ4_XS", qk, 2 + 2 + qk/2 + qk/64},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	F64:     {"F64", 1, 8},
	IQ1_M:   {"IQ1_M", qk, qk/8 + qk/16 + qk/32},
	BF16:    {"BF16", 1, 2},
	TQ1_0:   {"TQ1_0", qk, 2 + 4*13},
	TQ2_0:   {"TQ2_0", qk, 2 + 64},
	MXFP4:   {"MXFP4", 32, 1 + 16},
	NVFP4:   {"NVFP4", 64, 4 + 32},
	Q1_0:    {"Q1_0", 128, 2 + 16},
	Q2_0:    {"Q2_0", 64, 2 + 16},
}

// Known reports whether this package knows t's block and byte sizes.
func (t Type) Known() bool { _, ok := types[t]; return ok }

// BlockSize returns the number of elements in one block of t (1 for the
// plain types), or 0 for an unknown type.
func (t Type) BlockSize() int64 { return types[t].block }

// TypeSize returns the number of bytes of one block of t, or 0 for an
// unknown type.
func (t Type) TypeSize() int64 { return types[t].size }

// String returns the type's ggml name (Q4_K, BF16...), or TYPE_n for an
// unknown type numbered n.
func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("TYPE_%d", uint32(t))
}

// Types returns every known type, in numeric order.
func Types() []Type {
	var out []Type
	for t := range Type(64) {
		if t.Known() {
			out = append(out, t)
		}
	}
	return out
}

// maxDims is ggml's GGML_MAX_DIMS: a tensor has at most 4 dimensions.
const maxDims = 4

// nbytes returns the byte size of a tensor of type t and shape (ggml
// order), checking what ggml checks: a known type, at most maxDims
// dimensions, none negative, the first a whole number of blocks, and
// element and byte counts that fit in an int64.
func nbytes(t Type, shape []int64) (int64, error) {
	ti, ok := types[t]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrUnknownType, t)
	}
	if len(shape) > maxDims {
		return 0, fmt.Errorf("%w: %d dimensions, at most %d", ErrInvalidTensor, len(shape), maxDims)
	}
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("%w: shape %v has a negative dimension", ErrInvalidTensor, shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("%w: shape %v overflows", ErrInvalidTensor, shape)
		}
		n = lo
	}
	row := int64(1) // a scalar is one row of one element
	if len(shape) > 0 {
		row = shape[0]
	}
	if row%ti.block != 0 {
		return 0, fmt.Errorf("%w: %s rows of %d elements are not whole blocks of %d", ErrInvalidTensor, t, row, ti.block)
	}
	hi, lo := bits.Mul64(n/uint64(ti.block), uint64(ti.size))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("%w: shape %v of %s overflows in bytes", ErrInvalidTensor, shape, t)
	}
	return int64(lo), nil
}
