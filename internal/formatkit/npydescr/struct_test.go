package npydescr

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestParseStruct parses descr lists as zarr v2 stores them (JSON) and
// checks the offsets, sizes and NumPy's spelling of each (Repr: what
// NumPy 1.24 printed for the same dtypes' descr), and that List reads
// back as the same Struct.
func TestParseStruct(t *testing.T) {
	for _, c := range []struct {
		json, repr string
		size       int
		offsets    []int
	}{
		{`[["x","<f4"],["y","=i8"]]`, `[('x', '<f4'), ('y', '<i8')]`, 12, []int{0, 4}},
		{`[["x","<f4"],["v",">i2",[3]],["","|V2"],["s",[["a","<u1"],["","|V3"],["b","<U2"]]],["m","<f8",[2,3]]]`,
			`[('x', '<f4'), ('v', '>i2', (3,)), ('', '|V2'), ('s', [('a', '|u1'), ('', '|V3'), ('b', '<U2')]), ('m', '<f8', (2, 3))]`, 72, []int{0, 4, 10, 12, 24}},
		{`[["t","<M8[ns]",2],["z","|S3",[0]]]`, `[('t', '<M8[ns]', (2,)), ('z', '|S3', (0,))]`, 16, []int{0, 16}},
	} {
		var list []any
		if err := json.Unmarshal([]byte(c.json), &list); err != nil {
			t.Fatal(err)
		}
		s, err := ParseStruct(list)
		if err != nil {
			t.Errorf("ParseStruct(%s): %v", c.json, err)
			continue
		}
		var offsets []int
		for _, f := range s.Fields {
			offsets = append(offsets, f.Offset)
		}
		if s.Repr() != c.repr || s.Size != c.size || !reflect.DeepEqual(offsets, c.offsets) {
			t.Errorf("ParseStruct(%s) = %s, %d bytes, offsets %v; want %s, %d, %v", c.json, s.Repr(), s.Size, offsets, c.repr, c.size, c.offsets)
		}
		again, err := ParseStruct(s.List())
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("ParseStruct(List()) of %s = %+v, %v; want %+v", c.json, again, err, s)
		}
	}
}

// TestParseStructRefused checks descr lists NumPy would not write, or
// that no file holds as bytes, and the bounds.
func TestParseStructRefused(t *testing.T) {
	deep := `["a","<f4"]`
	for range MaxDepth {
		deep = `["a",[` + deep + `]]`
	}
	var many strings.Builder // MaxFields + 1 fields in all
	for i := range MaxFields {
		fmt.Fprintf(&many, `["a%d","|u1"],`, i)
	}
	for _, s := range []string{
		`[]`, `[["x"]]`, `[["x","<f4",[2],1]]`, `[[1,"<f4"]]`, `[["x","<f3"]]`, `[["x","<f4"],["x","<i4"]]`,
		`[["","<f4"]]`, `[["",[["a","<f4"]]]]`, `[["x\"","<f4"]]`, `[["x'","<f4"]]`, `[["é","<f4"]]`, `[["x\\","<f4"]]`,
		`[["x","<f4",[-1]]]`, `[["x","<f4",[1.5]]]`, `[["x","<f4",[]]]`, `[["x","<f4","3"]]`, `[["x",[]]]`, `[["x",4]]`,
		`[["x","<f8",[1024,1024,1024]]]`, `[["x","|V67108864"],["y","|u1"]]`, `[` + deep + `]`, `[` + many.String() + `["b","<f4"]]`,
		`["x","<f4"]`,
	} {
		var list []any
		if err := json.Unmarshal([]byte(s), &list); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got, err := ParseStruct(list); err == nil {
			t.Errorf("ParseStruct(%.80s) = %s, want refused", s, got.Repr())
		}
	}
	for _, s := range []string{`[["x","O"]]`, `[["x","|O8"]]`, `[["s",[["o","<O"]]]]`} {
		var list []any
		json.Unmarshal([]byte(s), &list)
		if _, err := ParseStruct(list); !errors.Is(err, ErrObject) {
			t.Errorf("ParseStruct(%s): %v, want ErrObject", s, err)
		}
	}
}

// FuzzParseStruct checks that any JSON descr list parses without a
// panic, within the bounds, and reads back the same from List.
func FuzzParseStruct(f *testing.F) {
	f.Add(`[["x","<f4"],["v",">i2",[3]],["","|V2"],["s",[["a","<u1"]]]]`)
	f.Add(`[["t","<M8[ns]",2],["z","|S3",[0]]]`)
	f.Fuzz(func(t *testing.T, s string) {
		var list []any
		if json.Unmarshal([]byte(s), &list) != nil {
			return
		}
		st, err := ParseStruct(list)
		if err != nil {
			return
		}
		if st.Size > MaxRecord || st.Size < 0 {
			t.Fatalf("%s: record of %d bytes", s, st.Size)
		}
		again, err := ParseStruct(st.List())
		if err != nil || !reflect.DeepEqual(again, st) {
			t.Fatalf("%s: List reads back as %+v, %v", s, again, err)
		}
	})
}
