package zarr

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/npydescr"
	"github.com/kvikgo/kvik/internal/formatkit/npytime"
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
	// DateTime and TimeDelta are NumPy's datetime64 and timedelta64: a
	// signed 64-bit count of the type's Unit times its Scale, since the
	// Unix epoch or as a duration; the smallest int64 is NaT (Not a
	// Time). In memory they are int64s: the Go program converts them.
	DateTime  Kind = 'M'
	TimeDelta Kind = 'm'
	// Bytes, Unicode and Raw are fixed-length strings of Size bytes:
	// NumPy's S (bytes padded with NULs; zarr-python's
	// null_terminated_bytes), U (UTF-32 code points, 4 bytes each,
	// padded with NUL code points; fixed_length_utf32) and V (raw bytes;
	// raw_bytes, or v3's r<bits>). In memory a Unicode element's code
	// points are little-endian uint32s.
	Bytes   Kind = 'S'
	Unicode Kind = 'U'
	Raw     Kind = 'V'
	// VarString and VarBytes are variable-length: UTF-8 strings (v3
	// "string"; v2 "|O" with the vlen-utf8 filter: NumPy's str objects,
	// xarray's string variables) and byte strings (v3
	// "variable_length_bytes"; v2 "|O" with vlen-bytes). Their Size is
	// 0; their arrays are read and written with Array.ReadStrings and
	// WriteStrings, not as bytes.
	VarString Kind = 'T'
	VarBytes  Kind = 'O'
)

// maxStringSize bounds the Size of a Bytes, Unicode or Raw type.
const maxStringSize = 1 << 20

// DataType is an element type: a number, a time or a string of fixed
// or variable length. Values in memory (region reads and writes) are always
// little-endian; the byte order of stored chunks is a property of the
// codecs (v3 bytes codec, v2 dtype string).
type DataType struct {
	Kind Kind
	Size int // bytes per element: 1, 2, 4 or 8, 16 for complex128, any for a fixed-length string kind (a multiple of 4 for Unicode), 0 for a variable-length one
	// Unit and Scale are a DateTime's or TimeDelta's (Size 8): NumPy's
	// unit ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps",
	// "fs", "as", or "generic" for none) and how many of it make one
	// (datetime64[10us]: "us", 10; 0 counts as 1). Other kinds leave
	// them empty.
	Unit  string
	Scale int
	// Struct makes a Raw type a structured one (v2 only): NumPy's descr
	// list of the record's fields, as npy.Dtype spells it, "[('x',
	// '<f4'), ('n', '>i2', (3,))]", Size its record's bytes. Records are
	// read and written as stored, each field in its own byte order (see
	// Fields).
	Struct string
}

// temporal reports whether t is a DateTime or a TimeDelta.
func (t DataType) temporal() bool { return t.Kind == DateTime || t.Kind == TimeDelta }

// isString reports whether t is one of the fixed-length string kinds:
// Bytes, Unicode or Raw.
func (t DataType) isString() bool { return t.Kind == Bytes || t.Kind == Unicode || t.Kind == Raw }

// Variable reports whether t's elements vary in length (VarString,
// VarBytes): such an array is read and written as strings
// (Array.ReadStrings, WriteStrings), never as bytes.
func (t DataType) Variable() bool { return t.Kind == VarString || t.Kind == VarBytes }

// scale returns t's Scale, 1 for 0.
func (t DataType) scale() int { return max(t.Scale, 1) }

// unitText is NumPy's bracket of a temporal type: "[ns]", "[10us]", or
// "" for the generic unit.
func (t DataType) unitText() string {
	switch {
	case t.Unit == "generic":
		return ""
	case t.scale() == 1:
		return "[" + t.Unit + "]"
	}
	return fmt.Sprintf("[%d%s]", t.scale(), t.Unit)
}

// check reports a DataType this package does not read or write.
func (t DataType) check() error {
	if t.temporal() {
		if _, known := npytime.Unit(t.Unit); t.Size != 8 || !known && t.Unit != "generic" || t.Scale < 0 || t.Scale > npytime.MaxScale {
			return fmt.Errorf("%w: %c8 of unit %q and scale %d", ErrUnsupportedDataType, t.Kind, t.Unit, t.Scale)
		}
		return nil
	}
	if t.isString() {
		if t.Size < 1 || t.Size > maxStringSize || t.Kind == Unicode && t.Size%4 != 0 || t.Unit != "" || t.Scale != 0 {
			return fmt.Errorf("%w: %c of %d bytes", ErrUnsupportedDataType, t.Kind, t.Size)
		}
		return t.checkStruct()
	}
	if t.Struct != "" {
		return fmt.Errorf("%w: a structured type of kind %c, not Raw", ErrUnsupportedDataType, t.Kind)
	}
	if t.Variable() {
		if t.Size != 0 || t.Unit != "" || t.Scale != 0 {
			return fmt.Errorf("%w: %c of %d bytes", ErrUnsupportedDataType, t.Kind, t.Size)
		}
		return nil
	}
	if v, ok := v3Types[t.Name()]; !ok || v != t {
		return fmt.Errorf("%w: %+v", ErrUnsupportedDataType, t)
	}
	return nil
}

// checkStruct reports a Struct that is not a structured type's descr
// list as NumPy spells it, of Size bytes, for a Raw type.
func (t DataType) checkStruct() error {
	if t.Struct == "" {
		return nil
	}
	st, err := npydescr.ParseRepr(t.Struct)
	switch {
	case err != nil:
		return fmt.Errorf("%w: structured type: %v", ErrUnsupportedDataType, err)
	case t.Kind != Raw || st.Size != t.Size || st.Repr() != t.Struct:
		return fmt.Errorf("%w: structured type %.80q of kind %c and %d bytes, want Raw of %d bytes spelled %.80q", ErrUnsupportedDataType, t.Struct, t.Kind, t.Size, st.Size, st.Repr())
	}
	return nil
}

// Fields returns the fields of a structured type (Struct), in order,
// with their offsets in a record; nil for another type.
func (t DataType) Fields() []Field {
	st, err := npydescr.ParseRepr(t.Struct)
	if t.Struct == "" || err != nil {
		return nil
	}
	fields := make([]Field, len(st.Fields))
	for i, f := range st.Fields {
		fields[i] = Field{Name: f.Name, DType: f.Type, Shape: f.Shape, Offset: f.Offset, Size: f.Size}
		if f.Struct != nil {
			fields[i].DType = f.Struct.Repr()
		}
	}
	return fields
}

// Field is a field of a structured type (DataType.Fields).
type Field struct {
	Name string // "" for padding (DType "|Vn")
	// DType is the field's element type as NumPy spells it ("<f4",
	// ">i2", "|S3"), or a nested structured type's descr list.
	DType string
	Shape []int // a subarray field's shape; nil for one element
	// Offset is where the field starts in a record, Size its bytes (the
	// subarray's included).
	Offset, Size int
}

// swapUnit is the size of the parts of an element whose bytes a
// big-endian order reverses: the element, each float of a complex, each
// code point of a Unicode string, or 1 (none) for bytes.
func (t DataType) swapUnit() int {
	switch t.Kind {
	case Complex:
		return t.Size / 2
	case Unicode:
		return 4
	case Bytes, Raw:
		return 1
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
	case DateTime:
		return "numpy.datetime64"
	case TimeDelta:
		return "numpy.timedelta64"
	case Bytes:
		return "null_terminated_bytes"
	case Unicode:
		return "fixed_length_utf32"
	case Raw:
		return "raw_bytes"
	case VarString:
		return "string"
	case VarBytes:
		return "variable_length_bytes"
	}
	return "invalid"
}

// String returns t's Zarr v3 name, with a temporal type's unit as NumPy
// writes it ("numpy.datetime64[10us]") and a string type's size in
// bytes ("fixed_length_utf32[24]").
func (t DataType) String() string {
	switch {
	case t.temporal():
		return t.Name() + t.unitText()
	case t.Struct != "":
		return "structured" + t.Struct
	case t.isString():
		return fmt.Sprintf("%s[%d]", t.Name(), t.Size)
	}
	return t.Name()
}

// NumPy returns t as NumPy spells it, little-endian ("<f4", "|b1",
// "<M8[ns]"), a structured type as its descr list: the dtype of a v2
// array stored little-endian, and what npy.ParseDtype takes.
func (t DataType) NumPy() string {
	switch {
	case t.Struct != "":
		return t.Struct
	case t.temporal():
		return fmt.Sprintf("<%c8%s", t.Kind, t.unitText())
	case t.Variable():
		return "|O"
	case t.Kind == Unicode:
		return fmt.Sprintf("<U%d", t.Size/4)
	case t.isString():
		return fmt.Sprintf("|%c%d", t.Kind, t.Size)
	case t.Size == 1:
		return fmt.Sprintf("|%c%d", t.Kind, t.Size)
	}
	return fmt.Sprintf("<%c%d", t.Kind, t.Size)
}

// v3JSON returns t as a v3 document's data_type: its name, or for a
// temporal or string type the name and its configuration.
func (t DataType) v3JSON() any {
	switch {
	case t.temporal():
		return map[string]any{"name": t.Name(), "configuration": map[string]any{"unit": t.Unit, "scale_factor": t.scale()}}
	case t.isString():
		return map[string]any{"name": t.Name(), "configuration": map[string]any{"length_bytes": t.Size}}
	}
	return t.Name()
}

// stringKinds are the v3 names of the string kinds, which a configuration
// of length_bytes sizes.
var stringKinds = map[string]Kind{"null_terminated_bytes": Bytes, "fixed_length_utf32": Unicode, "raw_bytes": Raw}

var v3Types = map[string]DataType{
	"bool": {Kind: Bool, Size: 1}, "int8": {Kind: Int, Size: 1}, "int16": {Kind: Int, Size: 2}, "int32": {Kind: Int, Size: 4}, "int64": {Kind: Int, Size: 8},
	"uint8": {Kind: Uint, Size: 1}, "uint16": {Kind: Uint, Size: 2}, "uint32": {Kind: Uint, Size: 4}, "uint64": {Kind: Uint, Size: 8},
	"float16": {Kind: Float, Size: 2}, "float32": {Kind: Float, Size: 4}, "float64": {Kind: Float, Size: 8},
	"complex64": {Kind: Complex, Size: 8}, "complex128": {Kind: Complex, Size: 16},
}

// varTypes are the v3 names of the variable-length kinds: zarr-python's,
// and "bytes", zarr-extensions' name of variable_length_bytes.
var varTypes = map[string]Kind{"string": VarString, "variable_length_bytes": VarBytes, "bytes": VarBytes}

// ParseDataType parses a Zarr v3 data type name such as "float32",
// "string" (VarString), or "r24" (Raw, of 3 bytes). The temporal and
// fixed-length string types, whose names need a configuration, are
// parsed from a document's data_type object (see Metadata).
func ParseDataType(name string) (DataType, error) {
	if t, ok := v3Types[name]; ok {
		return t, nil
	}
	if k, ok := varTypes[name]; ok {
		return DataType{Kind: k}, nil
	}
	if bits, ok := strings.CutPrefix(name, "r"); ok && bits != "" && bits[0] != '0' && bits[0] != '+' {
		if n, err := strconv.Atoi(bits); err == nil && n%8 == 0 {
			if t := (DataType{Kind: Raw, Size: n / 8}); t.check() == nil {
				return t, nil
			}
		}
	}
	return DataType{}, fmt.Errorf("%w: %q", ErrUnsupportedDataType, name)
}

// parseV3Type parses a v3 document's data_type: a name, or an object
// of a name and, for numpy.datetime64 and numpy.timedelta64 (which need
// it), a configuration of unit and scale_factor and nothing else.
func parseV3Type(raw json.RawMessage) (DataType, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return ParseDataType(name)
	}
	var obj struct {
		Name          string          `json:"name"`
		Configuration json.RawMessage `json:"configuration"`
	}
	bad := fmt.Errorf("%w: %.80s", ErrUnsupportedDataType, raw)
	if onlyFields(raw, &obj) != nil {
		return DataType{}, bad
	}
	if kind, ok := stringKinds[obj.Name]; ok {
		var cfg struct {
			Length *int64 `json:"length_bytes"`
		}
		if onlyFields(obj.Configuration, &cfg) != nil || cfg.Length == nil || *cfg.Length < 1 || *cfg.Length > maxStringSize {
			return DataType{}, bad
		}
		t := DataType{Kind: kind, Size: int(*cfg.Length)}
		if t.check() != nil {
			return DataType{}, bad
		}
		return t, nil
	}
	kind := map[string]Kind{"numpy.datetime64": DateTime, "numpy.timedelta64": TimeDelta}[obj.Name]
	if kind == 0 {
		if c := strings.TrimSpace(string(obj.Configuration)); c != "" && c != "{}" {
			return DataType{}, bad
		}
		return ParseDataType(obj.Name)
	}
	var cfg struct {
		Unit  *string `json:"unit"`
		Scale *int64  `json:"scale_factor"`
	}
	if onlyFields(obj.Configuration, &cfg) != nil || cfg.Unit == nil || cfg.Scale == nil || *cfg.Scale < 1 || *cfg.Scale > npytime.MaxScale {
		return DataType{}, bad
	}
	unit, _ := npytime.Unit(*cfg.Unit)
	t := DataType{Kind: kind, Size: 8, Unit: unit, Scale: int(*cfg.Scale)}
	if t.check() != nil {
		return DataType{}, bad
	}
	return t, nil
}

// parseV2Struct parses a v2 dtype that is a structured type's descr
// list, [["x", "<f4"], ["n", ">i2", [3]]], into a Raw type of its
// record's size.
func parseV2Struct(raw json.RawMessage) (DataType, error) {
	var list []any
	if err := json.Unmarshal(raw, &list); err != nil {
		return DataType{}, fmt.Errorf("%w: dtype %.60s", ErrInvalidMetadata, raw)
	}
	st, err := npydescr.ParseStruct(list)
	if err != nil {
		return DataType{}, fmt.Errorf("%w: structured dtype: %v", ErrUnsupportedDataType, err)
	}
	t := DataType{Kind: Raw, Size: st.Size, Struct: st.Repr()}
	return t, t.check()
}

// parseV2Type parses a NumPy type string such as "<f4" or "|b1" and
// reports whether the stored bytes are big-endian.
func parseV2Type(s string) (DataType, bool, error) {
	d, ok := npydescr.Parse(s)
	if !ok {
		return DataType{}, false, fmt.Errorf("%w: %q", ErrUnsupportedDataType, s)
	}
	t := DataType{Kind: Kind(d.Kind), Size: d.Size()}
	big := s[0] == '>' // as written: ">i1" too, which has no order to keep
	switch {
	case t.temporal():
		t.Unit, t.Scale = d.Unit, d.Scale
		if t.Unit == "" {
			t.Unit = "generic"
		}
	case t.isString():
		if t.check() != nil {
			return DataType{}, false, fmt.Errorf("%w: %q", ErrUnsupportedDataType, s)
		}
		big = big && t.Kind == Unicode
	}
	return t, big, nil
}

// onlyFields decodes the JSON object b into v, failing on a field v does
// not have.
func onlyFields(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
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
	if t.Variable() {
		v, ok := varFill(t, raw)
		if !ok {
			return bad()
		}
		return v, nil
	}
	if t.isString() {
		if !stringFill(t, raw, b) {
			return bad()
		}
		return b, nil
	}
	if t.temporal() {
		if s == `"NaT"` {
			putUint(b, 1<<63)
			return b, nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad()
		}
		putUint(b, uint64(v))
		return b, nil
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

// stringFill sets b, one element of string type t, to the fill value
// raw: for Bytes and Raw the base64 of at most Size bytes, NUL-padded;
// for Unicode a string of at most Size/4 code points. A number, as
// zarr-python 2 writes for a string array created without a fill value
// (0), is the string of its digits, as NumPy casts it.
func stringFill(t DataType, raw json.RawMessage, b []byte) bool {
	str, ok := fillText(raw, t.Kind == Unicode)
	return ok && t.putString(b, str) == nil
}

// fillText reads the fill value raw of a string type: text (a number
// as its digits, as NumPy casts zarr-python 2's 0) where text is set,
// else base64 of the bytes.
func fillText(raw json.RawMessage, text bool) (string, bool) {
	var str string
	if json.Unmarshal(raw, &str) != nil {
		var n json.Number
		if !text || json.Unmarshal(raw, &n) != nil {
			return "", false
		}
		return n.String(), true
	}
	if text {
		return str, true
	}
	v, err := base64.StdEncoding.DecodeString(str)
	return string(v), err == nil
}

// varFill converts the fill value of a variable-length type: a string
// for VarString (a number as its digits, as for Unicode), base64 for
// VarBytes; at most maxStringSize bytes.
func varFill(t DataType, raw json.RawMessage) ([]byte, bool) {
	str, ok := fillText(raw, t.Kind == VarString)
	return []byte(str), ok && len(str) <= maxStringSize
}

// stringFillJSON renders b, one element of string type t, as a JSON fill
// value: trailing NULs dropped (as NumPy's scalars drop them) but for
// Raw, then base64 or, for Unicode, a string (a code point that is none,
// from a hand-made element, as U+FFFD).
func stringFillJSON(t DataType, b []byte) string {
	s, _, _ := t.elementString(b)
	if t.Kind == Unicode {
		return s
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// complexFill converts a complex fill value: [real, imaginary], each as
// a float's (a number, "NaN", "Infinity", "-Infinity" or a "0x..." bit
// pattern), or a lone float for the real part (hand-written metadata).
func complexFill(t DataType, raw json.RawMessage, s string, bad func() ([]byte, error)) ([]byte, error) {
	half := DataType{Kind: Float, Size: t.Size / 2}
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
	if t.Kind == VarString {
		return string(b)
	}
	if t.Kind == VarBytes {
		return base64.StdEncoding.EncodeToString(b)
	}
	if t.isString() {
		return stringFillJSON(t, b)
	}
	if t.Kind == Complex {
		half := DataType{Kind: Float, Size: t.Size / 2}
		return []any{fillJSON(half, b[:half.Size]), fillJSON(half, b[half.Size:])}
	}
	var u uint64
	for i := range b {
		u |= uint64(b[i]) << (8 * i)
	}
	switch t.Kind {
	case Bool:
		return u != 0
	case Int, DateTime, TimeDelta:
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
