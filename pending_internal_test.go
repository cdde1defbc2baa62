package kvik

import (
	"path/filepath"
	"strings"
	"testing"
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
