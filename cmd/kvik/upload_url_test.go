package main

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestCpUploadHTTPURL uploads to an S3 object's http:// URL (path-style,
// credentials from the environment), one PUT and multipart: the upload
// is signed, and so must be the read-back that verifies it. (The
// read-back went unsigned: 403, exit 1, with the object there.)
func TestCpUploadHTTPURL(t *testing.T) {
	v := s3test.Start(t)
	env := append(s3Env(v), "KVIKIO_TASK_SIZE=5242880")
	rng := rand.New(rand.NewPCG(39, 6))
	for _, size := range []int{1 + rng.IntN(5000), 2*(5<<20) + 1 + rng.IntN(1<<20)} {
		src := randomFile(t, size)
		key := fmt.Sprintf("h/%d.bin", size)
		r := runKvik(t, env, "cp", src, v.URL+"/"+s3test.Bucket+"/"+key).expect(t, 0)
		if !strings.Contains(r.stdout, "read back and verified") {
			t.Errorf("the upload was not verified: %q", r.stdout)
		}
		sameFile(t, src, filepath.Join(v.Dir, s3test.Bucket, "h", fmt.Sprintf("%d.bin", size)))
	}
}

// TestCpUploadNameIsKey copies local files whose names hold '%', '#',
// '?', spaces, '+' and unicode under an S3 prefix (s3:// and http://):
// each becomes exactly the key PREFIX/NAME. ('x%41.bin' was stored as
// 'xA.bin', '50%off.bin' failed with an escape error and 'h#frag.bin'
// went to 'h'.)
func TestCpUploadNameIsKey(t *testing.T) {
	v := s3test.Start(t)
	env := s3Env(v)
	names := oddNames(t, 9)
	dir := t.TempDir()
	for i, name := range names {
		src := filepath.Join(dir, name)
		data := []byte(fmt.Sprintf("file %d: %q", i, name))
		if err := os.WriteFile(src, data, 0o644); err != nil {
			t.Fatal(err)
		}
		prefix := fmt.Sprintf("s3://%s/p%d/", s3test.Bucket, i)
		if i%2 == 1 {
			prefix = fmt.Sprintf("%s/%s/p%d/", v.URL, s3test.Bucket, i)
		}
		r := runKvik(t, env, "cp", src, prefix)
		if r.code != 0 {
			t.Errorf("%s to %s: exit status %d: %s", name, prefix, r.code, r.stderr)
			continue
		}
		key := fmt.Sprintf("p%d/%s", i, name)
		// The summary names the object by a URL of exactly that key.
		if got := summaryKey(t, r.stdout); got != "/"+s3test.Bucket+"/"+key {
			t.Errorf("%s to %s: the summary names %q, want the key %q: %q", name, prefix, got, key, r.stdout)
		}
		if got, ok := v.Object(key); !ok || string(got) != string(data) {
			ents, _ := os.ReadDir(filepath.Join(v.Dir, s3test.Bucket, fmt.Sprintf("p%d", i)))
			var keys []string
			for _, e := range ents {
				keys = append(keys, e.Name())
			}
			t.Errorf("%s to %s: no object %q with the file's bytes (present %v); the prefix holds %q", name, prefix, key, ok, keys)
		}
	}
}

// summaryKey returns the path (/bucket/key, decoded) of the URL an
// upload's summary line names as its destination.
func summaryKey(t *testing.T, line string) string {
	t.Helper()
	_, dst, _ := strings.Cut(line, " -> ")
	dst, _, _ = strings.Cut(dst, ": uploaded in")
	if rest, ok := strings.CutPrefix(dst, "s3://"); ok {
		p, err := url.PathUnescape(rest)
		if err != nil {
			t.Errorf("the summary's URL %q: %v", dst, err)
		}
		return "/" + p
	}
	u, err := url.Parse(dst)
	if err != nil {
		t.Errorf("the summary's URL %q: %v", dst, err)
		return ""
	}
	return u.Path
}

// TestCpS3ErrorLine: kvik cp of a missing S3 object fails with one line
// that quotes the server's error code and message, not its whole error
// document (RequestId, HostId).
func TestCpS3ErrorLine(t *testing.T) {
	v := s3test.Start(t)
	r := runKvik(t, s3Env(v), "cp", v.URLOf("no/such.bin"), filepath.Join(t.TempDir(), "x")).expect(t, 1)
	r.oneLineError(t, "kvik: cp: ", "404", "NoSuchKey")
	for _, s := range []string{"<", "RequestId", "HostId"} {
		if strings.Contains(r.stderr, s) {
			t.Errorf("the error line quotes %q: %s", s, r.stderr)
		}
	}
}

// oddNames returns file names that a URL must escape ('%', '#', '?',
// spaces, '+', unicode, a literal "%2F"), eight of them fixed and eight
// random (seeded by seed), and logs them.
func oddNames(t *testing.T, seed uint64) []string {
	names := []string{"x%41.bin", "50%off.bin", "h#frag.bin", "q?x=1.bin", "a%2Fb.bin", "%zz.bin", "sp ace+plus.bin", "é漢%20.bin"}
	rng := rand.New(rand.NewPCG(39, seed))
	chars := []rune("ab%#?& =+;~!'()@,$é漢🙂%2F5")
	for range 8 {
		n := make([]rune, 1+rng.IntN(12))
		for i := range n {
			n[i] = chars[rng.IntN(len(chars))]
		}
		names = append(names, string(n)+".bin")
	}
	t.Logf("names: %q", names)
	return names
}
