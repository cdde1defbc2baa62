package safetensors

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// fixtures returns the committed fixtures (safetensors files and the
// sharded index) by their path below testdata.
func fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, dir := range []string{"samples", "torch"} {
		names, err := filepath.Glob(filepath.Join("testdata", dir, "*.*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range names {
			if strings.HasSuffix(p, ".safetensors") || strings.HasSuffix(p, ".index.json") {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				out[dir+"/"+filepath.Base(p)] = b
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d fixtures", len(out))
	}
	return out
}

// sameModel checks that got holds want's tensors (names, order, dtypes,
// shapes, bytes) and metadata.
func sameModel(t *testing.T, what string, want, got *Model) {
	t.Helper()
	if len(got.Tensors) != len(want.Tensors) || !equalMeta(got.Metadata, want.Metadata) {
		t.Fatalf("%s: %d tensors, metadata %v; want %d, %v", what, len(got.Tensors), got.Metadata, len(want.Tensors), want.Metadata)
	}
	for i, w := range want.Tensors {
		g := got.Tensors[i]
		if g.Name != w.Name || g.Dtype != w.Dtype || !slices.Equal(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%s: tensor %d is %s %s %v (%d bytes), want %s %s %v (%d bytes)", what, i,
				g.Name, g.Dtype, g.Shape, len(g.Data), w.Name, w.Dtype, w.Shape, len(w.Data))
		}
	}
}

// TestS3Fixtures uploads the committed fixtures to an S3 server and reads
// each through its s3:// URL, comparing with the local read: every file,
// the sharded index (whole and a subset) and the index itself.
func TestS3Fixtures(t *testing.T) {
	v := s3test.Start(t)
	for name, b := range fixtures(t) {
		v.Put(t, "fix/"+name, b)
	}
	for name := range fixtures(t) {
		local, url := filepath.Join("testdata", name), v.URLOf("fix/"+name)
		if strings.HasSuffix(name, ".index.json") {
			continue
		}
		want, err := LoadHost(context.Background(), local, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := LoadHost(context.Background(), url, nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		sameModel(t, url, want, got)
	}
	idx := "torch/model.safetensors.index.json"
	for _, o := range []*Options{nil, {Names: []string{"lm_head.weight", "model.norm.weight"}}} {
		want, err := LoadIndexHost(context.Background(), filepath.Join("testdata", idx), o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := LoadIndexHost(context.Background(), v.URLOf("fix/"+idx), o, v.Opts()...)
		if err != nil {
			t.Fatal(err)
		}
		sameModel(t, idx, want, got)
	}
	ix, err := ReadIndex(context.Background(), v.URLOf("fix/"+idx), v.Opts()...)
	if err != nil || len(ix.WeightMap) != 4 || ix.WeightMap["lm_head.weight"] != "model-00002-of-00002.safetensors" {
		t.Fatalf("ReadIndex: %+v, %v", ix, err)
	}
	if _, err := LoadHost(context.Background(), v.URLOf("fix/none.safetensors"), nil, v.Opts()...); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing object: %v", err)
	}
}

// TestS3SaveLoad saves random tensors (one large enough for a multipart
// upload) to S3 and to a file: the object equals the file, and loading it
// back from its URL gives every tensor's bytes.
func TestS3SaveLoad(t *testing.T) {
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(61, 62))
	ts := randomTensors(rng, 30)
	big := make([]byte, 11<<20+36)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	ts = append(ts, SaveTensor{Name: "big", Dtype: F32, Shape: []int64{int64(len(big) / 4)}, Data: big})
	meta := map[string]string{"format": "pt"}
	local := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(context.Background(), local, ts, meta); err != nil {
		t.Fatal(err)
	}
	url := v.URLOf("saved/m.safetensors")
	if err := Save(context.Background(), url, ts, meta, v.Opts()...); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(local)
	if got, ok := v.Object("saved/m.safetensors"); !ok || !bytes.Equal(got, want) {
		t.Fatalf("object of %d bytes differs from the %d-byte file", len(got), len(want))
	}
	m, err := LoadHost(context.Background(), url, nil, v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ts {
		checkHostTensor(t, m, w)
	}
	// A Reader the caller opened serves as well, and stays open.
	r, err := kvik.OpenReader(t.Context(), url, v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m2, err := LoadHostReader(context.Background(), r, &Options{Names: []string{"big"}})
	if err != nil || !bytes.Equal(m2.Tensor("big").Data, big) {
		t.Fatalf("LoadHostReader: %v", err)
	}
	if _, err := r.Size(); err != nil {
		t.Fatalf("reader closed by LoadHostReader: %v", err)
	}
}

// servedFixtures serves the fixtures over HTTP at /name.
func servedFixtures(t *testing.T) *httpfault.Server {
	objs := map[string][]byte{}
	for name, b := range fixtures(t) {
		objs["/"+name] = b
	}
	return httpfault.New(t, objs, nil)
}

// TestHTTPHeaderRequests reads every fixture over plain HTTP, comparing
// with the local read, and counts requests: a header in the first MiB
// costs no GET beyond the one that opens the URL (one with the size
// given), and one more when it is longer.
func TestHTTPHeaderRequests(t *testing.T) {
	srv := servedFixtures(t)
	for name := range fixtures(t) {
		if strings.HasSuffix(name, ".index.json") {
			continue
		}
		want, err := LoadHost(context.Background(), filepath.Join("testdata", name), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := LoadHost(context.Background(), srv.URL+"/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameModel(t, name, want, got)

		h, err := kvik.OpenRemote(t.Context(), srv.URL+"/"+name)
		if err != nil {
			t.Fatal(err)
		}
		srv.SetFault(nil) // counts from 0
		// The GET that opened h brought the first MiB, the header with it.
		if _, err := ReadHeaderReader(t.Context(), h, nil); err != nil || srv.GETs.Load() != 0 {
			t.Fatalf("%s: header in %d GETs after the open (%v), want 0", name, srv.GETs.Load(), err)
		}
		h.Close()
		// With the size given there is no opening GET: the header costs one.
		if h, err = kvik.OpenRemote(t.Context(), srv.URL+"/"+name, kvik.WithRemoteSize(int64(len(fixtures(t)[name])))); err != nil {
			t.Fatal(err)
		}
		srv.SetFault(nil)
		if _, err := ReadHeaderReader(t.Context(), h, nil); err != nil || srv.GETs.Load() != 1 {
			t.Fatalf("%s, size given: header in %d GETs (%v), want 1", name, srv.GETs.Load(), err)
		}
		h.Close()
	}

	// A header longer than the probe costs a second GET, for its rest;
	// the tensors (of 256 bytes: one aligned run) one more.
	var ts []SaveTensor
	for i := range 6000 {
		data := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 128)
		ts = append(ts, SaveTensor{Name: fmt.Sprintf("%0150d", i), Dtype: U8, Shape: []int64{256}, Data: data})
	}
	p := filepath.Join(t.TempDir(), "long.safetensors")
	if err := Save(context.Background(), p, ts, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if n := binary.LittleEndian.Uint64(b); n <= headerProbe {
		t.Fatalf("header of %d bytes is not longer than the probe", n)
	}
	srv2 := httpfault.New(t, map[string][]byte{"/long.safetensors": b}, nil)
	m, err := LoadHost(context.Background(), srv2.URL+"/long.safetensors", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ts {
		checkHostTensor(t, m, w)
	}
	// The opening GET (the first MiB, which the probe reads), the
	// header's rest, the tensors.
	if heads, gets := srv2.Requests.Load()-srv2.GETs.Load(), srv2.GETs.Load(); heads != 0 || gets != 3 {
		t.Fatalf("long header: %d HEADs and %d GETs, want 0 and 3", heads, gets)
	}
}

// TestShardName resolves shard names against local and URL indexes and
// refuses those that would leave the index's directory.
func TestShardName(t *testing.T) {
	for _, c := range []struct{ index, file, want string }{
		{"/m/model.index.json", "a.safetensors", "/m/a.safetensors"},
		{"/m/model.index.json", "sub/a.safetensors", "/m/sub/a.safetensors"},
		{"s3://bkt/m/model.index.json", "a.safetensors", "s3://bkt/m/a.safetensors"},
		{"s3://bkt/m/model.index.json", "sub/./a b.safetensors", "s3://bkt/m/sub/a%20b.safetensors"},
		{"s3://bkt/model.index.json", "a?x#y.safetensors", "s3://bkt/a%3Fx%23y.safetensors"},
		{"https://h:8/m/model.index.json?X-Amz-Signature=s", "a.safetensors", "https://h:8/m/a.safetensors"},
		{"http://h/model.index.json", "a:b.safetensors", "http://h/a:b.safetensors"},
	} {
		got, err := ShardName(c.index, c.file)
		if err != nil || got != c.want {
			t.Errorf("ShardName(%q, %q) = %q, %v; want %q", c.index, c.file, got, err, c.want)
		}
	}
	for _, index := range []string{"/m/model.index.json", "s3://bkt/m/model.index.json", "https://h/m/model.index.json"} {
		for _, file := range []string{"../a.safetensors", "sub/../../a.safetensors", "/etc/passwd", "",
			"https://evil.example/a.safetensors", "s3://other/a.safetensors", `..\a.safetensors`} {
			if got, err := ShardName(index, file); !errors.Is(err, ErrInvalidIndex) {
				t.Errorf("ShardName(%q, %q) = %q, %v; want ErrInvalidIndex", index, file, got, err)
			}
		}
	}
}

// TestHostileIndex serves indexes naming shards outside their directory:
// loading fails with ErrInvalidIndex before any shard is fetched, here or
// on another server.
func TestHostileIndex(t *testing.T) {
	shard, err := os.ReadFile(filepath.Join("testdata", "torch", "model-00001-of-00002.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := httpfault.New(t, map[string][]byte{"/a.safetensors": shard}, nil)
	for _, file := range []string{"../a.safetensors", elsewhere.URL + "/a.safetensors", "/a.safetensors"} {
		ix := []byte(`{"metadata":{},"weight_map":{"model.embed.weight":"` + file + `"}}`)
		srv := httpfault.New(t, map[string][]byte{"/m/model.index.json": ix, "/a.safetensors": shard}, nil)
		_, err := LoadIndexHost(context.Background(), srv.URL+"/m/model.index.json?token=secret", nil)
		if !errors.Is(err, ErrInvalidIndex) || strings.Contains(err.Error(), "secret") {
			t.Fatalf("index naming %q: %v (the query must stay out of errors)", file, err)
		}
		if n := srv.GETs.Load(); n != 1 {
			t.Fatalf("index naming %q: %d GETs, want the index's alone", file, n)
		}
	}
	if n := elsewhere.Requests.Load(); n != 0 {
		t.Fatalf("the other server got %d requests", n)
	}
}

// TestHTTPFaults injects server faults into loads: 503 and 429 are
// retried; 403, 500 after the retries, a reset mid-body and a short body
// fail the load with typed errors.
func TestHTTPFaults(t *testing.T) {
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.HTTPMaxAttempts = 2 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	// Past the first MiB, which the GET that opens the URL brings: the
	// tensors take GETs of their own, for the faults to hit.
	rng := rand.New(rand.NewPCG(71, 72))
	big := SaveTensor{Name: "big", Dtype: U8, Shape: []int64{3 << 19}, Data: make([]byte, 3<<19)}
	for i := range big.Data {
		big.Data[i] = byte(rng.Uint32())
	}
	ts := append(randomTensors(rng, 40), big)
	p := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(context.Background(), p, ts, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	// A server per case: requests that a failed load cancelled may still
	// reach it after the load returns.
	serve := func(f httpfault.Fault) (*httpfault.Server, string) {
		srv := httpfault.New(t, map[string][]byte{"/m.safetensors": b}, f)
		return srv, srv.URL + "/m.safetensors"
	}
	for _, c := range []struct {
		name  string
		fault httpfault.Fault
	}{
		{"503 on the header", httpfault.Status(503, 1, 2)},
		{"429 on a tensor run", httpfault.Status(429, 2, 3)},
	} {
		_, url := serve(c.fault)
		m, err := LoadHost(context.Background(), url, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, w := range ts {
			checkHostTensor(t, m, w)
		}
	}
	var se *kvik.HTTPStatusError
	_, url := serve(httpfault.Status(403, 2, 0))
	if _, err := LoadHost(context.Background(), url, nil); !errors.Is(err, fs.ErrPermission) || !errors.As(err, &se) || se.Code != 403 {
		t.Fatalf("403: %v", err)
	}
	srv, url := serve(httpfault.Status(500, 1, 0))
	if _, err := LoadHost(context.Background(), url, nil); !errors.As(err, &se) || se.Code != 500 || srv.GETs.Load() != 2 {
		t.Fatalf("500 twice: %v after %d GETs", err, srv.GETs.Load())
	}
	for name, f := range map[string]func(http.ResponseWriter, *http.Request, []byte){"reset": httpfault.Reset, "short": httpfault.Short} {
		_, url := serve(func(n int32, w http.ResponseWriter, r *http.Request, data []byte) bool {
			if n >= 2 {
				f(w, r, data)
			}
			return n >= 2
		})
		if _, err := LoadHost(context.Background(), url, nil); !errors.Is(err, kvik.ErrShortBody) {
			t.Fatalf("%s body: %v", name, err)
		}
	}
}
