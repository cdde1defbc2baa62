package zarr

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestOpenCreatesNothing: opening a directory store that does not exist
// creates nothing, and the store is empty: ArrayPaths fails with
// ErrNoStore (which is also fs.ErrNotExist), Open finds no array, List
// finds no key. The first write creates the directory. A root that is a
// file fails to open with ENOTDIR.
func TestOpenCreatesNothing(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "typo.zarr")
	for _, open := range []func() (Store, error){
		func() (Store, error) { return NewDirStore(root) },
		func() (Store, error) { return OpenStore(bg, root) },
	} {
		s, err := open()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ArrayPaths(bg, s); !errors.Is(err, ErrNoStore) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ArrayPaths of a missing directory: %v, want ErrNoStore", err)
		}
		if _, err := Open(bg, s, ""); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open of a missing directory: %v", err)
		}
		if keys, err := s.List(bg, ""); err != nil || len(keys) != 0 {
			t.Errorf("List of a missing directory: %q, %v", keys, err)
		}
		if err := Consolidate(bg, s); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Consolidate of a missing directory: %v", err)
		}
		if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("opening and reading created %s: %v", root, err)
		}
	}
	if _, err := OpenArray(bg, root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenArray of a missing directory: %v", err)
	}
	s, _ := NewDirStore(root)
	if _, err := Create(bg, s, "g/a", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 2}}); err != nil {
		t.Fatal(err)
	}
	if paths, err := ArrayPaths(bg, s); err != nil || !slices.Equal(paths, []string{"g/a"}) {
		t.Fatalf("after Create: %q, %v", paths, err)
	}
	file := filepath.Join(tmp, "file.zarr")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewDirStore(file); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("a file as the root: %v, want ENOTDIR", err)
	}
}

// TestArrayPathsNoStore: a store with no metadata document at its root
// fails with ErrNoStore (an empty directory, arrays under a plain
// directory, a missing S3 prefix, a plain HTTP prefix without
// zarr.json); any one root document makes it a store.
func TestArrayPathsNoStore(t *testing.T) {
	root := t.TempDir()
	s, _ := NewDirStore(root)
	if _, err := ArrayPaths(bg, s); !errors.Is(err, ErrNoStore) {
		t.Errorf("an empty directory: %v, want ErrNoStore", err)
	}
	copyTree(t, filepath.Join("testdata", "zarrs"), root)
	if _, err := ArrayPaths(bg, s); !errors.Is(err, ErrNoStore) {
		t.Errorf("arrays under a plain directory: %v, want ErrNoStore", err)
	}
	for _, doc := range metadataNames {
		if err := s.Set(bg, doc, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if doc == "zarr.json" {
			s.Set(bg, doc, groupDocs[3].doc)
		}
		if paths, err := ArrayPaths(bg, s); err != nil {
			t.Errorf("a root with only %s: %q, %v", doc, paths, err)
		}
		s.Delete(bg, doc)
	}
	_, s3 := openS3(t, "nonexist.zarr")
	if _, err := ArrayPaths(bg, s3); !errors.Is(err, ErrNoStore) {
		t.Errorf("a missing S3 prefix: %v, want ErrNoStore", err)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer web.Close()
	h, err := OpenURL(bg, web.URL+"/none.zarr")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := ArrayPaths(bg, h); !errors.Is(err, ErrNoStore) {
		t.Errorf("a missing HTTP prefix: %v, want ErrNoStore", err)
	}
}

// failingStore fails every Get of one key with err.
type failingStore struct {
	Store
	key string
	err error
}

func (f failingStore) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	if key == f.key {
		return nil, f.err
	}
	return f.Store.Get(ctx, key, buf)
}

// TestArrayPathsCorrupt: a zarr.json that is not a JSON object naming
// node_type "array" or "group" fails ArrayPaths with ErrInvalidMetadata
// naming its key, and a zarr.json that cannot be read fails with the
// read's error: neither is left out silently (a store whose every
// zarr.json was corrupt listed no array and no error).
func TestArrayPathsCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 5))
	s, _ := NewDirStore(t.TempDir())
	for _, p := range []string{"a", "g/b", "g/h/c"} {
		if _, err := Create(bg, s, p, Metadata{Shape: []int{5}, ChunkShape: []int{2}, DataType: DataType{Kind: Float, Size: 8}}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a", "g/b", "g/h/c"}
	if paths, err := ArrayPaths(bg, s); err != nil || !slices.Equal(paths, want) {
		t.Fatalf("%q, %v", paths, err)
	}
	keys := []string{"zarr.json", "a/zarr.json", "g/zarr.json", "g/h/c/zarr.json"}
	for _, bad := range []string{"", "not json", `[1, 2]`, `{"zarr_format": 3}`, `{"zarr_format": 3, "node_type": "folder"}`, `{"node_type": 7}`, "{\"node_type\": \"array\"", "\x1b]0;title\a"} {
		key := keys[rng.IntN(len(keys))]
		good, _ := s.Get(bg, key, nil)
		s.Set(bg, key, []byte(bad))
		_, err := ArrayPaths(bg, s)
		if !errors.Is(err, ErrInvalidMetadata) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s holding %q: %v, want ErrInvalidMetadata naming it", key, bad, err)
		}
		s.Set(bg, key, good)
	}
	boom := errors.New("boom")
	for _, key := range keys {
		if _, err := ArrayPaths(bg, failingStore{s, key, boom}); !errors.Is(err, boom) {
			t.Errorf("%s unreadable: %v, want its error", key, err)
		}
	}
	// A document deleted between the listing and its read is no node.
	gone := failingStore{s, "a/zarr.json", fs.ErrNotExist}
	if paths, err := ArrayPaths(bg, gone); err != nil || !slices.Equal(paths, want[1:]) {
		t.Errorf("a zarr.json deleted after the listing: %q, %v", paths, err)
	}
}

// TestDirStoreLinkedRoot: a store whose root is a symbolic link to a
// directory lists the directory's keys (it listed only ".").
func TestDirStoreLinkedRoot(t *testing.T) {
	tmp := t.TempDir()
	real := filepath.Join(tmp, "real.zarr")
	s, _ := NewDirStore(real)
	if _, err := Create(bg, s, "g/a", Metadata{Shape: []int{3}, ChunkShape: []int{3}, DataType: DataType{Kind: Uint, Size: 1}}); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "link.zarr")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	ls, _ := NewDirStore(link)
	want, _ := s.List(bg, "")
	if got, err := ls.List(bg, ""); err != nil || len(want) != 3 || !slices.Equal(got, want) {
		t.Fatalf("list through a link: %q, %v; want %q", got, err, want)
	}
	if paths, err := ArrayPaths(bg, ls); err != nil || !slices.Equal(paths, []string{"g/a"}) {
		t.Fatalf("ArrayPaths through a link: %q, %v", paths, err)
	}
}

// TestOpenStoreNilOnError: a failed OpenStore returns a nil Store, not
// an interface holding a nil *RemoteStore or *DirStore (on which a nil
// check passed and List panicked).
func TestOpenStoreNilOnError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, c := range []struct {
		name string
		opts []StoreOption
	}{
		{"http://127.0.0.1:1/p?query", nil},
		{"s3://bad~bucket/p", nil},
		{"https://127.0.0.1:1/p", []StoreOption{WithMaxRequests(0)}},
		{file, nil},
		{t.TempDir(), []StoreOption{WithDimensionSeparator(":")}},
	} {
		s, err := OpenStore(bg, c.name, c.opts...)
		if err == nil || s != nil {
			t.Errorf("OpenStore(%q): %#v, %v; want nil and an error", c.name, s, err)
		}
	}
}
