package remote

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testClient is a client of srv with a quick retry policy.
func testClient(t *testing.T, srv *httptest.Server, typ Type, path string) (*Client, *Endpoint) {
	t.Helper()
	e, err := New(typ, srv.URL+path, S3Config{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", Region: "us-east-1", EndpointURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ClientOptions{HTTP: srv.Client(), Policy: Policy{MaxAttempts: 3, Timeout: time.Minute, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond,
		Retry: func(code int) bool { return code >= 500 }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, e
}

// allocDuring returns the bytes f allocates on the heap.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// endless streams random bytes, chunked, until the client goes away.
func endless(w http.ResponseWriter, r *http.Request) {
	buf := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	w.WriteHeader(http.StatusOK)
	for r.Context().Err() == nil {
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
}

// TestGetObjectClaimedLength: a server claiming a 1 TiB body (and sending
// a few bytes) gets ErrTooLarge at once, with no retry and without the
// memory it claims: the old readWholeBody allocated the Content-Length
// and the process died of it.
func TestGetObjectClaimedLength(t *testing.T) {
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		w.Header().Set("Content-Length", strconv.FormatInt(1<<40, 10))
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("not a terabyte"))
	}))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	var err error
	alloc := allocDuring(func() { _, err = c.GetObject(context.Background(), e, nil, 64<<20) })
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("GetObject of a claimed 1 TiB body: %v, want ErrTooLarge", err)
	}
	if requests != 1 {
		t.Errorf("%d requests, want 1 (ErrTooLarge is not retried)", requests)
	}
	if alloc > 4<<20 {
		t.Errorf("allocated %d bytes for a refused body", alloc)
	}
}

// TestGetObjectEndless: a body of unknown length that never ends fails
// with ErrTooLarge at the limit, its memory bounded by the limit, not by
// what the server sends.
func TestGetObjectEndless(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(endless))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	const limit = 3<<20 + 17
	var err error
	alloc := allocDuring(func() { _, err = c.GetObject(context.Background(), e, nil, limit) })
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("GetObject of an endless body: %v, want ErrTooLarge", err)
	}
	// Doubling from 32 KiB up to limit+1: under 2*limit, plus the
	// transport's buffers.
	if alloc > 2*limit+(4<<20) {
		t.Errorf("allocated %d bytes for a %d-byte limit", alloc, limit)
	}
}

// TestGetObjectDeadline: an endless body read under a large limit stops
// at the context's deadline, promptly (within twice the deadline).
func TestGetObjectDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(endless))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	const deadline = 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := c.GetObject(ctx, e, nil, 1<<40)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetObject past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if took > 2*deadline {
		t.Errorf("returned after %v, deadline %v", took, deadline)
	}
}

// TestGetObjectBounded: bodies up to the limit, of known and unknown
// length, come back whole; one byte over fails.
func TestGetObjectBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 200_001)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	chunked := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		}
		w.WriteHeader(http.StatusOK)
		for b := data; len(b) > 0; b = b[min(len(b), 7777):] {
			w.Write(b[:min(len(b), 7777)])
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	for _, chunked = range []bool{false, true} {
		for _, limit := range []int64{int64(len(data)), int64(len(data)) + 1 + rng.Int64N(1<<20)} {
			got, err := c.GetObject(context.Background(), e, make([]byte, rng.IntN(len(data)+10)), limit)
			if err != nil || string(got) != string(data) {
				t.Fatalf("chunked %v, limit %d: %d bytes, %v", chunked, limit, len(got), err)
			}
		}
		if _, err := c.GetObject(context.Background(), e, nil, int64(len(data))-1); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("chunked %v, limit one short: %v, want ErrTooLarge", chunked, err)
		}
	}
}

// TestListTooLarge: a ListObjectsV2 answer that never ends is
// ErrTooLarge, not an XML error about a cut document.
func TestListTooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(endless))
	defer srv.Close()
	c, e := testClient(t, srv, S3, "/bucket/prefix/k")
	if _, err := c.List(context.Background(), e, ""); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("List of an endless answer: %v, want ErrTooLarge", err)
	}
}

// TestReadRangeStallDeadline: a ranged body that stalls midway is
// abandoned at the context's deadline, promptly.
func TestReadRangeStallDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-999999/1000000")
		w.Header().Set("Content-Length", "1000000")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	c, e := testClient(t, srv, HTTP, "/obj")
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := c.ReadRange(ctx, e, make([]byte, 1000000), 0)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 2*deadline {
		t.Fatalf("ReadRange of a stalled body: %v after %v, want DeadlineExceeded within %v", err, took, 2*deadline)
	}
}

// listServer answers ListObjectsV2 with page(n), n counting from 0: the
// keys of answer n, and whether it is truncated. The continuation token
// of answer n is "tn", checked on the next request.
func listServer(t *testing.T, page func(n int) (keys []string, truncated bool)) (*httptest.Server, *atomic.Int64) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(requests.Add(1)) - 1
		if want := fmt.Sprintf("t%d", n-1); n > 0 && r.URL.Query().Get("continuation-token") != want {
			t.Errorf("request %d: continuation token %q, want %q", n, r.URL.Query().Get("continuation-token"), want)
		}
		keys, truncated := page(n)
		var b strings.Builder
		fmt.Fprintf(&b, "<ListBucketResult><IsTruncated>%v</IsTruncated>", truncated)
		if truncated {
			fmt.Fprintf(&b, "<NextContinuationToken>t%d</NextContinuationToken>", n)
		}
		for _, k := range keys {
			fmt.Fprintf(&b, "<Contents><Key>%s</Key></Contents>", k)
		}
		b.WriteString("</ListBucketResult>")
		w.Write([]byte(b.String()))
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// TestListPages follows continuation tokens over answers of random
// sizes (some empty), keeping the keys under the prefix in order.
func TestListPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	var want []string
	pages := make([][]string, 2+rng.IntN(8))
	for i := range pages {
		for range rng.IntN(5) {
			k := fmt.Sprintf("%03d-%d", len(want), rng.IntN(1000))
			want = append(want, k)
			pages[i] = append(pages[i], "prefix/k"+k)
			if rng.IntN(3) == 0 {
				pages[i] = append(pages[i], "other/"+k) // not under the prefix
			}
		}
	}
	srv, requests := listServer(t, func(n int) ([]string, bool) { return pages[n], n < len(pages)-1 })
	c, e := testClient(t, srv, S3, "/bucket/prefix/k")
	got, err := c.List(context.Background(), e, "")
	if err != nil || !slices.Equal(got, want) || requests.Load() != int64(len(pages)) {
		t.Fatalf("List: %q (%v) in %d requests; want %q in %d", got, err, requests.Load(), want, len(pages))
	}
}

// TestListEndless: a server that answers "truncated" with a fresh token
// forever, listing nothing or ever more keys, gets ErrTooLarge once the
// answers or the names kept pass their bounds (lowered here): the names'
// bound stops a listing of long names after a few answers, the answers'
// bound one that keeps little or nothing.
func TestListEndless(t *testing.T) {
	oldAnswers, oldBytes := listAnswersLimit, listKeyBytesLimit
	listAnswersLimit, listKeyBytesLimit = 40, 4<<20
	defer func() { listAnswersLimit, listKeyBytesLimit = oldAnswers, oldBytes }()
	long := strings.Repeat("x", 1000)
	cases := []struct {
		name    string
		page    func(n int) ([]string, bool)
		answers int64 // how many answers it takes
	}{
		{"empty answers", func(int) ([]string, bool) { return nil, true }, 40},
		{"foreign keys", func(n int) ([]string, bool) { return []string{fmt.Sprintf("elsewhere/%d", n)}, true }, 40},
		{"new keys", func(n int) ([]string, bool) { return []string{fmt.Sprintf("prefix/k%d", n)}, true }, 40},
		// 1000 names of 1 KB an answer: the fifth passes 4 MiB.
		{"long keys", func(n int) ([]string, bool) {
			return slices.Repeat([]string{fmt.Sprintf("prefix/k%d-%s", n, long)}, 1000), true
		}, 5},
		// Empty names still cost their string headers: 10000 an answer,
		// 160 KB, pass 4 MiB in the 27th.
		{"the prefix itself", func(n int) ([]string, bool) { return slices.Repeat([]string{"prefix/k"}, 10000), true }, 27},
	}
	for _, c := range cases {
		srv, requests := listServer(t, c.page)
		cl, e := testClient(t, srv, S3, "/bucket/prefix/k")
		keys, err := cl.List(context.Background(), e, "")
		if !errors.Is(err, ErrTooLarge) || keys != nil || requests.Load() != c.answers {
			t.Errorf("%s: %d keys, %v after %d answers; want ErrTooLarge after %d", c.name, len(keys), err, requests.Load(), c.answers)
		}
	}
}

// TestListFolderMarkers: zero-byte keys ending in "/" (folder markers,
// the prefix's own included) are left out of a listing; a key ending in
// "/" that holds bytes, or whose size the answer does not give, and a
// zero-byte key without the slash, are kept.
func TestListFolderMarkers(t *testing.T) {
	contents := []struct {
		key  string
		size string // "" for no <Size>
	}{
		{"z.zarr/", "0"}, {"z.zarr/a/", "0"}, {"z.zarr/a/c/0", "17"}, {"z.zarr/a/c/", "0"},
		{"z.zarr/empty", "0"}, {"z.zarr/full/", "3"}, {"z.zarr/nosize/", ""}, {"z.zarr/zarr.json", "120"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		b.WriteString("<ListBucketResult><IsTruncated>false</IsTruncated>")
		for _, c := range contents {
			fmt.Fprintf(&b, "<Contents><Key>%s</Key>", c.key)
			if c.size != "" {
				fmt.Fprintf(&b, "<Size>%s</Size>", c.size)
			}
			b.WriteString("</Contents>")
		}
		b.WriteString("</ListBucketResult>")
		w.Write([]byte(b.String()))
	}))
	defer srv.Close()
	c, e := testClient(t, srv, S3, "/bucket/z.zarr")
	got, err := c.List(context.Background(), e, "/")
	want := []string{"a/c/0", "empty", "full/", "nosize/", "zarr.json"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("List: %q, %v; want %q", got, err, want)
	}
}
