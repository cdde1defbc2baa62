package safetensors

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// TestLoadFileChangedMidway: a file written to in place while it is
// loaded (here from Filter, between the header and the data) fails the
// load with kvik.ErrFileChanged instead of returning tensors that may mix
// its old and new bytes, by name and through a handle the caller opened;
// a file replaced by a rename of another over its path, while loaded
// through an open handle, is not a change of the file read.
func TestLoadFileChangedMidway(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 77))
	ctx := context.Background()
	p, _ := writeRandom(t, rng, 2+rng.IntN(20), nil)
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// A modification time well in the past, so a write's differs
	// whatever the file system's timestamp granularity.
	past := func() {
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	touch := func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		f.WriteAt([]byte{^orig[len(orig)-1]}, int64(len(orig)-1)) // the same size
	}
	filter := func(f func()) *Options {
		var once sync.Once
		return &Options{Filter: func(*TensorInfo) bool { once.Do(f); return true }}
	}
	past()
	if m, err := LoadHost(ctx, p, filter(touch)); !errors.Is(err, kvik.ErrFileChanged) || m != nil {
		t.Fatalf("load of a file written to midway: %v, want ErrFileChanged and no model", err)
	}
	past()
	h, err := kvik.Open(p, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := LoadHostReader(ctx, h, filter(touch)); !errors.Is(err, kvik.ErrFileChanged) {
		t.Fatalf("LoadHostReader of a file written to midway: %v, want ErrFileChanged", err)
	}
	m, err := LoadHostReader(ctx, h, filter(func() {}))
	if err != nil {
		t.Fatalf("load of an untouched file: %v", err)
	}
	m.Close()
	replace := func() {
		if err := os.WriteFile(p+".new", orig, 0o644); err != nil {
			t.Error(err)
		}
		if err := os.Rename(p+".new", p); err != nil {
			t.Error(err)
		}
	}
	m, err = LoadHostReader(ctx, h, filter(replace))
	if err != nil {
		t.Fatalf("load of a file replaced by rename: %v", err)
	}
	m.Close()
}
