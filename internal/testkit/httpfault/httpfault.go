// Package httpfault serves objects over HTTP with Range support for the
// tests of any package that reads remote files, counting the requests
// and letting a test make chosen ones misbehave. It is imported by tests
// only.
package httpfault

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault decides, for the n-th GET (from 1) of an object holding data,
// whether to misbehave instead of serving it; it returns false to serve
// normally.
type Fault func(n int32, w http.ResponseWriter, r *http.Request, data []byte) bool

// Server serves objects at their paths (others are 404) until the test
// ends.
type Server struct {
	*httptest.Server
	// Requests counts every request, GETs the GETs.
	Requests, GETs atomic.Int32

	mu      sync.Mutex
	objects map[string][]byte
	fault   Fault
}

// New starts a server for objects, keyed by path ("/dir/name"); fault
// (which may be nil) sees the GETs of objects that exist.
func New(t testing.TB, objects map[string][]byte, fault Fault) *Server {
	s := &Server{objects: objects, fault: fault}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// SetFault replaces the fault for the requests to come.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
	s.Requests.Store(0)
	s.GETs.Store(0)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	s.mu.Lock()
	data, ok := s.objects[r.URL.Path]
	fault := s.fault
	s.mu.Unlock()
	if r.Method == http.MethodGet {
		if n := s.GETs.Add(1); ok && fault != nil && fault(n, w, r, data) {
			return
		}
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(data))
}

// rangeOf parses the request's "bytes=first-last", with last clamped
// to the object's end (an open asks for more than a small object has).
func rangeOf(r *http.Request, size int) (first, last int64) {
	fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last)
	return first, min(last, int64(size)-1)
}

// Reset sends headers announcing the whole range and half its body,
// then resets the connection.
func Reset(w http.ResponseWriter, r *http.Request, data []byte) {
	first, last := rangeOf(r, len(data))
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	fmt.Fprintf(bw, "HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\nContent-Range: bytes %d-%d/%d\r\n\r\n", last-first+1, first, last, len(data))
	bw.Write(data[first : first+(last-first+1)/2])
	bw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // RST instead of FIN
	}
	conn.Close()
}

// Short answers with a Content-Range claiming the whole range and a body
// of half of it that ends cleanly (no Content-Length).
func Short(w http.ResponseWriter, r *http.Request, data []byte) {
	first, last := rangeOf(r, len(data))
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
	w.WriteHeader(http.StatusPartialContent)
	w.Write(data[first : first+(last-first)/2])
}

// Status answers every GET with code, from the first GET on the n-th up
// to but not including the until-th (0: for ever).
func Status(code int, from, until int32) Fault {
	return func(n int32, w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if n < from || (until > 0 && n >= until) {
			return false
		}
		http.Error(w, http.StatusText(code), code)
		return true
	}
}
