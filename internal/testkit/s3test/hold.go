package s3test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// Hold lets a test cancel an operation while one of its requests or
// reads is in flight: a Proxy or a HoldReader holds the ones its rule
// picks until the operation's context is done, and CancelWhenHeld
// cancels it once one is held.
type Hold struct {
	// Held is closed when the first request or read is held.
	Held chan struct{}
	once sync.Once
}

func newHold() *Hold { return &Hold{Held: make(chan struct{})} }

func (h *Hold) held() { h.once.Do(func() { close(h.Held) }) }

// Proxy is a loopback proxy in front of a Server that forwards every
// request except those its rule picks: it holds each of those unanswered
// until the client drops it.
type Proxy struct {
	URL string
	*Hold
}

// HoldProxy starts a Proxy in front of s that holds the requests hold
// picks (hold may be called from several goroutines at once); it stops
// when the test ends.
func (s *Server) HoldProxy(t testing.TB, hold func(*http.Request) bool) *Proxy {
	t.Helper()
	target, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	p := &Proxy{Hold: newHold()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hold(r) {
			p.held()
			io.Copy(io.Discard, r.Body) // an upload's part: fails once the client drops it
			<-r.Context().Done()
			return
		}
		forward(tr, target, w, r)
	}))
	t.Cleanup(func() { srv.Close(); tr.CloseIdleConnections() })
	p.URL = srv.URL
	return p
}

// RangeStart returns the first byte a ranged GET asks for, or -1 for a
// request without a Range.
func RangeStart(r *http.Request) int64 {
	var first int64
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &first); err != nil {
		return -1
	}
	return first
}

// HoldReader is a kvik.Reader (a local file, say) whose PRead and
// PReadDevice at offsets from From on wait until their context is done
// before they start: an operation reading it is held midway.
type HoldReader struct {
	kvik.Reader
	From int64
	*Hold
}

// NewHoldReader returns r holding its reads at offsets from from on.
func NewHoldReader(r kvik.Reader, from int64) *HoldReader {
	return &HoldReader{Reader: r, From: from, Hold: newHold()}
}

// PRead is r's PRead, held until ctx is done when off >= From.
func (r *HoldReader) PRead(ctx context.Context, p []byte, off int64) *kvik.Future {
	r.wait(ctx, off)
	return r.Reader.PRead(ctx, p, off)
}

// PReadDevice is r's PReadDevice, held until ctx is done when
// fileOffset >= From.
func (r *HoldReader) PReadDevice(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) *kvik.Future {
	r.wait(ctx, fileOffset)
	return r.Reader.PReadDevice(ctx, buf, size, fileOffset, devOffset)
}

func (r *HoldReader) wait(ctx context.Context, off int64) {
	if off >= r.From {
		r.held()
		<-ctx.Done()
	}
}

// Opts returns options that reach the server through the proxy with its
// credentials.
func (p *Proxy) Opts() []kvik.RemoteOption {
	return []kvik.RemoteOption{kvik.WithS3Credentials(Key, Secret, ""), kvik.WithS3Region(Region), kvik.WithS3Endpoint(p.URL)}
}

// CancelWhenHeld runs op with a context that it cancels once a request
// or read is held, and returns op's error. The test fails if op returns
// before any request is held (it was not cancelled midway) or goes on
// for more than 10 s after the cancel (it was not cancelled promptly).
func (h *Hold) CancelWhenHeld(t testing.TB, op func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	select {
	case <-h.Held:
	case err := <-done:
		t.Fatalf("returned before any request was held: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10 s after its context was cancelled")
		return nil
	}
}

// forward relays r to target, keeping the Host header the client signed.
func forward(tr http.RoundTripper, target *url.URL, w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
	out.Host = r.Host
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// Uploads returns the bucket's ListMultipartUploads document: the
// multipart uploads in progress.
func (s *Server) Uploads(t testing.TB) string {
	t.Helper()
	b := s.Signed(t, http.MethodGet, "?uploads=", nil)
	if !strings.Contains(string(b), "ListMultipartUploadsResult") {
		t.Fatalf("ListMultipartUploads: %s", b)
	}
	return string(b)
}

// Signed sends a request signed with the server's credentials to the
// bucket's path rest ("?uploads=", "/key"), taken literally, with body,
// and returns the answer's body; an answer other than 200 fails t. It
// reaches what kvik refuses to send, such as a key ending in "/".
func (s *Server) Signed(t testing.TB, method, rest string, body []byte) []byte {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+"/"+Bucket+rest, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: Key, SecretAccessKey: Secret},
		req, "UNSIGNED-PAYLOAD", "s3", Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, rest, resp.StatusCode, b)
	}
	return b
}
