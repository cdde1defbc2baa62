package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// testdata is the committed fixtures of a format package.
func testdata(pkg string, elem ...string) string {
	return filepath.Join(append([]string{"..", "..", pkg, "testdata"}, elem...)...)
}

// serveDir serves dir over HTTP and returns its URL.
func serveDir(t *testing.T, dir string) string {
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// infoJSON runs kvik info --json on name.
func infoJSON(t *testing.T, env []string, name string) tensorFileInfo {
	t.Helper()
	r := runKvik(t, env, "info", "--json", name).expect(t, exitOK)
	var rep tensorFileInfo
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("kvik info --json %s: %v\n%s", name, err, r.stdout)
	}
	return rep
}

// sameInfo compares the reports of a local file and its URL, paths aside.
func sameInfo(t *testing.T, local, remote tensorFileInfo) {
	t.Helper()
	a, _ := json.Marshal(local.Tensors)
	b, _ := json.Marshal(remote.Tensors)
	if local.Format != remote.Format || local.Bytes != remote.Bytes || string(a) != string(b) || len(local.Metadata) != len(remote.Metadata) {
		t.Fatalf("local %+v\nremote %+v", local, remote)
	}
}

// TestInfoTensorURLs describes safetensors files, a sharded index, .npy
// and .gguf files at HTTP URLs as kvik info describes the local files.
func TestInfoTensorURLs(t *testing.T) {
	st, np, gg := serveDir(t, testdata("safetensors")), serveDir(t, testdata("npy")), serveDir(t, testdata("gguf"))
	for _, c := range []struct{ local, url string }{
		{testdata("safetensors", "samples", "overall.safetensors"), st + "/samples/overall.safetensors"},
		{testdata("safetensors", "torch", "all_dtypes.safetensors"), st + "/torch/all_dtypes.safetensors"},
		{testdata("safetensors", "torch", "model.safetensors.index.json"), st + "/torch/model.safetensors.index.json"},
		{testdata("npy", "v3.npy"), np + "/v3.npy"},
		{testdata("npy", "a017.npy"), np + "/a017.npy"},
		{testdata("gguf", "all_types.gguf"), gg + "/all_types.gguf"},
		{testdata("gguf", "v2.gguf"), gg + "/v2.gguf"},
	} {
		sameInfo(t, infoJSON(t, nil, c.local), infoJSON(t, nil, c.url))
	}
	ix := infoJSON(t, nil, st+"/torch/model.safetensors.index.json")
	if !strings.HasPrefix(ix.Format, "safetensors index, 2 shards") || len(ix.Tensors) != 4 || ix.Metadata["total_size"] != "1" {
		t.Fatalf("index report %+v", ix)
	}
	for _, x := range ix.Tensors {
		if !strings.HasPrefix(x.File, "model-0000") {
			t.Fatalf("index row without its shard: %+v", x)
		}
	}
	r := runKvik(t, nil, "info", st+"/torch/model.safetensors.index.json").expect(t, exitOK)
	if !strings.Contains(r.stdout, "FILE") || !strings.Contains(r.stdout, "model-00002-of-00002.safetensors") {
		t.Fatalf("index text report:\n%s", r.stdout)
	}
	runKvik(t, nil, "info", st+"/missing.safetensors").expect(t, exitFailure).oneLineError(t, "404")
}

// TestCpTensorsHTTP downloads tensor files by format (through the GPU
// when there is one): each copy is the object byte for byte, a sharded
// checkpoint brings its shards, and a failed copy leaves the destination
// as it was, with no temporary file.
func TestCpTensorsHTTP(t *testing.T) {
	st, np := serveDir(t, testdata("safetensors")), serveDir(t, testdata("npy"))
	dir := t.TempDir()
	for _, c := range []struct{ url, local string }{
		{st + "/samples/overall.safetensors", testdata("safetensors", "samples", "overall.safetensors")},
		{st + "/torch/all_dtypes.safetensors", testdata("safetensors", "torch", "all_dtypes.safetensors")},
		{np + "/a042.npy", testdata("npy", "a042.npy")},
		{np + "/v2.npy", testdata("npy", "v2.npy")},
	} {
		r := runKvik(t, nil, "cp", c.url, dir).expect(t, exitOK)
		if !strings.Contains(r.stdout, "loaded through") || !strings.Contains(r.stdout, "verified") {
			t.Errorf("cp output: %s", r.stdout)
		}
		sameFile(t, c.local, filepath.Join(dir, filepath.Base(c.local)))
	}
	// A GGUF file is copied as bytes, not loaded.
	gg := serveDir(t, testdata("gguf"))
	runKvik(t, nil, "cp", gg+"/all_types.gguf", filepath.Join(dir, "all_types.gguf")).expect(t, exitOK)
	sameFile(t, testdata("gguf", "all_types.gguf"), filepath.Join(dir, "all_types.gguf"))
	ckpt := filepath.Join(dir, "ckpt") + "/"
	r := runKvik(t, nil, "cp", st+"/torch/model.safetensors.index.json", ckpt).expect(t, exitOK)
	if !strings.Contains(r.stdout, "copied 3 files") {
		t.Errorf("index cp output: %s", r.stdout)
	}
	for _, f := range []string{"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		sameFile(t, testdata("safetensors", "torch", f), filepath.Join(ckpt, f))
	}

	// Failures: a corrupt file is refused before anything is written, a
	// download cut off for good fails; either way the old file stays.
	dst := filepath.Join(dir, "keep.safetensors")
	old := []byte("the old contents")
	os.WriteFile(dst, old, 0o644)
	bad := httpfault.New(t, map[string][]byte{"/x.safetensors": []byte("\xff\xff\xff\xff\xff\xff\xff\x7fnot a header")}, nil)
	runKvik(t, nil, "cp", bad.URL+"/x.safetensors", dst).expect(t, exitFailure).oneLineError(t, "invalid header")
	big := make([]byte, 3<<20)
	for i := range big {
		big[i] = byte(i * 31)
	}
	cut := httpfault.New(t, map[string][]byte{"/x.bin": big}, func(_ int32, w http.ResponseWriter, r *http.Request, data []byte) bool {
		httpfault.Reset(w, r, data)
		return true
	})
	runKvik(t, []string{"KVIKIO_HTTP_MAX_ATTEMPTS=1"}, "cp", cut.URL+"/x.bin", dst).expect(t, exitFailure)
	if got, _ := os.ReadFile(dst); string(got) != string(old) {
		t.Fatalf("failed copies changed the destination to %q", got)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if kvik.IsPendingName(e.Name()) {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

// TestCpTensorsS3 uploads tensor files and a sharded checkpoint to S3 by
// format, then downloads them back; every object and file is the
// original byte for byte.
func TestCpTensorsS3(t *testing.T) {
	v := s3test.Start(t)
	env := s3Env(v)
	runKvik(t, env, "cp", testdata("npy", "a007.npy"), v.URLOf("up/")).expect(t, exitOK)
	runKvik(t, env, "cp", testdata("safetensors", "torch", "metadata.safetensors"), v.URLOf("up/m.safetensors")).expect(t, exitOK)
	runKvik(t, env, "cp", testdata("safetensors", "torch", "model.safetensors.index.json"), v.URLOf("up/ckpt/")).expect(t, exitOK)
	for key, local := range map[string]string{
		"up/a007.npy":                              testdata("npy", "a007.npy"),
		"up/m.safetensors":                         testdata("safetensors", "torch", "metadata.safetensors"),
		"up/ckpt/model.safetensors.index.json":     testdata("safetensors", "torch", "model.safetensors.index.json"),
		"up/ckpt/model-00001-of-00002.safetensors": testdata("safetensors", "torch", "model-00001-of-00002.safetensors"),
		"up/ckpt/model-00002-of-00002.safetensors": testdata("safetensors", "torch", "model-00002-of-00002.safetensors"),
	} {
		sameFile(t, local, filepath.Join(v.Dir, s3test.Bucket, key))
	}
	back := t.TempDir()
	runKvik(t, env, "cp", v.URLOf("up/ckpt/model.safetensors.index.json"), back).expect(t, exitOK)
	runKvik(t, env, "cp", v.URLOf("up/a007.npy"), back).expect(t, exitOK)
	sameFile(t, testdata("safetensors", "torch", "model-00002-of-00002.safetensors"), filepath.Join(back, "model-00002-of-00002.safetensors"))
	sameFile(t, testdata("npy", "a007.npy"), filepath.Join(back, "a007.npy"))
	// A corrupt local file is refused before the upload.
	bad := filepath.Join(back, "bad.npy")
	os.WriteFile(bad, []byte("\x93NUMPY\x09\x00junk"), 0o644)
	runKvik(t, env, "cp", bad, v.URLOf("up/bad.npy")).expect(t, exitFailure).oneLineError(t, "invalid header")
	if _, ok := v.Object("up/bad.npy"); ok {
		t.Fatal("a corrupt file was uploaded")
	}
}

// TestBenchModelURL runs kvik bench --url on a safetensors and a GGUF
// object: the load onto GPU 0 against a RemoteHandle.ReadDevice of the
// object.
func TestBenchModelURL(t *testing.T) {
	if !hasGPU() {
		t.Skip("no GPU")
	}
	st, gg := serveDir(t, testdata("safetensors")), serveDir(t, testdata("gguf"))
	for url, load := range map[string]string{
		st + "/torch/all_dtypes.safetensors": "safetensors.Load gpu0",
		gg + "/all_types.gguf":               "gguf.Load gpu0",
	} {
		r := runKvik(t, nil, "bench", "--url", url, "--repeats", "3").expect(t, exitOK)
		if !strings.Contains(r.stdout, "RemoteHandle.ReadDevice") || !strings.Contains(r.stdout, load) {
			t.Fatalf("bench --url %s output:\n%s", url, r.stdout)
		}
	}
}
