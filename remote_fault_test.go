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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
)

// faultServer serves data at /obj with Range support, letting fault
// decide, per GET number (from 1), to misbehave instead; fault returns
// false to serve normally. The count is of every request.
func faultServer(t *testing.T, data []byte, fault func(n int32, w http.ResponseWriter, r *http.Request) bool) (*httptest.Server, *atomic.Int32) {
	var f httpfault.Fault
	if fault != nil {
		f = func(n int32, w http.ResponseWriter, r *http.Request, _ []byte) bool { return fault(n, w, r) }
	}
	s := httpfault.New(t, map[string][]byte{"/obj": data}, f)
	return s.Server, &s.Requests
}

// quickRetries shortens backoff and timeout for fault tests.
func quickRetries(t *testing.T, timeout time.Duration) {
	t.Cleanup(kvik.SetRemoteBackoff(time.Millisecond))
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.HTTPTimeout = timeout })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}

// openFault opens srv's object with the size given, so that every
// request counted is a read.
func openFault(t *testing.T, srv *httptest.Server, size int) *kvik.RemoteHandle {
	h, err := kvik.OpenHTTP(context.Background(), srv.URL+"/obj", kvik.WithRemoteSize(int64(size)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRemoteRetriesStatus(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 10*time.Second)
	data := randomBytes(rand.New(rand.NewPCG(20, 1)), 100_000)
	for _, code := range []int{503, 429} {
		srv, count := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
			if n <= 2 {
				http.Error(w, "busy", code)
				return true
			}
			return false
		})
		h := openFault(t, srv, len(data))
		got := make([]byte, len(data)-17)
		if n, err := h.ReadAt(got, 17); err != nil || n != len(got) || !bytes.Equal(got, data[17:]) {
			t.Fatalf("%d twice then success: %d, %v", code, n, err)
		}
		if count.Load() != 3 {
			t.Fatalf("%d: %d requests, want 3", code, count.Load())
		}
		h.Close()
		srv.Close()
	}
}

func TestRemoteRetriesExhausted(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 10*time.Second)
	srv, count := faultServer(t, []byte("abc"), func(n int32, w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	})
	h := openFault(t, srv, 3)
	defer h.Close()
	_, err := h.ReadAt(make([]byte, 3), 0)
	var se *kvik.HTTPStatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadGateway {
		t.Fatalf("always 502: %v", err)
	}
	if d, _ := kvik.GetDefaults(); count.Load() != int32(d.HTTPMaxAttempts) {
		t.Fatalf("%d requests, want %d", count.Load(), d.HTTPMaxAttempts)
	}
}

func TestRemoteNoRetry(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 10*time.Second)
	for _, c := range []struct {
		code int
		is   error
	}{{404, fs.ErrNotExist}, {403, fs.ErrPermission}, {401, fs.ErrPermission}} {
		srv, count := faultServer(t, []byte("abcdef"), func(n int32, w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "no", c.code)
			return true
		})
		h := openFault(t, srv, 6)
		_, err := h.ReadAt(make([]byte, 6), 0)
		var se *kvik.HTTPStatusError
		var pe *fs.PathError
		if !errors.Is(err, c.is) || !errors.As(err, &se) || se.Code != c.code || !errors.As(err, &pe) {
			t.Fatalf("%d: %v", c.code, err)
		}
		if count.Load() != 1 {
			t.Fatalf("%d retried: %d requests", c.code, count.Load())
		}
		h.Close()
		srv.Close()
	}
	// Open reports the HEAD's status the same way.
	srv, _ := faultServer(t, nil, nil)
	srv.Config.Handler = http.NotFoundHandler()
	if _, err := kvik.OpenRemote(context.Background(), srv.URL+"/gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
	srv.Close()
}

func TestRemoteResetMidBody(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 10*time.Second)
	data := randomBytes(rand.New(rand.NewPCG(21, 1)), 300_000)
	eachBodyVariant(t, func(t *testing.T) {
		srv, count := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				httpfault.Reset(w, r, data)
				return true
			}
			return false
		})
		h := openFault(t, srv, len(data))
		defer h.Close()
		got := make([]byte, len(data)-5)
		if n, err := h.ReadAt(got, 5); err != nil || n != len(got) || !bytes.Equal(got, data[5:]) {
			t.Fatalf("reset then success: %d, %v", n, err)
		}
		if count.Load() != 2 {
			t.Fatalf("%d requests, want 2 (the second resuming)", count.Load())
		}
	})
}

// eachBodyVariant runs test as subtests, once with bodies read straight
// into the destination and once through small reused buffers
// (SetRemoteVariant), so that faults are checked on both paths.
func eachBodyVariant(t *testing.T, test func(t *testing.T)) {
	for _, v := range []string{"direct", "stage4k+rbuf64k+rcvbuf64k"} {
		t.Run(v, func(t *testing.T) {
			restore, err := kvik.SetRemoteVariant(v)
			t.Cleanup(restore)
			if err != nil {
				t.Fatal(err)
			}
			test(t)
		})
	}
}

func TestRemoteShortBody(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 10*time.Second)
	data := randomBytes(rand.New(rand.NewPCG(22, 1)), 50_000)
	eachBodyVariant(t, func(t *testing.T) {
		srv, _ := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
			// Content-Range claims the whole range; the body is shorter and
			// ends cleanly (no Content-Length).
			var first, last int64
			fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[first : first+(last-first)/2])
			return true
		})
		h := openFault(t, srv, len(data))
		defer h.Close()
		got := make([]byte, len(data))
		n, err := h.ReadAt(got, 0)
		if !errors.Is(err, kvik.ErrShortBody) || n == len(data) || !bytes.Equal(got[:n], data[:n]) {
			t.Fatalf("short body: %d, %v (bytes equal %v)", n, err, bytes.Equal(got[:n], data[:n]))
		}
		// Always cut by a reset: also a short body, never silent short data.
		srv2, _ := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
			httpfault.Reset(w, r, data)
			return true
		})
		h2 := openFault(t, srv2, len(data))
		defer h2.Close()
		if n, err := h2.ReadAt(make([]byte, len(data)), 0); !errors.Is(err, kvik.ErrShortBody) || n == len(data) {
			t.Fatalf("always reset: %d, %v", n, err)
		}
	})
}

func TestRemoteBadContentRange(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 10*time.Second)
	data := randomBytes(rand.New(rand.NewPCG(23, 1)), 10_000)
	for name, fault := range map[string]func(w http.ResponseWriter, r *http.Request){
		"shifted": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-99/%d", len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:100])
		},
		"missing": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[100:200])
		},
		"ignored range": func(w http.ResponseWriter, r *http.Request) {
			w.Write(data)
		},
	} {
		srv, count := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
			fault(w, r)
			return true
		})
		h := openFault(t, srv, len(data))
		n, err := h.ReadAt(make([]byte, 100), 100)
		if !errors.Is(err, kvik.ErrBadContentRange) || n != 0 || count.Load() != 1 {
			t.Fatalf("%s: %d, %v after %d requests", name, n, err, count.Load())
		}
		if hint := "docs/remote.md"; (name == "ignored range") != strings.Contains(err.Error(), hint) {
			t.Errorf("%s: error %q: the local-server hint (%s) belongs to an ignored Range only", name, err, hint)
		}
		h.Close()
		srv.Close()
	}
}

func TestRemoteTimeout(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 150*time.Millisecond)
	srv, count := faultServer(t, []byte("0123456789"), func(n int32, w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return true
	})
	h := openFault(t, srv, 10)
	defer h.Close()
	start := time.Now()
	_, err := h.ReadAt(make([]byte, 10), 0)
	if !errors.Is(err, kvik.ErrHTTPTimeout) || time.Since(start) > 4*time.Second {
		t.Fatalf("slow server: %v after %v", err, time.Since(start))
	}
	if d, _ := kvik.GetDefaults(); count.Load() != int32(d.HTTPMaxAttempts) {
		t.Fatalf("%d attempts, want %d", count.Load(), d.HTTPMaxAttempts)
	}
}

func TestRemoteCancelMidRead(t *testing.T) {
	noLeaks(t)
	quickRetries(t, 30*time.Second)
	smallTasks(t, 64<<10)
	data := randomBytes(rand.New(rand.NewPCG(24, 1)), 1<<20)
	arrived := make(chan struct{}, 64)
	srv, _ := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
		arrived <- struct{}{}
		// Send part of the body asked for, then stall until the client
		// gives up.
		var first, last int
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last)
		w.Header().Set("Content-Length", strconv.Itoa(last-first+1))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(data)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[first : first+1000])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return true
	})
	h := openFault(t, srv, len(data))
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	fut := h.PRead(ctx, make([]byte, len(data)), 0)
	<-arrived
	cancel()
	n, err := fut.Wait(contextWithTimeout(t, 5*time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %d, %v", n, err)
	}
}

// noLeaks checks, after every other cleanup (servers, handles), that the
// test left no goroutines behind: no connection or request still alive.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func contextWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var _ = io.EOF

// TestRemoteHostTaskSize reads an object into host memory with small
// tasks: by default a large read makes about two requests per worker, with
// "nowaves" one per TaskSize; both read the right bytes.
func TestRemoteHostTaskSize(t *testing.T) {
	data := randomBytes(rand.New(rand.NewPCG(31, 1)), 8<<20+777)
	restoreD, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize, d.NumThreads = 64<<10, 4 })
	if err != nil {
		t.Fatal(err)
	}
	defer restoreD()
	for _, c := range []struct {
		variant  string
		min, max int32
	}{{"default", 8, 9}, {"nowaves", 129, 129}} {
		restore, err := kvik.SetRemoteVariant(c.variant)
		if err != nil {
			t.Fatal(err)
		}
		srv, count := faultServer(t, data, nil)
		h := openFault(t, srv, len(data))
		got := make([]byte, len(data))
		if n, err := h.ReadAt(got, 0); n != len(data) || err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: read %d of %d bytes: %v", c.variant, n, len(data), err)
		}
		h.Close()
		restore()
		if n := count.Load(); n < c.min || n > c.max {
			t.Errorf("%s: %d requests for %d bytes on 4 workers, want %d-%d", c.variant, n, len(data), c.min, c.max)
		}
	}
}
