package safetensors

// Dtype is a safetensors element type, as spelled in the header.
type Dtype string

// The dtypes of the safetensors format.
const (
	BOOL   Dtype = "BOOL"
	F4     Dtype = "F4"      // 4-bit float (e2m1), two per byte
	F6E2M3 Dtype = "F6_E2M3" // 6-bit float, packed
	F6E3M2 Dtype = "F6_E3M2" // 6-bit float, packed
	U8     Dtype = "U8"
	I8     Dtype = "I8"
	F8E5M2 Dtype = "F8_E5M2"
	F8E4M3 Dtype = "F8_E4M3"
	F8E8M0 Dtype = "F8_E8M0"
	I16    Dtype = "I16"
	U16    Dtype = "U16"
	F16    Dtype = "F16"
	BF16   Dtype = "BF16"
	I32    Dtype = "I32"
	U32    Dtype = "U32"
	F32    Dtype = "F32"
	C64    Dtype = "C64"
	F64    Dtype = "F64"
	I64    Dtype = "I64"
	U64    Dtype = "U64"
)

var dtypeBits = map[Dtype]int{
	BOOL: 8, F4: 4, F6E2M3: 6, F6E3M2: 6, U8: 8, I8: 8, F8E5M2: 8, F8E4M3: 8, F8E8M0: 8,
	I16: 16, U16: 16, F16: 16, BF16: 16, I32: 32, U32: 32, F32: 32, C64: 64, F64: 64, I64: 64, U64: 64,
}

// Bits returns the size of one element in bits, or 0 for an unknown dtype.
func (d Dtype) Bits() int { return dtypeBits[d] }

// Valid reports whether d is a known dtype.
func (d Dtype) Valid() bool { return dtypeBits[d] != 0 }

// rank is d's place in the reference library's list of dtypes, whose
// order is that of their sizes; Save stores tensors of higher ranks
// first, as that library does (so that, with its order of names, kvik
// writes the bytes it writes).
func (d Dtype) rank() int { return dtypeRanks[d] }

var dtypeRanks = func() map[Dtype]int {
	m := map[Dtype]int{}
	for i, d := range []Dtype{BOOL, F4, F6E2M3, F6E3M2, U8, I8, F8E5M2, F8E4M3, F8E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64} {
		m[d] = i + 1
	}
	return m
}()
