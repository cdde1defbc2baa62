package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The expected.json that gguf/testdata/make_fixtures.py writes beside the
// files gguf-py's GGUFWriter wrote.
type expectedValue struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Elem  string          `json:"elem"`
	Value json.RawMessage `json:"value"`
}

type expectedTensor struct {
	Name   string  `json:"name"`
	Type   string  `json:"type"`
	TypeID uint32  `json:"type_id"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
	NBytes int64   `json:"n_bytes"`
	Sha256 string  `json:"sha256"`
}

type expectedFile struct {
	Version    uint32           `json:"version"`
	Alignment  int64            `json:"alignment"`
	DataOffset int64            `json:"data_offset"`
	Error      string           `json:"error"`
	Metadata   []expectedValue  `json:"metadata"`
	Tensors    []expectedTensor `json:"tensors"`
}

type expected struct {
	Generator string                  `json:"generator"`
	Files     map[string]expectedFile `json:"files"`
}

// refDir is the folder of reference files and their expected.json:
// KVIK_GGUF_REF_DIR, or the committed fixtures.
func refDir() string {
	if d := os.Getenv("KVIK_GGUF_REF_DIR"); d != "" {
		return d
	}
	return "testdata"
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
	if len(e.Files) < 5 {
		t.Fatalf("expected.json lists %d files", len(e.Files))
	}
	return e
}

// jsonValue decodes an expected value (floats as the hex of their
// little-endian bytes) into what Value.Any returns.
func jsonValue(t *testing.T, typ, elem string, raw json.RawMessage) any {
	t.Helper()
	if typ == "ARRAY" {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			t.Fatal(err)
		}
		if elem == "ARRAY" {
			var out []Value
			for _, it := range items {
				var ev expectedValue
				if err := json.Unmarshal(it, &ev); err != nil {
					t.Fatal(err)
				}
				v, err := NewValue(jsonValue(t, ev.Type, ev.Elem, ev.Value))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
			return out
		}
		var xs []any
		for _, it := range items {
			xs = append(xs, jsonValue(t, elem, "", it))
		}
		return typedSlice(t, elem, xs)
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		t.Fatal(err)
	}
	num := func() json.Number { return x.(json.Number) }
	i64 := func() int64 { n, _ := num().Int64(); return n }
	switch typ {
	case "UINT8":
		return uint8(i64())
	case "INT8":
		return int8(i64())
	case "UINT16":
		return uint16(i64())
	case "INT16":
		return int16(i64())
	case "UINT32":
		return uint32(i64())
	case "INT32":
		return int32(i64())
	case "INT64":
		return i64()
	case "UINT64":
		var u uint64
		if err := json.Unmarshal([]byte(num()), &u); err != nil {
			t.Fatal(err)
		}
		return u
	case "FLOAT32", "FLOAT64":
		b, err := hex.DecodeString(x.(string))
		if err != nil {
			t.Fatal(err)
		}
		if typ == "FLOAT32" {
			return math.Float32frombits(binary.LittleEndian.Uint32(b))
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case "BOOL":
		return x.(bool)
	case "STRING":
		return x.(string)
	}
	t.Fatalf("type %s", typ)
	return nil
}

func typedSlice(t *testing.T, elem string, xs []any) any {
	conv := func(f func(any)) {
		for _, x := range xs {
			f(x)
		}
	}
	switch elem {
	case "UINT8":
		out := []uint8{}
		conv(func(x any) { out = append(out, x.(uint8)) })
		return out
	case "INT8":
		out := []int8{}
		conv(func(x any) { out = append(out, x.(int8)) })
		return out
	case "UINT16":
		out := []uint16{}
		conv(func(x any) { out = append(out, x.(uint16)) })
		return out
	case "INT16":
		out := []int16{}
		conv(func(x any) { out = append(out, x.(int16)) })
		return out
	case "UINT32":
		out := []uint32{}
		conv(func(x any) { out = append(out, x.(uint32)) })
		return out
	case "INT32":
		out := []int32{}
		conv(func(x any) { out = append(out, x.(int32)) })
		return out
	case "FLOAT32":
		out := []float32{}
		conv(func(x any) { out = append(out, x.(float32)) })
		return out
	case "BOOL":
		out := []bool{}
		conv(func(x any) { out = append(out, x.(bool)) })
		return out
	case "STRING":
		out := []string{}
		conv(func(x any) { out = append(out, x.(string)) })
		return out
	case "UINT64":
		out := []uint64{}
		conv(func(x any) { out = append(out, x.(uint64)) })
		return out
	case "INT64":
		out := []int64{}
		conv(func(x any) { out = append(out, x.(int64)) })
		return out
	case "FLOAT64":
		out := []float64{}
		conv(func(x any) { out = append(out, x.(float64)) })
		return out
	}
	t.Fatalf("array of %s", elem)
	return nil
}

// sameValue compares values bit for bit (floats by their bits, so -0 and
// NaN payloads count).
func sameValue(a, b Value) bool {
	if a.typ != b.typ || a.elem != b.elem || a.Len() != b.Len() {
		return false
	}
	return bytes.Equal(appendValue(nil, a), appendValue(nil, b)) && fmt.Sprintf("%T", a.v) == fmt.Sprintf("%T", b.v)
}

// TestFixtures parses every file gguf-py wrote (testdata, or
// KVIK_GGUF_REF_DIR) and compares the version, alignment, data offset,
// every metadata value and every tensor's type, shape, offset, size and
// bytes with what the generator recorded; the big-endian file must be
// refused with ErrBigEndian.
func TestFixtures(t *testing.T) {
	dir := refDir()
	e := readExpected(t, dir)
	for name, ef := range e.Files {
		path := filepath.Join(dir, name)
		if ef.Error != "" {
			if _, err := LoadHost(context.Background(), path, nil); !errors.Is(err, ErrBigEndian) || ef.Error != "big-endian" {
				t.Errorf("%s: %v, want %s (ErrBigEndian)", name, err, ef.Error)
			}
			continue
		}
		m, err := LoadHost(context.Background(), path, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		h, err := ReadHeader(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != ef.Version || h.Version != ef.Version || m.Alignment != ef.Alignment || h.DataOffset != ef.DataOffset {
			t.Errorf("%s: version %d alignment %d data offset %d, want %d %d %d", name, m.Version, m.Alignment, h.DataOffset, ef.Version, ef.Alignment, ef.DataOffset)
		}
		if len(m.Metadata) != len(ef.Metadata) {
			t.Fatalf("%s: %d metadata keys, want %d", name, len(m.Metadata), len(ef.Metadata))
		}
		for i, ev := range ef.Metadata {
			want, err := NewValue(jsonValue(t, ev.Type, ev.Elem, ev.Value))
			if err != nil {
				t.Fatal(err)
			}
			got := m.Metadata[i]
			if got.Key != ev.Key || !sameValue(got.Value, want) {
				t.Errorf("%s: metadata %d: %s = %v (%s), want %s = %v", name, i, got.Key, got.Value, got.Value.Type(), ev.Key, want)
			}
		}
		if len(m.Tensors) != len(ef.Tensors) {
			t.Fatalf("%s: %d tensors, want %d", name, len(m.Tensors), len(ef.Tensors))
		}
		for i, et := range ef.Tensors {
			g := m.Tensors[i]
			if g.Name != et.Name || g.Type.String() != et.Type || uint32(g.Type) != et.TypeID || !slices.Equal(g.Shape, et.Shape) ||
				g.Offset != et.Offset || g.Size() != et.NBytes || sum(g.Data) != et.Sha256 {
				t.Errorf("%s: tensor %d: %s %s %v at %d, %d bytes, sha256 %s; want %+v", name, i, g.Name, g.Type, g.Shape, g.Offset, g.Size(), sum(g.Data), et)
			}
		}
	}
}

// TestSaveMatchesGGUFPy saves each fixture's metadata and tensors again
// and expects the very bytes gguf-py wrote.
func TestSaveMatchesGGUFPy(t *testing.T) {
	dir := refDir()
	for name, ef := range readExpected(t, dir).Files {
		if ef.Error != "" || ef.Version != 3 {
			continue
		}
		path := filepath.Join(dir, name)
		m, err := LoadHost(context.Background(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var ts []SaveTensor
		for _, g := range m.Tensors {
			ts = append(ts, SaveTensor{Name: g.Name, Type: g.Type, Shape: g.Shape, Data: g.Data})
		}
		out := filepath.Join(t.TempDir(), name)
		if err := Save(context.Background(), out, ts, m.Metadata); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(path)
		b, _ := os.ReadFile(out)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: kvik wrote %d bytes that differ from gguf-py's %d", name, len(b), len(a))
		}
	}
}

// TestFixtureGetters reads the typed getters of the all-types fixture.
func TestFixtureGetters(t *testing.T) {
	h, err := ReadHeader(context.Background(), filepath.Join("testdata", "all_types.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	md := h.Metadata
	arch, err1 := md.Architecture()
	ctx, err2 := md.ContextLength()
	emb, err3 := md.EmbeddingLength()
	blocks, err4 := md.BlockCount()
	toks, err5 := md.Tokens()
	scores, err6 := ArrayOf[float32](md, "tokenizer.ggml.scores")
	types, err7 := ArrayOf[int32](md, "tokenizer.ggml.token_type")
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
		t.Fatal(err)
	}
	if arch != "llama" || ctx != 4096 || emb != 256 || blocks != 2 || len(toks) != 6 || toks[5] != "Ġthe" || scores[3] != -3.25 || types[0] != 3 {
		t.Errorf("arch %q ctx %d emb %d blocks %d tokens %q scores %v types %v", arch, ctx, emb, blocks, toks, scores, types)
	}
	if n, err := md.GetInt("test.scalar.int64"); n != -5 || err != nil {
		t.Errorf("GetInt int64: %d %v", n, err)
	}
	if n, err := md.GetUint("test.scalar.uint64"); n != 1<<40 || err != nil {
		t.Errorf("GetUint uint64: %d %v", n, err)
	}
	if _, err := md.GetUint("test.scalar.int8"); !errors.Is(err, ErrValueType) {
		t.Errorf("GetUint of -1: %v", err)
	}
	if f, err := md.GetFloat("test.scalar.float32"); f != 0 || err != nil || !math.Signbit(f) {
		t.Errorf("GetFloat: %v %v", f, err)
	}
	if b, err := md.GetBool("test.scalar.bool"); b || err != nil {
		t.Errorf("GetBool: %v %v", b, err)
	}
	if s, err := md.GetString("test.scalar.empty_string"); s != "" || err != nil {
		t.Errorf("GetString: %q %v", s, err)
	}
	nested, err := ArrayOf[Value](md, "test.nested")
	if err != nil || len(nested) != 3 || nested[2].ElemType() != ValueString {
		t.Errorf("nested: %v %v", nested, err)
	}
	if _, err := md.GetString("llama.context_length"); !errors.Is(err, ErrValueType) {
		t.Errorf("GetString of a UINT32: %v", err)
	}
	if _, err := ArrayOf[string](md, "tokenizer.ggml.scores"); !errors.Is(err, ErrValueType) {
		t.Errorf("ArrayOf[string] of FLOAT32s: %v", err)
	}
	if _, err := md.GetInt("no.such.key"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key: %v", err)
	}
}
