package gguf

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	parser "github.com/gpustack/gguf-parser-go"

	"github.com/kvikgo/kvik/gguf"
)

// canon turns a metadata value of either parser into plain Go values: a
// scalar as it is, an array as []any of its elements.
func canon(x any) any {
	switch v := x.(type) {
	case gguf.Value:
		if v.Type() != gguf.ValueArray {
			return v.Any()
		}
		rv := reflect.ValueOf(v.Any())
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = canon(rv.Index(i).Interface())
		}
		return out
	case parser.GGUFMetadataKVArrayValue:
		out := make([]any, len(v.Array))
		for i, e := range v.Array {
			out[i] = canon(e)
		}
		return out
	}
	return x
}

// elemType is an array's element type in either parser, or -1.
func elemType(x any) int {
	switch v := x.(type) {
	case gguf.Value:
		if v.Type() == gguf.ValueArray {
			return int(v.ElemType())
		}
	case parser.GGUFMetadataKVArrayValue:
		return int(v.Type)
	}
	return -1
}

// compare checks that both parsers read the same header from path.
func compare(t *testing.T, path string) {
	t.Helper()
	h, err := gguf.ReadHeader(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("kvik: %v", err)
	}
	pf, err := parser.ParseGGUFFile(path)
	if err != nil {
		t.Fatalf("gguf-parser-go: %v", err)
	}
	if uint32(pf.Header.Version) != h.Version || int(pf.Header.MetadataKVCount) != len(h.Metadata) || pf.TensorDataStartOffset != h.DataOffset {
		t.Errorf("%s: version %d/%d, %d/%d keys, data at %d/%d", path, h.Version, pf.Header.Version,
			len(h.Metadata), pf.Header.MetadataKVCount, h.DataOffset, pf.TensorDataStartOffset)
	}
	for i, kv := range h.Metadata {
		p := pf.Header.MetadataKV[i]
		if p.Key != kv.Key || uint32(p.ValueType) != uint32(kv.Value.Type()) || elemType(p.Value) != elemType(kv.Value) ||
			!reflect.DeepEqual(canon(p.Value), canon(kv.Value)) {
			t.Errorf("%s: key %d: kvik %s %s %v, gguf-parser-go %s %s %v", path, i, kv.Key, kv.Value.Type(), kv.Value, p.Key, p.ValueType, p.Value)
		}
	}
	if len(pf.TensorInfos) != len(h.Tensors) {
		t.Fatalf("%s: %d tensors, gguf-parser-go %d", path, len(h.Tensors), len(pf.TensorInfos))
	}
	for i, ti := range h.Tensors {
		p := pf.TensorInfos[i]
		shape := make([]int64, len(p.Dimensions))
		for j, d := range p.Dimensions {
			shape[j] = int64(d)
		}
		if p.Name != ti.Name || uint32(p.Type) != uint32(ti.Type) || !reflect.DeepEqual(shape, ti.Shape) ||
			int64(p.Offset) != ti.Offset || int64(p.Bytes()) != ti.Size() {
			t.Errorf("%s: tensor %d: kvik %+v, gguf-parser-go %s %s %v at %d, %d bytes", path, i, ti, p.Name, p.Type, p.Dimensions, p.Offset, p.Bytes())
		}
	}
}

// TestSameAsPeer compares the two parsers on every little-endian fixture
// gguf-py wrote and on a synthetic model.
func TestSameAsPeer(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "gguf", "testdata", "*.gguf"))
	n := 0
	for _, f := range files {
		if !strings.Contains(f, "bigendian") {
			compare(t, f)
			n++
		}
	}
	if n < 5 {
		t.Fatalf("compared %d fixtures", n)
	}
	compare(t, synthetic(t))
}

// synthetic writes, once per test binary, a model with a llama-3-sized
// tokenizer (128,256 tokens, scores, token types, 280,000 merges) and
// 2,000 small tensors of every type, so that parsing is what is timed.
func synthetic(tb testing.TB) string {
	p := filepath.Join(os.TempDir(), fmt.Sprintf("kvik-gguf-peer-%d.gguf", os.Getpid()))
	if _, err := os.Stat(p); err == nil {
		return p
	}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, 2+rng.IntN(10))
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	const vocab, merges = 128256, 280000
	tokens, scores, types := make([]string, vocab), make([]float32, vocab), make([]int32, vocab)
	for i := range tokens {
		tokens[i], scores[i], types[i] = word(), -float32(i), int32(1+rng.IntN(6))
	}
	ms := make([]string, merges)
	for i := range ms {
		ms[i] = word() + " " + word()
	}
	var meta gguf.Metadata
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"}, {"general.name", "synthetic"}, {"llama.context_length", uint32(131072)},
		{"llama.embedding_length", uint32(4096)}, {"llama.block_count", uint32(32)}, {"llama.rope.freq_base", float32(500000)},
		{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.merges", ms}, {"tokenizer.ggml.bos_token_id", uint32(128000)},
	} {
		if err := meta.Set(kv.k, kv.v); err != nil {
			tb.Fatal(err)
		}
	}
	all := gguf.Types()
	var ts []gguf.SaveTensor
	for i := range 2000 {
		typ := all[i%len(all)]
		shape := []int64{typ.BlockSize(), int64(1 + i%3)}
		ts = append(ts, gguf.SaveTensor{Name: fmt.Sprintf("blk.%d.t%d.weight", i/10, i%10), Type: typ, Shape: shape,
			Data: make([]byte, typ.TypeSize()*shape[1])})
	}
	if err := gguf.Save(context.Background(), p, ts, meta); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestMain(m *testing.M) {
	code := m.Run()
	os.Remove(filepath.Join(os.TempDir(), fmt.Sprintf("kvik-gguf-peer-%d.gguf", os.Getpid())))
	os.Exit(code)
}

// BenchmarkParse times parsing the synthetic model's header (about 7 MB:
// the tokenizer and 2,000 tensor descriptions) from the page cache: kvik's
// ReadFileHeader, gguf-parser-go's ParseGGUFFile (buffered reads, and
// mmap).
func BenchmarkParse(b *testing.B) {
	p := synthetic(b)
	h, err := gguf.ReadHeader(context.Background(), p, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		parse func() error
	}{
		{"kvik", func() error { _, err := gguf.ReadHeader(context.Background(), p, nil); return err }},
		{"gguf-parser-go", func() error { _, err := parser.ParseGGUFFile(p); return err }},
		{"gguf-parser-go-mmap", func() error { _, err := parser.ParseGGUFFile(p, parser.UseMMap()); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(h.DataOffset)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.parse(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
