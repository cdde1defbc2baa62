package zarr

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the family of a DataType.
type Kind byte

// Kinds of data types.
const (
	Bool  Kind = 'b'
	Int   Kind = 'i'
	Uint  Kind = 'u'
	Float Kind = 'f'
	// Complex is a pair of floats, real then imaginary (complex64: two
	// float32, complex128: two float64), as NumPy stores them.
	Complex Kind = 'c'
)

// DataType is a numeric element type. Values in memory (region reads and
// writes) are always little-endian; the byte order of stored chunks is a
// property of the codecs (v3 bytes codec, v2 dtype string).
type DataType struct {
	Kind Kind
	Size int // bytes per element: 1, 2, 4 or 8, 16 for complex128
}

// swapUnit is the size of the parts of an element whose bytes a
// big-endian order reverses: the element, or each float of a complex.
func (t DataType) swapUnit() int {
	if t.Kind == Complex {
		return t.Size / 2
	}
	return t.Size
}

// Name returns the Zarr v3 name of t ("float32", "bool").
func (t DataType) Name() string {
	switch t.Kind {
	case Bool:
		return "bool"
	case Int:
		return fmt.Sprintf("int%d", t.Size*8)
	case Uint:
		return fmt.Sprintf("uint%d", t.Size*8)
	case Float:
		return fmt.Sprintf("float%d", t.Size*8)
	case Complex:
		return fmt.Sprintf("complex%d", t.Size*8)
	}
	return "invalid"
}

func (t DataType) String() string { return t.Name() }

// v2 returns the Zarr v2 (NumPy) type string of t in little-endian order.
func (t DataType) v2() string {
	if t.Size == 1 {
		return fmt.Sprintf("|%c%d", t.Kind, t.Size)
	}
	return fmt.Sprintf("<%c%d", t.Kind, t.Size)
}

var v3Types = map[string]DataType{
	"bool": {Bool, 1}, "int8": {Int, 1}, "int16": {Int, 2}, "int32": {Int, 4}, "int64": {Int, 8},
	"uint8": {Uint, 1}, "uint16": {Uint, 2}, "uint32": {Uint, 4}, "uint64": {Uint, 8},
	"float16": {Float, 2}, "float32": {Float, 4}, "float64": {Float, 8},
	"complex64": {Complex, 8}, "complex128": {Complex, 16},
}

// ParseDataType parses a Zarr v3 data type name such as "float32".
func ParseDataType(name string) (DataType, error) {
	if t, ok := v3Types[name]; ok {
		return t, nil
	}
	return DataType{}, fmt.Errorf("%w: %q", ErrUnsupportedDataType, name)
}

// parseV2Type parses a NumPy type string such as "<f4" or "|b1" and
// reports whether the stored bytes are big-endian.
func parseV2Type(s string) (DataType, bool, error) {
	bad := fmt.Errorf("%w: %q", ErrUnsupportedDataType, s)
	if len(s) < 3 {
		return DataType{}, false, bad
	}
	order, kind := s[0], Kind(s[1])
	size, err := strconv.Atoi(s[2:])
	if err != nil || (order != '<' && order != '>' && order != '|' && order != '=') {
		return DataType{}, false, bad
	}
	t := DataType{kind, size}
	switch {
	case kind == Bool && size == 1, (kind == Int || kind == Uint) && (size == 1 || size == 2 || size == 4 || size == 8),
		kind == Float && (size == 2 || size == 4 || size == 8), kind == Complex && (size == 8 || size == 16):
	default:
		return DataType{}, false, bad
	}
	if order == '|' && size > 1 {
		return DataType{}, false, bad
	}
	return t, order == '>', nil
}

// fillBytes converts a JSON fill value to one little-endian element.
// null (v2 only) gives zeros. Floats accept "NaN", "Infinity", "-Infinity"
// and (v3) "0x..." raw bit patterns.
func fillBytes(t DataType, raw json.RawMessage, allowNull bool) ([]byte, error) {
	b := make([]byte, t.Size)
	s := strings.TrimSpace(string(raw))
	bad := func() ([]byte, error) {
		return nil, fmt.Errorf("%w: fill_value %.40s for %v", ErrInvalidMetadata, s, t)
	}
	if s == "" || s == "null" {
		if allowNull {
			return b, nil
		}
		return bad()
	}
	if t.Kind == Complex {
		return complexFill(t, raw, s, bad)
	}
	if t.Kind == Bool {
		switch s {
		case "true", "1":
			b[0] = 1
		case "false", "0":
		default:
			return bad()
		}
		return b, nil
	}
	if s[0] == '"' {
		var str string
		if json.Unmarshal(raw, &str) != nil || t.Kind != Float {
			return bad()
		}
		var f float64
		switch str {
		case "NaN":
			f = math.NaN()
		case "Infinity":
			f = math.Inf(1)
		case "-Infinity":
			f = math.Inf(-1)
		default:
			if !strings.HasPrefix(str, "0x") || len(str) != 2+2*t.Size {
				return bad()
			}
			u, err := strconv.ParseUint(str[2:], 16, 64)
			if err != nil {
				return bad()
			}
			putUint(b, u)
			return b, nil
		}
		putFloat(b, f)
		return b, nil
	}
	switch t.Kind {
	case Int:
		v, err := strconv.ParseInt(s, 10, t.Size*8)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || f < -math.MaxInt64 || f > math.MaxInt64 {
				return bad()
			}
			v = int64(f)
			if t.Size < 8 && (v < -(1<<(t.Size*8-1)) || v >= 1<<(t.Size*8-1)) {
				return bad()
			}
		}
		putUint(b, uint64(v))
	case Uint:
		v, err := strconv.ParseUint(s, 10, t.Size*8)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || f < 0 || f >= math.MaxUint64 {
				return bad()
			}
			v = uint64(f)
			if t.Size < 8 && v >= 1<<(t.Size*8) {
				return bad()
			}
		}
		putUint(b, v)
	case Float:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return bad()
		}
		putFloat(b, f)
	}
	return b, nil
}

// complexFill converts a complex fill value: [real, imaginary], each as
// a float's (a number, "NaN", "Infinity", "-Infinity" or a "0x..." bit
// pattern), or a lone float for the real part (hand-written metadata).
func complexFill(t DataType, raw json.RawMessage, s string, bad func() ([]byte, error)) ([]byte, error) {
	half := DataType{Float, t.Size / 2}
	parts := []json.RawMessage{raw, json.RawMessage("0")}
	if s[0] == '[' && (json.Unmarshal(raw, &parts) != nil || len(parts) != 2) {
		return bad()
	}
	re, err := fillBytes(half, parts[0], false)
	if err != nil {
		return bad()
	}
	im, err := fillBytes(half, parts[1], false)
	if err != nil {
		return bad()
	}
	return append(re, im...), nil
}

// putUint stores the low len(b) bytes of v, little-endian.
func putUint(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}

// putFloat stores f as a little-endian float of len(b) bytes; a NaN as
// NumPy's np.nan (0x7e00, 0x7fc00000, 0x7ff8000000000000), sign kept.
func putFloat(b []byte, f float64) {
	nan := math.IsNaN(f)
	sign := uint64(0)
	if math.Signbit(f) {
		sign = 1
	}
	switch len(b) {
	case 2:
		binary.LittleEndian.PutUint16(b, Float16FromFloat64(f)) // NaN: 0x7e00
	case 4:
		u := math.Float32bits(float32(f))
		if nan {
			u = uint32(sign)<<31 | 0x7fc00000
		}
		binary.LittleEndian.PutUint32(b, u)
	case 8:
		u := math.Float64bits(f)
		if nan {
			u = sign<<63 | 0x7ff8000000000000
		}
		binary.LittleEndian.PutUint64(b, u)
	}
}

// fillJSON renders a little-endian element as a JSON fill value.
func fillJSON(t DataType, b []byte) any {
	if t.Kind == Complex {
		half := DataType{Float, t.Size / 2}
		return []any{fillJSON(half, b[:half.Size]), fillJSON(half, b[half.Size:])}
	}
	var u uint64
	for i := range b {
		u |= uint64(b[i]) << (8 * i)
	}
	switch t.Kind {
	case Bool:
		return u != 0
	case Int:
		shift := 64 - 8*t.Size
		return int64(u<<shift) >> shift
	case Uint:
		return u
	}
	var f float64
	switch t.Size {
	case 2:
		f = Float16ToFloat64(uint16(u))
	case 4:
		f = float64(math.Float32frombits(uint32(u)))
	default:
		f = math.Float64frombits(u)
	}
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// Float16ToFloat64 converts IEEE 754 half-precision bits to a float64.
func Float16ToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * frac * math.Ldexp(1, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// Float16FromFloat64 converts f to IEEE 754 half-precision bits, rounding
// to nearest even as NumPy's astype does.
func Float16FromFloat64(f float64) uint16 {
	bits := math.Float64bits(f)
	sign := uint16(bits>>48) & 0x8000
	if math.IsNaN(f) {
		return sign | 0x7e00
	}
	a := math.Abs(f)
	if a >= 65520 { // rounds past the largest half (65504)
		return sign | 0x7c00
	}
	if a < math.Ldexp(1, -14) { // subnormal: units of 2^-24
		return sign | uint16(math.RoundToEven(a*math.Ldexp(1, 24)))
	}
	e := math.Ilogb(a)
	m := math.RoundToEven(math.Ldexp(a, 10-e)) // 1024..2048
	if m == 2048 {
		m, e = 1024, e+1
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}
