package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// fileServer serves the directory of path over HTTP on loopback and
// returns the URL of path.
func fileServer(t *testing.T, path string) string {
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(path))))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(path)
}

func TestRemoteCpInfoBench(t *testing.T) {
	src := randomFile(t, 5<<20+17)
	url := fileServer(t, src)
	dst := filepath.Join(t.TempDir(), "dst.bin")
	r := runKvik(t, nil, "cp", url, dst).expect(t, 0)
	if !strings.Contains(r.stdout, "verified") {
		t.Errorf("cp output: %s", r.stdout)
	}
	sameFile(t, src, dst)

	r = runKvik(t, nil, "info", "--json", url).expect(t, 0)
	var info struct {
		Endpoint string `json:"endpoint"`
		Size     int64  `json:"size"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.Endpoint != "HTTP" || info.Size != 5<<20+17 {
		t.Errorf("info --json: %v %+v\n%s", err, info, r.stdout)
	}
	r = runKvik(t, nil, "bench", "--url", url, "--repeats", "1").expect(t, 0)
	if !strings.Contains(r.stdout, "kvik parallel -> host") || !strings.Contains(r.stdout, "one GET stream") {
		t.Errorf("bench --url output: %s", r.stdout)
	}
	// A directory destination receives the object's base name, as a
	// local copy does: an existing directory, or a new one named with a
	// trailing slash.
	dir := t.TempDir()
	runKvik(t, nil, "cp", url, dir).expect(t, 0)
	sameFile(t, src, filepath.Join(dir, filepath.Base(src)))
	runKvik(t, nil, "cp", url, filepath.Join(dir, "new")+"/").expect(t, 0)
	sameFile(t, src, filepath.Join(dir, "new", filepath.Base(src)))
	runKvik(t, nil, "cp", url, url).expect(t, exitUsage)
	runKvik(t, nil, "cp", url+".missing", dst).expect(t, exitFailure).oneLineError(t, "404")
}

// s3Env returns the AWS_* variables that reach v.
func s3Env(v *s3test.Server) []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s3test.Key, "AWS_SECRET_ACCESS_KEY=" + s3test.Secret,
		"AWS_DEFAULT_REGION=" + s3test.Region, "AWS_ENDPOINT_URL=" + v.URL}
}

// TestRemoteCpS3 copies a file to versitygw and back with the AWS_*
// variables. Without versitygw it skips, except under CI=true.
func TestRemoteCpS3(t *testing.T) {
	v := s3test.Start(t)
	env := s3Env(v)
	src := randomFile(t, 11<<20+5)
	runKvik(t, env, "cp", src, v.URLOf("d/x.bin")).expect(t, 0)
	sameFile(t, src, filepath.Join(v.Dir, s3test.Bucket, "d", "x.bin"))
	dst := filepath.Join(t.TempDir(), "back.bin")
	runKvik(t, env, "cp", v.URLOf("d/x.bin"), dst).expect(t, 0)
	sameFile(t, src, dst)
	// An S3 prefix ending in "/" receives the file under its base name,
	// and a local directory the object under its own.
	runKvik(t, env, "cp", src, v.URLOf("p/")).expect(t, 0)
	sameFile(t, src, filepath.Join(v.Dir, s3test.Bucket, "p", filepath.Base(src)))
	dir := t.TempDir()
	runKvik(t, env, "cp", v.URLOf("d/x.bin"), dir).expect(t, 0)
	sameFile(t, src, filepath.Join(dir, "x.bin"))
}

// kvik cp to an http URL says that uploads go to S3 and which variables
// hold the credentials, not to "pass credentials" (the CLI has no flag).
func TestCpUploadHint(t *testing.T) {
	src := randomFile(t, 100)
	r := runKvik(t, []string{"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY="}, "cp", src, "http://127.0.0.1:1/b/x.bin").expect(t, 1)
	r.oneLineError(t, "kvik: cp: ", "S3 only", "s3://", "AWS_ACCESS_KEY_ID")
}

// kvik bench --url of a model without a GPU names the flag the user
// typed, not --safetensors or --gguf.
func TestBenchURLModelWithoutGPU(t *testing.T) {
	if hasGPU() {
		t.Skip("a GPU is present")
	}
	for _, name := range []string{"m.safetensors", "m.gguf"} {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte("not really a model"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runKvik(t, nil, "bench", "--url", fileServer(t, p)).expect(t, 1)
		r.oneLineError(t, "--url", "needs a GPU")
		if strings.Contains(r.stderr, "--safetensors") || strings.Contains(r.stderr, "--gguf") {
			t.Errorf("%s: error names a flag the user did not type: %s", name, r.stderr)
		}
	}
}
