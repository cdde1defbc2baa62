package npy

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
)

// TestSaveFullFilesystemKeepsOld saves an array over a good one on a full
// 1 MiB tmpfs: ENOSPC, the old array still loads with its bytes, and no
// temporary file is left beside it.
func TestSaveFullFilesystemKeepsOld(t *testing.T) {
	dir := tmpfstest.Mount(t, "1m", "kvik's TestSaveFileWriteErrorKeepsOld covers the logic")
	rng := rand.New(rand.NewPCG(9, 9))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	path := filepath.Join(dir, "x.npy")
	old := data(8 * 30_000)
	if err := Save(context.Background(), path, SaveArray{Dtype: Float64, Shape: []int64{30_000}, Data: old}); err != nil {
		t.Fatal(err)
	}
	if err := Save(context.Background(), path, SaveArray{Dtype: Float64, Shape: []int64{250_000}, Data: data(8 * 250_000)}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save of 2 MB into 1 MiB: %v, want ENOSPC", err)
	}
	a, err := LoadHost(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("the old array no longer loads: %v", err)
	}
	defer a.Close()
	if !bytes.Equal(a.Data, old) {
		t.Fatal("the old array's bytes changed")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if kvik.IsPendingName(e.Name()) {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}
