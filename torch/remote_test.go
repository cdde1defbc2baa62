package torch

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestS3Fixtures loads every fixture from versitygw (its directory and
// data.pkl in ranged GETs, its tensors in parallel ones) into host
// memory and, where there is a GPU, onto device 0, against what
// torch.load gave.
func TestS3Fixtures(t *testing.T) {
	v := s3test.Start(t)
	for file := range readExpected(t).Files {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		v.Put(t, "ckpt/"+file, b)
		c, err := LoadHost(context.Background(), v.URLOf("ckpt/"+file), nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		checkTensors(t, file, c.Tensors, func(x *Tensor) []byte { return x.Data })
		if !haveGPU() {
			continue
		}
		d, err := Load(context.Background(), v.URLOf("ckpt/"+file), nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s onto the GPU: %v", file, err)
		}
		checkTensors(t, file, d.Tensors, func(x *Tensor) []byte { return fromDevice(t, x) })
		d.Close()
	}
}
