package gguf

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/gputest"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// deviceCopies returns SaveTensors of m's tensors that point at their
// device memory (an empty tensor, which has none, at empty host data).
func deviceCopies(m *Model) []SaveTensor {
	var out []SaveTensor
	for _, g := range m.Tensors {
		s := SaveTensor{Name: g.Name, Type: g.Type, Shape: g.Shape, Ptr: g.Ptr}
		if g.Size() == 0 {
			s.Data = []byte{}
		}
		out = append(out, s)
	}
	return out
}

// TestDeviceRoundTrip loads random files (several alignments) and the
// gguf-py fixtures to device 0, compares every tensor's bytes, saves them
// back from device memory and expects the original file byte for byte.
func TestDeviceRoundTrip(t *testing.T) {
	gputest.Need(t)
	rng := rand.New(rand.NewPCG(21, 22))
	var files []string
	for _, align := range []uint32{0, 8, 256, 64} {
		p, _, _ := writeRandom(t, rng, 1+rng.IntN(80), align)
		files = append(files, p)
	}
	for _, n := range []string{"all_types.gguf", "align8.gguf", "align1024.gguf", "v2.gguf"} {
		files = append(files, filepath.Join("testdata", n))
	}
	for _, p := range files {
		host, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Load(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range host.Tensors {
			g := m.Tensor(w.Name)
			if g == nil || g.Device != 0 || (g.Size() > 0 && g.Ptr%Alignment != 0) {
				t.Fatalf("%s: %s: %+v", p, w.Name, g)
			}
			if got := gputest.FromDevice(t, 0, g.Ptr, g.Size()); !bytes.Equal(got, w.Data) {
				t.Fatalf("%s: %s: device bytes differ", p, w.Name)
			}
		}
		q := filepath.Join(t.TempDir(), "back.gguf")
		if err := Save(context.Background(), q, deviceCopies(m), m.Metadata); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(q)
		if m.Version == 3 && !bytes.Equal(a, b) {
			t.Fatalf("%s: file saved from device differs from the original", p)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMultiDevice loads onto two GPUs balanced, by a mapping function, and
// with the largest tensor split by byte range at whole blocks.
func TestMultiDevice(t *testing.T) {
	if n := gputest.Need(t); n < 2 {
		t.Skipf("needs two GPUs, found %d", n)
	}
	devs := []int{0, 1}
	p, ts, _ := writeRandom(t, rand.New(rand.NewPCG(31, 32)), 120, 0)
	var biggest SaveTensor
	for _, w := range ts {
		if len(w.Data) > len(biggest.Data) {
			biggest = w
		}
	}
	for _, o := range []*Options{
		{Devices: devs},
		{Devices: devs, Place: func(ti *TensorInfo) int { return int(ti.Name[4]) % 2 }},
		{Devices: devs, Split: func(ti *TensorInfo) bool { return ti.Name == biggest.Name }},
	} {
		m, err := Load(context.Background(), p, o)
		if err != nil {
			t.Fatal(err)
		}
		used := map[int]int64{}
		for _, w := range ts {
			g := m.Tensor(w.Name)
			var got []byte
			if len(g.Parts) > 0 {
				for _, part := range g.Parts {
					if part.Offset%splitUnit(g.Type) != 0 {
						t.Fatalf("%s: part at %d cuts a block", g.Name, part.Offset)
					}
					got = append(got, gputest.FromDevice(t, part.Device, part.Ptr, part.Size)...)
					used[part.Device] += part.Size
				}
			} else {
				got = gputest.FromDevice(t, g.Device, g.Ptr, g.Size())
				used[g.Device] += g.Size()
			}
			if !bytes.Equal(got, w.Data) {
				t.Fatalf("%s differs (options %+v)", w.Name, o)
			}
		}
		if used[0] == 0 || used[1] == 0 {
			t.Fatalf("bytes per device %v: one device unused", used)
		}
		if o.Split != nil && len(m.Tensor(biggest.Name).Parts) != 2 {
			t.Fatalf("split tensor has %d parts", len(m.Tensor(biggest.Name).Parts))
		}
		m.Close()
	}
}

// TestS3Device loads a fixture from S3 (versitygw) into device memory.
func TestS3Device(t *testing.T) {
	gputest.Need(t)
	srv := s3test.Start(t)
	b, err := os.ReadFile(filepath.Join("testdata", "all_types.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := LoadHost(context.Background(), filepath.Join("testdata", "all_types.gguf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(context.Background(), srv.Put(t, "all_types.gguf", b), nil, srv.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, w := range want.Tensors {
		g := m.Tensor(w.Name)
		if got := gputest.FromDevice(t, 0, g.Ptr, g.Size()); !bytes.Equal(got, w.Data) {
			t.Fatalf("%s differs", w.Name)
		}
	}
}

// TestWriteForPython writes GGUF files with kvik's Save for the reverse
// check (testdata/xcheck.py reads them with gguf-py's GGUFReader) into
// KVIK_GGUF_XCHECK_OUT, with an expected.json of every metadata value and
// tensor: from device memory where there is a GPU, else from host memory.
func TestWriteForPython(t *testing.T) {
	out := os.Getenv("KVIK_GGUF_XCHECK_OUT")
	if out == "" {
		t.Skip("KVIK_GGUF_XCHECK_OUT not set")
	}
	fromDev := gputest.Count() > 0
	gen := "kvik gguf.Save from host memory"
	if fromDev {
		gen = "kvik gguf.Save from device memory"
	}
	rng := rand.New(rand.NewPCG(41, 42))
	e := map[string]any{"generator": gen}
	files := map[string]any{}
	for i, align := range []uint32{0, 64, 8} {
		var ts []SaveTensor
		for _, x := range randomTensors(rng, 60) {
			if x.Type < NVFP4 && x.Type != Q8_1 { // gguf-py stops at MXFP4 and sizes Q8_1 blocks as ggml no longer does
				ts = append(ts, x)
			}
		}
		meta := xcheckMetadata(rng, align)
		if fromDev {
			src := filepath.Join(t.TempDir(), "src.gguf")
			if err := Save(context.Background(), src, ts, nil); err != nil {
				t.Fatal(err)
			}
			m, err := Load(context.Background(), src, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ts = withData(deviceCopies(m), ts)
		}
		name := "kvik" + string(rune('0'+i)) + ".gguf"
		if err := Save(context.Background(), filepath.Join(out, name), ts, meta); err != nil {
			t.Fatal(err)
		}
		files[name] = expectedJSON(ts, meta)
	}
	e["files"] = files
	b, _ := json.MarshalIndent(e, "", " ")
	if err := os.WriteFile(filepath.Join(out, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// withData gives the device tensors the host bytes they hold, for the
// expected sha256 (Save reads Ptr, not Data, when Ptr is set).
func withData(dev, host []SaveTensor) []SaveTensor {
	for i := range dev {
		dev[i].Data = host[i].Data
	}
	return dev
}

// xcheckMetadata is metadata that gguf-py's reader can compare: UTF-8
// strings, and arrays of arrays of one element type (it flattens them).
func xcheckMetadata(rng *rand.Rand, align uint32) Metadata {
	m := randomMetadata(rng, align)
	m.Set("str", "ünïcode text")
	m.Set("tokenizer.ggml.tokens", []string{"<s>", "a", "", "Ġthe"})
	a, _ := NewValue([]int32{1, -2})
	b, _ := NewValue([]int32{int32(rng.Uint32())})
	m.Set("nested", []Value{a, b})
	return m
}

// expectedJSON is a file's entry in the reverse check's expected.json, in
// the form of testdata/expected.json.
func expectedJSON(ts []SaveTensor, meta Metadata) map[string]any {
	var md []map[string]any
	for _, kv := range meta {
		j := jsonOfValue(kv.Value)
		j["key"] = kv.Key
		md = append(md, j)
	}
	var tensors []map[string]any
	for _, x := range ts {
		tensors = append(tensors, map[string]any{"name": x.Name, "type": x.Type.String(), "type_id": uint32(x.Type),
			"shape": x.Shape, "n_bytes": len(x.Data), "sha256": sum(x.Data)})
	}
	return map[string]any{"metadata": md, "tensors": tensors}
}

func jsonOfValue(v Value) map[string]any {
	j := map[string]any{"type": v.typ.String()}
	if v.typ == ValueArray {
		j["elem"] = v.elem.String()
		var items []any
		for i := range v.Len() {
			switch a := v.v.(type) {
			case []Value:
				items = append(items, jsonOfValue(a[i]))
			case []string:
				items = append(items, a[i])
			default:
				items = append(items, jsonScalar(elemAt(a, i)))
			}
		}
		if items == nil {
			items = []any{}
		}
		j["value"] = items
		return j
	}
	j["value"] = jsonScalar(v.v)
	return j
}

// jsonScalar writes floats as the hex of their little-endian bytes, as
// make_fixtures.py does.
func jsonScalar(x any) any {
	switch x := x.(type) {
	case float32:
		return hex.EncodeToString(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
	case float64:
		return hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, math.Float64bits(x)))
	}
	return x
}
