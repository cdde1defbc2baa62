package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/npy"
)

// swapServer serves one object at /obj whose content is replaced, with
// the same size and a new ETag, once `after` GETs have been answered.
// honor says whether it answers If-Match (412) or ignores it.
type swapServer struct {
	mu       sync.Mutex
	versions [][]byte
	gets     int
	after    int
	honor    bool
	ifMatch  int // GETs that carried If-Match
}

func (s *swapServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v := 0
	if s.gets >= s.after {
		v = 1
	}
	if r.Method == http.MethodGet {
		s.gets++
		if r.Header.Get("If-Match") != "" {
			s.ifMatch++
		}
	}
	s.mu.Unlock()
	w.Header().Set("ETag", []string{`"version-a"`, `"version-b"`}[v])
	if !s.honor {
		r.Header.Del("If-Match")
	}
	// ServeContent answers Range and If-Match (412 on another ETag).
	http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(s.versions[v]))
}

// TestRemoteObjectChanged: an object replaced (same size, new ETag)
// during a parallel ranged read fails with ErrObjectChanged, whether the
// server answers If-Match with 412 or ignores it; before, the read
// returned bytes of both versions with a nil error.
func TestRemoteObjectChanged(t *testing.T) {
	smallTasks(t, 64<<10)
	rng := rand.New(rand.NewPCG(28, 6))
	const size = 2<<20 + 4093
	a, b := randomBytes(rng, size), randomBytes(rng, size)
	for _, honor := range []bool{true, false} {
		for _, withSize := range []bool{false, true} {
			srv := &swapServer{versions: [][]byte{a, b}, after: 3, honor: honor}
			ts := httptest.NewServer(srv)
			var opts []kvik.RemoteOption
			if withSize {
				opts = append(opts, kvik.WithRemoteSize(size)) // no HEAD: the first GET pins
			}
			h, err := kvik.OpenHTTP(context.Background(), ts.URL+"/obj", opts...)
			if err != nil {
				t.Fatal(err)
			}
			p := make([]byte, size)
			n, err := h.ReadAt(p, 0)
			if !errors.Is(err, kvik.ErrObjectChanged) {
				t.Errorf("honor If-Match %v, size given %v: ReadAt of a swapped object = %d, %v; want ErrObjectChanged", honor, withSize, n, err)
			}
			// With a HEAD first every GET carries the pinned ETag. With
			// the size given, the first GET's answer pins it, and GETs
			// sent before that answer arrives carry none (timing).
			srv.mu.Lock()
			carried := srv.ifMatch
			srv.mu.Unlock()
			if honor && !withSize && carried == 0 {
				t.Errorf("no GET carried If-Match")
			}
			h.Close()
			ts.Close()
		}
	}
}

// TestRemoteVersionCheckOff: with WithVersionCheck(false) a server whose
// replicas answer one unchanged object with different ETags (a
// load-balanced mirror) is read whole, without If-Match; with the check
// on (the default) the same server fails with ErrObjectChanged.
func TestRemoteVersionCheckOff(t *testing.T) {
	smallTasks(t, 64<<10)
	rng := rand.New(rand.NewPCG(28, 8))
	data := randomBytes(rng, 1<<20+4093)
	var reqs, ifMatch atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := reqs.Add(1)
		if r.Header.Get("If-Match") != "" {
			ifMatch.Add(1)
			r.Header.Del("If-Match") // this mirror's replicas do not share ETags
		}
		w.Header().Set("ETag", fmt.Sprintf(`"replica-%d"`, n%3))
		http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(data))
	}))
	defer ts.Close()
	for _, on := range []bool{true, false} {
		h, err := kvik.OpenHTTP(context.Background(), ts.URL+"/obj", kvik.WithVersionCheck(on))
		if err != nil {
			t.Fatal(err)
		}
		ifMatch.Store(0)
		p := make([]byte, len(data))
		n, err := h.ReadAt(p, 0)
		h.Close()
		if on {
			if !errors.Is(err, kvik.ErrObjectChanged) || ifMatch.Load() == 0 {
				t.Errorf("check on: ReadAt = %d, %v (%d If-Match); want ErrObjectChanged", n, err, ifMatch.Load())
			}
			continue
		}
		if err != nil || n != len(data) || !bytes.Equal(p, data) || ifMatch.Load() != 0 {
			t.Errorf("check off: ReadAt = %d, %v, equal %v, %d If-Match; want every byte, no If-Match", n, err, bytes.Equal(p, data), ifMatch.Load())
		}
	}
}

// TestRemoteObjectStable: reads of an object that does not change, with
// strong, weak or no ETags, all succeed and return its bytes.
func TestRemoteObjectStable(t *testing.T) {
	smallTasks(t, 64<<10)
	rng := rand.New(rand.NewPCG(28, 7))
	data := randomBytes(rng, 1<<20+77)
	for _, tag := range []string{`"strong"`, `W/"weak"`, ""} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tag != "" {
				w.Header().Set("ETag", tag)
			}
			http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(data))
		}))
		h, err := kvik.OpenHTTP(context.Background(), ts.URL+"/obj")
		if err != nil {
			t.Fatal(err)
		}
		checkReads(t, rng, h, data)
		h.Close()
		ts.Close()
	}
}

// TestRemoteGetMaxBounds: RemotePrefix.Get of an object whose server
// claims a 1 TiB Content-Length fails with ErrTooLarge (before: the
// process died allocating it), as does an endless chunked body, and the
// cap follows WithMaxDocumentSize.
func TestRemoteGetMaxBounds(t *testing.T) {
	doc := strings.Repeat("{}", 3000)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/p/huge":
			w.Header().Set("Content-Length", "1099511627776")
			w.WriteHeader(http.StatusOK)
			w.Write([]byte("{}"))
		case "/p/endless":
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte("[1,"), 10000)
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		default:
			w.Write([]byte(doc))
		}
	}))
	defer ts.Close()
	ctx := context.Background()
	p, err := kvik.NewRemotePrefix(ts.URL+"/p", kvik.WithEndpointType(kvik.RemoteHTTP))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, key := range []string{"huge", "endless"} {
		if _, err := p.Get(ctx, key, nil); !errors.Is(err, kvik.ErrTooLarge) {
			t.Errorf("Get(%s) = %v, want ErrTooLarge", key, err)
		}
	}
	if got, err := p.Get(ctx, "doc", nil); err != nil || string(got) != doc {
		t.Errorf("Get(doc) = %d bytes, %v", len(got), err)
	}
	if _, err := p.GetMax(ctx, "doc", nil, int64(len(doc)-1)); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("GetMax one byte short = %v, want ErrTooLarge", err)
	}
	small, err := kvik.NewRemotePrefix(ts.URL+"/p", kvik.WithEndpointType(kvik.RemoteHTTP), kvik.WithMaxDocumentSize(100))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if _, err := small.Get(ctx, "doc", nil); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("Get over WithMaxDocumentSize(100) = %v, want ErrTooLarge", err)
	}
}

// TestRemoteFormatOneVersion: a format load from a URL takes its header
// and its data from one version: an npy file replaced (same size, new
// ETag) between the header's GET and the data's fails with
// ErrObjectChanged. (The file is larger than the first bytes that the
// opening GET brings, so the data takes requests of its own.)
func TestRemoteFormatOneVersion(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 8))
	hdr := npyHeader("<u2", "(700000,)")
	a := append(append([]byte{}, hdr...), randomBytes(rng, 1400000)...)
	b := append(append([]byte{}, hdr...), randomBytes(rng, 1400000)...)
	srv := &swapServer{versions: [][]byte{a, b}, after: 1, honor: true}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	h, err := kvik.OpenHTTP(context.Background(), ts.URL+"/obj")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := npy.LoadHostReader(context.Background(), h, nil); !errors.Is(err, kvik.ErrObjectChanged) {
		t.Fatalf("npy load of a file replaced after its header: %v, want ErrObjectChanged", err)
	}
}
