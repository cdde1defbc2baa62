package safetensors

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestSaveFromDevices loads random tensors onto every GPU (balanced over
// two where there are two, else onto GPU 0) and saves them back from
// device memory, with tasks of a few pages (so that tasks span several
// tensors, and on two GPUs both devices' tensors) and the default ones:
// the file must equal the original byte for byte, and SaveSharded of
// the same tensors must load back equal.
func TestSaveFromDevices(t *testing.T) {
	n := gputest.Need(t)
	devs := []int{0}
	if n >= 2 {
		devs = []int{0, 1}
	}
	rng := rand.New(rand.NewPCG(71, 72))
	p, ts := writeRandom(t, rng, 150, map[string]string{"k": "v"})
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(context.Background(), p, &Options{Devices: devs})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	used := map[int]bool{}
	var back []SaveTensor
	for _, w := range ts {
		g := m.Tensor(w.Name)
		if g.Size() > 0 {
			used[g.Device] = true
		}
		back = append(back, SaveTensor{Name: w.Name, Dtype: w.Dtype, Shape: w.Shape, Ptr: g.Ptr, Data: nilIfDev(g)})
	}
	if len(used) != len(devs) {
		t.Fatalf("tensors on devices %v, want %v", used, devs)
	}
	for _, task := range []int{3 * 4096, 64 << 10, 0} {
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
			if task > 0 {
				d.TaskSize = task
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		q := filepath.Join(t.TempDir(), "back.safetensors")
		err = Save(context.Background(), q, back, map[string]string{"k": "v"})
		if err == nil {
			var got []byte
			got, err = os.ReadFile(q)
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("task size %d: file saved from devices %v differs from the original", task, devs)
			}
		}
		if err == nil {
			var index string
			index, err = SaveSharded(context.Background(), filepath.Join(t.TempDir(), "sharded"), back, nil, &ShardOptions{MaxShardSize: 50_000})
			if err == nil {
				var h *Model
				if h, err = LoadIndexHost(context.Background(), index, nil); err == nil {
					for _, w := range ts {
						checkHostTensor(t, h, w)
					}
					h.Close()
				}
			}
		}
		restore()
		if err != nil {
			t.Fatalf("task size %d: %v", task, err)
		}
	}
}
