package npy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type expectedFile struct {
	Descr        string  `json:"descr"`
	FortranOrder bool    `json:"fortran_order"`
	Shape        []int64 `json:"shape"`
	Sha256       string  `json:"sha256"`
}

type expected struct {
	Generator string                  `json:"generator"`
	Files     map[string]expectedFile `json:"files"`
	Object    string                  `json:"object"`
}

func readExpected(t *testing.T, dir string) expected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if len(e.Files) == 0 {
		t.Fatal("expected.json lists no files")
	}
	return e
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// refDir is the directory of files written by numpy.save with their
// expected.json (testdata, or KVIK_NPY_REF_DIR on the GPU machine).
func refDir() string {
	if d := os.Getenv("KVIK_NPY_REF_DIR"); d != "" {
		return d
	}
	return "testdata"
}

// TestNumpyFiles loads files numpy wrote and compares header fields and
// the data's sha256 with what numpy itself loaded.
func TestNumpyFiles(t *testing.T) {
	dir := refDir()
	e := readExpected(t, dir)
	for name, want := range e.Files {
		a, err := LoadHost(context.Background(), filepath.Join(dir, name), nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		d, _ := ParseDtype(want.Descr)
		if a.Dtype != d || a.FortranOrder != want.FortranOrder || !slices.Equal(a.Shape, want.Shape) || sum(a.Data) != want.Sha256 {
			t.Errorf("%s: got %v fortran=%v shape=%v sha=%s, want %+v", name, a.Dtype, a.FortranOrder, a.Shape, sum(a.Data)[:8], want)
		}
	}
	if e.Object != "" {
		if _, err := LoadHost(context.Background(), filepath.Join(dir, e.Object), nil); !errors.Is(err, ErrObjectArray) || !errors.Is(err, ErrUnsupportedDtype) {
			t.Errorf("object array: %v, want ErrObjectArray", err)
		}
	}
}

var allDtypes = []string{"|b1", "|i1", "|u1", "<i2", ">i2", "<u2", ">u2", "<i4", ">i4", "<u4", "<i8", ">i8", "<u8", ">u8",
	"<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c8", "<c16", ">c16", "<M8[ns]", ">M8[10us]", "<m8[D]", "<m8", "|S1", "|S7", "<U3", ">U2", "|V5",
	"[('x', '<f4'), ('n', '>i2', (3,))]", "[('a', '|u1'), ('', '|V7'), ('b', '<f8')]", "[('p', [('x', '<f4'), ('y', '>f4')]), ('id', '<u8'), ('tag', '|S3', (2, 2))]"}

// randData returns random bytes of an array of d and shape (bools 0 or
// 1, as NumPy writes them).
func randData(rng *rand.Rand, d Dtype, shape []int64) []byte {
	n := int64(d.Size())
	for _, s := range shape {
		n *= s
	}
	data := make([]byte, n)
	for k := range data {
		data[k] = byte(rng.Uint32())
		if d.Kind() == 'b' {
			data[k] &= 1
		}
	}
	return data
}

// TestRoundTrip saves random arrays and loads them back; the saved bytes
// must also parse with the same header.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	for i, ds := range allDtypes {
		d, err := ParseDtype(ds)
		if err != nil {
			t.Fatal(err)
		}
		for _, shape := range [][]int64{{}, {0}, {int64(rng.IntN(50) + 1)}, {3, int64(rng.IntN(9) + 1)}, {2, 0, 5}, {2, 3, int64(rng.IntN(7) + 1)}} {
			data := randData(rng, d, shape)
			fortran := len(shape) >= 2 && i%2 == 0
			p := filepath.Join(dir, "x.npy")
			if err := Save(context.Background(), p, SaveArray{Dtype: d, Shape: shape, Fortran: fortran, Data: data}); err != nil {
				t.Fatal(err)
			}
			a, err := LoadHost(context.Background(), p, nil)
			if err != nil {
				t.Fatalf("%s %v: %v", ds, shape, err)
			}
			if a.Dtype != d || a.FortranOrder != fortran || !slices.Equal(a.Shape, shape) || !bytes.Equal(a.Data, data) {
				t.Fatalf("%s %v: round trip differs: %+v", ds, shape, a.Header)
			}
			if a.DataOffset%64 != 0 {
				t.Errorf("data offset %d is not a multiple of 64", a.DataOffset)
			}
		}
	}
}

func TestSaveRejects(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npy")
	for _, c := range []struct {
		d     Dtype
		shape []int64
		n     int
	}{{Float32, []int64{3}, 8}, {Dtype("<f3"), []int64{1}, 3}, {Float64, []int64{-1}, 0}, {Dtype("<O8"), []int64{1}, 8}} {
		if err := Save(context.Background(), p, SaveArray{Dtype: c.d, Shape: c.shape, Data: make([]byte, c.n)}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Save(%v, %v, %d bytes) = %v, want ErrInvalidArgument", c.d, c.shape, c.n, err)
		}
	}
}

// TestDtypes checks the dtype constants against ParseDtype and their
// parts, MakeDtype's spelling, and a non-canonical spelling that Save
// refuses.
func TestDtypes(t *testing.T) {
	for _, c := range []struct {
		d           Dtype
		order, kind byte
		size        int
	}{
		{Bool, '|', 'b', 1}, {Int8, '|', 'i', 1}, {Uint8, '|', 'u', 1}, {Int16, '<', 'i', 2}, {Uint16, '<', 'u', 2},
		{Int32, '<', 'i', 4}, {Uint32, '<', 'u', 4}, {Int64, '<', 'i', 8}, {Uint64, '<', 'u', 8}, {Float16, '<', 'f', 2},
		{Float32, '<', 'f', 4}, {Float64, '<', 'f', 8}, {Complex64, '<', 'c', 8}, {Complex128, '<', 'c', 16},
		{"|S5", '|', 'S', 5}, {"|S1", '|', 'S', 1}, {"<U3", '<', 'U', 12}, {">U2", '>', 'U', 8}, {"<U1", '<', 'U', 4}, {"|V4", '|', 'V', 4},
	} {
		p, err := ParseDtype(string(c.d))
		if err != nil || p != c.d || !c.d.Valid() || c.d.Order() != c.order || c.d.Kind() != c.kind || c.d.Size() != c.size {
			t.Errorf("%q: parses as %q (%v), parts %c %c %d", c.d, p, err, c.d.Order(), c.d.Kind(), c.d.Size())
		}
		if m, err := MakeDtype(c.order, c.kind, c.size); err != nil || m != c.d {
			t.Errorf("MakeDtype(%c, %c, %d) = %q, %v; want %q", c.order, c.kind, c.size, m, err, c.d)
		}
	}
	if d, err := MakeDtype('<', 'u', 1); err != nil || d != Uint8 {
		t.Errorf("MakeDtype('<', 'u', 1) = %q, %v; want %q", d, err, Uint8)
	}
	if d, err := MakeDtype('=', 'f', 8); err != nil || d != Float64 {
		t.Errorf("MakeDtype('=', 'f', 8) = %q, %v; want %q", d, err, Float64)
	}
	for _, d := range []Dtype{"", "<f", "=f8", "<f3", ">O8", "f4", "<f-4", "|S0", "<S5", "|U3", "<U0", ">V2", "<U+2", "|S2000000"} {
		if d.Valid() {
			t.Errorf("%q is valid", d)
		}
	}
	if n := Dtype("<f").Size(); n != 0 {
		t.Errorf("the size of %q is %d, want 0", "<f", n)
	}
	// datetime64 and timedelta64: the unit spelled as NumPy spells it.
	for in, want := range map[string]Dtype{"<M8[ns]": "<M8[ns]", ">m8[10us]": ">m8[10us]", "=M8[1s]": "<M8[s]",
		"<M8[3μs]": "<M8[3us]", "<m8": "<m8", ">M8[D]": ">M8[D]"} {
		d, err := ParseDtype(in)
		if err != nil || d != want || !d.Valid() || d.Size() != 8 || d.Kind() != in[1] {
			t.Errorf("%q: parses as %q (%v), size %d, kind %c; want %q", in, d, err, d.Size(), d.Kind(), want)
		}
	}
	for _, bad := range []string{"|M8[ns]", "<M4[ns]", "<M8[xs]", "<M8[0s]", "<M8[ns", "<M8[]", "<M8[-1s]", "<M8[2147483648s]", "<Mns", "<M[ns]"} {
		if _, err := ParseDtype(bad); !errors.Is(err, ErrUnsupportedDtype) {
			t.Errorf("%q: %v, want ErrUnsupportedDtype", bad, err)
		}
	}
	p := filepath.Join(t.TempDir(), "x.npy")
	if err := Save(context.Background(), p, SaveArray{Dtype: "=f8", Shape: []int64{1}, Data: make([]byte, 8)}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Save of dtype \"=f8\": %v, want ErrInvalidArgument", err)
	}
}

// TestOptionsDevices checks that one array is not placed on two devices:
// the load fails before any GPU is touched.
func TestOptionsDevices(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npy")
	if err := Save(context.Background(), p, SaveArray{Dtype: Int16, Shape: []int64{2}, Data: []byte{1, 2, 3, 4}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), p, &Options{Devices: []int{0, 1}}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Load onto two devices: %v, want ErrInvalidArgument", err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeader(context.Background(), p, nil)
	if err != nil || h.Dtype != Int16 || h.Size() != 4 || h.DataOffset != st.Size()-4 || h.DataOffset%64 != 0 {
		t.Errorf("ReadHeader: %+v, %v", h, err)
	}
}

func header(ver byte, dict string, data int) []byte {
	b := append([]byte{}, magic...)
	b = append(b, ver, 0)
	if ver == 1 {
		b = append(b, byte(len(dict)), byte(len(dict)>>8))
	} else {
		b = append(b, byte(len(dict)), byte(len(dict)>>8), byte(len(dict)>>16), byte(len(dict)>>24))
	}
	b = append(b, dict...)
	return append(b, make([]byte, data)...)
}

// TestBadHeaders checks hostile or broken files get typed errors.
func TestBadHeaders(t *testing.T) {
	ok := "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", []byte("\x93NUM"), ErrInvalidHeader},
		{"magic", append([]byte("\x93NUMPZ\x01\x00"), header(1, ok, 24)[8:]...), ErrInvalidHeader},
		{"version", header(4, ok, 24), ErrInvalidHeader},
		{"huge length", append(header(2, "", 0)[:8], 0xff, 0xff, 0xff, 0x7f), ErrInvalidHeader},
		{"length past end", append(header(1, "", 0)[:8], 0xff, 0x00, '{'), ErrInvalidHeader},
		{"data short", header(1, ok, 23), ErrInvalidHeader},
		{"data long", header(1, ok, 25), ErrInvalidHeader},
		{"object", header(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16), ErrObjectArray},
		{"empty string", header(1, "{'descr': '<U0', 'fortran_order': False, 'shape': (2,), }", 0), ErrUnsupportedDtype},
		{"huge string", header(1, "{'descr': '|S9999999999', 'fortran_order': False, 'shape': (1,), }", 8), ErrUnsupportedDtype},
		{"structured, object field", header(1, "{'descr': [('a', '<i4'), ('o', '|O')], 'fortran_order': False, 'shape': (2,), }", 24), ErrObjectArray},
		{"structured, bad field", header(1, "{'descr': [('a', '<i4', 'x')], 'fortran_order': False, 'shape': (2,), }", 0), ErrUnsupportedDtype},
		{"structured, data short", header(1, "{'descr': [('a', '<i4'), ('b', '|u1', (3,))], 'fortran_order': False, 'shape': (2,), }", 13), ErrInvalidHeader},
		{"structured, huge record", header(1, "{'descr': [('a', '<f8', (65536, 65536))], 'fortran_order': False, 'shape': (0,), }", 0), ErrUnsupportedDtype},
		{"f16 longdouble", header(1, "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", 16), ErrUnsupportedDtype},
		{"negative dim", header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 0), ErrInvalidHeader},
		{"missing key", header(1, "{'descr': '<f4', 'shape': (2,), }", 8), ErrInvalidHeader},
		{"extra key", header(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8), ErrInvalidHeader},
		{"dup key", header(1, "{'descr': '<f4', 'descr': '<f4', 'shape': (2,)}", 8), ErrInvalidHeader},
		{"bool as int", header(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8), ErrInvalidHeader},
		{"overflow", header(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0), ErrInvalidHeader},
		{"big int", header(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0), ErrInvalidHeader},
		{"deep", header(1, "{'descr': "+string(bytes.Repeat([]byte("("), 100))+"}", 0), ErrInvalidHeader},
		{"unterminated", header(1, "{'descr': '<f4", 0), ErrInvalidHeader},
	}
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHost(context.Background(), p, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// FuzzDecodeHeader checks that no input panics, and that an accepted header
// describes exactly the bytes the file holds.
func FuzzDecodeHeader(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.npy")
	seeds := slices.Concat(names[:min(len(names), 12)], []string{"testdata/a085.npy", "testdata/a100.npy", "testdata/a134.npy"}) // and two datetime64s, a structured dtype
	for _, n := range seeds {
		b, _ := os.ReadFile(n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrUnsupportedDtype) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if h.DataOffset+h.Size() != int64(len(b)) {
			t.Fatalf("header accepted with offset %d size %d for %d bytes", h.DataOffset, h.Size(), len(b))
		}
	})
}

// TestErrorsQuoteHeaderText reads headers whose keys and shape hold
// terminal escape sequences: the errors name them quoted, without a
// control byte, so printing one cannot drive the terminal.
func TestErrorsQuoteHeaderText(t *testing.T) {
	esc := "\x1b]0;owned\x07\x1b[2K\r"
	for name, dict := range map[string]string{
		"key":              "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), '" + esc + "': 1}",
		"shape":            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, '" + esc + "'), }",
		"descr":            "{'descr': '" + esc + "', 'fortran_order': False, 'shape': (2,), }",
		"field":            "{'descr': [('" + esc + "', '<f4')], 'fortran_order': False, 'shape': (2,), }",
		"type":             "{'descr': [('x', '" + esc + "')], 'fortran_order': False, 'shape': (2,), }",
		"shape of a field": "{'descr': [('x', '<f4', ('" + esc + "',))], 'fortran_order': False, 'shape': (2,), }",
	} {
		b := header(1, dict, 8)
		_, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
		if !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrUnsupportedDtype) {
			t.Fatalf("%s: %v, want ErrInvalidHeader", name, err)
		}
		if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Errorf("%s: the error holds control characters: %q", name, err)
		}
	}
}

// TestStructuredDtypes checks structured dtypes: NumPy's spellings of a
// descr list parse to one spelling, with kind 'V', order '|', the record's
// size and each field's offset; bad lists and object fields are refused,
// as is a non-canonical spelling given to Save.
func TestStructuredDtypes(t *testing.T) {
	for in, want := range map[string]Dtype{
		`[('x', '<f4'), ('n', '>i2', (3,))]`:     "[('x', '<f4'), ('n', '>i2', (3,))]",
		`[("x", "=f4"), ("n", ">i2", 3)]`:        "[('x', '<f4'), ('n', '>i2', (3,))]",
		` [('x','<f4',),('n','>i2',(3,),),] `:    "[('x', '<f4'), ('n', '>i2', (3,))]",
		`[('s', [('a', '<u1'), ('', '|V3')])]`:   "[('s', [('a', '|u1'), ('', '|V3')])]",
		`[('t', '<M8[us]'), ('u', '<U2', (2,))]`: "[('t', '<M8[us]'), ('u', '<U2', (2,))]",
	} {
		d, err := ParseDtype(in)
		if err != nil || d != want || !d.Valid() || d.Kind() != 'V' || d.Order() != '|' || d.BigEndian() {
			t.Errorf("ParseDtype(%s) = %q, %v (kind %c, order %c); want %q", in, d, err, d.Kind(), d.Order(), want)
		}
	}
	d := Dtype("[('p', [('x', '<f4'), ('y', '>f4')]), ('id', '<u8'), ('tag', '|S3', (2, 2))]")
	want := []Field{{"p", "[('x', '<f4'), ('y', '>f4')]", nil, 0, 8}, {"id", "<u8", nil, 8, 8}, {"tag", "|S3", []int{2, 2}, 16, 12}}
	if got := d.Fields(); d.Size() != 28 || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: size %d, fields %+v; want 28, %+v", d, d.Size(), got, want)
	}
	if f := Float32.Fields(); f != nil {
		t.Errorf("Float32.Fields() = %v, want nil", f)
	}
	for _, bad := range []string{"[]", "[('x',)]", "[('x', '<f3')]", "[('x', '<f4'), ('x', '<f4')]", "[('', '<f4')]",
		"[('x', '<f4', (-1,))]", "[('x', '<f4')] x", "[('x', '<f4'", "[1, 2]", "[('x', {'a': 1})]", "[('x', '<f8', (1024, 1024, 1024))]"} {
		if d, err := ParseDtype(bad); !errors.Is(err, ErrUnsupportedDtype) || errors.Is(err, ErrObjectArray) {
			t.Errorf("ParseDtype(%s) = %q, %v; want ErrUnsupportedDtype", bad, d, err)
		}
	}
	for _, obj := range []string{"[('x', 'O')]", "[('s', [('o', '|O')])]"} {
		if _, err := ParseDtype(obj); !errors.Is(err, ErrObjectArray) {
			t.Errorf("ParseDtype(%s): %v, want ErrObjectArray", obj, err)
		}
	}
	p := filepath.Join(t.TempDir(), "x.npy")
	if err := Save(context.Background(), p, SaveArray{Dtype: `[("x", "<f4")]`, Shape: []int64{1}, Data: make([]byte, 4)}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Save of a structured dtype spelled with double quotes: %v, want ErrInvalidArgument", err)
	}
}
