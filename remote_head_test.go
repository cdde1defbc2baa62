package kvik_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// TestRemoteHeadServesReads: the GET that opens a URL brings the
// object's first MiB, and reads use it: a read inside it sends no
// request, a read that runs past it asks only for the rest, a read past
// it asks for itself; every byte matches the object. With the size
// given there is no opening GET and reads ask for all their bytes.
func TestRemoteHeadServesReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 71))
	obj := make([]byte, 5<<19+12345) // 2.5 MiB and some
	for i := range obj {
		obj[i] = byte(rng.Uint32())
	}
	var mu sync.Mutex
	var ranges []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ranges = append(ranges, r.Method+" "+r.Header.Get("Range"))
		mu.Unlock()
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(obj))
	}))
	defer srv.Close()
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := ranges
		ranges = nil
		return got
	}
	same := func(what string, got, want []string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: requests %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: requests %q, want %q", what, got, want)
			}
		}
	}
	ctx := context.Background()
	h, err := kvik.OpenHTTP(ctx, srv.URL+"/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	same("open", take(), []string{"GET bytes=0-1048575"})
	read := func(off int64, n int) {
		t.Helper()
		buf := make([]byte, n)
		if got, err := h.ReadAt(buf, off); err != nil || got != n || !bytes.Equal(buf, obj[off:off+int64(n)]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v, or other bytes", n, off, got, err)
		}
	}
	read(12345, 100000)
	same("read inside the first MiB", take(), nil)
	read(1<<20-1000, 5000)
	same("read across its end", take(), []string{"GET bytes=1048576-1052575"})
	read(2<<20, 1000)
	same("read past it", take(), []string{"GET bytes=2097152-2098151"})

	h2, err := kvik.OpenHTTP(ctx, srv.URL+"/obj", kvik.WithRemoteSize(int64(len(obj))))
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	buf := make([]byte, 100)
	if _, err := h2.ReadAt(buf, 7); err != nil || !bytes.Equal(buf, obj[7:107]) {
		t.Fatalf("size given: %v", err)
	}
	same("size given", take(), []string{"GET bytes=7-106"})
}
