package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type of a metadata value, as numbered in the file.
type ValueType uint32

// The metadata value types.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"}

// String returns the type's name as gguf-py spells it (UINT32, STRING...).
func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("VALUE_TYPE_%d", uint32(t))
}

func (t ValueType) valid() bool { return int(t) < len(valueTypeNames) }

// size is the encoded size of a value of fixed-size type t, 0 for STRING
// and ARRAY.
func (t ValueType) size() int64 {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes a value of type t takes in a file: an array
// of n elements of type t takes at least n*minSize bytes.
func (t ValueType) minSize() int64 {
	switch t {
	case ValueString:
		return 8 // the length
	case ValueArray:
		return 12 // the element type and the count
	}
	return t.size()
}

// Value is one metadata value: a scalar, a string or an array. Any
// returns it as the matching Go value: uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64 or float64 for a
// scalar; a slice of one of those for an array; []Value for an array of
// arrays. NewValue makes one from such a Go value. The zero Value is
// invalid (Save refuses it).
type Value struct {
	typ, elem ValueType
	v         any
}

// Type returns the value's type (ValueArray for an array).
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the type of an array's elements.
func (v Value) ElemType() ValueType { return v.elem }

// Any returns the value as a Go value (see Value).
func (v Value) Any() any { return v.v }

// Len returns an array's number of elements, or 0 for a scalar.
func (v Value) Len() int {
	switch a := v.v.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// NewValue makes a Value from x: a Go value of one of the types that Any
// returns (an int or other Go type of no GGUF type is ErrInvalidArgument),
// or a Value. A []Value must hold arrays only. The Value keeps x's slice,
// not a copy.
func NewValue(x any) (Value, error) {
	switch x := x.(type) {
	case Value:
		return x, x.check()
	case uint8:
		return Value{typ: ValueUint8, v: x}, nil
	case int8:
		return Value{typ: ValueInt8, v: x}, nil
	case uint16:
		return Value{typ: ValueUint16, v: x}, nil
	case int16:
		return Value{typ: ValueInt16, v: x}, nil
	case uint32:
		return Value{typ: ValueUint32, v: x}, nil
	case int32:
		return Value{typ: ValueInt32, v: x}, nil
	case float32:
		return Value{typ: ValueFloat32, v: x}, nil
	case bool:
		return Value{typ: ValueBool, v: x}, nil
	case string:
		return Value{typ: ValueString, v: x}, nil
	case uint64:
		return Value{typ: ValueUint64, v: x}, nil
	case int64:
		return Value{typ: ValueInt64, v: x}, nil
	case float64:
		return Value{typ: ValueFloat64, v: x}, nil
	case []uint8:
		return array(ValueUint8, x), nil
	case []int8:
		return array(ValueInt8, x), nil
	case []uint16:
		return array(ValueUint16, x), nil
	case []int16:
		return array(ValueInt16, x), nil
	case []uint32:
		return array(ValueUint32, x), nil
	case []int32:
		return array(ValueInt32, x), nil
	case []float32:
		return array(ValueFloat32, x), nil
	case []bool:
		return array(ValueBool, x), nil
	case []string:
		return array(ValueString, x), nil
	case []uint64:
		return array(ValueUint64, x), nil
	case []int64:
		return array(ValueInt64, x), nil
	case []float64:
		return array(ValueFloat64, x), nil
	case []Value:
		v := array(ValueArray, x)
		return v, v.check()
	}
	hint := ""
	switch x.(type) {
	case int, uint, []int, []uint:
		// The common slip: an untyped constant such as 8192 is an int,
		// whose size GGUF cannot know.
		hint = " (GGUF integers have a size: convert, e.g. uint32(8192) or int64(n))"
	}
	return Value{}, fmt.Errorf("%w: %T is not a GGUF value type%s; want one of uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64, bool, string, a slice of one of those, []gguf.Value of arrays, or a gguf.Value",
		ErrInvalidArgument, x, hint)
}

func array(elem ValueType, x any) Value { return Value{typ: ValueArray, elem: elem, v: x} }

// check reports whether v is a valid value: made by NewValue or read from
// a file, with arrays of arrays holding arrays only.
func (v Value) check() error {
	if v.v == nil {
		return fmt.Errorf("%w: zero Value", ErrInvalidArgument)
	}
	if a, ok := v.v.([]Value); ok {
		for _, e := range a {
			if e.typ != ValueArray {
				return fmt.Errorf("%w: an array of arrays holds a %s", ErrInvalidArgument, e.typ)
			}
			if err := e.check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// String formats the value for people: strings quoted and cut after 80
// bytes, arrays as their type, length and first few elements.
func (v Value) String() string {
	if v.typ != ValueArray {
		return scalarString(v.v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%d %s]", v.Len(), v.elem)
	const show = 6
	for i := range min(v.Len(), show) {
		if i == 0 {
			b.WriteString(" ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(elemString(v.v, i))
	}
	if v.Len() > show {
		b.WriteString(", ...")
	}
	return b.String()
}

func scalarString(x any) string {
	switch x := x.(type) {
	case string:
		if len(x) > 80 {
			return strconv.Quote(x[:80]) + "..."
		}
		return strconv.Quote(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(x)
}

func elemString(a any, i int) string {
	switch a := a.(type) {
	case []Value:
		return "(" + a[i].String() + ")"
	case []string:
		return scalarString(a[i])
	case []float32:
		return scalarString(a[i])
	case []float64:
		return scalarString(a[i])
	}
	return fmt.Sprint(index(a, i))
}

// index returns element i of a numeric or bool slice.
func index(a any, i int) any {
	switch a := a.(type) {
	case []uint8:
		return a[i]
	case []int8:
		return a[i]
	case []uint16:
		return a[i]
	case []int16:
		return a[i]
	case []uint32:
		return a[i]
	case []int32:
		return a[i]
	case []bool:
		return a[i]
	case []uint64:
		return a[i]
	case []int64:
		return a[i]
	}
	return nil
}

// KV is one metadata key and its value.
type KV struct {
	Key   string
	Value Value
}

// Metadata is a file's key/value metadata, in file order.
type Metadata []KV

// Lookup returns the value of key.
func (m Metadata) Lookup(key string) (Value, bool) {
	for _, kv := range m {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return Value{}, false
}

// Get returns the value of key, or an error matching ErrNotFound.
func (m Metadata) Get(key string) (Value, error) {
	v, ok := m.Lookup(key)
	if !ok {
		return Value{}, fmt.Errorf("%w: metadata key %q", ErrNotFound, key)
	}
	return v, nil
}

// Set sets key to NewValue(x), in place if key is present, else at the end.
func (m *Metadata) Set(key string, x any) error {
	if key == "" {
		return fmt.Errorf("%w: empty metadata key", ErrInvalidArgument)
	}
	v, err := NewValue(x)
	if err != nil {
		return fmt.Errorf("metadata key %q: %w", key, err)
	}
	for i := range *m {
		if (*m)[i].Key == key {
			(*m)[i].Value = v
			return nil
		}
	}
	*m = append(*m, KV{key, v})
	return nil
}

func wrongType(key string, v Value, want string) error {
	t := v.typ.String()
	if v.typ == ValueArray {
		t = "ARRAY of " + v.elem.String()
	}
	return fmt.Errorf("%w: metadata key %q is %s, not %s", ErrValueType, key, t, want)
}

// GetString returns the string value of key.
func (m Metadata) GetString(key string) (string, error) {
	v, err := m.Get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.v.(string)
	if !ok {
		return "", wrongType(key, v, "STRING")
	}
	return s, nil
}

// GetBool returns the bool value of key.
func (m Metadata) GetBool(key string) (bool, error) {
	v, err := m.Get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.v.(bool)
	if !ok {
		return false, wrongType(key, v, "BOOL")
	}
	return b, nil
}

// GetInt returns the value of key, of any integer type, as an int64 (a
// UINT64 above math.MaxInt64 is ErrValueType).
func (m Metadata) GetInt(key string) (int64, error) {
	v, err := m.Get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.v.(type) {
	case uint8:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
	}
	return 0, wrongType(key, v, "an integer that fits an int64")
}

// GetUint returns the value of key, of any integer type, as a uint64 (a
// negative value is ErrValueType). Writers differ in the width they give
// counts such as a context length; GetUint takes any.
func (m Metadata) GetUint(key string) (uint64, error) {
	v, err := m.Get(key)
	if err != nil {
		return 0, err
	}
	if x, ok := v.v.(uint64); ok {
		return x, nil
	}
	n, err := m.GetInt(key)
	if err != nil || n < 0 {
		return 0, wrongType(key, v, "a non-negative integer")
	}
	return uint64(n), nil
}

// GetFloat returns the value of key, FLOAT32 or FLOAT64, as a float64.
func (m Metadata) GetFloat(key string) (float64, error) {
	v, err := m.Get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, wrongType(key, v, "FLOAT32 or FLOAT64")
}

// Elem is a Go type of the elements of a metadata array.
type Elem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | uint64 | int64 | float64 | Value
}

// ArrayOf returns the array value of key in m as a []T, with T the Go
// type of its elements (Value for an array of arrays); another element
// type is ErrValueType. The slice is the Metadata's own, not a copy.
func ArrayOf[T Elem](m Metadata, key string) ([]T, error) {
	v, err := m.Get(key)
	if err != nil {
		return nil, err
	}
	a, ok := v.v.([]T)
	if !ok {
		var zero []T
		return nil, wrongType(key, v, fmt.Sprintf("%T", zero))
	}
	return a, nil
}

// Architecture returns general.architecture, the model architecture
// (llama, qwen2, gemma3...), which prefixes the model's own keys.
func (m Metadata) Architecture() (string, error) { return m.GetString("general.architecture") }

// ArchUint returns the integer value of the architecture's key name:
// ArchUint("context_length") reads llama.context_length in a llama model.
func (m Metadata) ArchUint(name string) (uint64, error) {
	arch, err := m.Architecture()
	if err != nil {
		return 0, err
	}
	return m.GetUint(arch + "." + name)
}

// ContextLength returns the architecture's context_length.
func (m Metadata) ContextLength() (uint64, error) { return m.ArchUint("context_length") }

// EmbeddingLength returns the architecture's embedding_length.
func (m Metadata) EmbeddingLength() (uint64, error) { return m.ArchUint("embedding_length") }

// BlockCount returns the architecture's block_count (transformer layers).
func (m Metadata) BlockCount() (uint64, error) { return m.ArchUint("block_count") }

// Tokens returns the tokenizer's vocabulary, tokenizer.ggml.tokens (its
// scores and token types are ArrayOf[float32] tokenizer.ggml.scores and
// ArrayOf[int32] tokenizer.ggml.token_type).
func (m Metadata) Tokens() ([]string, error) { return ArrayOf[string](m, "tokenizer.ggml.tokens") }
