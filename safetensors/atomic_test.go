package safetensors

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
)

func f32Tensor(rng *rand.Rand, name string, n int) SaveTensor {
	b := make([]byte, 4*n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return SaveTensor{Name: name, Dtype: F32, Shape: []int64{int64(n)}, Data: b}
}

// TestSaveFullFilesystemKeepsOld saves a checkpoint over a good one on a
// full file system: ENOSPC, the old checkpoint still loads with its
// bytes, and no temporary file is left beside it.
func TestSaveFullFilesystemKeepsOld(t *testing.T) {
	dir := tmpfstest.Mount(t, "1m", "kvik's TestSaveFileWriteErrorKeepsOld covers the logic")
	rng := rand.New(rand.NewPCG(7, 7))
	path := filepath.Join(dir, "model.safetensors")
	old := f32Tensor(rng, "w", 50_000)
	if err := Save(context.Background(), path, []SaveTensor{old}, nil); err != nil {
		t.Fatal(err)
	}
	err := Save(context.Background(), path, []SaveTensor{f32Tensor(rng, "a", 200_000), f32Tensor(rng, "b", 200_000)}, nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save of 1.6 MB into 1 MiB: %v, want ENOSPC", err)
	}
	m, err := LoadHost(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("the old checkpoint no longer loads: %v", err)
	}
	defer m.Close()
	if w := m.Tensor("w"); w == nil || !bytes.Equal(w.Data, old.Data) {
		t.Fatal("the old checkpoint's tensor changed")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if kvik.IsPendingName(e.Name()) {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}

// TestSaveConcurrent saves different checkpoints to one path at once: the
// file must load as exactly one of them.
func TestSaveConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	path := filepath.Join(t.TempDir(), "m.safetensors")
	const n = 6
	ts := make([]SaveTensor, n)
	for i := range ts {
		ts[i] = f32Tensor(rng, "w", 10_000+rng.IntN(50_000))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = Save(context.Background(), path, []SaveTensor{ts[i]}, nil) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	m, err := LoadHost(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("after concurrent saves: %v", err)
	}
	defer m.Close()
	got := m.Tensor("w").Data
	for _, s := range ts {
		if bytes.Equal(got, s.Data) {
			return
		}
	}
	t.Fatal("the file is none of the saves")
}
