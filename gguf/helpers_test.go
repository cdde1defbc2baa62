package gguf

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// randomBytes returns n random bytes.
func randomBytes(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n+8)
	for i := int64(0); i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b[:n:n]
}

// randomTensors makes n tensors of random known types and shapes (1 to 4
// dimensions, empty ones included) with random bytes.
func randomTensors(rng *rand.Rand, n int) []SaveTensor {
	all := Types()
	var ts []SaveTensor
	for i := range n {
		typ := all[rng.IntN(len(all))]
		shape := []int64{typ.BlockSize() * int64(1+rng.IntN(3))}
		if typ.BlockSize() == 1 {
			shape[0] = int64(rng.IntN(40))
		}
		for range rng.IntN(maxDims) {
			shape = append(shape, int64(rng.IntN(4)))
		}
		size, err := nbytes(typ, shape)
		if err != nil {
			panic(err)
		}
		ts = append(ts, SaveTensor{Name: "blk." + string(rune('a'+i%26)) + "." + string(rune('0'+i/26)) + ".weight", Type: typ, Shape: shape, Data: randomBytes(rng, size)})
	}
	return ts
}

// randomMetadata makes metadata of every value type, arrays and nested
// arrays included, with an architecture and, if align is not 0, a
// general.alignment.
func randomMetadata(rng *rand.Rand, align uint32) Metadata {
	var m Metadata
	set := func(k string, x any) {
		if err := m.Set(k, x); err != nil {
			panic(err)
		}
	}
	set("general.architecture", "llama")
	if align != 0 {
		set("general.alignment", align)
	}
	set("llama.context_length", uint32(rng.IntN(1<<20)))
	set("u8", uint8(rng.Uint32()))
	set("i8", int8(rng.Uint32()))
	set("u16", uint16(rng.Uint32()))
	set("i16", int16(rng.Uint32()))
	set("i32", int32(rng.Uint32()))
	set("f32", rng.Float32())
	set("bool", rng.IntN(2) == 0)
	set("u64", rng.Uint64())
	set("i64", int64(rng.Uint64()))
	set("f64", rng.NormFloat64())
	set("str", string(randomBytes(rng, int64(rng.IntN(20))))) // any bytes, UTF-8 or not
	set("a.u8", randomBytes(rng, int64(rng.IntN(9))))
	set("a.i16", []int16{int16(rng.Uint32()), -1})
	set("a.u32", []uint32{rng.Uint32()})
	set("a.f32", []float32{rng.Float32(), -rng.Float32()})
	set("a.bool", []bool{true, false, rng.IntN(2) == 0})
	set("a.i64", []int64{})
	set("a.f64", []float64{rng.Float64()})
	set("a.u16", []uint16{1, 2})
	set("a.i8", []int8{-1})
	set("a.i32", []int32{int32(rng.Uint32())})
	set("a.u64", []uint64{rng.Uint64()})
	tokens := make([]string, 1+rng.IntN(50))
	for i := range tokens {
		tokens[i] = string(randomBytes(rng, int64(rng.IntN(8))))
	}
	set("tokenizer.ggml.tokens", tokens)
	inner1, _ := NewValue([]int32{1, 2, 3})
	inner2, _ := NewValue([]string{"x", ""})
	inner3, _ := NewValue([]Value{inner1})
	set("nested", []Value{inner1, inner2, inner3})
	return m
}

// writeRandom saves n random tensors with random metadata in a temporary
// file.
func writeRandom(t *testing.T, rng *rand.Rand, n int, align uint32) (string, []SaveTensor, Metadata) {
	t.Helper()
	ts := randomTensors(rng, n)
	meta := randomMetadata(rng, align)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := Save(context.Background(), p, ts, meta); err != nil {
		t.Fatal(err)
	}
	return p, ts, meta
}
