package safetensors

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
	"strings"
	"testing"
	"unsafe"
)

func writeRandom(t *testing.T, rng *rand.Rand, n int, meta map[string]string) (string, []SaveTensor) {
	t.Helper()
	ts := randomTensors(rng, n)
	p := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(context.Background(), p, ts, meta); err != nil {
		t.Fatal(err)
	}
	return p, ts
}

// TestRoundTripHost saves random tensors and loads them all, a subset by
// name and a subset by filter, comparing every byte.
func TestRoundTripHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 8 {
		meta := map[string]string{"format": "pt", "trial": strings.Repeat("x", trial)}
		p, ts := writeRandom(t, rng, 1+rng.IntN(60), meta)
		m, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Tensors) != len(ts) || !equalMeta(m.Metadata, meta) {
			t.Fatalf("got %d tensors, metadata %v", len(m.Tensors), m.Metadata)
		}
		for _, w := range ts {
			checkHostTensor(t, m, w)
		}
		var names []string
		for i, w := range ts {
			if i%3 == 0 {
				names = append(names, w.Name)
			}
		}
		sub, err := LoadHost(context.Background(), p, &Options{Names: names})
		if err != nil {
			t.Fatal(err)
		}
		if len(sub.Tensors) != len(names) {
			t.Fatalf("subset: %d tensors, want %d", len(sub.Tensors), len(names))
		}
		for i, w := range ts {
			if i%3 == 0 {
				checkHostTensor(t, sub, w)
			}
		}
		f16, err := LoadHost(context.Background(), p, &Options{Filter: func(ti *TensorInfo) bool { return ti.Dtype == F32 }})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f16.Tensors {
			if g.Dtype != F32 {
				t.Fatalf("filter let %s through", g.Dtype)
			}
		}
		m.Close()
	}
}

func equalMeta(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func checkHostTensor(t *testing.T, m *Model, w SaveTensor) {
	t.Helper()
	g := m.Tensor(w.Name)
	if g == nil {
		t.Fatalf("%s missing", w.Name)
	}
	if g.Dtype != w.Dtype || !slices.Equal(g.Shape, nonNil(w.Shape)) || !bytes.Equal(g.Data, w.Data) {
		t.Fatalf("%s: got %s %v %d bytes, want %s %v %d bytes", w.Name, g.Dtype, g.Shape, len(g.Data), w.Dtype, w.Shape, len(w.Data))
	}
	if len(g.Data) > 0 && uintptr(unsafe.Pointer(&g.Data[0]))%Alignment != 0 {
		t.Fatalf("%s: data not aligned to %d", w.Name, Alignment)
	}
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

func TestNamesNotFound(t *testing.T) {
	p, _ := writeRandom(t, rand.New(rand.NewPCG(5, 6)), 4, nil)
	if _, err := LoadHost(context.Background(), p, &Options{Names: []string{"nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

// TestSaveLayout checks the header Save writes: 8-byte padded, tensors
// ordered by element size then name, contiguous offsets.
func TestSaveLayout(t *testing.T) {
	p, _ := writeRandom(t, rand.New(rand.NewPCG(9, 9)), 40, map[string]string{"a": "b"})
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	if n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if byName, err := ReadHeader(context.Background(), p, nil); err != nil || !reflect.DeepEqual(byName, h) {
		t.Fatalf("ReadHeader by name differs from DecodeHeader: %v", err)
	}
	for i := 1; i < len(h.Tensors); i++ {
		a, c := h.Tensors[i-1], h.Tensors[i]
		if a.Dtype.rank() < c.Dtype.rank() || (a.Dtype == c.Dtype && a.Name > c.Name) {
			t.Fatalf("order: %s(%s) before %s(%s)", a.Name, a.Dtype, c.Name, c.Dtype)
		}
	}
}

func TestSaveRejects(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.safetensors")
	for _, ts := range [][]SaveTensor{
		{{Name: "a", Dtype: "F99", Data: []byte{1}}},
		{{Name: "a", Dtype: F32, Shape: []int64{2}, Data: []byte{1, 2, 3}}},
		{{Name: "a", Dtype: F4, Shape: []int64{3}, Data: []byte{1, 2}}},
		{{Name: "a", Dtype: U8, Data: []byte{1}}, {Name: "a", Dtype: U8, Data: []byte{1}}},
		{{Name: "__metadata__", Dtype: U8, Data: []byte{1}}},
		{{Name: "a", Dtype: U8, Shape: []int64{-1}}},
	} {
		if err := Save(context.Background(), p, ts, nil); err == nil || !(errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrUnknownDtype)) {
			t.Errorf("Save(context.Background(), %+v) = %v", ts, err)
		}
	}
}

// TestPlaceOutOfRange checks a Place outside Devices is refused before
// any device is touched (so without a GPU too).
func TestPlaceOutOfRange(t *testing.T) {
	p, _ := writeRandom(t, rand.New(rand.NewPCG(8, 8)), 3, nil)
	if _, err := Load(context.Background(), p, &Options{Devices: []int{0, 1}, Place: func(*TensorInfo) int { return 2 }}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
}
