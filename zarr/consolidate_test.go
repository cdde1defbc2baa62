package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// hierarchy is what a test wrote to a store: each array's contents by
// path.
type hierarchy map[string][]byte

func (h hierarchy) paths() []string {
	var p []string
	for k := range h {
		p = append(p, k)
	}
	slices.Sort(p)
	return p
}

var consolidateTypes = []DataType{{Kind: Bool, Size: 1}, {Kind: Int, Size: 1}, {Kind: Int, Size: 2}, {Kind: Int, Size: 4}, {Kind: Uint, Size: 8}, {Kind: Float, Size: 2}, {Kind: Float, Size: 4}, {Kind: Float, Size: 8}}

// randAttrs returns attributes of a few JSON kinds, with characters an
// HTML-escaping encoder would rewrite.
func randAttrs(rng *rand.Rand, name string) map[string]any {
	return map[string]any{
		"name":   name,
		"scale":  float64(rng.IntN(1000)) / 7,
		"tags":   []any{"<x>", "a&b", rng.IntN(100)},
		"nested": map[string]any{"on": rng.IntN(2) == 1, "none": nil},
	}
}

// createArray creates the array at path in format f with a random shape,
// type, codec and attributes, writes random values and records them.
func (h hierarchy) createArray(t *testing.T, rng *rand.Rand, s Store, f int, path string) {
	t.Helper()
	nd := 1 + rng.IntN(3)
	m := Metadata{ZarrFormat: f, Shape: make([]int, nd), ChunkShape: make([]int, nd),
		DataType: consolidateTypes[rng.IntN(len(consolidateTypes))], Attributes: randAttrs(rng, path)}
	for d := range m.Shape {
		m.Shape[d] = 1 + rng.IntN(9)
		m.ChunkShape[d] = 1 + rng.IntN(m.Shape[d])
	}
	zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}
	switch {
	case f == 2 && rng.IntN(2) == 0:
		m.Compressor = &zstd
	case f == 3 && rng.IntN(2) == 0:
		m.Codecs = []Codec{{Name: "bytes"}, zstd}
	}
	a, err := Create(bg, s, path, m)
	if err != nil {
		t.Fatal(err)
	}
	data := randValues(rng, m.DataType, numElements(m.Shape))
	if err := a.WriteRegion(bg, make([]int, nd), m.Shape, data); err != nil {
		t.Fatal(err)
	}
	h[path] = data
}

// buildHierarchy writes groups "", "g" and "g/h" with attributes and
// arrays in the root and in each group, for each format in formats.
func buildHierarchy(t *testing.T, rng *rand.Rand, s Store, formats []int) hierarchy {
	t.Helper()
	h := hierarchy{}
	for _, f := range formats {
		for _, g := range []string{"", "g", "g/h"} {
			attrs, _ := json.Marshal(randAttrs(rng, g))
			p := keyPrefix(g)
			var err error
			if f == 3 {
				err = s.Set(bg, p+"zarr.json", fmt.Appendf(nil, `{"zarr_format": 3, "node_type": "group", "attributes": %s}`, attrs))
			} else if err = s.Set(bg, p+".zgroup", []byte(`{"zarr_format": 2}`)); err == nil {
				err = s.Set(bg, p+".zattrs", attrs)
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 1+rng.IntN(2); i++ {
				h.createArray(t, rng, s, f, fmt.Sprintf("%sv%d-%d", p, f, i))
			}
		}
	}
	return h
}

// jsonOf decodes a JSON document for semantic comparison.
func jsonOf(t *testing.T, key string, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

// checkConsolidated checks the consolidated documents of s against the
// documents of its listing: .zmetadata holds exactly the v2 documents,
// and the root zarr.json (whose other fields must be those of oldRoot)
// exactly the other zarr.json documents, nested groups with the empty
// marker zarr-python writes.
func checkConsolidated(t *testing.T, s Store, formats []int, oldRoot []byte) {
	t.Helper()
	keys, err := s.List(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) []byte {
		b, err := s.Get(bg, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	wantV2, wantV3 := map[string]any{}, map[string]any{}
	for _, k := range keys {
		switch base := k[strings.LastIndexByte(k, '/')+1:]; {
		case base == ".zarray" || base == ".zgroup" || base == ".zattrs":
			wantV2[k] = jsonOf(t, k, get(k))
		case base == "zarr.json" && k != "zarr.json":
			doc := jsonOf(t, k, get(k)).(map[string]any)
			if doc["node_type"] == "group" {
				doc["consolidated_metadata"] = map[string]any{"kind": "inline", "must_understand": false, "metadata": map[string]any{}}
			}
			wantV3[strings.TrimSuffix(k, "/zarr.json")] = doc
		}
	}
	if slices.Contains(formats, 2) {
		var z struct {
			Metadata map[string]any `json:"metadata"`
			Format   *int           `json:"zarr_consolidated_format"`
		}
		if err := json.Unmarshal(get(".zmetadata"), &z); err != nil || z.Format == nil || *z.Format != 1 {
			t.Fatalf(".zmetadata: %v, format %v", err, z.Format)
		}
		if len(wantV2) < 6 || !reflect.DeepEqual(z.Metadata, wantV2) {
			t.Fatalf(".zmetadata holds %d documents:\n%v\nwant %d:\n%v", len(z.Metadata), z.Metadata, len(wantV2), wantV2)
		}
	} else if _, err := s.Get(bg, ".zmetadata", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf(".zmetadata in a v3 store: %v", err)
	}
	if !slices.Contains(formats, 3) {
		return
	}
	root := jsonOf(t, "zarr.json", get("zarr.json")).(map[string]any)
	cm, _ := root["consolidated_metadata"].(map[string]any)
	delete(root, "consolidated_metadata")
	old := jsonOf(t, "old zarr.json", oldRoot).(map[string]any)
	delete(old, "consolidated_metadata")
	if !reflect.DeepEqual(root, old) {
		t.Fatalf("root fields changed: %v, were %v", root, old)
	}
	if cm["kind"] != "inline" || cm["must_understand"] != false || len(cm) != 3 {
		t.Fatalf("consolidated_metadata %v", cm)
	}
	if len(wantV3) < 4 || !reflect.DeepEqual(cm["metadata"], wantV3) {
		t.Fatalf("consolidated_metadata holds\n%v\nwant\n%v", cm["metadata"], wantV3)
	}
}

// requestLog is an http.RoundTripper that records the path of each
// request it sends.
type requestLog struct {
	mu   sync.Mutex
	log  []string
	base http.RoundTripper
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	l.mu.Lock()
	l.log = append(l.log, r.Method+" "+r.URL.Path)
	l.mu.Unlock()
	return l.base.RoundTrip(r)
}

// metadataRequests returns the requests for metadata documents since the
// last call.
func (l *requestLog) metadataRequests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.log {
		if IsMetadataKey(r) {
			out = append(out, r)
		}
	}
	l.log = nil
	return out
}

// checkArrays opens and reads every array of h through rs and checks
// that this fetched no metadata document.
func checkArrays(t *testing.T, rs *RemoteStore, h hierarchy, metadataRequests func() []string) {
	t.Helper()
	metadataRequests()
	if !rs.Consolidated() {
		t.Fatal("store not consolidated")
	}
	if paths, err := ArrayPaths(bg, rs); err != nil || !slices.Equal(paths, h.paths()) {
		t.Fatalf("arrays %q (%v), want %q", paths, err, h.paths())
	}
	for _, p := range h.paths() {
		a, err := Open(bg, rs, p)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(h[p]))
		if err := a.ReadRegion(bg, make([]int, len(a.Shape())), a.Shape(), got); err != nil || !bytes.Equal(got, h[p]) {
			t.Fatalf("%s: read back %v, equal %v", p, err, bytes.Equal(got, h[p]))
		}
		if a.Metadata().Attributes["name"] != p {
			t.Fatalf("%s attributes %v", p, a.Metadata().Attributes)
		}
	}
	if log := metadataRequests(); len(log) != 0 {
		t.Fatalf("metadata fetched despite consolidation: %q", log)
	}
}

// TestConsolidate consolidates v2, v3 and mixed hierarchies of random
// arrays in a directory and on S3, compares the documents with the
// store's own, reads every array through fresh remote stores (HTTP over
// the written files, and S3) without fetching metadata, adds an array
// and consolidates again, and checks that a second run writes the same
// bytes and that a broken document fails and leaves the consolidated
// documents alone.
func TestConsolidate(t *testing.T) {
	srv := s3test.Start(t)
	for _, backend := range []string{"dir", "s3"} {
		for _, formats := range [][]int{{2}, {3}, {2, 3}} {
			name := fmt.Sprintf("%s/v%v", backend, formats)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(backend)), uint64(formats[0]*len(formats))))
				reqs := &requestLog{base: http.DefaultTransport}
				openS3 := func(url string) *RemoteStore {
					rs, err := OpenURL(bg, url, WithRemoteOptions(append(srv.Opts(), kvik.WithHTTPClient(&http.Client{Transport: reqs}))...))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { rs.Close() })
					return rs
				}
				var s Store
				var dir string
				if backend == "dir" {
					ds, err := NewDirStore(t.TempDir())
					if err != nil {
						t.Fatal(err)
					}
					s, dir = ds, ds.Root()
				} else {
					prefix := strings.NewReplacer("/", "-", "[", "", "]", "", " ", "").Replace(name)
					s, dir = openS3(srv.URLOf(prefix)), filepath.Join(srv.Dir, s3test.Bucket, prefix)
				}
				h := buildHierarchy(t, rng, s, formats)
				oldRoot, _ := s.Get(bg, "zarr.json", nil)
				if err := Consolidate(bg, s); err != nil {
					t.Fatal(err)
				}
				checkConsolidated(t, s, formats, oldRoot)
				if rs, ok := s.(*RemoteStore); ok {
					s = openS3(rs.URL("")) // one whose consolidated copy goes stale
				}
				// Stale: a new array, then consolidating again.
				for _, f := range formats {
					h.createArray(t, rng, s, f, fmt.Sprintf("g/h/new%d", f))
				}
				if err := Consolidate(bg, s); err != nil {
					t.Fatal(err)
				}
				checkConsolidated(t, s, formats, oldRoot)
				first := map[string][]byte{}
				for _, k := range []string{".zmetadata", "zarr.json"} {
					first[k], _ = s.Get(bg, k, nil)
				}
				if err := Consolidate(bg, s); err != nil {
					t.Fatal(err)
				}
				for k, b := range first {
					if again, _ := s.Get(bg, k, nil); !bytes.Equal(again, b) {
						t.Fatalf("%s differs on a second run:\n%s\n%s", k, b, again)
					}
				}
				// The writer's own copy was reloaded.
				if rs, ok := s.(*RemoteStore); ok {
					checkArrays(t, rs, h, reqs.metadataRequests)
					checkArrays(t, openS3(rs.URL("")), h, reqs.metadataRequests)
				}
				web := serveDir(t, dir)
				hs, err := OpenURL(bg, web.URL)
				if err != nil {
					t.Fatal(err)
				}
				defer hs.Close()
				checkArrays(t, hs, h, func() []string {
					var out []string
					for _, r := range web.requests() {
						if IsMetadataKey(strings.Fields(r)[0]) {
							out = append(out, r)
						}
					}
					return out
				})
				// A broken document fails before anything is written.
				for i, bad := range []string{`{"zarr_format": 2,`, `[1, 2]`, `null`, `{"a": NaN}`} {
					key := map[int]string{2: "g/v2-0/.zattrs", 3: "g/v3-0/zarr.json"}[formats[i%len(formats)]]
					good, _ := s.Get(bg, key, nil)
					if err := s.Set(bg, key, []byte(bad)); err != nil {
						t.Fatal(err)
					}
					err := Consolidate(bg, s)
					if !errors.Is(err, ErrInvalidMetadata) || !strings.Contains(err.Error(), key) {
						t.Fatalf("%s = %s: %v", key, bad, err)
					}
					for k, b := range first {
						if now, _ := s.Get(bg, k, nil); !bytes.Equal(now, b) {
							t.Fatalf("%s changed by a failed run", k)
						}
					}
					s.Set(bg, key, good)
				}
			})
		}
	}
}

// TestConsolidateRefused checks the stores Consolidate refuses or leaves
// alone: a plain HTTP store (no listing), an empty store, v3 arrays under
// no root group, a root of unknown node type, and a v3 root array, which
// has nothing to consolidate.
func TestConsolidateRefused(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	hs, err := OpenURL(bg, web.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	if err := Consolidate(bg, hs); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP store: %v", err)
	}
	s, _ := NewDirStore(t.TempDir())
	if err := Consolidate(bg, s); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty store: %v", err)
	}
	m := Metadata{Shape: []int{5, 3}, ChunkShape: []int{2, 2}, DataType: DataType{Kind: Float, Size: 4}}
	if _, err := Create(bg, s, "x/a", m); err != nil {
		t.Fatal(err)
	}
	// As a writer of no group documents leaves it.
	if err := s.Delete(bg, "zarr.json"); err != nil {
		t.Fatal(err)
	}
	if err := Consolidate(bg, s); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no root group") {
		t.Fatalf("v3 without a root: %v", err)
	}
	s.Set(bg, "zarr.json", []byte(`{"zarr_format": 3, "node_type": "folder"}`))
	if err := Consolidate(bg, s); !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("root of node type folder: %v", err)
	}
	s, _ = NewDirStore(t.TempDir())
	if _, err := Create(bg, s, "", m); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Get(bg, "zarr.json", nil)
	if err := Consolidate(bg, s); err != nil {
		t.Fatalf("root array: %v", err)
	}
	if after, _ := s.Get(bg, "zarr.json", nil); !bytes.Equal(after, before) {
		t.Fatal("root array rewritten")
	}
	if keys, _ := s.List(bg, ""); slices.Contains(keys, ".zmetadata") {
		t.Fatal(".zmetadata written for a v3 array")
	}
}
