package realpath

import (
	"os"
	"path/filepath"
	"strconv"
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

// TestCache: a Cache resolves each spelling as Resolve does (a file that
// is a link, one not there yet, a relative path, a directory not there
// yet), again after a link along the path is pointed elsewhere and after
// a directory is replaced, and keeps at most maxCached directories.
func TestCache(t *testing.T) {
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/c/0", "b/c/0"} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, "b", "c", "0", "1"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a/c/0/2 -> ../../../b/c/0/1: a chunk file that is a link.
	if err := os.Symlink("../../../b/c/0/1", filepath.Join(tmp, "a", "c", "0", "2")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link")
	if err := os.Symlink("a", link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(tmp)
	var c Cache
	check := func(when string) {
		t.Helper()
		for _, p := range []string{
			"link/c/0/1", "link/c/0/2", "link/c/0/new", "link/c/9/new", "a/c/0/1",
			filepath.Join(link, "c", "0", "1"), "link/c/0", "link/c/0/", "x", "link/../b/c/0/1",
		} {
			for range 2 { // the second from the cache
				if got, want := c.Resolve(p), Resolve(p); got != want {
					t.Errorf("%s: Cache.Resolve(%q) = %q, Resolve: %q", when, p, got, want)
				}
			}
		}
	}
	check("first")
	if got, want := c.Resolve("link/c/0/1"), filepath.Join(tmp, "a", "c", "0", "1"); got != want {
		t.Fatalf("Cache.Resolve(link/c/0/1) = %q, want %q", got, want)
	}
	// The link pointed at b: link/c/0 is another directory now.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b", link); err != nil {
		t.Fatal(err)
	}
	check("link to b")
	if got, want := c.Resolve("link/c/0/1"), filepath.Join(tmp, "b", "c", "0", "1"); got != want {
		t.Fatalf("after the link changed: Cache.Resolve(link/c/0/1) = %q, want %q", got, want)
	}
	// a/c replaced by a link to b/c.
	if err := os.RemoveAll(filepath.Join(tmp, "a", "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../b/c", filepath.Join(tmp, "a", "c")); err != nil {
		t.Fatal(err)
	}
	check("a/c a link")
	if got, want := c.Resolve("a/c/0/1"), filepath.Join(tmp, "b", "c", "0", "1"); got != want {
		t.Fatalf("after a/c was replaced: Cache.Resolve(a/c/0/1) = %q, want %q", got, want)
	}
	defer func(n int) { maxCached = n }(maxCached)
	maxCached = 8
	for i := range 40 {
		d := filepath.Join(tmp, "many", strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, "f")
		if got := c.Resolve(p); got != p {
			t.Fatalf("Cache.Resolve(%q) = %q", p, got)
		}
	}
	if len(c.dirs) != maxCached {
		t.Fatalf("%d directories cached, at most %d", len(c.dirs), maxCached)
	}
}
