package pylit

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestParse checks the literals a .npy header holds and what is refused,
// with the byte each refusal names.
func TestParse(t *testing.T) {
	v, err := Parse(`{'descr': [('x', '<f4', (3,)), ("y", '|u1')], 'fortran_order': False, 'shape': (2, 3), 'ok': True, }  `)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"descr":         []any{Tuple{"x", "<f4", Tuple{int64(3)}}, Tuple{"y", "|u1"}},
		"fortran_order": false, "shape": Tuple{int64(2), int64(3)}, "ok": true,
	}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("Parse = %#v, want %#v", v, want)
	}
	plain := []any{[]any{"x", "<f4", []any{int64(3)}}, []any{"y", "|u1"}}
	if got := Plain(want["descr"]); !reflect.DeepEqual(got, plain) {
		t.Errorf("Plain = %#v, want %#v", got, plain)
	}
	for in, at := range map[string]int{
		"": 0, "{'a': 1": 7, "{'a' 1}": 5, "{1: 2}": 1, "{'a': 1, 'a': 2}": 15, "[1, 2] x": 7, "'a\\'": 1,
		"99999999999999999999": 20, "-1": 0, "None": 0, strings.Repeat("(", 20) + "1": 17, "'unterminated": 1,
	} {
		_, err := Parse(in)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != at {
			t.Errorf("Parse(%q) = %v, want a syntax error at byte %d", in, err, at)
		}
	}
}
