package npy

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// touchingReader is a FileHandle that writes to its own file, in place,
// before its first PRead: an array rewritten while it is loaded.
type touchingReader struct {
	*kvik.FileHandle
	once  sync.Once
	touch func()
}

func (r *touchingReader) PRead(ctx context.Context, p []byte, off int64) *kvik.Future {
	r.once.Do(r.touch)
	return r.FileHandle.PRead(ctx, p, off)
}

// TestLoadFileChangedMidway: an array file written to in place between
// its header and its data read fails LoadHostReader with
// kvik.ErrFileChanged; the same load of the untouched file passes.
func TestLoadFileChangedMidway(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 78))
	data := make([]byte, 8*(1+rng.IntN(50_000)))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	p := filepath.Join(t.TempDir(), "a.npy")
	if err := Save(context.Background(), p, SaveArray{Dtype: Float64, Shape: []int64{int64(len(data) / 8)}, Data: data}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // so a write's modification time differs
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	h, err := kvik.Open(p, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	a, err := LoadHostReader(context.Background(), &touchingReader{FileHandle: h, touch: func() {}}, nil)
	if err != nil {
		t.Fatalf("load of an untouched file: %v", err)
	}
	a.Close()
	touch := func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		f.WriteAt([]byte{0x5a}, fi.Size()-1)
	}
	if _, err := LoadHostReader(context.Background(), &touchingReader{FileHandle: h, touch: touch}, nil); !errors.Is(err, kvik.ErrFileChanged) {
		t.Fatalf("load of a file written to midway: %v, want ErrFileChanged", err)
	}
}
