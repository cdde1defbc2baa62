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
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// bucketFiles lists the files below a versitygw directory, as paths
// relative to it ("bucket/key").
func bucketFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !strings.HasPrefix(rel, ".") { // versitygw's own (.vgwlocks)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// TestRemoteStoreKeysStayInPrefix writes keys with escapes through a
// RemoteStore on versitygw: each lands under exactly its key, inside the
// store (issue 28, finding 1: the old code overwrote
// prod-bucket/config.json), and arrays named "50%25" and "pct%41" round
// trip.
func TestRemoteStoreKeysStayInPrefix(t *testing.T) {
	srv, s := openS3(t, "scratch/user1/store.zarr")
	prod := filepath.Join(srv.Dir, "prod-bucket")
	if err := os.MkdirAll(prod, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prod, "config.json"), []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	evil := "x%2f..%2f..%2f..%2f..%2fprod-bucket%2fconfig.json"
	if err := s.Set(bg, evil, []byte("evil")); err != nil {
		t.Fatal(err)
	}
	if b, ok := srv.Object("scratch/user1/store.zarr/" + evil); !ok || string(b) != "evil" {
		t.Errorf("the value is not at its literal key: %v", ok)
	}
	if b, err := s.Get(bg, evil, nil); err != nil || string(b) != "evil" {
		t.Errorf("Get(%q) = %q, %v", evil, b, err)
	}
	if err := s.Delete(bg, evil); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../x", "a/../../x", "a//b", "", "./a"} {
		if err := s.Set(bg, key, []byte("x")); !errors.Is(err, ErrInvalidKey) || !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("Set(%q) = %v, want ErrInvalidKey", key, err)
		}
	}

	rng := rand.New(rand.NewPCG(28, 1))
	for _, name := range []string{"50%25", "pct%41", "a b+c", "é%zz"} {
		m := Metadata{Shape: []int{5, 7}, ChunkShape: []int{2, 3}, DataType: DataType{Kind: Uint, Size: 2}}
		a, err := Create(bg, s, name, m)
		if err != nil {
			t.Fatalf("create %q: %v", name, err)
		}
		data := make([]byte, 5*7*2)
		for i := range data {
			data[i] = byte(rng.IntN(255) + 1)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, []int{5, 7}, data); err != nil {
			t.Fatal(err)
		}
		if _, ok := srv.Object("scratch/user1/store.zarr/" + name + "/zarr.json"); !ok {
			t.Errorf("array %q: no zarr.json at its literal key", name)
		}
		b, err := Open(bg, s, name)
		if err != nil {
			t.Fatalf("reopen %q: %v", name, err)
		}
		got := make([]byte, len(data))
		if err := b.ReadRegion(bg, []int{0, 0}, []int{5, 7}, got); err != nil || !bytes.Equal(got, data) {
			t.Errorf("array %q read back differs: %v", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(prod, "config.json")); err != nil || string(b) != "original" {
		t.Errorf("prod-bucket/config.json: %q, %v", b, err)
	}
	for _, f := range bucketFiles(t, srv.Dir) {
		if !strings.HasPrefix(f, s3test.Bucket+"/scratch/user1/store.zarr/") && f != "prod-bucket/config.json" {
			t.Errorf("object outside the store: %s", f)
		}
	}
}

// badKey is the rule keys are checked against, written out again: empty,
// a NUL byte, or an empty, "." or ".." segment.
func badKey(key string) bool {
	if key == "" || strings.ContainsRune(key, 0) {
		return true
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// publicBucket serves objects by path like a public S3 bucket without
// list permission: a missing key is 403 AccessDenied, not 404.
func publicBucket(t *testing.T, objects map[string][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := objects[r.URL.EscapedPath()]
		if !ok {
			http.Error(w, "<Error><Code>AccessDenied</Code></Error>", http.StatusForbidden)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOpenFromBucketAnswering403 opens a v3 and a v2 array from a public
// bucket that answers 403 for missing keys: the optional probes
// (.zmetadata, the root zarr.json of a v2 store) read as absent, while a
// required document's 403 stays an error (issue 28, finding 7).
func TestOpenFromBucketAnswering403(t *testing.T) {
	for _, format := range []int{3, 2} {
		dir := t.TempDir()
		local, err := NewDirStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Create(bg, local, "", Metadata{ZarrFormat: format, Shape: []int{9}, ChunkShape: []int{4}, DataType: DataType{Kind: Int, Size: 4}})
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 9*4)
		for i := range data {
			data[i] = byte(i*13 + 5)
		}
		if err := a.WriteRegion(bg, []int{0}, []int{9}, data); err != nil {
			t.Fatal(err)
		}
		objects := map[string][]byte{}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				objects["/bkt/arr.zarr/"+filepath.ToSlash(rel)], _ = os.ReadFile(p)
			}
			return err
		})
		srv := publicBucket(t, objects)
		opts := WithRemoteOptions(kvik.WithEndpointType(kvik.RemoteS3Public), kvik.WithS3Endpoint(srv.URL), kvik.WithS3Region("us-east-1"))
		b, err := OpenArray(bg, "s3://bkt/arr.zarr", opts)
		if err != nil {
			t.Fatalf("v%d array from a bucket answering 403: %v", format, err)
		}
		got := make([]byte, len(data))
		if err := b.ReadRegion(bg, []int{0}, []int{9}, got); err != nil || !bytes.Equal(got, data) {
			t.Errorf("v%d read back differs: %v", format, err)
		}
		b.Store().(*RemoteStore).Close()
		// Without the array's metadata the 403 is the error.
		if _, err := OpenArray(bg, "s3://bkt/none.zarr", opts); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("v%d: missing array in a 403 bucket: %v, want the 403", format, err)
		}
	}
}

// TestKeysProperty writes random keys (unicode, %, +, space, ?, #, //,
// .., %2f) through SaveFile, RemotePrefix.Save and a RemoteStore's Set
// to versitygw, then lists the bucket: each key is refused with
// ErrInvalidKey before any request or lands under exactly its key, and
// nothing lands outside the prefix.
func TestKeysProperty(t *testing.T) {
	srv := s3test.Start(t)
	const pre = "prop/root"
	p, err := kvik.NewRemotePrefix(srv.URLOf(pre), srv.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := OpenURL(bg, srv.URLOf(pre), WithRemoteOptions(srv.Opts()...))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 28))
	atoms := []string{"a", "Z", "9", "-", "_", ".", "~", "%", "%2f", "%2F", "%25", "%2e", "%zz", "+", " ", "?", "#", "/", "//",
		"..", ".", "é", "日本", "\u00a0", "=", "&", ";", ":", "@", "!", "'", "(", "*", ",", "$", "[", "]", "{", "\\", "^", "`", "|"}
	want := map[string]string{} // key below pre -> value
	for i := range 120 {
		// A first segment of its own: on versitygw's file system a key
		// cannot also be another's directory.
		var b strings.Builder
		fmt.Fprintf(&b, "k%03d-", i)
		for range rng.IntN(6) + 1 {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		key := b.String()
		val := []byte{byte(i), byte(i >> 8), 'v'}
		var err error
		switch i % 3 {
		case 0:
			err = kvik.SaveFile(bg, p.URL(key), []kvik.Piece{{Data: val}}, srv.Opts()...)
		case 1:
			err = p.Save(bg, key, []kvik.Piece{{Data: val}})
		case 2:
			err = s.Set(bg, key, val)
		}
		// Stores also refuse "\\", a separator on some file systems.
		invalid := badKey(key) || (i%3 == 2 && strings.ContainsRune(key, '\\'))
		switch {
		case invalid && !errors.Is(err, kvik.ErrInvalidKey):
			t.Errorf("key %q (way %d): %v, want ErrInvalidKey", key, i%3, err)
		case !invalid && err != nil:
			t.Errorf("key %q (way %d): %v", key, i%3, err)
		case !invalid:
			// A later key may replace an earlier one, or a directory
			// of the file system behind versitygw may block it.
			want[key] = string(val)
		}
	}
	all, err := kvik.NewRemotePrefix(srv.URLOf(""), srv.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	listed, err := all.List(bg, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, k := range listed {
		rest, ok := strings.CutPrefix(k, pre+"/")
		if !ok {
			t.Errorf("object outside the prefix: %q", k)
			continue
		}
		if _, ok := want[rest]; !ok {
			t.Errorf("object %q under no key written", rest)
		}
		got[rest] = true
	}
	for k, v := range want {
		if !got[k] {
			t.Errorf("key %q not listed", k)
			continue
		}
		if b, err := p.Get(bg, k, nil); err != nil || string(b) != v {
			t.Errorf("key %q holds %q, %v; want %q", k, b, err, v)
		}
	}
	for _, f := range bucketFiles(t, srv.Dir) {
		if !strings.HasPrefix(f, s3test.Bucket+"/"+pre+"/") {
			t.Errorf("file outside the prefix: %s", f)
		}
	}
}

func TestIsMetadataKey(t *testing.T) {
	for key, want := range map[string]bool{
		"zarr.json": true, ".zmetadata": true, "a/b/.zarray": true, "g/.zattrs": true, "g/.zgroup": true,
		"": false, "c/0/0": false, "a/zarr.json.bak": false, "x.zarray": false, "zarr.json/0": false, "a/zarr.jso": false,
	} {
		if got := IsMetadataKey(key); got != want {
			t.Errorf("IsMetadataKey(%q) = %v, want %v", key, got, want)
		}
	}
}
