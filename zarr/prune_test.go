package zarr

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree returns the paths below root (relative, with "/"), directories
// ending in "/".
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeletePrunesDirs: Delete of an array in a DirStore (chunk keys
// with "/", WithProcessLocks) leaves no directory of it behind, lock
// file included, where it left a tree of empty directories before;
// the group above and a sibling array stay as they were, a directory
// holding a concurrent write's temporary file stays (no error), the
// root stays when the whole store is deleted, and the array's path can
// be written again at once.
func TestDeletePrunesDirs(t *testing.T) {
	root := t.TempDir()
	s, err := NewDirStore(root, WithProcessLocks())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 1))
	m := Metadata{Shape: []int{40 + rng.IntN(40), 40 + rng.IntN(40)}, ChunkShape: []int{8 + rng.IntN(8), 8 + rng.IntN(8)}, DataType: DataType{Kind: Float, Size: 4}}
	write := func(path string) []byte {
		a, err := Create(bg, s, path, m)
		if err != nil {
			t.Fatal(err)
		}
		src := randValues(rng, m.DataType, numElements(m.Shape))
		if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, src); err != nil {
			t.Fatal(err)
		}
		return src
	}
	write("g/a")
	sibling := write("g/b")
	before := tree(t, filepath.Join(root, "g", "b"))
	if !slices.Contains(before, ".kvik-lock") || !slices.Contains(before, "c/0/") {
		t.Fatalf("sibling's tree lacks the lock file or a chunk directory: %v", before)
	}
	if err := Delete(bg, s, "g/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "g", "a")); !os.IsNotExist(err) {
		t.Fatalf("g/a after Delete: %v; left: %v", err, tree(t, filepath.Join(root, "g", "a")))
	}
	if got := tree(t, filepath.Join(root, "g", "b")); !slices.Equal(got, before) {
		t.Fatalf("sibling changed by Delete:\n%v\nwas\n%v", got, before)
	}
	for _, doc := range []string{"zarr.json", "g/zarr.json"} {
		if _, err := os.Stat(filepath.Join(root, doc)); err != nil {
			t.Fatalf("%s after Delete of g/a: %v", doc, err)
		}
	}
	b, err := Open(bg, s, "g/b")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(sibling))
	if err := b.ReadRegion(bg, []int{0, 0}, m.Shape, got); err != nil || !slices.Equal(got, sibling) {
		t.Fatalf("sibling's values after Delete of g/a: %v", err)
	}

	// Written again at once, then deleted with another write's temporary
	// file in one chunk directory: that directory and those above it stay.
	again := write("g/a")
	a, err := Open(bg, s, "g/a")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.ReadRegion(bg, []int{0, 0}, m.Shape, got); err != nil || !slices.Equal(got, again) {
		t.Fatalf("array written again after Delete: %v", err)
	}
	pending := filepath.Join(root, "g", "a", "c", "1", ".0.kvik-tmp-1-1")
	if err := os.WriteFile(pending, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Delete(bg, s, "g/a"); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, filepath.Join(root, "g", "a")), []string{".kvik-lock", "c/", "c/1/", "c/1/.0.kvik-tmp-1-1"}; !slices.Equal(got, want) {
		t.Fatalf("left after Delete beside a temporary file: %v, want %v", got, want)
	}

	if err := Delete(bg, s, ""); err != nil {
		t.Fatal(err)
	}
	if got, want := tree(t, root), []string{"g/", "g/a/", "g/a/.kvik-lock", "g/a/c/", "g/a/c/1/", "g/a/c/1/.0.kvik-tmp-1-1"}; !slices.Equal(got, want) {
		t.Fatalf("left after Delete of the whole store: %v, want %v", got, want)
	}
	if err := os.Remove(pending); err != nil {
		t.Fatal(err)
	}
	if err := Delete(bg, s, ""); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, root); len(got) != 0 {
		t.Fatalf("left after Delete of the whole store: %v", got)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("root after Delete of the whole store: %v", err)
	}
}

// TestDeletePruneStaysInside: an array whose tree holds links to
// directories and files outside the store (an empty directory there, a
// directory with a file, a file) and a FIFO is deleted: the links and
// the FIFO go with the array (they are its entries, not followed), and
// nothing outside the store changes, its empty directory included.
func TestDeletePruneStaysInside(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "store"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(outside, "empty"), filepath.Join(outside, "full", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "full", "sub", "f"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "file"), []byte("keep too"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewDirStore(root, WithProcessLocks())
	if err != nil {
		t.Fatal(err)
	}
	m := Metadata{Shape: []int{16, 16}, ChunkShape: []int{8, 8}, DataType: DataType{Kind: Float, Size: 4}}
	a, err := Create(bg, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, randValues(rand.New(rand.NewPCG(3, 4)), m.DataType, 256)); err != nil {
		t.Fatal(err)
	}
	c := filepath.Join(root, "a", "c")
	for name, target := range map[string]string{"9": filepath.Join(outside, "empty"), "8": filepath.Join(outside, "full"), "0/7": filepath.Join(outside, "file")} {
		if err := os.Symlink(target, filepath.Join(c, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(c, "1", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := tree(t, outside)
	if err := Delete(bg, s, "a"); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, outside); !slices.Equal(got, before) {
		t.Fatalf("outside the store after Delete:\n%v\nwas\n%v", got, before)
	}
	if _, err := os.Lstat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Fatalf("the array's directory after Delete: %v; left: %v", err, tree(t, filepath.Join(root, "a")))
	}
}

// TestDirStoreListPrefixes: List of any prefix (whole segments, part of
// one, with "..", naming a value, missing) gives the keys of List("")
// that start with it, now that a walk starts at the prefix's directory.
func TestDirStoreListPrefixes(t *testing.T) {
	root := t.TempDir()
	s, err := NewDirStore(root)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 9))
	segs := []string{"a", "ab", "b", "c", "0", "1"}
	for range 60 {
		var parts []string
		for range 1 + rng.IntN(4) {
			parts = append(parts, segs[rng.IntN(len(segs))])
		}
		key := strings.Join(parts, "/")
		s.Set(bg, key, []byte(key)) // fails below another key's file, or at a directory
	}
	all, err := s.List(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 10 {
		t.Fatalf("only %d keys made", len(all))
	}
	prefixes := []string{"a", "a/", "ab", "ab/", "a/b", "a/b/", "../", "a/../b/", "zz/", "zz/q", "/a/", "c/0/1/"}
	for _, k := range all {
		prefixes = append(prefixes, k, k+"/", k[:rng.IntN(len(k))+1])
	}
	for _, p := range prefixes {
		var want []string
		for _, k := range all {
			if strings.HasPrefix(k, p) {
				want = append(want, k)
			}
		}
		got, err := s.List(bg, p)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("List(%q) = %v, %v; want %v", p, got, err, want)
		}
	}
}

// TestDeleteConcurrent: Deletes of one array at once all succeed, each
// finding directories the others removed, and leave nothing of it.
func TestDeleteConcurrent(t *testing.T) {
	root := t.TempDir()
	s, err := NewDirStore(root, WithProcessLocks())
	if err != nil {
		t.Fatal(err)
	}
	m := Metadata{Shape: []int{64, 64}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Float, Size: 4}}
	for round := range 3 {
		a, err := Create(bg, s, "g/a", m)
		if err != nil {
			t.Fatal(err)
		}
		src := randValues(rand.New(rand.NewPCG(uint64(round), 2)), m.DataType, numElements(m.Shape))
		if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, src); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 4)
		for range cap(errs) {
			go func() { errs <- Delete(bg, s, "g/a") }()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: concurrent Delete: %v", round, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(root, "g", "a")); !os.IsNotExist(err) {
			t.Fatalf("round %d: g/a after the Deletes: %v", round, err)
		}
	}
}
