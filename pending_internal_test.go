package kvik

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/tmpfstest"
)

// TestIsPendingOf checks that the temporary names CreatePending makes,
// shortened or not, are recognised as a file's own (what kvik cp removes
// after an interruption), and not as those of a file whose name shares a
// prefix or of another file.
func TestIsPendingOf(t *testing.T) {
	long := strings.Repeat("x", 240) + ".safetensors" // shortened and hashed
	utf := strings.Repeat("é", 124) + ".bin"          // 252 bytes, cut at a whole character
	for _, base := range []string{"model.bin", "a", long, utf, strings.Repeat("y", 255)} {
		path := filepath.Join("/some/dir", base)
		tmp := filepath.Base(pendingName(path))
		if len(tmp) > nameMax {
			t.Fatalf("%d-byte name: temporary name of %d bytes", len(base), len(tmp))
		}
		if !IsPendingOf(tmp, path) || !IsPendingName(tmp) {
			t.Errorf("%d-byte name: %q not recognised as its temporary", len(base), tmp)
		}
		for _, other := range []string{base + "2", "z" + base, base[:len(base)-1]} {
			if IsPendingOf(tmp, other) {
				t.Errorf("%d-byte name: %q taken for a temporary of %q", len(base), tmp, other)
			}
		}
	}
	for _, n := range []string{"model.bin", ".model.bin", "model.bin.kvik-tmp-1-1", ".kvik-tmp-1-1"} {
		if IsPendingOf(n, "model.bin") {
			t.Errorf("%q taken for a temporary of model.bin", n)
		}
	}
}

// TestCommitInMemory: inMemory tells a file on a tmpfs from one on ext4
// (each mounted for the test), and a save on the tmpfs, which skips its
// syncs, leaves the file whole with its contents and no temporary file.
func TestCommitInMemory(t *testing.T) {
	for _, c := range []struct {
		fs    string
		mount func(t *testing.T) string
		want  bool
	}{
		{"tmpfs", func(t *testing.T) string { return tmpfstest.Mount(t, "4m", "none: the syncs are only skipped") }, true},
		{"ext4", func(t *testing.T) string { return tmpfstest.MountExt4(t, "8M", "none: the syncs are kept") }, false},
	} {
		t.Run(c.fs, func(t *testing.T) {
			dir := c.mount(t)
			f, err := os.Create(filepath.Join(dir, "probe"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := inMemory(int(f.Fd())); got != c.want {
				t.Fatalf("inMemory on %s = %v", c.fs, got)
			}
			rng := rand.New(rand.NewPCG(uint64(len(c.fs)), 5))
			data := make([]byte, 1+rng.IntN(300<<10))
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			path := filepath.Join(dir, "f.bin")
			for range 2 { // new, then replaced
				if err := SaveFile(context.Background(), path, []Piece{{Data: data}}); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("saved file differs (%v)", err)
				}
				data = data[:len(data)/2]
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if IsPendingName(e.Name()) {
					t.Fatalf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}
