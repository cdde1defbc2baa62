package torch

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// haveGPU reports whether a CUDA device is usable here.
func haveGPU() bool {
	if cuda.Init() != nil {
		return false
	}
	n, err := cuda.DeviceGetCount()
	return err == nil && n > 0
}

// fromDevice copies a loaded tensor's bytes from its device.
func fromDevice(t testing.TB, x *Tensor) []byte {
	t.Helper()
	if x.Size == 0 {
		return []byte{}
	}
	return gputest.FromDevice(t, x.Device, x.Ptr, x.Size)
}

// TestDeviceFixtures loads every fixture onto device 0 and compares each
// tensor's bytes there with what torch.load gave (tied weights in one
// place); then places views.pt's tensors across the devices there are,
// by Place, and loads a sharded checkpoint balanced over them.
func TestDeviceFixtures(t *testing.T) {
	n := gputest.Need(t)
	for file := range readExpected(t).Files {
		c, err := Load(context.Background(), filepath.Join("testdata", file), nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for i := range c.Tensors {
			if x := &c.Tensors[i]; x.Size > 0 && (x.Device != 0 || x.Ptr == 0 || uint64(x.Ptr)%Alignment != 0) {
				t.Errorf("%s: %q on device %d at %#x", file, x.Name, x.Device, uint64(x.Ptr))
			}
		}
		checkTensors(t, file, c.Tensors, func(x *Tensor) []byte { return fromDevice(t, x) })
		if file == "views.pt" && c.Tensor("emb").Ptr != c.Tensor("lm_head").Ptr {
			t.Error("tied weights in two places")
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	devices := make([]int, n)
	for i := range devices {
		devices[i] = i
	}
	c, err := Load(context.Background(), "testdata/views.pt", &Options{Devices: devices, Place: func(t *TensorInfo) int { return len(t.Name) % n }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range c.Tensors {
		x := &c.Tensors[i]
		want := len(x.Name) % n
		if x.Name == "lm_head" {
			want = len("emb") % n // tied to emb: placed as emb is
		}
		if x.Size > 0 && x.Device != want {
			t.Errorf("%q on device %d, placed on %d", x.Name, x.Device, want)
		}
	}
	checkTensors(t, "views.pt", c.Tensors, func(x *Tensor) []byte { return fromDevice(t, x) })
	ix, err := LoadIndex(context.Background(), shardedIndex(t, nil), &Options{Devices: devices})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	checkIndexed(t, ix, func(x *Tensor) []byte { return fromDevice(t, x) })
}
