package zarr

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

// memStore is a Store in a map, for fuzzing without I/O.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) Get(_ context.Context, key string, buf []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return append(buf[:0], v...), nil
}

func (s *memStore) ReadRange(_ context.Context, key string, off int64, p []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return -1, fs.ErrNotExist
	}
	if off < 0 {
		off += int64(len(v))
	}
	if off < 0 || off+int64(len(p)) > int64(len(v)) {
		return int64(len(v)), io.ErrUnexpectedEOF
	}
	copy(p, v[off:])
	return int64(len(v)), nil
}

func (s *memStore) Set(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = append([]byte(nil), value...)
	return nil
}

func (s *memStore) SetDevice(context.Context, string, cuda.DevicePtr, int, int64) error {
	return errors.ErrUnsupported
}

func (s *memStore) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *memStore) List(_ context.Context, prefix string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// fuzzAllocBound is the most heap a metadata document of at most a few
// KiB may cost, parsing, opening the array and reading one element
// included: sizes in a document are claims, never allocations.
const fuzzAllocBound = 64 << 20

// metadataSeeds returns the metadata documents under testdata.
func metadataSeeds(f *testing.F) [][]byte {
	var docs [][]byte
	filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		switch d.Name() {
		case ".zarray", "zarr.json", ".zmetadata", ".zgroup", ".zattrs":
			if b, err := os.ReadFile(path); err == nil && len(b) <= 64<<10 {
				docs = append(docs, b)
			}
		}
		return nil
	})
	if len(docs) == 0 {
		f.Fatal("no metadata documents under testdata")
	}
	return docs
}

// FuzzMetadataDocument stores an arbitrary document as zarr.json,
// .zarray and .zmetadata of a store, opens it (consolidated metadata
// first, as a RemoteStore does), and reads the first element of the
// array it describes, whose chunks are all missing: errors are fine;
// panics, and heap beyond fuzzAllocBound, are not. Seeds are every
// metadata document in testdata. Run longer with
//
//	go test -run '^$' -fuzz FuzzMetadataDocument -fuzztime 10m ./zarr
func FuzzMetadataDocument(f *testing.F) {
	for _, d := range metadataSeeds(f) {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 64<<10 {
			return
		}
		ctx := context.Background()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for _, name := range []string{"zarr.json", ".zarray", ".zmetadata"} {
			s := &memStore{m: map[string][]byte{name: b}}
			readConsolidated(ctx, s)
			a, err := Open(ctx, s, "")
			if err != nil {
				continue
			}
			shape := a.Shape()
			start, stop := make([]int, len(shape)), make([]int, len(shape))
			empty := false
			for d := range shape {
				stop[d] = min(shape[d], 1)
				empty = empty || shape[d] == 0
			}
			if !empty {
				a.ReadRegion(ctx, start, stop, make([]byte, a.Metadata().DataType.Size))
			}
		}
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > fuzzAllocBound {
			t.Fatalf("a %d-byte document cost %d bytes of heap:\n%s", len(b), got, b)
		}
	})
}
