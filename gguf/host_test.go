package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"unicode/utf8"
	"unsafe"
)

func checkHostTensor(t *testing.T, m *Model, w SaveTensor) {
	t.Helper()
	g := m.Tensor(w.Name)
	if g == nil {
		t.Fatalf("%s missing", w.Name)
	}
	if g.Type != w.Type || !slices.Equal(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) || g.Size() != int64(len(w.Data)) {
		t.Fatalf("%s: got %s %v %d bytes, want %s %v %d bytes", w.Name, g.Type, g.Shape, len(g.Data), w.Type, w.Shape, len(w.Data))
	}
	if len(g.Data) > 0 && uintptr(unsafe.Pointer(&g.Data[0]))%Alignment != 0 {
		t.Fatalf("%s: data not aligned to %d", w.Name, Alignment)
	}
}

// TestRoundTripHost saves random tensors and metadata with several
// alignments, loads them all, a subset by name and a subset by filter,
// and compares every value and byte.
func TestRoundTripHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial, align := range []uint32{0, 1, 8, 32, 64, 4096, 0, 16} {
		p, ts, meta := writeRandom(t, rng, 1+rng.IntN(60), align)
		m, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Tensors) != len(ts) || !reflect.DeepEqual(m.Metadata, meta) || m.Version != 3 {
			t.Fatalf("trial %d: %d tensors, version %d, metadata\n%v\nwant\n%v", trial, len(m.Tensors), m.Version, m.Metadata, meta)
		}
		wantAlign := int64(align)
		if align == 0 {
			wantAlign = DefaultAlignment
		}
		h, err := ReadHeader(context.Background(), p, nil)
		if err != nil || m.Alignment != wantAlign || h.DataOffset%wantAlign != 0 {
			t.Fatalf("alignment %d, data offset %d, want alignment %d (%v)", m.Alignment, h.DataOffset, wantAlign, err)
		}
		for i, w := range ts {
			checkHostTensor(t, m, w)
			if m.Tensors[i].Name != w.Name || m.Tensors[i].Offset%wantAlign != 0 {
				t.Fatalf("tensor %d: %s at %d", i, m.Tensors[i].Name, m.Tensors[i].Offset)
			}
		}
		var names []string
		for i, w := range ts {
			if i%3 == 0 {
				names = append(names, w.Name)
			}
		}
		sub, err := LoadHost(context.Background(), p, &Options{Names: names})
		if err != nil || len(sub.Tensors) != len(names) {
			t.Fatalf("subset: %v, %d tensors, want %d", err, len(sub.Tensors), len(names))
		}
		for i, w := range ts {
			if i%3 == 0 {
				checkHostTensor(t, sub, w)
			}
		}
		q, err := LoadHost(context.Background(), p, &Options{Filter: func(ti *TensorInfo) bool { return ti.Type == Q4_K || ti.Type == F32 }})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range q.Tensors {
			if g.Type != Q4_K && g.Type != F32 {
				t.Fatalf("filter let %s through", g.Type)
			}
		}
	}
}

func TestNamesNotFound(t *testing.T) {
	p, _, _ := writeRandom(t, rand.New(rand.NewPCG(5, 6)), 4, 0)
	if _, err := LoadHost(context.Background(), p, &Options{Names: []string{"nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

// TestPlaceOutOfRange checks a Place outside Devices is refused before
// any device is touched (so without a GPU too).
func TestPlaceOutOfRange(t *testing.T) {
	p, _, _ := writeRandom(t, rand.New(rand.NewPCG(8, 8)), 3, 0)
	if _, err := Load(context.Background(), p, &Options{Devices: []int{0, 1}, Place: func(*TensorInfo) int { return -1 }}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
}

// TestSplitUnit checks a split cuts every type at a multiple of
// Alignment that is whole blocks.
func TestSplitUnit(t *testing.T) {
	for _, typ := range append(Types(), Type(99)) {
		u := splitUnit(typ)
		if u%Alignment != 0 || (typ.Known() && u%typ.TypeSize() != 0) || u > Alignment*typ.TypeSize() && typ.Known() {
			t.Errorf("%s: split unit %d", typ, u)
		}
	}
}

func TestSaveRejects(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.gguf")
	bad := func(k string, x any) Metadata { v, _ := NewValue(x); return Metadata{{k, v}} }
	cases := []struct {
		ts   []SaveTensor
		meta Metadata
		want error
	}{
		{[]SaveTensor{{Name: "a", Type: Type(4), Shape: []int64{1}, Data: []byte{1}}}, nil, ErrUnknownType},
		{[]SaveTensor{{Name: "a", Type: F32, Shape: []int64{2}, Data: []byte{1, 2, 3}}}, nil, ErrInvalidArgument},
		{[]SaveTensor{{Name: "a", Type: Q4_0, Shape: []int64{16}, Data: make([]byte, 9)}}, nil, ErrInvalidTensor},
		{[]SaveTensor{{Name: "a", Type: F16, Shape: []int64{1, 1, 1, 1, 1}, Data: make([]byte, 2)}}, nil, ErrInvalidTensor},
		{[]SaveTensor{{Name: "a", Type: I8, Shape: []int64{-1}}}, nil, ErrInvalidTensor},
		{[]SaveTensor{{Name: "a", Type: I8, Shape: []int64{1}, Data: []byte{1}}, {Name: "a", Type: I8, Shape: []int64{1}, Data: []byte{1}}}, nil, ErrInvalidArgument},
		{nil, Metadata{{"k", Value{}}}, ErrInvalidArgument},
		{nil, append(bad("k", uint8(1)), bad("k", uint8(2))...), ErrInvalidArgument},
		{nil, bad("", uint8(1)), ErrInvalidArgument},
		{nil, bad("general.alignment", uint32(48)), ErrInvalidArgument},
		{nil, bad("general.alignment", uint64(64)), ErrInvalidArgument},
	}
	for i, c := range cases {
		if err := Save(context.Background(), p, c.ts, c.meta); !errors.Is(err, c.want) {
			t.Errorf("case %d: Save = %v, want %v", i, err, c.want)
		}
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("a refused Save left a file: %v", err)
	}
	var m Metadata
	for _, x := range []any{1, uint(2), []int{1}, []Value{{}}, map[string]int{}, nil} {
		if err := m.Set("k", x); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Set(%T) = %v", x, err)
		}
	}
	s, _ := NewValue("x")
	if _, err := NewValue([]Value{s}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an array of arrays holding a string: %v", err)
	}
}

// TestSetReplaces checks Set keeps a key's place when it replaces it.
func TestSetReplaces(t *testing.T) {
	var m Metadata
	for _, k := range []string{"a", "b", "c"} {
		if err := m.Set(k, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Set("b", uint64(7)); err != nil {
		t.Fatal(err)
	}
	if n, err := m.GetUint("b"); len(m) != 3 || m[1].Key != "b" || n != 7 || err != nil {
		t.Fatalf("%v", m)
	}
}

// TestUnknownType writes a file with a tensor of an unknown type between
// two known ones: ReadHeader and Load refuse it with ErrUnknownType,
// AllowUnknownTypes loads its bytes raw (to the next tensor's data).
func TestUnknownType(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ts := []SaveTensor{
		{Name: "a", Type: F32, Shape: []int64{8}, Data: randomBytes(rng, 32)},
		{Name: "x", Type: I8, Shape: []int64{40}, Data: randomBytes(rng, 40)},
		{Name: "b", Type: Q8_0, Shape: []int64{32}, Data: randomBytes(rng, 34)},
	}
	p := filepath.Join(t.TempDir(), "u.gguf")
	if err := Save(context.Background(), p, ts, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	// The tensor info of "x": name, 1 dimension, 40, then the type.
	at := bytes.Index(b, []byte("\x01\x00\x00\x00\x00\x00\x00\x00x\x01\x00\x00\x00\x28\x00\x00\x00\x00\x00\x00\x00"))
	if at < 0 {
		t.Fatal("tensor info of x not found")
	}
	binary.LittleEndian.PutUint32(b[at+21:], 77)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeHeader(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("ReadHeader: %v", err)
	}
	if _, err := LoadHost(context.Background(), p, nil); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("LoadHost: %v", err)
	}
	m, err := LoadHost(context.Background(), p, &Options{AllowUnknownTypes: true})
	if err != nil {
		t.Fatal(err)
	}
	x := m.Tensor("x")
	want := append(slices.Clone(ts[1].Data), make([]byte, 24)...) // to the next tensor, padding included
	if x.Type.Known() || x.Type.String() != "TYPE_77" || !bytes.Equal(x.Data, want) {
		t.Fatalf("raw tensor %s, %d bytes", x.Type, len(x.Data))
	}
	checkHostTensor(t, m, ts[0])
	checkHostTensor(t, m, ts[2])
}

// TestValueString checks the display form of values.
func TestValueString(t *testing.T) {
	cases := map[string]any{
		`"héllo"`:                         "héllo",
		"1.5":                             float32(1.5),
		"-7":                              int64(-7),
		"true":                            true,
		`[3 STRING] "a", "b", "c"`:        []string{"a", "b", "c"},
		"[8 UINT8] 1, 2, 3, 4, 5, 6, ...": []uint8{1, 2, 3, 4, 5, 6, 7, 8},
	}
	for want, x := range cases {
		v, err := NewValue(x)
		if err != nil || v.String() != want {
			t.Errorf("%#v: %q (%v), want %q", x, v.String(), err, want)
		}
	}
}

// TestSaveNamesUTF8 saves tensors and metadata under random byte
// strings: a metadata key or tensor name that is not valid UTF-8 (the
// format's strings are UTF-8; gguf-py decodes keys and names so) fails
// with ErrInvalidArgument and writes nothing; anything else, string
// values with stray bytes included, loads back byte for byte.
func TestSaveNamesUTF8(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 41))
	str := func() string {
		b := []byte("k.")
		for range rng.IntN(5) {
			switch rng.IntN(4) {
			case 0:
				b = append(b, byte(0x80+rng.IntN(0x80))) // alone: not UTF-8
			case 1:
				b = append(b, "é权🙂"...)
			default:
				b = append(b, byte(rng.IntN(0x80)))
			}
		}
		return string(b)
	}
	saved, refused := 0, 0
	for trial := range 100 {
		valid := true
		var meta Metadata
		for range 1 + rng.IntN(3) {
			k := str()
			if _, dup := meta.Lookup(k); dup {
				continue
			}
			valid = valid && utf8.ValidString(k)
			v, _ := NewValue(str())
			a, _ := NewValue([]string{str(), str()})
			meta = append(meta, KV{k, v}, KV{k + ".list", a})
		}
		ts := []SaveTensor{{Name: str(), Type: I8, Shape: []int64{3}, Data: []byte{byte(trial), 2, 3}}}
		valid = valid && utf8.ValidString(ts[0].Name)
		p := filepath.Join(t.TempDir(), "m.gguf")
		err := Save(context.Background(), p, ts, meta)
		if !valid {
			refused++
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("trial %d: a key or name that is not UTF-8 saved: %v", trial, err)
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("trial %d: a refused Save left a file", trial)
			}
			continue
		}
		saved++
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		m, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Metadata, meta) {
			t.Fatalf("trial %d: metadata\n%q\nwant\n%q", trial, m.Metadata, meta)
		}
		checkHostTensor(t, m, ts[0])
	}
	if saved < 10 || refused < 10 {
		t.Fatalf("%d saved, %d refused: the names drawn test too little", saved, refused)
	}
}
