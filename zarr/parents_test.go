package zarr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// wantGroup is the group document zarr-python writes for format f.
func wantGroup(f int) (string, any) {
	if f == 2 {
		return ".zgroup", map[string]any{"zarr_format": 2.0}
	}
	return "zarr.json", map[string]any{"zarr_format": 3.0, "node_type": "group", "attributes": map[string]any{}}
}

// setLog is a Store that records the keys of its Sets.
type setLog struct {
	Store
	mu   sync.Mutex
	keys []string
}

func (l *setLog) Set(ctx context.Context, key string, value []byte) error {
	l.mu.Lock()
	l.keys = append(l.keys, key)
	l.mu.Unlock()
	return l.Store.Set(ctx, key, value)
}

// snapshot returns every key of s with its value.
func snapshot(t *testing.T, s Store) map[string][]byte {
	t.Helper()
	keys, err := s.List(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, k := range keys {
		if m[k], err = s.Get(bg, k, nil); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestCreateParents creates arrays at nested paths of random depth, v2
// and v3, in a directory and on S3, some parents already groups with
// attributes, and checks that every missing parent, root first, got
// exactly zarr-python's group document and nothing else, that existing
// ones are unchanged, that the data round-trips, that Consolidate embeds
// the groups, and that an array where a parent belongs fails before
// anything is written.
func TestCreateParents(t *testing.T) {
	srv := s3test.Start(t)
	for _, backend := range []string{"dir", "s3"} {
		for _, f := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/v%d", backend, f), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(len(backend)), uint64(f)))
				reqs := &requestLog{base: http.DefaultTransport}
				newStore := func(name string) Store {
					if backend == "dir" {
						s, err := NewDirStore(t.TempDir())
						if err != nil {
							t.Fatal(err)
						}
						return s
					}
					rs, err := OpenURL(bg, srv.URLOf(fmt.Sprintf("parents-v%d-%s", f, name)),
						WithRemoteOptions(append(srv.Opts(), kvik.WithHTTPClient(&http.Client{Transport: reqs}))...))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { rs.Close() })
					return rs
				}
				for i := range 6 {
					checkCreateParents(t, rng, newStore(fmt.Sprint(i)), f)
				}
				checkParentConflict(t, rng, newStore, f)
				if backend == "s3" {
					checkParentRequests(t, newStore, reqs, f)
				}
			})
		}
	}
}

// checkCreateParents creates one array of format f at a random depth in
// s, below some existing groups, and checks the documents, the data and
// the consolidated metadata.
func checkCreateParents(t *testing.T, rng *rand.Rand, s Store, f int) {
	t.Helper()
	depth := 1 + rng.IntN(5)
	segs := make([]string, depth)
	for i := range segs {
		segs[i] = fmt.Sprintf("n%d_%d", i, rng.IntN(100))
	}
	path := strings.Join(segs, "/")
	parents := parentPrefixes(path + "/")
	if len(parents) != depth {
		t.Fatalf("parents of %q: %q", path, parents)
	}
	gkey, gdoc := wantGroup(f)
	// Some parents are groups already, with attributes (v3 in zarr.json,
	// v2 in .zattrs), in zarr-python's spacing rather than ours.
	existing := map[string][]byte{}
	for _, p := range parents {
		if rng.IntN(3) != 0 {
			continue
		}
		attrs, _ := json.Marshal(randAttrs(rng, p))
		if f == 3 {
			existing[p+gkey] = fmt.Appendf(nil, `{"zarr_format": 3, "node_type": "group", "attributes": %s}`, attrs)
		} else {
			existing[p+gkey] = []byte(`{"zarr_format":2}`)
			existing[p+".zattrs"] = attrs
		}
	}
	for k, b := range existing {
		if err := s.Set(bg, k, b); err != nil {
			t.Fatal(err)
		}
	}
	h, sets := hierarchy{}, &setLog{Store: s}
	h.createArray(t, rng, sets, f, path)
	// Missing groups root first, then the array's documents, then chunks.
	var order []string
	for _, p := range parents {
		if existing[p+gkey] == nil {
			order = append(order, p+gkey)
		}
	}
	order = append(order, map[int][]string{2: {path + "/.zattrs", path + "/.zarray"}, 3: {path + "/zarr.json"}}[f]...)
	if len(sets.keys) < len(order) || !slices.Equal(sets.keys[:len(order)], order) || slices.ContainsFunc(sets.keys[len(order):], IsMetadataKey) {
		t.Fatalf("%s: Create wrote %q, want %q first and then chunks", path, sets.keys, order)
	}

	got := snapshot(t, s)
	for _, p := range parents {
		b, ok := got[p+gkey]
		switch {
		case !ok:
			t.Fatalf("%s: no group document %s after Create", path, p+gkey)
		case existing[p+gkey] != nil:
			if !bytes.Equal(b, existing[p+gkey]) {
				t.Fatalf("%s: existing %s rewritten:\n%s", path, p+gkey, b)
			}
		default:
			if doc := jsonOf(t, p+gkey, b); !reflect.DeepEqual(doc, gdoc) {
				t.Fatalf("%s: %s = %v, want %v", path, p+gkey, doc, gdoc)
			}
		}
		delete(got, p+gkey)
	}
	// Besides the groups: the existing .zattrs, the array's documents
	// and its chunks, nothing else.
	for k, b := range got {
		if e, ok := existing[k]; ok {
			if !bytes.Equal(b, e) {
				t.Fatalf("%s: existing %s rewritten:\n%s", path, k, b)
			}
		} else if !strings.HasPrefix(k, path+"/") || k == path+"/.zgroup" {
			t.Fatalf("%s: unexpected key %s after Create", path, k)
		}
	}
	// The data round-trips through a fresh open.
	a, err := Open(bg, s, path)
	if err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(h[path]))
	if err := a.ReadRegion(bg, make([]int, len(a.Shape())), a.Shape(), back); err != nil || !bytes.Equal(back, h[path]) {
		t.Fatalf("%s: read back %v, equal %v", path, err, bytes.Equal(back, h[path]))
	}
	// Consolidated metadata embeds every group.
	if err := Consolidate(bg, s); err != nil {
		t.Fatal(err)
	}
	if f == 2 {
		var z struct {
			Metadata map[string]any `json:"metadata"`
		}
		b, _ := s.Get(bg, ".zmetadata", nil)
		if err := json.Unmarshal(b, &z); err != nil {
			t.Fatal(err)
		}
		for _, p := range parents {
			stored, _ := s.Get(bg, p+gkey, nil)
			if !reflect.DeepEqual(z.Metadata[p+gkey], jsonOf(t, p+gkey, stored)) {
				t.Fatalf(".zmetadata[%s] = %v", p+gkey, z.Metadata[p+gkey])
			}
		}
		return
	}
	var root struct {
		NodeType     string `json:"node_type"`
		Consolidated struct {
			Metadata map[string]map[string]any `json:"metadata"`
		} `json:"consolidated_metadata"`
	}
	b, _ := s.Get(bg, "zarr.json", nil)
	if err := json.Unmarshal(b, &root); err != nil || root.NodeType != "group" {
		t.Fatalf("root %s: %v", b, err)
	}
	for _, p := range parents[1:] {
		stored, _ := s.Get(bg, p+gkey, nil)
		want := jsonOf(t, p+gkey, stored).(map[string]any)
		want["consolidated_metadata"] = map[string]any{"kind": "inline", "must_understand": false, "metadata": map[string]any{}}
		if doc := root.Consolidated.Metadata[strings.TrimSuffix(p, "/")]; !reflect.DeepEqual(doc, want) {
			t.Fatalf("consolidated %s = %v, want %v", p, doc, want)
		}
	}
}

// checkParentConflict puts an array, of either format, where a parent
// group of a new array of format f belongs, and checks that Create
// fails with ErrInvalidMetadata naming it and writes nothing.
func checkParentConflict(t *testing.T, rng *rand.Rand, newStore func(string) Store, f int) {
	t.Helper()
	for i, other := range []int{2, 3} {
		s := newStore(fmt.Sprintf("conflict%d", i))
		depth := 2 + rng.IntN(4)
		segs := make([]string, depth)
		for i := range segs {
			segs[i] = fmt.Sprint("c", i)
		}
		at := strings.Join(segs[:1+rng.IntN(depth-1)], "/")
		m := Metadata{ZarrFormat: other, Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 4}}
		a, err := Create(bg, s, at, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0}, []int{3}, randValues(rng, m.DataType, 3)); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, s)
		m.ZarrFormat = f
		path := strings.Join(segs, "/")
		_, err = Create(bg, s, path, m)
		if !errors.Is(err, ErrInvalidMetadata) || !strings.Contains(err.Error(), at+"/") {
			t.Fatalf("v%d array at %s below a v%d array at %s: %v", f, path, other, at, err)
		}
		if after := snapshot(t, s); !reflect.DeepEqual(after, before) {
			t.Fatalf("failed Create of %s wrote %d keys, had %d", path, len(after), len(before))
		}
	}
}

// checkParentRequests counts the requests Create makes on S3: every
// parent looked up once per document that could be there; with
// consolidated metadata, no lookup for the groups it holds, but one for
// a group it lacks, which is kept as it is.
func checkParentRequests(t *testing.T, newStore func(string) Store, reqs *requestLog, f int) {
	t.Helper()
	gkey, _ := wantGroup(f)
	s := newStore("requests").(*RemoteStore)
	m := Metadata{ZarrFormat: f, Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 4}}
	reqs.metadataRequests()
	if _, err := Create(bg, s, "a/b/c", m); err != nil {
		t.Fatal(err)
	}
	lookups := map[int]int{2: 3, 3: 2}[f] // .zgroup, .zarray, zarr.json or zarr.json, .zarray
	var gets, puts int
	for _, r := range reqs.metadataRequests() {
		if strings.HasPrefix(r, "GET ") {
			gets++
		} else if strings.HasPrefix(r, "PUT ") {
			puts++
		}
	}
	// Three lookups more: the new node's own documents (ErrExists).
	if wantPuts := 3 + map[int]int{2: 2, 3: 1}[f]; gets != 3*lookups+3 || puts != wantPuts {
		t.Fatalf("Create in an empty store: %d GETs, %d PUTs, want %d, %d", gets, puts, 3*lookups+3, wantPuts)
	}
	if err := Consolidate(bg, s); err != nil {
		t.Fatal(err)
	}
	// A group written after consolidation: the copy does not know it.
	fresh := []byte(`{"zarr_format": 3, "node_type": "group", "attributes": {"late": true}}`)
	if f == 2 {
		fresh = []byte(`{"zarr_format": 2, "late": true}`)
	}
	if err := s.Set(bg, "a/b/late/"+gkey, fresh); err != nil {
		t.Fatal(err)
	}
	cs := newStore("requests").(*RemoteStore)
	reqs.metadataRequests()
	if _, err := Create(bg, cs, "a/b/late/d", m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range reqs.metadataRequests() {
		if strings.HasPrefix(r, "GET ") {
			_, key, _ := strings.Cut(r, "-requests/")
			got = append(got, key)
		}
	}
	// The new node's own documents are looked up too (ErrExists): the
	// consolidated copy may be stale.
	want := []string{"a/b/late/" + gkey, "a/b/late/d/.zarray", "a/b/late/d/.zgroup", "a/b/late/d/zarr.json"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Create under consolidated groups fetched %q, want %q", got, want)
	}
	if b, _ := cs.Get(bg, "a/b/late/"+gkey, nil); !bytes.Equal(b, fresh) {
		t.Fatalf("group missing from the consolidated copy rewritten: %s", b)
	}
}
