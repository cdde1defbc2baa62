package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// raw builds GGUF bytes by hand: fields are appended little-endian.
type raw struct{ b []byte }

func newRaw(version uint32, ntensors, nkv uint64) *raw {
	r := &raw{b: []byte("GGUF")}
	return r.u32(version).u64(ntensors).u64(nkv)
}

func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }

// tensor appends a tensor description.
func (r *raw) tensor(name string, typ Type, off uint64, shape ...uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// pad appends zeros to a multiple of 32 and then n data bytes.
func (r *raw) data(n int) []byte {
	for len(r.b)%32 != 0 {
		r.b = append(r.b, 0)
	}
	return append(r.b, bytes.Repeat([]byte{0xa5}, n)...)
}

// TestBadHeaders checks every kind of broken or hostile header gets its
// typed error before any data is read.
func TestBadHeaders(t *testing.T) {
	kv := func(key string, typ ValueType) *raw { return newRaw(3, 0, 1).str(key).u32(uint32(typ)) }
	dup := newRaw(3, 0, 2).str("k").u32(uint32(ValueUint8))
	dup.b = append(dup.b, 1)
	dup.str("k").u32(uint32(ValueUint8))
	dup.b = append(dup.b, 2)
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", []byte("GGUF\x03\x00"), ErrInvalidHeader},
		{"magic", append([]byte("GGML"), newRaw(3, 0, 0).b[4:]...), ErrInvalidHeader},
		{"FUGG", append([]byte("FUGG"), newRaw(3, 0, 0).b[4:]...), ErrBigEndian},
		{"swapped version", newRaw(3<<24, 0, 0).b, ErrBigEndian},
		{"version 1", newRaw(1, 0, 0).b, ErrVersion},
		{"version 4", newRaw(4, 0, 0).b, ErrVersion},
		{"version 0", newRaw(0, 0, 0).b, ErrVersion},
		{"2^60 tensors", newRaw(3, 1<<60, 0).data(64), ErrInvalidHeader},
		{"2^64-1 pairs", newRaw(3, 0, 1<<64-1).data(64), ErrInvalidHeader},
		{"2^40-byte key", newRaw(3, 0, 1).u64(1 << 40).data(64), ErrInvalidHeader},
		{"2^40-byte string", kv("k", ValueString).u64(1 << 40).data(64), ErrInvalidHeader},
		{"2^62 array elements", kv("k", ValueArray).u32(uint32(ValueUint64)).u64(1 << 62).data(64), ErrInvalidHeader},
		{"2^50 strings", kv("k", ValueArray).u32(uint32(ValueString)).u64(1 << 50).data(64), ErrInvalidHeader},
		{"2^50 arrays", kv("k", ValueArray).u32(uint32(ValueArray)).u64(1 << 50).data(64), ErrInvalidHeader},
		{"value type 13", kv("k", 13).data(8), ErrInvalidHeader},
		{"array of type 99", kv("k", ValueArray).u32(99).u64(0).data(0), ErrInvalidHeader},
		{"empty key", kv("", ValueUint8).data(1), ErrInvalidHeader},
		{"duplicate key", dup.b, ErrInvalidHeader},
		{"alignment 48", kv("general.alignment", ValueUint32).u32(48).data(0), ErrInvalidHeader},
		{"alignment 0", kv("general.alignment", ValueUint32).u32(0).data(0), ErrInvalidHeader},
		{"alignment u64", kv("general.alignment", ValueUint64).u64(64).data(0), ErrInvalidHeader},
		{"5 dimensions", newRaw(3, 1, 0).tensor("t", F32, 0, 1, 1, 1, 1, 1).data(4), ErrInvalidHeader},
		{"negative dimension", newRaw(3, 1, 0).tensor("t", F32, 0, 1<<63).data(4), ErrInvalidTensor},
		{"unknown type", newRaw(3, 1, 0).tensor("t", Type(31), 0, 4).data(4), ErrUnknownType},
		{"partial block", newRaw(3, 1, 0).tensor("t", Q4_0, 0, 16).data(18), ErrInvalidTensor},
		{"element overflow", newRaw(3, 1, 0).tensor("t", F32, 0, 1<<32, 1<<32).data(4), ErrInvalidTensor},
		{"byte overflow", newRaw(3, 1, 0).tensor("t", F64, 0, 1<<61).data(4), ErrInvalidTensor},
		{"past the data", newRaw(3, 1, 0).tensor("t", F32, 0, 8).data(31), ErrInvalidTensor},
		{"offset past the file", newRaw(3, 1, 0).tensor("t", F32, 1<<40, 1).data(4), ErrInvalidTensor},
		{"misaligned", newRaw(3, 1, 0).tensor("t", I8, 4, 1).data(8), ErrInvalidTensor},
		{"overlap", newRaw(3, 2, 0).tensor("a", F32, 0, 16).tensor("b", I8, 32, 4).data(64), ErrInvalidTensor},
		{"overlap after an empty one", newRaw(3, 3, 0).tensor("a", F32, 0, 16).tensor("e", F32, 32, 0).tensor("b", I8, 32, 4).data(64), ErrInvalidTensor},
		{"duplicate tensor", newRaw(3, 2, 0).tensor("a", I8, 0, 1).tensor("a", I8, 32, 1).data(64), ErrInvalidHeader},
		// Keys and names that are not UTF-8, which Save (and gguf-py) refuse.
		{"key not UTF-8", kv("general.\xe5x", ValueUint8).data(1), ErrInvalidHeader},
		{"tensor name not UTF-8", newRaw(3, 1, 0).tensor("t\xff", I8, 0, 1).data(32), ErrInvalidHeader},
		{"data area past the end", newRaw(3, 1, 0).tensor("a", I8, 0, 0).b, ErrInvalidHeader},
	}
	// Arrays nested deeper than maxNesting.
	deep := kv("k", ValueArray)
	for range maxNesting + 1 {
		deep.u32(uint32(ValueArray)).u64(1)
	}
	cases = append(cases, struct {
		name string
		b    []byte
		want error
	}{"deep arrays", deep.u32(uint32(ValueUint8)).u64(0).b, ErrInvalidHeader})
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHost(context.Background(), p, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestTruncated cuts a valid file at every length in its header and at a
// sample in its data, and expects a typed error each time.
func TestTruncated(t *testing.T) {
	p, _, _ := writeRandom(t, rand.New(rand.NewPCG(4, 4)), 6, 0)
	b, _ := os.ReadFile(p)
	h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if n > int(h.DataOffset)+16 && n%61 != 0 {
			continue
		}
		_, err := DecodeHeader(bytes.NewReader(b[:n]), int64(n))
		if !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrInvalidTensor) {
			t.Fatalf("cut at %d of %d: %v", n, len(b), err)
		}
	}
}

// countingReader counts ReadAt calls and the bytes they ask for.
type countingReader struct {
	r            io.ReaderAt
	calls, bytes atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	c.bytes.Add(int64(len(p)))
	return c.r.ReadAt(p, off)
}

// TestHeaderReads checks ReadHeader's reads: one for a header under 1 MiB
// (never the data beyond it), and a few, each doubling what it has, for
// a 5 MiB vocabulary.
func TestHeaderReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	var small Metadata
	small.Set("general.architecture", "llama")
	big := Metadata{small[0]}
	tokens := make([]string, 400_000)
	for i := range tokens {
		tokens[i] = string(randomBytes(rng, 5))
	}
	big.Set("tokenizer.ggml.tokens", tokens) // 5.2 MB
	for _, c := range []struct {
		meta     Metadata
		maxCalls int64
	}{{small, 1}, {big, 4}} {
		ts := []SaveTensor{{Name: "w", Type: I8, Shape: []int64{8 << 20}, Data: randomBytes(rng, 8<<20)}}
		p := filepath.Join(t.TempDir(), "h.gguf")
		if err := Save(context.Background(), p, ts, c.meta); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		cr := &countingReader{r: bytes.NewReader(b)}
		h, err := DecodeHeader(cr, int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if cr.calls.Load() > c.maxCalls || cr.bytes.Load() > max(firstRead, 2*h.DataOffset) {
			t.Errorf("header of %d bytes: %d reads of %d bytes in all", h.DataOffset, cr.calls.Load(), cr.bytes.Load())
		}
		if got, _ := h.Metadata.Tokens(); len(c.meta) == 2 && !slicesEqual(got, tokens) {
			t.Error("tokens differ")
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzReadHeader checks no input panics or hangs, every error is typed,
// and an accepted header describes tensors inside the file at aligned,
// non-overlapping offsets, whose metadata and tensors Save writes back
// into a file that reads the same.
func FuzzDecodeHeader(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.gguf")
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil && len(b) < 1<<16 {
			f.Add(b)
		}
	}
	f.Add(newRaw(3, 1, 1).str("general.alignment").u32(uint32(ValueUint32)).u32(64).tensor("t", Q8_0, 0, 32).data(34))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			for _, e := range []error{ErrInvalidHeader, ErrInvalidTensor, ErrUnknownType, ErrVersion, ErrBigEndian} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("untyped error %v", err)
		}
		var ts []SaveTensor
		for _, ti := range h.Tensors {
			end := h.DataOffset + ti.Offset + ti.Size()
			if ti.Offset%h.Alignment != 0 || end > int64(len(b)) {
				t.Fatalf("accepted %q at %d+%d in a %d-byte file", ti.Name, ti.Offset, ti.Size(), len(b))
			}
			for _, o := range h.Tensors {
				if o.Name != ti.Name && o.Size() > 0 && ti.Size() > 0 && o.Offset < ti.Offset+ti.Size() && ti.Offset < o.Offset+o.Size() {
					t.Fatalf("accepted overlapping %q and %q", o.Name, ti.Name)
				}
			}
			ts = append(ts, SaveTensor{Name: ti.Name, Type: ti.Type, Shape: ti.Shape, Data: b[h.DataOffset+ti.Offset : end]})
		}
		ps, err := pieces(ts, h.Metadata)
		if err != nil {
			t.Fatalf("Save refuses what ReadHeader accepted: %v", err)
		}
		var out []byte
		for _, p := range ps {
			out = append(out, p.Data...)
		}
		h2, err := DecodeHeader(bytes.NewReader(out), int64(len(out)))
		if err != nil || len(h2.Tensors) != len(h.Tensors) || len(h2.Metadata) != len(h.Metadata) {
			t.Fatalf("rewritten file: %v", err)
		}
		for i := range h.Metadata {
			if h.Metadata[i].Key != h2.Metadata[i].Key || !sameValue(h.Metadata[i].Value, h2.Metadata[i].Value) {
				t.Fatalf("metadata %q changed", h.Metadata[i].Key)
			}
		}
	})
}

// TestEmptyTensors checks empty tensors overlap nothing: one at the offset
// of another, or inside another's data, loads (as ggml would read it).
func TestEmptyTensors(t *testing.T) {
	b := newRaw(3, 3, 0).tensor("w", I8, 0, 64).tensor("e", F32, 32, 0).tensor("z", Q4_K, 0, 256, 0).data(64)
	p := filepath.Join(t.TempDir(), "e.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadHost(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := m.Tensor("w"); len(w.Data) != 64 || !bytes.Equal(w.Data, b[len(b)-64:]) || len(m.Tensor("e").Data) != 0 || m.Tensor("z").Size() != 0 {
		t.Fatalf("tensors %+v", m.Tensors)
	}
}
