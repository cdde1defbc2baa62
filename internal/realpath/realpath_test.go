package realpath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestResolve: spellings of one path (relative, through links, with ".."
// after a link, with a trailing separator, not existing yet) resolve
// alike, and Within tells a path below another from a sibling whose
// name starts alike.
func TestResolve(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(tmp, "a", "b")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	// link -> a/b, so link/.. is a, not tmp.
	if err := os.Symlink(real, filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(tmp)
	for _, c := range []struct{ p, want string }{
		{"a/b", real},
		{"link", real},
		{"link/", real},
		{"./a/../link", real},
		{"link/..", filepath.Join(tmp, "a")},
		{"link/../b/new/deeper", filepath.Join(real, "new", "deeper")},
		{filepath.Join(tmp, "link", "x.zarr"), filepath.Join(real, "x.zarr")},
		{"missing/../a", filepath.Join(tmp, "a")},
	} {
		if got := Resolve(c.p); got != c.want {
			t.Errorf("Resolve(%q) = %q, want %q", c.p, got, c.want)
		}
	}
	for _, c := range []struct {
		outer, inner string
		want         bool
	}{
		{"a", "link/inner.zarr", true},
		{"link", "a/b", true},
		{"a/b", "link/..", false},
		{"a/b", "a/bc", false},
		{"a/b", "a/b/../bc/x", false},
		{"/", "a", true},
	} {
		if got := Within(c.outer, c.inner); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.outer, c.inner, got, c.want)
		}
	}
}
