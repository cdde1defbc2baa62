package kvik_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// s3Recorder is a hostile-enough S3 on loopback: it stores what is PUT
// under the raw request path, answers GET, HEAD and DELETE from that,
// speaks just enough multipart, and records every request as "METHOD
// raw-path" (the path exactly as sent, escapes and all) with its
// headers.
type s3Recorder struct {
	mu      sync.Mutex
	reqs    []string
	headers []http.Header
	objects map[string][]byte
	parts   map[string][]byte
	// inFlight and peak count requests being served at once; hold, when
	// set, keeps each request until another arrives or it times out, so
	// that requests that may overlap do.
	inFlight, peak atomic.Int32
	hold           chan struct{}
}

func newS3Recorder(t *testing.T) (*s3Recorder, *httptest.Server) {
	r := &s3Recorder{objects: map[string][]byte{}, parts: map[string][]byte{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (s *s3Recorder) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func (s *s3Recorder) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs, s.headers = nil, nil
}

func (s *s3Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	if s.hold != nil {
		select {
		case s.hold <- struct{}{}:
		case <-s.hold:
		case <-time.After(200 * time.Millisecond):
		}
	}
	raw, _, _ := strings.Cut(r.RequestURI, "?")
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r.Method+" "+raw)
	s.headers = append(s.headers, r.Header.Clone())
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPost && q.Has("uploads"):
		fmt.Fprintf(w, "<InitiateMultipartUploadResult><UploadId>up1</UploadId></InitiateMultipartUploadResult>")
	case r.Method == http.MethodPut && q.Has("partNumber"):
		s.parts[raw+"#"+q.Get("partNumber")] = body
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	case r.Method == http.MethodPost && q.Has("uploadId"):
		var all []byte
		for i := 1; ; i++ {
			p, ok := s.parts[raw+"#"+strconv.Itoa(i)]
			if !ok {
				break
			}
			all = append(all, p...)
		}
		s.objects[raw] = all
		fmt.Fprintf(w, "<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>")
	case r.Method == http.MethodDelete && q.Has("uploadId"):
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && q.Has("uploadId"):
		http.Error(w, "NoSuchUpload", http.StatusNotFound)
	case r.Method == http.MethodPut:
		s.objects[raw] = body
		w.Header().Set("ETag", `"e"`)
	case r.Method == http.MethodDelete:
		delete(s.objects, raw)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet, r.Method == http.MethodHead:
		b, ok := s.objects[raw]
		if !ok {
			http.Error(w, "NoSuchKey", http.StatusNotFound)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, strings.NewReader(string(b)))
	default:
		http.Error(w, "unexpected", http.StatusBadRequest)
	}
}

func recorderOpts(srv *httptest.Server, token string) []kvik.RemoteOption {
	return []kvik.RemoteOption{kvik.WithS3Credentials("AKIDTESTKEY", "TESTSECRETKEY", token),
		kvik.WithS3Region("us-east-1"), kvik.WithS3Endpoint(srv.URL)}
}

// TestKeysEscapedOnce checks the path of every request made for keys
// with escapes in them: each key byte escaped exactly once, nothing
// decoded twice or path-cleaned, so no key leaves its prefix (issue 28,
// finding 1). The old code sent PUT /scratch/user2/notes.txt, PUT and
// DELETE to the bucket root, and a%20b.bin as "a b.bin".
func TestKeysEscapedOnce(t *testing.T) {
	ctx := context.Background()
	rec, srv := newS3Recorder(t)
	opts := recorderOpts(srv, "")
	data := []byte("payload")
	check := func(what string, err error, want ...string) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		if got := rec.requests(); !slices.Equal(got, want) {
			t.Errorf("%s: requests %q, want %q", what, got, want)
		}
		rec.reset()
	}
	save := func(url string) error { return kvik.SaveFile(ctx, url, []kvik.Piece{{Data: data}}, opts...) }

	check("SaveFile 50%25off", save("s3://bkt/reports/50%25off.bin"), "PUT /bkt/reports/50%25off.bin")
	check("SaveFile a%2520b", save("s3://bkt/dir/a%2520b.bin"), "PUT /bkt/dir/a%2520b.bin")
	h, err := kvik.OpenRemote(ctx, "s3://bkt/dir/a%2520b.bin", opts...)
	if err == nil {
		buf := make([]byte, len(data))
		_, err = h.ReadAt(buf, 0)
		if string(buf) != string(data) {
			t.Errorf("read back %q", buf)
		}
		h.Close()
	}
	// The GET that opens the handle brings the first bytes: the read
	// needs no request of its own.
	check("OpenRemote a%2520b", err, "GET /bkt/dir/a%2520b.bin")
	// OpenS3 takes the key itself.
	if h, err = kvik.OpenS3(ctx, "bkt", "dir/a%20b.bin", opts...); err == nil {
		h.Close()
	}
	check("OpenS3 literal key", err, "GET /bkt/dir/a%2520b.bin")
	check("SaveFile unicode, space, plus", save("s3://bkt/k/%C3%A9 +x"), "PUT /bkt/k/%C3%A9%20%2Bx")

	p, err := kvik.NewRemotePrefix("s3://bkt/scratch/user1", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	check("Save escapes", p.Save(ctx, "a%2f..%2f..%2fuser2%2fnotes.txt", []kvik.Piece{{Data: data}}),
		"PUT /bkt/scratch/user1/a%252f..%252f..%252fuser2%252fnotes.txt")
	check("Delete tmp%zz", p.Delete(ctx, "tmp%zz"), "DELETE /bkt/scratch/user1/tmp%25zz")
	check("Save 50%25", p.Save(ctx, "50%25/zarr.json", []kvik.Piece{{Data: data}}), "PUT /bkt/scratch/user1/50%2525/zarr.json")
	b, err := p.Get(ctx, "50%25/zarr.json", nil)
	if string(b) != string(data) {
		t.Errorf("Get 50%%25: %q", b)
	}
	check("Get 50%25", err, "GET /bkt/scratch/user1/50%2525/zarr.json")
	if u := p.URL("50%25/a b"); u != "s3://bkt/scratch/user1/50%2525/a%20b" {
		t.Errorf("URL = %q", u)
	}

	// A prefix URL is decoded once, as an object URL is.
	q, err := kvik.NewRemotePrefix("s3://bkt/we%20ird%2525/", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	check("prefix decoded once", q.Save(ctx, "k", []kvik.Piece{{Data: data}}), "PUT /bkt/we%20ird%2525/k")

	// Plain HTTP: the URL as given, never decoded twice; prefix keys
	// escaped once.
	rec.objects["/files/a%2520b.bin"] = data
	hh, err := kvik.OpenHTTP(ctx, srv.URL+"/files/a%2520b.bin")
	if err == nil {
		hh.Close()
	}
	check("OpenHTTP a%2520b", err, "GET /files/a%2520b.bin")
	hp, err := kvik.NewRemotePrefix(srv.URL+"/files", kvik.WithEndpointType(kvik.RemoteHTTP))
	if err != nil {
		t.Fatal(err)
	}
	defer hp.Close()
	_, err = hp.Get(ctx, "a%20b.bin", nil)
	check("HTTP prefix Get", err, "GET /files/a%2520b.bin")
}

// TestInvalidKeysRefused checks that keys with empty, "." or ".."
// segments, malformed escapes in s3:// URLs and keys naming a bucket's
// root fail with ErrInvalidKey before any request.
func TestInvalidKeysRefused(t *testing.T) {
	ctx := context.Background()
	rec, srv := newS3Recorder(t)
	opts := recorderOpts(srv, "")
	piece := []kvik.Piece{{Data: []byte("x")}}
	for _, url := range []string{"s3://bkt/tmp%zz", "s3://bkt/50%off.bin", "s3://bkt/a/../b", "s3://bkt/a/./b",
		"s3://bkt/a//b", "s3://bkt/dir/", "s3://bkt/%2e%2e/other-bucket/x", "s3://bkt/a/%2E%2E", "s3://bkt//x",
		srv.URL + "/bkt/a/../b"} {
		err := kvik.SaveFile(ctx, url, piece, append(opts, kvik.WithEndpointType(kvik.RemoteS3))...)
		if !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("SaveFile(%q) = %v, want ErrInvalidKey", url, err)
		}
		if !strings.HasPrefix(url, "s3://") {
			continue // as a plain HTTP URL it is sent as given
		}
		if _, err := kvik.OpenRemote(ctx, url, opts...); !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("OpenRemote(%q) = %v, want ErrInvalidKey", url, err)
		}
	}
	p, err := kvik.NewRemotePrefix("s3://bkt/pre", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, key := range []string{"", ".", "..", "../x", "a/../../b", "a//b", "/abs", "dir/", "./a", "a/.", "x\x00y"} {
		if err := p.Save(ctx, key, piece); !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("Save(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := p.Delete(ctx, key); !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := p.Get(ctx, key, nil); !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := p.ReadRange(ctx, key, make([]byte, 1), 0); !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("ReadRange(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, bad := range []string{"s3://bkt/a/../b/", "s3://bkt/a//b/"} {
		if _, err := kvik.NewRemotePrefix(bad, opts...); !errors.Is(err, kvik.ErrInvalidKey) {
			t.Errorf("NewRemotePrefix(%q) = %v, want ErrInvalidKey", bad, err)
		}
	}
	if got := rec.requests(); len(got) != 0 {
		t.Errorf("requests sent for refused keys: %q", got)
	}
}

// TestUploadHonoursMaxRequests checks that a multipart upload keeps to
// WithMaxRequests, and a RemotePrefix to the process-wide cap (issue 28,
// finding 7: only RemoteHandle applied them).
func TestUploadHonoursMaxRequests(t *testing.T) {
	ctx := context.Background()
	rec, srv := newS3Recorder(t)
	rec.hold = make(chan struct{})
	d, _ := kvik.GetDefaults()
	d.NumThreads = 4
	restore, err := kvik.SetDefaults(d)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	data := make([]byte, 3*(5<<20)+17)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	if err := kvik.UploadS3(ctx, "s3://bkt/big", data, append(recorderOpts(srv, ""), kvik.WithMaxRequests(1))...); err != nil {
		t.Fatal(err)
	}
	if got := rec.objects["/bkt/big"]; string(got) != string(data) {
		t.Fatalf("uploaded %d bytes, want %d", len(got), len(data))
	}
	if p := rec.peak.Load(); p != 1 {
		t.Errorf("upload with WithMaxRequests(1): %d requests at once", p)
	}

	rec.peak.Store(0)
	d.RemoteMaxRequests = 1
	restore2, err := kvik.SetDefaults(d)
	if err != nil {
		t.Fatal(err)
	}
	defer restore2()
	p, err := kvik.NewRemotePrefix("s3://bkt/", recorderOpts(srv, "")...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := p.Get(ctx, "big", nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if p := rec.peak.Load(); p != 1 {
		t.Errorf("prefix under RemoteMaxRequests 1: %d requests at once", p)
	}
}

// redirectTo answers every request with a 307 to target's origin, same
// path.
func redirectTo(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	})
}

// sink is a server that records the headers of what reaches it and
// answers with a small object.
type sink struct {
	mu   sync.Mutex
	hdrs []http.Header
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hdrs = append(s.hdrs, r.Header.Clone())
	s.mu.Unlock()
	http.ServeContent(w, r, "", time.Time{}, strings.NewReader("0123456789"))
}

func (s *sink) seen() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hdrs)
}

// TestRedirectKeepsCredentials checks that signed requests do not follow
// a redirect to another port or host, and nothing follows https -> http
// (issue 28, finding 3): the old code sent X-Amz-Security-Token and
// Authorization to the other server.
func TestRedirectKeepsCredentials(t *testing.T) {
	ctx := context.Background()
	other := &sink{}
	otherSrv := httptest.NewServer(other)
	defer otherSrv.Close()
	// The same host (127.0.0.1) on another port, and another host name
	// for the same server.
	for _, target := range []string{otherSrv.URL, strings.Replace(otherSrv.URL, "127.0.0.1", "localhost", 1)} {
		front := httptest.NewServer(redirectTo(target))
		_, err := kvik.OpenRemote(ctx, "s3://bkt/obj", recorderOpts(front, "SESSIONTOKEN123")...)
		front.Close()
		var re *kvik.RedirectError
		if !errors.Is(err, kvik.ErrRedirect) || !errors.As(err, &re) || !strings.HasPrefix(re.To, target) {
			t.Errorf("signed S3 redirected to %s: %v, want a RedirectError", target, err)
		}
	}
	// A password in the URL is a credential too.
	front := httptest.NewServer(redirectTo(otherSrv.URL))
	defer front.Close()
	withPass := strings.Replace(front.URL, "http://", "http://user:hunter2pass@", 1) + "/f"
	if _, err := kvik.OpenHTTP(ctx, withPass); !errors.Is(err, kvik.ErrRedirect) {
		t.Errorf("userinfo redirected: %v", err)
	} else if strings.Contains(err.Error(), "hunter2pass") {
		t.Errorf("password in the error: %v", err)
	}
	for _, h := range other.seen() {
		t.Errorf("the other server got a request with Authorization %q, X-Amz-Security-Token %q",
			h.Get("Authorization"), h.Get("X-Amz-Security-Token"))
	}

	// Without credentials a redirect to another origin is followed
	// (WebHDFS's datanodes, CDNs).
	h, err := kvik.OpenHTTP(ctx, front.URL+"/f")
	if err != nil {
		t.Fatalf("unsigned redirect: %v", err)
	}
	h.Close()
	if n := len(other.seen()); n != 1 {
		t.Errorf("unsigned redirect reached the target %d times", n)
	}

	// https -> http: never, signed or not, with kvik's client or the
	// caller's.
	plain := &sink{}
	plainSrv := httptest.NewServer(plain)
	defer plainSrv.Close()
	tlsFront := httptest.NewTLSServer(redirectTo(plainSrv.URL))
	defer tlsFront.Close()
	caller := tlsFront.Client()
	cfg := caller.Transport.(*http.Transport).TLSClientConfig
	if _, err := kvik.OpenHTTP(ctx, tlsFront.URL+"/f", kvik.WithTLSConfig(cfg)); !errors.Is(err, kvik.ErrRedirect) {
		t.Errorf("https -> http followed: %v", err)
	}
	if _, err := kvik.OpenHTTP(ctx, tlsFront.URL+"/f", kvik.WithHTTPClient(caller)); !errors.Is(err, kvik.ErrRedirect) {
		t.Errorf("https -> http followed with the caller's client: %v", err)
	}
	if caller.CheckRedirect != nil {
		t.Error("the caller's http.Client was changed")
	}
	if n := len(plain.seen()); n != 0 {
		t.Errorf("the http server got %d requests after an https redirect", n)
	}
}

// TestUnsignedFallbackOnlyOnRefusal checks that a signed s3:// endpoint
// falls back to public S3 after a 401 or 403 only: a stalled or failing
// one does not run its retries a second time unsigned (issue 28,
// finding 7).
func TestUnsignedFallbackOnlyOnRefusal(t *testing.T) {
	t.Cleanup(kvik.SetRemoteBackoff(time.Millisecond))
	d, _ := kvik.GetDefaults()
	d.HTTPMaxAttempts, d.HTTPTimeout = 2, 200*time.Millisecond
	restore, err := kvik.SetDefaults(d)
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		handler   func(w http.ResponseWriter, r *http.Request)
		wantReqs  int
		fallsBack bool
	}{
		{"stall", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, 2, false},
		{"503", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "slow down", http.StatusServiceUnavailable)
		}, 2, false},
		{"403 then public", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				http.Error(w, "AccessDenied", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Length", "10")
			w.Write([]byte("0123456789")) // the opening GET's answer, the whole object
		}, 2, true},
	} {
		var signed, unsigned atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				signed.Add(1)
			} else {
				unsigned.Add(1)
			}
			c.handler(w, r)
		}))
		h, err := kvik.OpenRemote(ctx, "s3://bkt/obj", recorderOpts(srv, "")...)
		if c.fallsBack {
			if err != nil || h.EndpointType() != kvik.RemoteS3Public {
				t.Errorf("%s: %v, want a public S3 handle", c.name, err)
			} else {
				h.Close()
			}
		} else if err == nil {
			h.Close()
			t.Errorf("%s: opened", c.name)
		}
		if n := signed.Load() + unsigned.Load(); int(n) != c.wantReqs || (unsigned.Load() > 0) != c.fallsBack {
			t.Errorf("%s: %d signed and %d unsigned requests, want %d in all, unsigned only if falling back",
				c.name, signed.Load(), unsigned.Load(), c.wantReqs)
		}
		srv.CloseClientConnections()
		srv.Close()
	}
}
