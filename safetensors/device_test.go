package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestDeviceRoundTrip loads random tensors to device 0, compares every
// tensor's bytes with the host copy, saves them back from device memory
// and checks the file is byte-identical to the original.
func TestDeviceRoundTrip(t *testing.T) {
	gputest.Need(t)
	rng := rand.New(rand.NewPCG(21, 22))
	for range 4 {
		p, ts := writeRandom(t, rng, 1+rng.IntN(80), map[string]string{"k": "v"})
		m, err := Load(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		var back []SaveTensor
		for _, w := range ts {
			g := m.Tensor(w.Name)
			if g == nil || g.Device != 0 || (g.Size() > 0 && g.Ptr%Alignment != 0) {
				t.Fatalf("%s: %+v", w.Name, g)
			}
			if got := gputest.FromDevice(t, 0, g.Ptr, g.Size()); !bytes.Equal(got, w.Data) {
				t.Fatalf("%s: device bytes differ", w.Name)
			}
			back = append(back, SaveTensor{Name: w.Name, Dtype: w.Dtype, Shape: w.Shape, Ptr: g.Ptr, Data: nilIfDev(g)})
		}
		q := filepath.Join(t.TempDir(), "back.safetensors")
		if err := Save(context.Background(), q, back, map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(q)
		if !bytes.Equal(a, b) {
			t.Fatalf("file saved from device differs from the original")
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// nilIfDev gives an empty tensor (no device bytes) empty host data, so
// Save takes it from Data.
func nilIfDev(g *Tensor) []byte {
	if g.Size() == 0 {
		return []byte{}
	}
	return nil
}

// TestMultiDevice loads onto every GPU (at least two) balanced, by a
// mapping function, and with the largest tensor split by byte range.
func TestMultiDevice(t *testing.T) {
	n := gputest.Need(t)
	if n < 2 {
		t.Skipf("needs two GPUs, found %d", n)
	}
	devs := []int{0, 1}
	p, ts := writeRandom(t, rand.New(rand.NewPCG(31, 32)), 120, nil)
	var biggest string
	var bigSize int
	for _, w := range ts {
		if len(w.Data) > bigSize {
			biggest, bigSize = w.Name, len(w.Data)
		}
	}
	for _, o := range []*Options{
		{Devices: devs},
		{Devices: devs, Place: func(ti *TensorInfo) int { return int(ti.Name[1]) % 2 }},
		{Devices: devs, Split: func(ti *TensorInfo) bool { return ti.Name == biggest }},
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
		if o.Split != nil && len(m.Tensor(biggest).Parts) != 2 {
			t.Fatalf("split tensor has %d parts", len(m.Tensor(biggest).Parts))
		}
		m.Close()
	}
}

// TestWriteForPython writes files from device memory for
// bench/loaders_xcheck.py check (KVIK_ST_XCHECK_OUT), with the expected
// sha256 of every tensor.
func TestWriteForPython(t *testing.T) {
	out := os.Getenv("KVIK_ST_XCHECK_OUT")
	if out == "" {
		t.Skip("KVIK_ST_XCHECK_OUT not set")
	}
	gputest.Need(t)
	rng := rand.New(rand.NewPCG(41, 42))
	e := expected{Generator: "kvik safetensors.Save from device memory", Files: map[string]expectedFile{}}
	for i := range 3 {
		var ts []SaveTensor
		for _, x := range randomTensors(rng, 60) {
			if x.Dtype != F4 && x.Dtype != F8E8M0 && x.Dtype != C64 { // no torch dtype the checker maps
				ts = append(ts, x)
			}
		}
		src := filepath.Join(t.TempDir(), "src.safetensors")
		if err := Save(context.Background(), src, ts, nil); err != nil {
			t.Fatal(err)
		}
		m, err := Load(context.Background(), src, nil)
		if err != nil {
			t.Fatal(err)
		}
		meta := map[string]string{"writer": "kvik", "i": string(rune('0' + i))}
		var dev []SaveTensor
		ef := expectedFile{Metadata: meta, Tensors: map[string]expectedTensor{}}
		for _, w := range ts {
			g := m.Tensor(w.Name)
			dev = append(dev, SaveTensor{Name: w.Name, Dtype: w.Dtype, Shape: w.Shape, Ptr: g.Ptr, Data: nilIfDev(g)})
			ef.Tensors[w.Name] = expectedTensor{Dtype: string(w.Dtype), Shape: nonNil(w.Shape), Sha256: sum(w.Data)}
		}
		name := "kvik" + string(rune('0'+i)) + ".safetensors"
		if err := Save(context.Background(), filepath.Join(out, name), dev, meta); err != nil {
			t.Fatal(err)
		}
		e.Files[name] = ef
		m.Close()
	}
	b, _ := json.MarshalIndent(e, "", " ")
	if err := os.WriteFile(filepath.Join(out, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReplicate loads random tensors onto every GPU with Replicate (device
// 0 twice where there is one GPU, so it runs on any GPU machine) and
// checks every replica's bytes against the file; Place with Replicate is
// refused before anything is read.
func TestReplicate(t *testing.T) {
	n := gputest.Need(t)
	devs := []int{0, 0}
	if n > 1 {
		devs = []int{0, 1}
	}
	p, ts := writeRandom(t, rand.New(rand.NewPCG(33, 34)), 90, nil)
	m, err := Load(context.Background(), p, &Options{Devices: devs, Replicate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, w := range ts {
		g := m.Tensor(w.Name)
		if g == nil || len(g.Replicas) != len(devs) || g.Device != devs[0] || g.Ptr != g.Replicas[0].Ptr {
			t.Fatalf("%s: %+v", w.Name, g)
		}
		for k, r := range g.Replicas {
			if r.Device != devs[k] || (g.Size() > 0 && r.Ptr%Alignment != 0) {
				t.Fatalf("%s: replica %d %+v", w.Name, k, r)
			}
			if got := gputest.FromDevice(t, r.Device, r.Ptr, g.Size()); !bytes.Equal(got, w.Data) {
				t.Fatalf("%s: replica %d on device %d differs", w.Name, k, r.Device)
			}
		}
	}
	_, err = Load(context.Background(), p, &Options{Devices: devs, Replicate: true, Place: func(*TensorInfo) int { return 0 }})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Replicate with Place: %v, want ErrInvalidArgument", err)
	}
}
