package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// openS3 starts versitygw and opens a RemoteStore at s3://bkt/prefix.
func openS3(t *testing.T, prefix string, opts ...StoreOption) (*s3test.Server, *RemoteStore) {
	t.Helper()
	srv := s3test.Start(t)
	s, err := OpenURL(bg, srv.URLOf(prefix), append(opts, WithRemoteOptions(srv.Opts()...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return srv, s
}

// copyTree copies the files below src to dst: an upload that does not go
// through the code under test.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fixtureArrays returns the paths of the arrays of a fixture root.
func fixtureArrays(root string) []string {
	var globs []string
	switch filepath.Base(root) {
	case "zarr-python-v2":
		globs = []string{"[0-9]*/[0-9]", "flat", "flat_legacy", "nested"}
	case "zarrs":
		globs = []string{"*/*.zarr", "sharded_array_write_read.zarr/group/array"}
	}
	var out []string
	for _, g := range globs {
		m, _ := filepath.Glob(filepath.Join(root, g))
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// compareStores opens each array in the local and the remote store and
// checks that whole and random region reads agree byte for byte, and
// that arrays the local store cannot open fail the same way remotely.
func compareStores(t *testing.T, local, remote Store, arrays []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, uint64(len(arrays))))
	checked := 0
	for _, p := range arrays {
		la, lerr := Open(bg, local, p)
		ra, rerr := Open(bg, remote, p)
		if lerr != nil {
			if !errors.Is(rerr, ErrUnsupportedCodec) || !errors.Is(lerr, ErrUnsupportedCodec) {
				t.Errorf("%s: local %v, remote %v", p, lerr, rerr)
			}
			continue
		}
		if rerr != nil {
			t.Fatalf("%s: remote open: %v", p, rerr)
		}
		for r := 0; r < 3; r++ {
			start, stop := make([]int, len(la.Shape())), la.Shape()
			if r > 0 {
				start, stop = randRegion(rng, la.Shape())
			}
			_, size, _ := la.region(start, stop)
			want, got := make([]byte, size), make([]byte, size)
			if err := la.ReadRegion(bg, start, stop, want); err != nil {
				t.Fatalf("%s local: %v", p, err)
			}
			if err := ra.ReadRegion(bg, start, stop, got); err != nil {
				t.Fatalf("%s remote %v-%v: %v", p, start, stop, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: remote region %v-%v differs from the local read", p, start, stop)
			}
		}
		checked++
	}
	if checked < len(arrays)/2 {
		t.Fatalf("only %d of %d arrays checked", checked, len(arrays))
	}
	t.Logf("%d arrays agree", checked)
}

// TestRemoteFixtures uploads the committed fixtures (written by
// zarr-python, numcodecs through zarr-python, and zarrs) to versitygw and
// to a plain HTTP server, and reads every array through s3:// and
// http:// URLs, comparing with the local reads.
func TestRemoteFixtures(t *testing.T) {
	srv := s3test.Start(t)
	web := httptest.NewServer(http.FileServer(http.Dir("testdata")))
	defer web.Close()
	for _, root := range []string{"zarr-python-v2", "zarrs"} {
		copyTree(t, filepath.Join("testdata", root), filepath.Join(srv.Dir, s3test.Bucket, "fixtures", root))
		local, err := NewDirStore(filepath.Join("testdata", root))
		if err != nil {
			t.Fatal(err)
		}
		arrays := fixtureArrays(local.Root())
		for _, url := range []string{srv.URLOf("fixtures/" + root), web.URL + "/" + root} {
			t.Run(url[:strings.Index(url, ":")]+"/"+root, func(t *testing.T) {
				remote, err := OpenURL(bg, url, WithRemoteOptions(srv.Opts()...))
				if err != nil {
					t.Fatal(err)
				}
				defer remote.Close()
				compareStores(t, local, remote, arrays)
			})
		}
	}
	// The legacy nested array needs the store's separator remotely too.
	local, _ := NewDirStore(filepath.Join("testdata", "zarr-python-v2"), WithDimensionSeparator("/"))
	remote, err := OpenURL(bg, web.URL+"/zarr-python-v2", WithDimensionSeparator("/"))
	if err != nil {
		t.Fatal(err)
	}
	compareStores(t, local, remote, []string{"nested_legacy"})
}

// TestRemoteStoreContract runs the Store contract on S3, and checks that
// a plain HTTP store is read-only and has no listing.
func TestRemoteStoreContract(t *testing.T) {
	srv, s := openS3(t, "contract")
	testStore(t, s)
	if s.EndpointType() != kvik.RemoteS3 || s.MaxRequests() != DefaultMaxRequests() {
		t.Fatalf("endpoint %v, %d requests", s.EndpointType(), s.MaxRequests())
	}
	if err := s.Set(bg, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if b, ok := srv.Object("contract/k"); !ok || string(b) != "v" {
		t.Fatalf("object: %q %v", b, ok)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(srv.Dir)))
	defer web.Close()
	h, err := OpenURL(bg, web.URL+"/"+s3test.Bucket+"/contract")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if b, err := h.Get(bg, "k", nil); err != nil || string(b) != "v" {
		t.Fatalf("HTTP get: %q %v", b, err)
	}
	if err := h.Set(bg, "k", []byte("w")); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP set: %v", err)
	}
	if err := h.Delete(bg, "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP delete: %v", err)
	}
	if _, err := h.List(bg, ""); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP list: %v", err)
	}
	if _, err := OpenURL(bg, "ftp://x/y"); !errors.Is(err, kvik.ErrUnsupportedURL) {
		t.Fatalf("ftp: %v", err)
	}
	if _, err := OpenURL(bg, web.URL, WithMaxRequests(0)); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("0 requests: %v", err)
	}
}

// TestRemoteRoundTrip writes v2 and v3 arrays (gzip, zstd, blosc,
// sharded) to S3 through a RemoteStore, reads them back against a model,
// and reads the objects versitygw stored through a local DirStore.
// With zarrtune.InlineFetch the workers fetch the chunks they decode,
// with no fetch stage (a design the benchmarks compare).
func TestRemoteRoundTrip(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) {
			zarrtune.InlineFetch.Store(inline)
			defer zarrtune.InlineFetch.Store(false)
			remoteRoundTrip(t, fmt.Sprintf("rt-%v.zarr", inline))
		})
	}
}

func remoteRoundTrip(t *testing.T, prefix string) {
	srv, s := openS3(t, prefix, WithMaxRequests(3))
	rng := rand.New(rand.NewPCG(5, 6))
	gzip := Codec{Name: "gzip", Configuration: map[string]any{"level": 1}}
	zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}
	blosc := Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}
	bytesLE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	cases := map[string]Metadata{
		"v2-gzip":        {ZarrFormat: 2, Compressor: &gzip},
		"v2-zstd-F":      {ZarrFormat: 2, Compressor: &zstd, Order: 'F', Separator: "/"},
		"v2-blosc":       {ZarrFormat: 2, Compressor: &blosc},
		"v3-gzip":        {Codecs: []Codec{bytesLE, gzip}},
		"v3-zstd":        {Codecs: []Codec{bytesLE, zstd}},
		"v3-blosc":       {Codecs: []Codec{bytesLE, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}}},
		"v3-raw":         {},
		"v3-sharded":     {Codecs: shardCodecs([]int{2, 3}, false, []Codec{bytesLE, zstd})},
		"v3-shard-start": {Codecs: shardCodecs([]int{2, 3}, true, []Codec{bytesLE, gzip})},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			m.Shape, m.ChunkShape = []int{3 + rng.IntN(9), 5 + rng.IntN(9)}, []int{1 + rng.IntN(4), 1 + rng.IntN(6)}
			if strings.Contains(name, "shard") {
				m.ChunkShape = []int{4, 6}
			}
			m.DataType, m.FillValue = DataType{Kind: Float, Size: 4}, "NaN"
			sub, err := OpenURL(bg, s.URL(name), WithRemoteOptions(srv.Opts()...))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			roundTripIn(t, rng, sub, m)
			// The objects are a store zarr readers find locally.
			local, err := NewDirStore(filepath.Join(srv.Dir, s3test.Bucket, prefix, name))
			if err != nil {
				t.Fatal(err)
			}
			compareStores(t, local, sub, []string{"g/arr"})
		})
	}
}

// TestArrayPaths lists the arrays of a fixture store locally, on S3 and,
// with consolidated metadata only, over plain HTTP. As zarr-python's
// tree, it lists an array only below groups of its format.
func TestArrayPaths(t *testing.T) {
	root := t.TempDir()
	copyTree(t, filepath.Join("testdata", "zarrs"), root)
	local, _ := NewDirStore(root)
	// The fixture directories are no groups, the root no store.
	if got, err := ArrayPaths(bg, local); !errors.Is(err, ErrNoStore) {
		t.Fatalf("arrays under plain directories: %q, %v", got, err)
	}
	v2Only := []string{"v2", "v3"}
	for _, d := range []string{"", "v2", "v3", "v3_zarr_python", "sharded_array_write_read.zarr"} {
		keys := []string{".zgroup", "zarr.json"}
		if slices.Contains(v2Only, d) {
			keys = keys[:1]
		}
		for _, k := range keys {
			if err := local.Set(bg, keyPrefix(d)+k, groupDocs[map[string]int{".zgroup": 2, "zarr.json": 3}[k]].doc); err != nil {
				t.Fatal(err)
			}
		}
	}
	want, err := ArrayPaths(bg, local)
	if err != nil || len(want) != 17 || !slices.Contains(want, "sharded_array_write_read.zarr/group/array") || slices.Contains(want, "sharded_array_write_read.zarr/group") ||
		!slices.Contains(want, "v3/array_zstd.zarr") || !slices.IsSorted(want) || len(slices.Compact(slices.Clone(want))) != len(want) {
		t.Fatalf("local: %q, %v", want, err)
	}
	// v3/array_zstd.zarr is listed as the v2 array it also is; the v3
	// arrays of v3_zarr_python need v3 parents all the way up.
	if err := local.Delete(bg, "zarr.json"); err != nil {
		t.Fatal(err)
	}
	if got, _ := ArrayPaths(bg, local); len(got) != 17-7 || slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, "v3_zarr_python/") || strings.HasPrefix(p, "sharded") }) {
		t.Fatalf("without a v3 root group: %q", got)
	}
	if err := local.Set(bg, "zarr.json", groupDocs[3].doc); err != nil {
		t.Fatal(err)
	}
	srv := s3test.Start(t)
	copyTree(t, root, filepath.Join(srv.Dir, s3test.Bucket, "z"))
	s3, err := OpenURL(bg, srv.URLOf("z"), WithRemoteOptions(srv.Opts()...))
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if got, err := ArrayPaths(bg, s3); err != nil || !slices.Equal(got, want) {
		t.Fatalf("S3: %q, %v", got, err)
	}
	web := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer web.Close()
	h, err := OpenURL(bg, web.URL+"/v3/array_zstd.zarr")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got, err := ArrayPaths(bg, h); err != nil || !slices.Equal(got, []string{""}) {
		t.Fatalf("HTTP array root: %q, %v", got, err)
	}
	h2, _ := OpenURL(bg, web.URL+"/v3")
	defer h2.Close()
	if _, err := ArrayPaths(bg, h2); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("HTTP group without listing: %v", err)
	}
}
