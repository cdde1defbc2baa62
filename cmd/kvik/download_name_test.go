package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestCpDownloadNameIsKey copies objects whose keys hold '%', '#', '?',
// spaces, '+' and unicode into a directory, from their s3:// URLs and,
// as files of a web server, their http:// URLs (each name escaped once,
// as kvik reads URLs): each lands under its key's (path's) last segment,
// byte for byte. (The name was the URL's text:
// s3://b/p/x%2541.bin was saved as x%2541.bin.) A URL whose key ends in
// no file name ("..", ".", a trailing slash) fails, writing nothing.
func TestCpDownloadNameIsKey(t *testing.T) {
	v := s3test.Start(t)
	env := s3Env(v)
	names := oddNames(t, 10)
	web := t.TempDir()
	webURL := strings.TrimSuffix(fileServer(t, filepath.Join(web, "x")), "/x")
	for i, name := range names {
		data := []byte(fmt.Sprintf("object %d: %q", i, name))
		src := fmt.Sprintf("s3://%s/d%d/%s", s3test.Bucket, i, url.PathEscape(name))
		if i%2 == 0 {
			v.Put(t, fmt.Sprintf("d%d/%s", i, name), data)
		} else {
			if err := os.MkdirAll(filepath.Join(web, fmt.Sprint(i)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(web, fmt.Sprint(i), name), data, 0o644); err != nil {
				t.Fatal(err)
			}
			src = fmt.Sprintf("%s/%d/%s", webURL, i, url.PathEscape(name))
		}
		dir := t.TempDir()
		if r := runKvik(t, env, "cp", src, dir); r.code != 0 {
			t.Errorf("%s: exit status %d: %s", src, r.code, r.stderr)
			continue
		}
		ents, _ := os.ReadDir(dir)
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != string(data) || len(ents) != 1 {
			var have []string
			for _, e := range ents {
				have = append(have, e.Name())
			}
			t.Errorf("%s: no file %q with the object's bytes (%v); the directory holds %q", src, name, err, have)
		}
	}
	v.Put(t, "e/x.bin", []byte("x"))
	for _, src := range []string{"s3://" + s3test.Bucket + "/e/%2E%2E", "s3://" + s3test.Bucket + "/e/.", "s3://" + s3test.Bucket + "/e/",
		webURL + "/e/%2e%2e", webURL + "/e/"} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "in")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		r := runKvik(t, env, "cp", src, dir)
		if r.code == 0 || !strings.Contains(r.stderr, "no file name") {
			t.Errorf("%s into a directory: exit status %d, %q; want a failure asking for a file name", src, r.code, r.stderr)
		}
		for _, d := range []string{parent, dir} {
			if ents, _ := os.ReadDir(d); len(ents) != map[string]int{parent: 1, dir: 0}[d] {
				t.Errorf("%s: %s holds %d entries after a refused copy", src, d, len(ents))
			}
		}
	}
}
