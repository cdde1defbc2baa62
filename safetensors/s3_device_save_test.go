package safetensors

import (
	"bytes"
	"context"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestS3SaveDevice saves tensors that live in device memory (a device
// Load of a local save) to s3:// with small parts and small bounce
// buffers, so that parts cross tensors and each part is staged in
// several chunks, and checks that the object is byte for byte the local
// save of the same tensors from host memory, and that the CRC-32C of the
// bytes sent (kvik.WithUploadCRC32C) is the object's. Needs a GPU.
func TestS3SaveDevice(t *testing.T) {
	gputest.Need(t)
	v := s3test.Start(t)
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize, d.BounceBufferSize = 5<<20, 1<<20 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	rng := rand.New(rand.NewPCG(91, 92))
	ts := randomTensors(rng, 40)
	big := make([]byte, 13<<20+6)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	ts = append(ts, SaveTensor{Name: "big", Dtype: BF16, Shape: []int64{int64(len(big) / 2)}, Data: big})
	p := t.TempDir() + "/m.safetensors"
	if err := Save(context.Background(), p, ts, nil); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dev := make([]SaveTensor, len(ts))
	for i, w := range ts {
		g := m.Tensor(w.Name)
		if g == nil || g.Ptr == 0 && g.Size() > 0 {
			t.Fatalf("%s not loaded whole onto the device", w.Name)
		}
		dev[i] = SaveTensor{Name: w.Name, Dtype: w.Dtype, Shape: w.Shape, Ptr: g.Ptr}
		if g.Size() == 0 {
			dev[i].Ptr, dev[i].Data = 0, []byte{}
		}
	}
	var sum uint32
	if err := Save(context.Background(), v.URLOf("dev.safetensors"), dev, nil, append(v.Opts(), kvik.WithUploadCRC32C(&sum))...); err != nil {
		t.Fatal(err)
	}
	got, ok := v.Object("dev.safetensors")
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("S3 save of device tensors: %d bytes stored, want the local save's %d", len(got), len(want))
	}
	if w := crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)); sum != w {
		t.Fatalf("CRC-32C sent %08x, want %08x", sum, w)
	}
}
