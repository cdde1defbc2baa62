package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestRemotePrefix reads, writes, lists and deletes objects under an S3
// prefix (versitygw) and reads the same objects under a plain HTTP
// prefix, which is read-only.
func TestRemotePrefix(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(30, 1))
	data := randomBytes(rng, 70_001)
	v.Put(t, "pre/fix/obj", data)
	// More keys than one ListObjectsV2 answer holds (1000), with names
	// that sort differently as strings and numbers.
	var want []string
	for i := range 1003 {
		k := fmt.Sprintf("pre/fix/many/%d", i)
		v.Put(t, k, []byte{byte(i)})
		want = append(want, k[len("pre/fix/"):])
	}
	v.Put(t, "pre/other", []byte("not under the prefix"))
	sort.Strings(want)
	p, err := kvik.NewRemotePrefix(v.URLOf("pre/fix"), v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.EndpointType() != kvik.RemoteS3 {
		t.Fatalf("endpoint %v", p.EndpointType())
	}
	checkPrefixReads(t, p, data)
	keys, err := p.List(ctx, "many/")
	if err != nil || !slices.Equal(keys, want) {
		t.Fatalf("list: %d keys (%v), want %d", len(keys), err, len(want))
	}
	if err := p.Save(ctx, "new/obj", []kvik.Piece{{Data: data[:5]}, {Data: data[5:99]}}); err != nil {
		t.Fatal(err)
	}
	if b, ok := v.Object("pre/fix/new/obj"); !ok || !bytes.Equal(b, data[:99]) {
		t.Fatalf("saved object: %v", ok)
	}
	for range 2 {
		if err := p.Delete(ctx, "new/obj"); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := v.Object("pre/fix/new/obj"); ok {
		t.Fatal("deleted object still there")
	}
	// The same objects through a plain HTTP server.
	web := httptest.NewServer(http.FileServer(http.Dir(v.Dir)))
	defer web.Close()
	h, err := kvik.NewRemotePrefix(web.URL + "/" + s3test.Bucket + "/pre/fix/")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.EndpointType() != kvik.RemoteHTTP {
		t.Fatalf("endpoint %v", h.EndpointType())
	}
	checkPrefixReads(t, h, data)
	if _, err := h.List(ctx, ""); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP list: %v", err)
	}
	if err := h.Save(ctx, "x", nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP save: %v", err)
	}
	if err := h.Delete(ctx, "obj"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("HTTP delete: %v", err)
	}
	for _, bad := range []string{"ftp://x/y", v.URL + "/b/k?X-Amz-Algorithm=a&X-Amz-Signature=s"} {
		if _, err := kvik.NewRemotePrefix(bad); !errors.Is(err, kvik.ErrUnsupportedURL) {
			t.Fatalf("%s: %v", bad, err)
		}
	}
}

// checkPrefixReads checks whole and ranged reads of p's object "obj"
// (data) and of a missing key.
func checkPrefixReads(t *testing.T, p *kvik.RemotePrefix, data []byte) {
	t.Helper()
	ctx := context.Background()
	got, err := p.Get(ctx, "obj", make([]byte, 0, len(data)+1))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v", err)
	}
	n := int64(len(data))
	for _, r := range [][2]int64{{0, 1}, {12345, 678}, {n - 3, 3}, {-16, 16}, {-20, 4}} {
		b := make([]byte, r[1])
		size, err := p.ReadRange(ctx, "obj", b, r[0])
		off := r[0]
		if off < 0 {
			off += n
		}
		if err != nil || size != n || !bytes.Equal(b, data[off:off+r[1]]) {
			t.Fatalf("range %v: size %d, %v", r, size, err)
		}
	}
	if size, err := p.ReadRange(ctx, "obj", make([]byte, 10), n-5); !errors.Is(err, io.ErrUnexpectedEOF) || size != n {
		t.Fatalf("range past the end: size %d, %v", size, err)
	}
	if _, err := p.ReadRange(ctx, "obj", make([]byte, 1), n+10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("range after the end: %v", err)
	}
	if _, err := p.Get(ctx, "missing", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	// Ranges within wider ones: the whole object (versitygw sends it from
	// its file), the bytes around those kept dropped.
	for _, r := range [][4]int64{{100, n - 150, 0, n}, {0, n - 1, 0, n}, {12345, 678, 12000, 13500}} {
		b := make([]byte, r[1])
		size, err := p.ReadRangeWithin(ctx, "obj", b, r[0], r[2], r[3])
		if err != nil || size != n || !bytes.Equal(b, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %d+%d within %d-%d: size %d, %v", r[0], r[1], r[2], r[3], size, err)
		}
	}
	if size, err := p.ReadRangeWithin(ctx, "obj", make([]byte, 10), 0, 0, n+5); !errors.Is(err, io.ErrUnexpectedEOF) || size != n {
		t.Fatalf("wider range past the end: size %d, %v", size, err)
	}
	if _, err := p.ReadRangeWithin(ctx, "missing", make([]byte, 10), 0, 0, 20); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing, wider range: %v", err)
	}
	// The same with the bytes reported as they come: the counts grow to
	// the bytes asked for, each prefix already the object's.
	for _, r := range [][4]int64{{100, n - 150, 0, n}, {12345, 678, 12345, 12345 + 678}} {
		b := make([]byte, r[1])
		last := 0
		size, err := p.ReadRangeFunc(ctx, "obj", b, r[0], r[2], r[3], func(got int) {
			if got <= last || got > len(b) || !bytes.Equal(b[:got], data[r[0]:r[0]+int64(got)]) {
				t.Errorf("range %d+%d: progress %d after %d, or its bytes not the object's", r[0], r[1], got, last)
			}
			last = got
		})
		if err != nil || size != n || last != len(b) || !bytes.Equal(b, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("range %d+%d within %d-%d, reported: size %d, %v, progress ended at %d", r[0], r[1], r[2], r[3], size, err, last)
		}
	}
}
