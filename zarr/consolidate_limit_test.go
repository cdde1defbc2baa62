package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
)

// fatArrays creates n small arrays of format f under "g/" with about
// attr bytes of random attributes each.
func fatArrays(t *testing.T, rng *rand.Rand, s Store, f, n, attr int) {
	t.Helper()
	blob := make([]byte, attr)
	for range n {
		for i := range blob {
			blob[i] = 'a' + byte(rng.IntN(26))
		}
		m := Metadata{ZarrFormat: f, Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 4}, Attributes: map[string]any{"blob": string(blob)}}
		if _, err := Create(bg, s, fmt.Sprintf("g/a%d", rng.IntN(1<<30)), m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConsolidateTooLarge: Consolidate refuses, with kvik.ErrTooLarge
// and before writing anything, a consolidated document longer than the
// store's readers accept: the document cap of a RemoteStore (set
// through kvik.WithMaxDocumentSize), whose Consolidate wrote the
// document and only then failed to read it back, leaving a store that
// OpenURL refused; and WithMaxDocumentSize on a DirStore or a
// RemoteStore. A document of exactly the cap is written and read back.
func TestConsolidateTooLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 7))
	srv, _ := openS3(t, "unused")
	dirs := t.TempDir()
	const limit = 48 << 10
	for i, c := range []struct {
		name string
		f    int
		open func(prefix string, limit int64) Store
	}{
		{"s3 kvik option", 3, func(p string, n int64) Store {
			return mustOpenURL(t, srv.URLOf(p), WithRemoteOptions(append(srv.Opts(), kvik.WithMaxDocumentSize(n))...))
		}},
		{"s3 v2", 2, func(p string, n int64) Store {
			return mustOpenURL(t, srv.URLOf(p), WithMaxDocumentSize(n), WithRemoteOptions(srv.Opts()...))
		}},
		{"dir v3", 3, func(p string, n int64) Store {
			s, err := NewDirStore(filepath.Join(dirs, p), WithMaxDocumentSize(n))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := fmt.Sprintf("fat%d.zarr", i)
			s := c.open(prefix, limit)
			fatArrays(t, rng, s, c.f, 12, 6<<10) // about 72 KiB of documents
			before := snapshot(t, s)
			if err := Consolidate(bg, s); !errors.Is(err, kvik.ErrTooLarge) {
				t.Fatalf("Consolidate over the cap: %v, want ErrTooLarge", err)
			}
			if after := snapshot(t, s); !maps.EqualFunc(after, before, bytes.Equal) {
				t.Fatalf("the refused Consolidate changed the store: %d keys, %d before", len(after), len(before))
			}
			// The exact size fits, a byte less does not, for the
			// writer and the remote reader alike.
			big := c.open(prefix, 1<<30)
			if err := Consolidate(bg, big); err != nil {
				t.Fatal(err)
			}
			key := map[int]string{2: ".zmetadata", 3: "zarr.json"}[c.f]
			doc, _ := big.Get(bg, key, nil)
			n := int64(len(doc))
			for k, v := range before {
				big.Set(bg, k, v)
			}
			big.Delete(bg, ".zmetadata")
			if err := Consolidate(bg, c.open(prefix, n-1)); !errors.Is(err, kvik.ErrTooLarge) {
				t.Fatalf("a %d-byte document under a cap of %d: %v", n, n-1, err)
			}
			if err := Consolidate(bg, c.open(prefix, n)); err != nil {
				t.Fatalf("a %d-byte document under a cap of as much: %v", n, err)
			}
			if c.name != "dir v3" {
				if rs, ok := c.open(prefix, n).(*RemoteStore); !ok || !rs.Consolidated() {
					t.Fatalf("reading back under a cap of %d: not consolidated", n)
				}
			}
		})
	}
}

func mustOpenURL(t *testing.T, url string, opts ...StoreOption) *RemoteStore {
	t.Helper()
	s, err := OpenURL(bg, url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestMaxDocumentSize: the default cap is kvik's, for both kinds of
// store, the option sets it, and a cap below one byte is refused.
func TestMaxDocumentSize(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	ds, _ := NewDirStore(t.TempDir())
	rs := mustOpenURL(t, web.URL+"/z.zarr/")
	if ds.MaxDocumentSize() != kvik.DefaultMaxDocumentSize || rs.MaxDocumentSize() != kvik.DefaultMaxDocumentSize || maxDocument(&memStore{}) != kvik.DefaultMaxDocumentSize {
		t.Fatalf("default caps: %d, %d", ds.MaxDocumentSize(), rs.MaxDocumentSize())
	}
	ds, _ = NewDirStore(t.TempDir(), WithMaxDocumentSize(100<<20))
	rs = mustOpenURL(t, web.URL+"/z.zarr/", WithMaxDocumentSize(100<<20))
	if ds.MaxDocumentSize() != 100<<20 || rs.MaxDocumentSize() != 100<<20 {
		t.Fatalf("caps set to 100 MiB: %d, %d", ds.MaxDocumentSize(), rs.MaxDocumentSize())
	}
	if _, err := NewDirStore(t.TempDir(), WithMaxDocumentSize(0)); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("a cap of 0: %v", err)
	}
}
