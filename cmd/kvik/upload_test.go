package main

import (
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// cpUploadLine matches kvik cp's summary of an upload.
var cpUploadLine = regexp.MustCompile(`^copied .* \((\d+) bytes\) .* -> (s3://\S+): uploaded in [0-9.]+ s, [0-9.]+ GB/s; ` +
	`(read back and verified in [0-9.]+ s, [0-9.]+ GB/s|not verified); CRC-32C ([0-9a-f]{8})( of the bytes sent)?\n$`)

// checkUpload checks kvik cp's output for an upload of src to key: one
// summary line with the upload's own figures, the read-back's when
// verified, and the CRC-32C of the file; and the object is the file.
func checkUpload(t *testing.T, v *s3test.Server, r result, src, key string, verified bool) {
	t.Helper()
	m := cpUploadLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("cp output is not an upload summary: %q", r.stdout)
	}
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if m[1] != fmt.Sprint(len(want)) || m[2] != v.URLOf(key) {
		t.Errorf("summary names %s bytes to %s, want %d to %s", m[1], m[2], len(want), v.URLOf(key))
	}
	if got := strings.HasPrefix(m[3], "read back"); got != verified {
		t.Errorf("summary says verified %v, want %v: %q", got, verified, r.stdout)
	}
	if sum := fmt.Sprintf("%08x", crc32.Checksum(want, castagnoli)); m[4] != sum {
		t.Errorf("summary CRC-32C %s, file %s", m[4], sum)
	}
	sameFile(t, src, filepath.Join(v.Dir, s3test.Bucket, filepath.FromSlash(key)))
}

// TestCpUploadS3 uploads files of random, unaligned sizes (one PUT and
// multipart) with and without verification, and checks the summary
// (upload figures apart from the read-back's, the file's CRC-32C) and
// the object.
func TestCpUploadS3(t *testing.T) {
	v := s3test.Start(t)
	env := append(s3Env(v), "KVIKIO_TASK_SIZE=5242880")
	rng := rand.New(rand.NewPCG(61, 5))
	for i, size := range []int{0, 1 + rng.IntN(5000), 5<<20 + 1 + rng.IntN(1<<20), 3*(5<<20) + 1 + rng.IntN(5<<20)} {
		src := randomFile(t, size)
		verify := i%2 == 0
		key := fmt.Sprintf("up/%d.bin", size)
		r := runKvik(t, env, "cp", fmt.Sprintf("--verify=%v", verify), src, v.URLOf(key)).expect(t, 0)
		checkUpload(t, v, r, src, key, verify)
	}
}

// TestCpUploadS3PartFaults uploads through a proxy that fails the first
// attempt of several parts midway through their bodies (503 and dropped
// connections): the retried parts must make the object whole and the
// CRC-32C of the bytes sent that of the file, not of the failed halves.
// A part that fails for good fails kvik cp and leaves no object and no
// multipart upload behind.
func TestCpUploadS3PartFaults(t *testing.T) {
	v := s3test.Start(t)
	src := randomFile(t, 4*(5<<20)+12345)
	for _, status := range []int{http.StatusServiceUnavailable, s3test.Reset} {
		var mu sync.Mutex
		seen := map[string]bool{}
		faults := 0
		p := v.FaultProxy(t, func(r *http.Request) int {
			n := r.URL.Query().Get("partNumber")
			if r.Method != http.MethodPut || (n != "1" && n != "3" && n != "4") {
				return 0
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[n] {
				return 0
			}
			seen[n] = true
			faults++
			return status
		})
		env := append(s3Env(v), "AWS_ENDPOINT_URL="+p.URL, "KVIKIO_TASK_SIZE=5242880")
		key := fmt.Sprintf("faults/%d.bin", status)
		r := runKvik(t, env, "cp", src, v.URLOf(key)).expect(t, 0)
		checkUpload(t, v, r, src, key, true)
		if faults != 3 {
			t.Errorf("fault %d: %d faults injected, want 3", status, faults)
		}
	}
	p := v.FaultProxy(t, func(r *http.Request) int {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			return http.StatusBadRequest
		}
		return 0
	})
	env := append(s3Env(v), "AWS_ENDPOINT_URL="+p.URL, "KVIKIO_TASK_SIZE=5242880")
	runKvik(t, env, "cp", src, v.URLOf("faults/failed.bin")).expect(t, exitFailure).oneLineError(t, "400")
	if _, ok := v.Object("faults/failed.bin"); ok {
		t.Error("a failed upload left an object")
	}
	if ups := v.Uploads(t); strings.Contains(ups, "failed.bin") {
		t.Errorf("a failed upload is still listed: %s", ups)
	}
}

// TestCpUploadS3VerifyCatches reads the object back through a proxy that
// flips one byte of each GET's body: the verification must fail kvik cp
// with a verify error, and --verify=false must not read back at all.
func TestCpUploadS3VerifyCatches(t *testing.T) {
	v := s3test.Start(t)
	target, err := url.Parse(v.URL)
	if err != nil {
		t.Fatal(err)
	}
	var gets sync.Map
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
		out.Host = r.Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return
		}
		if r.Method == http.MethodGet && len(body) > 0 && resp.StatusCode/100 == 2 {
			gets.Store(r.URL.Path, true)
			body[len(body)/2] ^= 0x10
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	}))
	defer proxy.Close()
	env := append(s3Env(v), "AWS_ENDPOINT_URL="+proxy.URL, "KVIKIO_TASK_SIZE=5242880")
	src := randomFile(t, 2*(5<<20)+777)
	r := runKvik(t, env, "cp", src, v.URLOf("corrupt.bin")).expect(t, exitFailure)
	r.oneLineError(t, "verify")
	if _, ok := gets.Load("/" + s3test.Bucket + "/corrupt.bin"); !ok {
		t.Fatal("the object was not read back")
	}
	r = runKvik(t, env, "cp", "--verify=false", src, v.URLOf("unverified.bin")).expect(t, 0)
	checkUpload(t, v, r, src, "unverified.bin", false)
	if _, ok := gets.Load("/" + s3test.Bucket + "/unverified.bin"); ok {
		t.Fatal("--verify=false read the object back")
	}
}

// TestCpUploadS3Shrinks truncates the source while kvik cp uploads it
// (one worker; when the second part's request arrives): the copy fails
// with one line naming the cause, not a fault, and leaves no object and
// no multipart upload. (A mapping of the file, as kvik cp used, faulted
// with SIGBUS on the pages past the new end.)
func TestCpUploadS3Shrinks(t *testing.T) {
	v := s3test.Start(t)
	src := randomFile(t, 3*(5<<20)+99)
	var once sync.Once
	p := v.FaultProxy(t, func(r *http.Request) int {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			once.Do(func() { os.Truncate(src, 1<<20) })
		}
		return 0
	})
	env := append(s3Env(v), "AWS_ENDPOINT_URL="+p.URL, "KVIKIO_TASK_SIZE=5242880", "KVIKIO_NTHREADS=1")
	runKvik(t, env, "cp", src, v.URLOf("shrunk.bin")).expect(t, exitFailure).oneLineError(t, "shrank", "unexpected EOF")
	if _, ok := v.Object("shrunk.bin"); ok {
		t.Error("an object was left")
	}
	if ups := v.Uploads(t); strings.Contains(ups, "shrunk.bin") {
		t.Errorf("the upload is still listed: %s", ups)
	}
}
