package zarr

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// condBucket is an S3 bucket in memory that honours conditional writes
// as S3 does, atomically: a PUT with If-Match succeeds only while the
// object has that ETag (412 otherwise, 404 for a missing one, as
// versitygw answers), with If-None-Match: * only while there is none. It
// counts the conditional writes and those refused. With noETag it names
// no version; with refuseAll it refuses every conditional write. A
// listing names every object, whatever prefix was asked for, and the
// keys of extraList besides; DELETEs are kept in deleted.
type condBucket struct {
	*httptest.Server
	mu                   sync.Mutex
	objects              map[string][]byte
	extraList, deleted   []string
	conditional, refused atomic.Int64
	noETag, refuseAll    atomic.Bool
}

func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

func newCondBucket(t *testing.T) *condBucket {
	t.Helper()
	c := &condBucket{objects: map[string][]byte{}}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *condBucket) serve(w http.ResponseWriter, r *http.Request) {
	key := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Has("list-type"):
		c.mu.Lock()
		defer c.mu.Unlock()
		var b strings.Builder
		b.WriteString("<ListBucketResult><IsTruncated>false</IsTruncated>")
		keys := slices.Clone(c.extraList)
		for k := range c.objects {
			keys = append(keys, strings.TrimPrefix(k, "/bkt/"))
		}
		for _, k := range keys {
			fmt.Fprintf(&b, "<Contents><Key>%s</Key><Size>1</Size></Contents>", html.EscapeString(k))
		}
		b.WriteString("</ListBucketResult>")
		w.Write([]byte(b.String()))
		return
	case r.Method == http.MethodDelete:
		c.mu.Lock()
		defer c.mu.Unlock()
		c.deleted = append(c.deleted, key)
		delete(c.objects, key)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c.mu.Lock()
		b, ok := c.objects[key]
		c.mu.Unlock()
		if !ok {
			http.Error(w, "<Error><Code>NoSuchKey</Code></Error>", http.StatusNotFound)
			return
		}
		if !c.noETag.Load() {
			w.Header().Set("ETag", etagOf(b))
		}
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(b)))
	case http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		old, exists := c.objects[key]
		match, none := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
		if match != "" || none != "" {
			c.conditional.Add(1)
		}
		switch {
		case match != "" && !exists:
			http.Error(w, "<Error><Code>NoSuchKey</Code></Error>", http.StatusNotFound)
			return
		case (match != "" || none != "") && c.refuseAll.Load(),
			match != "" && match != etagOf(old), none == "*" && exists:
			c.refused.Add(1)
			http.Error(w, "<Error><Code>PreconditionFailed</Code></Error>", http.StatusPreconditionFailed)
			return
		}
		c.objects[key] = body
		w.Header().Set("ETag", etagOf(body))
	default:
		http.Error(w, "<Error><Code>NotImplemented</Code></Error>", http.StatusNotImplemented)
	}
}

// s3Options opens the bucket served at endpoint as S3, with opts.
func s3Options(endpoint string, opts ...StoreOption) []StoreOption {
	return append(opts, WithRemoteOptions(kvik.WithEndpointType(kvik.RemoteS3Public), kvik.WithS3Endpoint(endpoint), kvik.WithS3Region("us-east-1")))
}

// TestConditionalWriteFailures: a RemoteStore opened WithProcessLocks
// writes a whole chunk without a condition, and part of one on the
// version it read; a server that names no version (no ETag) fails such a
// write with errors.ErrUnsupported and a chunk whose every conditional
// write is refused fails it with ErrObjectChanged after maxWriteTries,
// the chunk left as it was either way.
func TestConditionalWriteFailures(t *testing.T) {
	old := maxWriteTries
	maxWriteTries = 3
	t.Cleanup(func() { maxWriteTries = old })
	bkt := newCondBucket(t)
	s, err := OpenURL(bg, "s3://bkt/x.zarr", s3Options(bkt.URL, WithProcessLocks())...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := Metadata{Shape: []int{8, 8}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Int, Size: 4}}
	a, err := Create(bg, s, "", m)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 8))
	full := randValues(rng, m.DataType, 64)
	if err := a.WriteRegion(bg, []int{0, 0}, []int{8, 8}, full); err != nil {
		t.Fatal(err)
	}
	if n := bkt.conditional.Load(); n != 0 {
		t.Fatalf("%d conditional writes of whole chunks", n)
	}
	part := randValues(rng, m.DataType, 2)
	if err := a.WriteRegion(bg, []int{1, 1}, []int{2, 3}, part); err != nil {
		t.Fatal(err)
	}
	if n := bkt.conditional.Load(); n != 1 {
		t.Fatalf("%d conditional writes for part of a chunk, want 1", n)
	}
	snapshot := func() map[string]string {
		bkt.mu.Lock()
		defer bkt.mu.Unlock()
		out := map[string]string{}
		for k, v := range bkt.objects {
			out[k] = string(v)
		}
		return out
	}
	before := snapshot()
	bkt.noETag.Store(true)
	if err := a.WriteRegion(bg, []int{1, 1}, []int{2, 3}, part); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("part of a chunk, no ETag: %v, want ErrUnsupported", err)
	}
	bkt.noETag.Store(false)
	bkt.refuseAll.Store(true)
	refused := bkt.refused.Load()
	if err := a.WriteRegion(bg, []int{5, 1}, []int{6, 3}, part); !errors.Is(err, kvik.ErrObjectChanged) {
		t.Fatalf("part of a chunk, every condition refused: %v, want ErrObjectChanged", err)
	}
	if n := bkt.refused.Load() - refused; n != int64(maxWriteTries) {
		t.Fatalf("%d tries, want %d", n, maxWriteTries)
	}
	after := snapshot()
	if len(after) != len(before) {
		t.Fatalf("%d objects after the failed writes, %d before", len(after), len(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("%s changed by a failed write", k)
		}
	}
}
