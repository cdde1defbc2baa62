package gguf

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/gputest"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
)

// syntheticModel describes a llama-like GGUF of about size bytes: F16
// token embeddings, a Q8_0 output, and as many layers as fit, each with
// Q4_K attention q/k and ffn gate/up, Q8_0 attention v and ffn down, a
// BF16 attention output and F32 norms; a 32,000-token vocabulary. Its
// tensors' bytes are slices of one random buffer (the benchmarks measure
// moving bytes, not their values), or nil without data.
func syntheticModel(size int64, seed uint64, data bool) ([]SaveTensor, Metadata) {
	const embd, ffn, vocab = 4096, 11008, 32000
	var buf []byte
	if data {
		buf = randomBytes(rand.New(rand.NewPCG(seed, seed)), 300<<20)
	}
	var at int64
	var ts []SaveTensor
	var total int64
	add := func(name string, typ Type, shape ...int64) {
		n, err := nbytes(typ, shape)
		if err != nil {
			panic(err)
		}
		t := SaveTensor{Name: name, Type: typ, Shape: shape}
		if data {
			if at+n > int64(len(buf)) {
				at = 0
			}
			t.Data = buf[at : at+n]
			at += n + 4096
		}
		ts = append(ts, t)
		total += n
	}
	add("token_embd.weight", F16, embd, vocab)
	add("output_norm.weight", F32, embd)
	add("output.weight", Q8_0, embd, vocab)
	for l := 0; total < size; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", F32, embd)
		add(p+"attn_q.weight", Q4_K, embd, embd)
		add(p+"attn_k.weight", Q4_K, embd, embd)
		add(p+"attn_v.weight", Q8_0, embd, embd)
		add(p+"attn_output.weight", BF16, embd, embd)
		add(p+"ffn_norm.weight", F32, embd)
		add(p+"ffn_gate.weight", Q4_K, embd, ffn)
		add(p+"ffn_up.weight", Q4_K, embd, ffn)
		add(p+"ffn_down.weight", Q8_0, ffn, embd)
	}
	var m Metadata
	m.Set("general.architecture", "llama")
	m.Set("general.name", "kvik synthetic")
	m.Set("llama.context_length", uint32(4096))
	m.Set("llama.embedding_length", uint32(embd))
	m.Set("llama.feed_forward_length", uint32(ffn))
	m.Set("llama.block_count", uint32((len(ts)-3)/9))
	tokens := make([]string, vocab)
	scores := make([]float32, vocab)
	for i := range tokens {
		tokens[i] = "tok" + strconv.Itoa(i)
		scores[i] = -float32(i)
	}
	m.Set("tokenizer.ggml.model", "llama")
	m.Set("tokenizer.ggml.tokens", tokens)
	m.Set("tokenizer.ggml.scores", scores)
	return ts, m
}

// TestMakeSynthetic writes the synthetic model of the GPU benchmark
// (bench/gguf_gpu.sh) to KVIK_GGUF_MAKE, KVIK_GGUF_GB gigabytes (default
// 8), and checks its header reads back.
func TestMakeSynthetic(t *testing.T) {
	path := os.Getenv("KVIK_GGUF_MAKE")
	if path == "" {
		t.Skip("KVIK_GGUF_MAKE not set")
	}
	gb := 8.0
	if s := os.Getenv("KVIK_GGUF_GB"); s != "" {
		var err error
		if gb, err = strconv.ParseFloat(s, 64); err != nil {
			t.Fatal(err)
		}
	}
	ts, meta := syntheticModel(int64(gb*1e9), 1, true)
	if err := Save(context.Background(), path, ts, meta); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHeader(context.Background(), path, nil)
	if err != nil || len(h.Tensors) != len(ts) {
		t.Fatalf("%v, %d tensors", err, len(h.Tensors))
	}
	st, _ := os.Stat(path)
	t.Logf("%s: %d tensors, %.2f GB", path, len(ts), float64(st.Size())/1e9)
}

// BenchmarkReadHeader parses the header of a synthetic model (32,000
// tokens and scores, 300 tensors) from memory.
func BenchmarkReadHeader(b *testing.B) {
	hdr, size := syntheticHeader(b, 5e9)
	r := bytes.NewReader(hdr)
	b.SetBytes(int64(len(hdr)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readHeader(sizedReader{r}, size, false); err != nil {
			b.Fatal(err)
		}
	}
}

// syntheticHeader returns the header of a synthetic model of about size
// bytes, and the size of its file.
func syntheticHeader(tb testing.TB, size int64) ([]byte, int64) {
	ts, meta := syntheticModel(size, 1, false)
	sizes := make([]int64, len(ts))
	for i, t := range ts {
		sizes[i], _ = nbytes(t.Type, t.Shape)
	}
	hdr := encodeHeader(ts, sizes, meta, DefaultAlignment)
	end := int64(len(hdr))
	for _, n := range sizes {
		end += alignUp(n, DefaultAlignment)
	}
	return hdr, end
}

// TestSyntheticOneRun checks a llama-like model is read in one run per
// device (tensors adjacent in the file stay adjacent in memory), and in
// near-equal contiguous shares over four devices.
func TestSyntheticOneRun(t *testing.T) {
	hdr, size := syntheticHeader(t, 8e9)
	h, err := readHeader(sizedReader{bytes.NewReader(hdr)}, size, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ndev := range []int{1, 4} {
		specs := make([]tensorload.Tensor, len(h.Tensors))
		for i, ti := range h.Tensors {
			specs[i] = tensorload.Tensor{Off: h.DataOffset + ti.Offset, Size: ti.Size(), Slot: tensorload.Balanced}
		}
		p := tensorload.New(specs, ndev)
		if len(p.Runs) != ndev {
			t.Errorf("%d devices: %d runs", ndev, len(p.Runs))
		}
		for _, n := range p.Totals {
			if d := float64(n) / float64(size) * float64(ndev); d < 0.97 || d > 1.03 {
				t.Errorf("%d devices: shares %v of %d", ndev, p.Totals, size)
			}
		}
	}
}

// sizedReader serves a header followed by zeros (the data of the
// tensors, which ReadHeader reads only the start of).
type sizedReader struct{ r *bytes.Reader }

func (s sizedReader) ReadAt(p []byte, off int64) (int, error) {
	n, _ := s.r.ReadAt(p, off)
	clear(p[n:])
	return len(p), nil
}

// benchFile writes a synthetic model of KVIK_GGUF_BENCH_SIZE bytes
// (default 256 MB) into a temporary directory (KVIK_BENCH_DIR if set).
func benchFile(b *testing.B) string {
	size := int64(256e6)
	if s := os.Getenv("KVIK_GGUF_BENCH_SIZE"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	dir := os.Getenv("KVIK_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	p := filepath.Join(dir, "bench.gguf")
	ts, meta := syntheticModel(size, 2, true)
	if err := Save(context.Background(), p, ts, meta); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(p) })
	return p
}

// BenchmarkLoadHost loads a synthetic model into host memory.
func BenchmarkLoadHost(b *testing.B) {
	p := benchFile(b)
	st, _ := os.Stat(p)
	b.SetBytes(st.Size())
	for b.Loop() {
		if _, err := LoadHost(context.Background(), p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadDevice loads a synthetic model onto GPU 0, and reads the
// same file with kvik.ReadFileToDevice, the ceiling Load should meet.
func BenchmarkLoadDevice(b *testing.B) {
	gputest.Need(b)
	p := benchFile(b)
	st, _ := os.Stat(p)
	b.Run("gguf.Load", func(b *testing.B) {
		b.SetBytes(st.Size())
		for b.Loop() {
			m, err := Load(context.Background(), p, nil)
			if err != nil {
				b.Fatal(err)
			}
			m.Close()
		}
	})
	b.Run("ReadFileToDevice", func(b *testing.B) {
		b.SetBytes(st.Size())
		for b.Loop() {
			buf, err := kvik.ReadFileToDevice(p)
			if err != nil {
				b.Fatal(err)
			}
			buf.Close()
		}
	})
}
