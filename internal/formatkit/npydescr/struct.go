package npydescr

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/pylit"
)

// Bounds of a structured type: fields in all (nested ones included),
// nesting depth, bytes of a record.
const (
	MaxFields = 1 << 12
	MaxDepth  = 8
	MaxRecord = 1 << 26
)

// ErrObject is the error ParseStruct returns (wrapped) for a field of
// Python objects ('O'), which no file holds as bytes.
var ErrObject = errors.New("object field")

// Struct is a structured type (a record of named fields) as NumPy's descr
// lists it: fields back to back, padding as fields named "" of type
// "|Vn".
type Struct struct {
	Fields []Field
	Size   int // bytes of a record
}

// Field is one field of a Struct.
type Field struct {
	Name string
	// Type is the field's type string (Parse's spelling); Struct, when
	// not nil, is its nested structured type instead.
	Type   string
	Struct *Struct
	Shape  []int // a subarray field's shape; nil for one element
	Offset int   // bytes from the record's start
	Size   int   // bytes, the subarray's included
}

// ParseStruct parses NumPy's descr list of a structured type, decoded
// from JSON (zarr v2's dtype) or from a Python literal (a .npy header)
// into []any, strings and integers (int64 or integral float64): items
// [name, type] or [name, type, shape], type a type string or a nested
// list, shape an integer or a list of them.
func ParseStruct(list []any) (Struct, error) {
	n := 0
	return parseStruct(list, 0, &n)
}

func parseStruct(list []any, depth int, count *int) (Struct, error) {
	if depth >= MaxDepth {
		return Struct{}, fmt.Errorf("structured type nested more than %d deep", MaxDepth)
	}
	if len(list) == 0 {
		return Struct{}, errors.New("structured type without fields")
	}
	var s Struct
	names := map[string]bool{}
	for i, item := range list {
		if *count++; *count > MaxFields {
			return Struct{}, fmt.Errorf("structured type of more than %d fields", MaxFields)
		}
		f, err := parseField(item, depth, count)
		if err != nil {
			return Struct{}, fmt.Errorf("field %d: %w", i, err)
		}
		if f.Name != "" && names[f.Name] {
			return Struct{}, fmt.Errorf("field name %q twice", f.Name)
		}
		names[f.Name] = true
		f.Offset = s.Size
		if s.Size += f.Size; s.Size > MaxRecord {
			return Struct{}, fmt.Errorf("record of more than %d bytes", MaxRecord)
		}
		s.Fields = append(s.Fields, f)
	}
	return s, nil
}

func parseField(item any, depth int, count *int) (Field, error) {
	t, ok := item.([]any)
	if !ok || len(t) < 2 || len(t) > 3 {
		return Field{}, fmt.Errorf("%.80q is not [name, type] or [name, type, shape]", item)
	}
	var f Field
	if f.Name, ok = t[0].(string); !ok || !goodName(f.Name) {
		return Field{}, fmt.Errorf("name %.80q: not a string of printable ASCII without quotes or backslashes", t[0])
	}
	switch ty := t[1].(type) {
	case string:
		if ty == "O" || len(ty) >= 2 && ty[1] == 'O' {
			return Field{}, fmt.Errorf("%q: %w", f.Name, ErrObject)
		}
		d, ok := Parse(ty)
		if !ok {
			return Field{}, fmt.Errorf("%q: type %q", f.Name, ty)
		}
		if f.Name == "" && d.Kind != 'V' {
			return Field{}, fmt.Errorf("a field without a name of type %q, not padding (|Vn)", ty)
		}
		f.Type, f.Size = d.String(), d.Size()
	case []any:
		if f.Name == "" {
			return Field{}, errors.New("a nested structured type without a name")
		}
		sub, err := parseStruct(ty, depth+1, count)
		if err != nil {
			return Field{}, fmt.Errorf("%q: %w", f.Name, err)
		}
		f.Struct, f.Size = &sub, sub.Size
	default:
		return Field{}, fmt.Errorf("%q: type %.80q", f.Name, t[1])
	}
	if len(t) == 3 {
		shape, err := parseShape(t[2])
		if err != nil {
			return Field{}, fmt.Errorf("%q: %w", f.Name, err)
		}
		f.Shape = shape
		for _, n := range shape {
			if n > 0 && f.Size > MaxRecord/n {
				return Field{}, fmt.Errorf("%q: a subarray of more than %d bytes", f.Name, MaxRecord)
			}
			f.Size *= n
		}
	}
	return f, nil
}

// parseShape parses a subarray's shape: an integer or a list of them, each
// at least 0.
func parseShape(v any) ([]int, error) {
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	if len(list) == 0 || len(list) > 32 {
		return nil, fmt.Errorf("subarray shape %.80q", v)
	}
	shape := make([]int, len(list))
	for i, x := range list {
		n, ok := integer(x)
		if !ok || n < 0 || n > MaxRecord {
			return nil, fmt.Errorf("subarray shape %.80q", v)
		}
		shape[i] = int(n)
	}
	return shape, nil
}

// integer returns x as an integer: an int64, or a float64 (JSON) with no
// fraction.
func integer(x any) (int64, bool) {
	switch n := x.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) <= 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

// goodName reports whether a field name is one Repr writes as it reads:
// printable ASCII, no quote or backslash ("" too: padding).
func goodName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '\'' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ParseRepr parses a structured type's descr list as a .npy header holds
// it, a Python literal: [('x', '<f4'), ('v', '<i2', (3,))].
func ParseRepr(s string) (Struct, error) {
	v, err := pylit.Parse(strings.TrimSpace(s))
	if err != nil {
		return Struct{}, fmt.Errorf("descr list %w", err)
	}
	list, ok := pylit.Plain(v).([]any)
	if !ok {
		return Struct{}, errors.New("descr is not a list of fields")
	}
	return ParseStruct(list)
}

// Repr returns s as NumPy writes a descr list in a .npy header, e.g.
// [('x', '<f4'), ('v', '<i2', (3,))].
func (s Struct) Repr() string {
	var b strings.Builder
	s.repr(&b)
	return b.String()
}

func (s Struct) repr(b *strings.Builder) {
	b.WriteByte('[')
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("('" + f.Name + "', ")
		if f.Struct != nil {
			f.Struct.repr(b)
		} else {
			b.WriteString("'" + f.Type + "'")
		}
		if f.Shape != nil {
			b.WriteString(", (")
			for j, n := range f.Shape {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(strconv.Itoa(n))
			}
			if len(f.Shape) == 1 {
				b.WriteByte(',')
			}
			b.WriteByte(')')
		}
		b.WriteByte(')')
	}
	b.WriteByte(']')
}

// List returns s as the nested lists ParseStruct reads (what zarr v2's
// dtype holds, once encoded as JSON): [["x", "<f4"], ["v", "<i2", [3]]].
func (s Struct) List() []any {
	out := make([]any, len(s.Fields))
	for i, f := range s.Fields {
		var ty any = f.Type
		if f.Struct != nil {
			ty = f.Struct.List()
		}
		item := []any{f.Name, ty}
		if f.Shape != nil {
			shape := make([]any, len(f.Shape))
			for j, n := range f.Shape {
				shape[j] = n
			}
			item = append(item, shape)
		}
		out[i] = item
	}
	return out
}
