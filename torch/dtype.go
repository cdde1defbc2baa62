package torch

import (
	"errors"

	"github.com/kvikgo/kvik/safetensors"
)

// ErrUnsupportedDtype reports a tensor of a dtype this package does not
// know (a quantized type, one newer than it).
var ErrUnsupportedDtype = errors.New("torch: unsupported dtype")

// Dtype is a tensor's element type as PyTorch names it, without "torch."
// ("float32", "bfloat16", "int64", "float8_e4m3fn"...).
type Dtype string

// Size returns the bytes of one element (0 for a dtype this package does
// not know).
func (d Dtype) Size() int { return dtypeSizes[d] }

var dtypeSizes = map[Dtype]int{
	"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
	"int64": 8, "int32": 4, "int16": 2, "int8": 1,
	"uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1,
	"complex128": 16, "complex64": 8, "complex32": 4,
	"float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
}

// storageDtypes are the typed storages' classes (torch.FloatStorage...)
// that torch.save names for the dtypes that have one; the others it
// saves as an UntypedStorage with the dtype beside it.
var storageDtypes = map[string]Dtype{
	"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16", "BFloat16Storage": "bfloat16",
	"LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
	"ByteStorage": "uint8", "BoolStorage": "bool",
	"ComplexDoubleStorage": "complex128", "ComplexFloatStorage": "complex64",
}

// safetensorsDtypes are the safetensors spellings of the dtypes that
// format has.
var safetensorsDtypes = map[Dtype]safetensors.Dtype{
	"float64": safetensors.F64, "float32": safetensors.F32, "float16": safetensors.F16, "bfloat16": safetensors.BF16,
	"int64": safetensors.I64, "int32": safetensors.I32, "int16": safetensors.I16, "int8": safetensors.I8,
	"uint64": safetensors.U64, "uint32": safetensors.U32, "uint16": safetensors.U16, "uint8": safetensors.U8,
	"bool": safetensors.BOOL, "complex64": safetensors.C64,
	"float8_e4m3fn": safetensors.F8E4M3, "float8_e5m2": safetensors.F8E5M2, "float8_e8m0fnu": safetensors.F8E8M0,
}

// Safetensors returns d as the safetensors format spells it ("float32":
// "F32"), or "" where that format has no such dtype (complex128,
// complex32, the fnuz float8 types).
func (d Dtype) Safetensors() safetensors.Dtype { return safetensorsDtypes[d] }
