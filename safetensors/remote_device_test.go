package safetensors

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// checkDeviceModel compares every tensor of m, whole or split, with its
// host bytes, and returns how many were split.
func checkDeviceModel(t *testing.T, what string, m *Model, ts []SaveTensor) int {
	t.Helper()
	split := 0
	for _, w := range ts {
		g := m.Tensor(w.Name)
		if g == nil {
			t.Fatalf("%s: %s missing", what, w.Name)
		}
		var got []byte
		if len(g.Parts) > 0 {
			split++
			for _, p := range g.Parts {
				if p.Size > 0 && p.Ptr%Alignment != 0 {
					t.Fatalf("%s: %s part at %#x not aligned", what, w.Name, p.Ptr)
				}
				got = append(got, gputest.FromDevice(t, p.Device, p.Ptr, p.Size)...)
			}
		} else {
			if g.Size() > 0 && g.Ptr%Alignment != 0 {
				t.Fatalf("%s: %s at %#x not aligned", what, w.Name, g.Ptr)
			}
			got = gputest.FromDevice(t, g.Device, g.Ptr, g.Size())
		}
		if !bytes.Equal(got, w.Data) {
			t.Fatalf("%s: %s differs on the device", what, w.Name)
		}
	}
	return split
}

// TestRemoteDevice loads a checkpoint from S3 and from plain HTTP into
// device memory, with small tasks so that every run is many parallel
// ranged GETs, placed as local loads are: one device, and several slots
// (device 0 twice, so one GPU suffices) balanced, mapped by Place and
// with the largest tensor split.
func TestRemoteDevice(t *testing.T) {
	gputest.Need(t)
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = 64 << 10 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	rng := rand.New(rand.NewPCG(81, 82))
	ts := randomTensors(rng, 60)
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	ts = append(ts, SaveTensor{Name: "big", Dtype: BF16, Shape: []int64{int64(len(big) / 2)}, Data: big})
	p := t.TempDir() + "/m.safetensors"
	if err := Save(context.Background(), p, ts, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	v := s3test.Start(t)
	s3url := v.Put(t, "m.safetensors", b)
	srv := httpfault.New(t, map[string][]byte{"/m.safetensors": b}, nil)

	two := []int{0, 0}
	for _, src := range []struct {
		url  string
		opts []kvik.RemoteOption
	}{{s3url, v.Opts()}, {srv.URL + "/m.safetensors", nil}} {
		for _, o := range []*Options{
			nil,
			{Devices: two},
			{Devices: two, Place: func(ti *TensorInfo) int { return int(ti.Name[1]) % 2 }},
			{Devices: two, Split: func(ti *TensorInfo) bool { return ti.Name == "big" }},
		} {
			m, err := Load(context.Background(), src.url, o, src.opts...)
			if err != nil {
				t.Fatalf("%s: %v", src.url, err)
			}
			split := checkDeviceModel(t, src.url, m, ts)
			if o != nil && o.Split != nil && (split != 1 || len(m.Tensor("big").Parts) != 2) {
				t.Fatalf("%s: %d tensors split, big in %d parts", src.url, split, len(m.Tensor("big").Parts))
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRemoteIndexDevice loads the committed sharded checkpoint from S3
// into device memory and compares it with the host load of the local
// files.
func TestRemoteIndexDevice(t *testing.T) {
	gputest.Need(t)
	v := s3test.Start(t)
	for name, b := range fixtures(t) {
		v.Put(t, name, b)
	}
	want, err := LoadIndexHost(context.Background(), "testdata/torch/model.safetensors.index.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := LoadIndex(context.Background(), v.URLOf("torch/model.safetensors.index.json"), &Options{Devices: []int{0, 0}}, v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var ts []SaveTensor
	for _, w := range want.Tensors {
		ts = append(ts, SaveTensor{Name: w.Name, Data: w.Data})
	}
	checkDeviceModel(t, "index", m, ts)
}
