package zarr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestCreateExisting creates arrays where an array or a group already
// is, in a directory and on S3: each fails with ErrExists (and
// fs.ErrExist) before anything is written, the old array reading back
// unchanged; after Delete the path is free, and the new array reads its
// fill value, none of the old chunks.
func TestCreateExisting(t *testing.T) {
	for _, backend := range []string{"dir", "s3"} {
		t.Run(backend, func(t *testing.T) {
			var s Store
			if backend == "dir" {
				s, _ = NewDirStore(t.TempDir())
			} else {
				_, s = openS3(t, "exists.zarr")
			}
			rng := rand.New(rand.NewPCG(uint64(len(backend)), 7))
			zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}
			old := Metadata{Shape: []int{5 + rng.IntN(20), 3 + rng.IntN(20)}, ChunkShape: []int{1 + rng.IntN(6), 1 + rng.IntN(6)},
				DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"}, zstd}}
			a, err := Create(bg, s, "g/x", old)
			if err != nil {
				t.Fatal(err)
			}
			data := randValues(rng, old.DataType, numElements(old.Shape))
			if err := a.WriteRegion(bg, []int{0, 0}, old.Shape, data); err != nil {
				t.Fatal(err)
			}
			keys, _ := s.List(bg, "")
			for _, c := range []struct {
				path string
				m    Metadata
			}{
				{"g/x", Metadata{Shape: old.Shape, ChunkShape: old.ChunkShape, DataType: DataType{Kind: Float, Size: 4}, FillValue: 7}},
				{"g/x/", Metadata{ZarrFormat: 2, Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 2}}},
				{"g", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 2}}}, // the parent group
				{"", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 2}}},  // the root group
			} {
				_, err := Create(bg, s, c.path, c.m)
				if !errors.Is(err, ErrExists) || !errors.Is(err, fs.ErrExist) {
					t.Fatalf("Create at %q over a node: %v, want ErrExists", c.path, err)
				}
				if after, _ := s.List(bg, ""); fmt.Sprint(after) != fmt.Sprint(keys) {
					t.Fatalf("a refused Create at %q changed the store's keys:\n%q\nwas\n%q", c.path, after, keys)
				}
			}
			checkRead(t, s, "g/x", old.Shape, data)

			if err := Delete(bg, s, "g/x"); err != nil {
				t.Fatal(err)
			}
			if left, _ := s.List(bg, "g/x/"); len(left) != 0 {
				t.Fatalf("keys left under g/x after Delete: %q", left)
			}
			if err := Delete(bg, s, "g/x"); err != nil {
				t.Fatalf("Delete of a deleted node: %v", err)
			}
			fresh := Metadata{Shape: old.Shape, ChunkShape: old.ChunkShape, DataType: DataType{Kind: Float, Size: 4}, FillValue: 7, Codecs: old.Codecs}
			if _, err := Create(bg, s, "g/x", fresh); err != nil {
				t.Fatalf("Create after Delete: %v", err)
			}
			fill := make([]byte, len(data))
			for i := 0; i < len(fill); i += 4 {
				copy(fill[i:], []byte{0, 0, 0xe0, 0x40}) // 7.0f
			}
			checkRead(t, s, "g/x", old.Shape, fill)
		})
	}
}

// checkRead opens the array at path in s and checks that it reads want.
func checkRead(t *testing.T, s Store, path string, shape []int, want []byte) {
	t.Helper()
	a, err := Open(bg, s, path)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := a.ReadRegion(bg, make([]int, len(shape)), shape, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s reads other bytes than written", path)
	}
}

// failingDeletes is a store whose Delete fails after n deletions; of
// one request slot, so that Delete's work on it runs in turn.
type failingDeletes struct {
	Store
	n int
}

func (*failingDeletes) MaxRequests() int { return 1 }

func (s *failingDeletes) Delete(ctx context.Context, key string) error {
	if s.n--; s.n < 0 {
		return fs.ErrPermission
	}
	return s.Store.Delete(ctx, key)
}

// TestDeleteCutShort cuts Deletes short after every number of keys: the
// node's metadata goes last, so the array still exists (Create there
// fails with ErrExists) until its last chunk is gone.
func TestDeleteCutShort(t *testing.T) {
	dir, _ := NewDirStore(t.TempDir())
	m := Metadata{Shape: []int{6, 6}, ChunkShape: []int{2, 3}, DataType: DataType{Kind: Uint, Size: 1}}
	for n := 0; ; n++ {
		a, err := Create(bg, dir, "a", m)
		if err != nil {
			t.Fatalf("cut after %d: %v", n, err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, bytes.Repeat([]byte{9}, 36)); err != nil {
			t.Fatal(err)
		}
		keys, _ := dir.List(bg, "a/")
		f := &failingDeletes{Store: dir, n: n}
		err = Delete(bg, f, "a")
		if err == nil {
			if n < len(keys) {
				t.Fatalf("Delete with %d of %d deletions succeeded", n, len(keys))
			}
			return
		}
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("cut after %d: %v", n, err)
		}
		if _, err := Create(bg, dir, "a", m); !errors.Is(err, ErrExists) {
			t.Fatalf("cut after %d of %d keys: Create %v, want ErrExists", n, len(keys), err)
		}
		if err := Delete(bg, dir, "a"); err != nil { // the rest
			t.Fatal(err)
		}
	}
}

// TestDeleteInvalidPath deletes paths no key may lie under: each fails
// with ErrInvalidKey, and the file beside the store's root stays.
func TestDeleteInvalidPath(t *testing.T) {
	root := t.TempDir()
	beside := filepath.Join(root, "beside.txt")
	if err := os.WriteFile(beside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := NewDirStore(filepath.Join(root, "s"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"..", "../", "a/../..", "a//b", "./a", "a\\b", "a\x00b"} {
		if err := Delete(bg, s, p); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q): %v, want ErrInvalidKey", p, err)
		}
	}
	if _, err := os.Stat(beside); err != nil {
		t.Fatalf("the file beside the store: %v", err)
	}
}
