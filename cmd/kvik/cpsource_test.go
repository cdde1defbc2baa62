package main

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// TestCpSourceChanged: a copy whose SRC is written to after it was opened
// fails with kvik.ErrFileChanged before the copy is committed, even
// where nothing would read the files back (--verify=false); an
// untouched SRC passes.
func TestCpSourceChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 55))
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	data := make([]byte, 1+rng.IntN(1<<20))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A modification time well in the past, so the write's differs
	// whatever the file system's timestamp granularity.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(src, old, old); err != nil {
		t.Fatal(err)
	}
	j := &copyJob{o: &cpOptions{}, src: src, dst: filepath.Join(dir, "dst.bin")}
	if err := j.open(); err != nil {
		t.Fatal(err)
	}
	defer j.in.Close()
	defer j.pending.Abort()
	if err := j.unchanged(); err != nil {
		t.Fatalf("untouched source: %v", err)
	}
	f, err := os.OpenFile(src, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte{^data[0]}, 0) // the same size
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.unchanged(); !errors.Is(err, kvik.ErrFileChanged) {
		t.Fatalf("source written to: %v, want ErrFileChanged", err)
	}
}
