package kvik_test

// Remote requests in logs and errors: retries, failures and (verbose)
// every request are recorded with attributes; no password, signature,
// token or S3 key ever appears in an error or a record; the request cap
// holds across handles. These tests change the process's logger and
// settings: they must not run in parallel.

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestRemoteLogRetries reads through two 503s: each retry is recorded at
// WARN with method, URL, status and attempt, and every request at TRACE,
// or at DEBUG with RemoteVerbose.
func TestRemoteLogRetries(t *testing.T) {
	quickRetries(t, 10*time.Second)
	data := randomBytes(rand.New(rand.NewPCG(70, 71)), 10_000)
	for _, verbose := range []bool{false, true} {
		setDefaults(t, func(d *kvik.Defaults) { d.RemoteVerbose = verbose })
		srv, _ := faultServer(t, data, func(n int32, w http.ResponseWriter, r *http.Request) bool {
			if n <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return true
			}
			return false
		})
		c := captureLogs(t, kvik.LevelTrace)
		h := openFault(t, srv, len(data))
		got := make([]byte, 5000)
		if n, err := h.ReadAt(got, 17); n != len(got) || err != nil || !bytes.Equal(got, data[17:17+len(got)]) {
			t.Fatalf("ReadAt: %d, %v", n, err)
		}
		h.Close()
		if o := c.Find("kvik: open remote"); len(o) != 1 || o[0].Attrs["url"] != srv.URL+"/obj" || o[0].Attrs["endpoint"] != "HTTP" || o[0].Attrs["size"] != fmt.Sprint(len(data)) {
			t.Fatalf("open records:\n%s", c.Text())
		}
		retries := c.Find("kvik: http retry")
		if len(retries) != 2 {
			t.Fatalf("%d retry records:\n%s", len(retries), c.Text())
		}
		for i, r := range retries {
			a := r.Attrs
			if r.Level != kvik.LevelWarn || a["method"] != "GET" || a["url"] != srv.URL+"/obj" || a["status"] != "503" ||
				a["attempt"] != fmt.Sprint(i+1) || a["max_attempts"] != "3" || a["backoff"] == "" {
				t.Fatalf("retry record %d: %v %v", i, r.Level, a)
			}
		}
		reqs := c.Find("kvik: http request")
		want := kvik.LevelTrace
		if verbose {
			want = kvik.LevelDebug
		}
		var statuses []string
		for _, r := range reqs {
			if r.Level != want || r.Attrs["range"] != "bytes=17-5016" {
				t.Fatalf("verbose %v: request record %v %v", verbose, r.Level, r.Attrs)
			}
			statuses = append(statuses, r.Attrs["status"])
		}
		if strings.Join(statuses, ",") != "503,503,206" {
			t.Fatalf("verbose %v: request statuses %v", verbose, statuses)
		}
		srv.Close()
	}
}

// TestRemoteLogFailed: a request that fails for good is recorded once,
// with its last attempt.
func TestRemoteLogFailed(t *testing.T) {
	quickRetries(t, 10*time.Second)
	for _, code := range []int{http.StatusBadGateway, http.StatusNotFound} {
		srv, _ := faultServer(t, []byte("abc"), func(int32, http.ResponseWriter, *http.Request) bool { return false })
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", code) })
		c := captureLogs(t, kvik.LevelWarn)
		h := openFault(t, srv, 3)
		if _, err := h.ReadAt(make([]byte, 3), 0); err == nil {
			t.Fatalf("%d: no error", code)
		}
		h.Close()
		failed := c.Find("kvik: http request failed")
		attempt := "3"
		if code == http.StatusNotFound {
			attempt = "1" // not retried
		}
		if len(failed) != 1 || failed[0].Attrs["status"] != fmt.Sprint(code) || failed[0].Attrs["attempt"] != attempt || failed[0].Attrs["method"] != "GET" {
			t.Fatalf("%d: failure records:\n%s", code, c.Text())
		}
		srv.Close()
	}
}

// echoServer answers every request with status and a body that repeats
// the request line and every header: a worst case of a server that
// quotes what it was sent.
func echoServer(t *testing.T, status int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.URL.RequestURI())
		for k, vs := range r.Header {
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ","))
		}
		http.Error(w, b.String(), status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// noSecrets fails the test if any secret appears in the texts.
func noSecrets(t *testing.T, what string, secrets []string, texts ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, text := range texts {
			if strings.Contains(text, s) {
				t.Errorf("%s: secret %q in %q", what, s, text)
			}
		}
	}
}

// TestRemoteSecretsRedacted opens and reads URLs carrying a password, a
// token, a presigned signature and S3 keys, against servers that quote
// the request back, refuse it or are not there, and checks that none of
// them appears in an error or a log record.
func TestRemoteSecretsRedacted(t *testing.T) {
	quickRetries(t, 10*time.Second)
	secrets := []string{"PASSWORD", "SECRETTOKEN123456", "SIGSECRET0123456789", "AKIDPRESIGNED", "AKIDSIGNED",
		"SECRETKEYVALUE", "SESSIONTOKENVALUE", "dXNlcjpQQVNTV09SRA"} // the last: base64 of user:PASSWORD
	refused := echoServer(t, http.StatusForbidden)
	busy := echoServer(t, http.StatusServiceUnavailable)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	host := func(base string) string { return strings.TrimPrefix(base, "http://") }
	presign := "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDPRESIGNED%2F20260101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=SIGSECRET0123456789"
	s3opts := []kvik.RemoteOption{kvik.WithS3Credentials("AKIDSIGNED", "SECRETKEYVALUE", "SESSIONTOKENVALUE"), kvik.WithS3Region("us-east-1")}
	cases := []struct {
		name string
		url  string
		opts []kvik.RemoteOption
	}{
		{"password, refused", "http://user:PASSWORD@" + host(refused.URL) + "/obj", nil},
		{"password, retried", "http://user:PASSWORD@" + host(busy.URL) + "/obj?token=SECRETTOKEN123456", nil},
		{"password, no server", "http://user:PASSWORD@" + host(closed) + "/obj?token=SECRETTOKEN123456", nil},
		{"presigned, refused", refused.URL + "/bkt/obj" + presign, nil},
		{"presigned, retried", busy.URL + "/bkt/obj" + presign, nil},
		{"presigned, no server", closed + "/bkt/obj" + presign, nil},
		{"S3 keys, refused", "s3://bkt/obj", append(s3opts, kvik.WithS3Endpoint(refused.URL), kvik.WithEndpointType(kvik.RemoteS3))},
		{"S3 keys, retried", "s3://bkt/obj", append(s3opts, kvik.WithS3Endpoint(busy.URL), kvik.WithEndpointType(kvik.RemoteS3))},
	}
	for _, tc := range cases {
		c := captureLogs(t, kvik.LevelTrace)
		h, err := kvik.OpenRemote(context.Background(), tc.url, tc.opts...)
		if err == nil {
			h.Close()
			t.Fatalf("%s: opened", tc.name)
		}
		if len(c.Find("kvik: http request")) == 0 {
			t.Fatalf("%s: no request recorded", tc.name)
		}
		noSecrets(t, tc.name, secrets, err.Error(), c.Text())
		// Reads and uploads print the URL the same way.
		h, err = kvik.OpenRemote(context.Background(), tc.url, append(tc.opts, kvik.WithRemoteSize(100))...)
		if err != nil {
			t.Fatalf("%s: open with a size: %v", tc.name, err)
		}
		_, rerr := h.ReadAt(make([]byte, 10), 0)
		h.Close()
		uerr := kvik.UploadS3(context.Background(), tc.url, []byte("data"), tc.opts...)
		if rerr == nil {
			t.Fatalf("%s: read succeeded", tc.name)
		}
		noSecrets(t, tc.name, secrets, rerr.Error(), fmt.Sprint(uerr), h.Name(), c.Text())
	}
}

// TestRemoteLogSignedFallback opens an s3:// URL whose signed requests
// are refused: the fall back to public S3, as KvikIO's auto-detection
// does, is recorded, without the keys.
func TestRemoteLogSignedFallback(t *testing.T) {
	srv := echoServer(t, http.StatusForbidden)
	c := captureLogs(t, kvik.LevelInfo)
	_, err := kvik.OpenRemote(context.Background(), "s3://bkt/obj", kvik.WithS3Credentials("AKIDFALLBACK", "SECRETFALLBACK", ""),
		kvik.WithS3Region("us-east-1"), kvik.WithS3Endpoint(srv.URL))
	if err == nil {
		t.Fatal("opened")
	}
	f := c.Find("kvik: signed S3 failed, trying public S3")
	if len(f) != 1 || f[0].Attrs["url"] != "s3://bkt/obj" || !strings.Contains(f[0].Attrs["error"], "403") {
		t.Fatalf("fallback records:\n%s", c.Text())
	}
	noSecrets(t, "signed fallback", []string{"AKIDFALLBACK", "SECRETFALLBACK"}, err.Error(), c.Text())
}

// fakeS3 is a minimal S3 multipart server: it starts uploads, accepts
// parts except part failPart (refused with a body quoting the request's
// headers), and aborts; it counts the aborts.
func fakeS3(t *testing.T, failPart string) (*httptest.Server, *atomic.Int32) {
	var aborts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodPost && q.Has("uploads"):
			xml.NewEncoder(w).Encode(struct {
				XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
				UploadID string   `xml:"UploadId"`
			}{UploadID: "up-1"})
		case r.Method == http.MethodPut && q.Get("partNumber") == failPart:
			http.Error(w, "Authorization: "+r.Header.Get("Authorization")+" Token: "+r.Header.Get("X-Amz-Security-Token"), http.StatusBadRequest)
		case r.Method == http.MethodPut:
			w.Header().Set("ETag", `"e`+q.Get("partNumber")+`"`)
		case r.Method == http.MethodDelete:
			aborts.Add(1)
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodGet && q.Has("uploadId"):
			http.Error(w, "NoSuchUpload", http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &aborts
}

// TestRemoteLogUploadAbort uploads in parts to a server that refuses one:
// the start and the abort are recorded, with the cause, and neither they
// nor the error hold a key.
func TestRemoteLogUploadAbort(t *testing.T) {
	smallTasks(t, 5<<20)
	srv, aborts := fakeS3(t, "2")
	c := captureLogs(t, kvik.LevelInfo)
	opts := []kvik.RemoteOption{kvik.WithS3Credentials("AKIDUPLOAD", "SECRETKEYUPLOAD", "SESSIONTOKENUPLOAD"),
		kvik.WithS3Region("us-east-1"), kvik.WithS3Endpoint(srv.URL)}
	err := kvik.UploadS3(context.Background(), "s3://bkt/big.bin", make([]byte, 12<<20), opts...)
	if err == nil || aborts.Load() != 1 {
		t.Fatalf("upload with a refused part: %v, %d aborts", err, aborts.Load())
	}
	started, aborted := c.Find("kvik: multipart upload started"), c.Find("kvik: multipart upload aborted")
	if len(started) != 1 || started[0].Attrs["parts"] != "3" || started[0].Attrs["upload_id"] != "up-1" || started[0].Attrs["url"] != srv.URL+"/bkt/big.bin" {
		t.Fatalf("start records:\n%s", c.Text())
	}
	if len(aborted) != 1 || aborted[0].Level != kvik.LevelWarn || !strings.Contains(aborted[0].Attrs["error"], "HTTP 400") || aborted[0].Attrs["abort_error"] != "" {
		t.Fatalf("abort records:\n%s", c.Text())
	}
	noSecrets(t, "upload abort", []string{"AKIDUPLOAD", "SECRETKEYUPLOAD", "SESSIONTOKENUPLOAD"}, err.Error(), c.Text())
}

// TestRemoteLogUploadComplete uploads to versitygw in one PUT, then in
// parts: the PUT, the start and the completion are recorded.
func TestRemoteLogUploadComplete(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	c := captureLogs(t, kvik.LevelDebug)
	if err := kvik.UploadS3(context.Background(), v.URLOf("one.bin"), []byte("one PUT"), v.Opts()...); err != nil {
		t.Fatal(err)
	}
	if u := c.Find("kvik: upload"); len(u) != 1 || u[0].Attrs["size"] != "7" || u[0].Attrs["url"] != v.URL+"/bkt/one.bin" {
		t.Fatalf("single PUT records:\n%s", c.Text())
	}
	want := randomBytes(rand.New(rand.NewPCG(72, 73)), 11<<20)
	if err := kvik.UploadS3(context.Background(), v.URLOf("logged.bin"), want, v.Opts()...); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Object("logged.bin"); !bytes.Equal(got, want) {
		t.Fatal("object differs")
	}
	s, done := c.Find("kvik: multipart upload started"), c.Find("kvik: multipart upload completed")
	if len(s) != 1 || len(done) != 1 || done[0].Attrs["upload_id"] != s[0].Attrs["upload_id"] || done[0].Attrs["parts"] != "3" ||
		done[0].Attrs["size"] != fmt.Sprint(len(want)) {
		t.Fatalf("upload records:\n%s", c.Text())
	}
}

// inflightServer serves data, holding each request a moment, and keeps
// the most requests it ever had in flight at once.
func inflightServer(t *testing.T, data []byte) (*httptest.Server, func() int32) {
	var in, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := in.Add(1)
		defer in.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, func() int32 { p := peak.Load(); peak.Store(0); return p }
}

// readMany reads small ranges of the handles from 48 goroutines at once
// (each read is one request, made in its goroutine) and checks the bytes.
func readMany(t *testing.T, hs []*kvik.RemoteHandle, data []byte) {
	var wg sync.WaitGroup
	for g := range 48 {
		wg.Go(func() {
			h := hs[g%len(hs)]
			for i := range 4 {
				off := int64((g*4 + i) * 100)
				p := make([]byte, 300)
				if n, err := h.ReadAt(p, off); n != len(p) || err != nil || !bytes.Equal(p, data[off:off+300]) {
					t.Errorf("ReadAt(300 at %d): %d, %v", off, n, err)
				}
			}
		})
	}
	wg.Wait()
}

// TestRemoteMaxRequests caps the requests in flight over four handles
// (KVIKIO_REMOTE_IO_MAX_CONCURRENT_REQUESTS) and on one handle
// (WithMaxRequests), and checks the server never sees more at once;
// without a cap it does.
func TestRemoteMaxRequests(t *testing.T) {
	data := randomBytes(rand.New(rand.NewPCG(74, 75)), 100_000)
	srv, peak := inflightServer(t, data)
	open := func(opts ...kvik.RemoteOption) *kvik.RemoteHandle {
		h, err := kvik.OpenHTTP(context.Background(), srv.URL+"/obj", append(opts, kvik.WithRemoteSize(int64(len(data))))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	hs := []*kvik.RemoteHandle{open(), open(), open(), open()}
	peaks := map[string]int32{}
	for _, limit := range []int{0, 3} {
		setDefaults(t, func(d *kvik.Defaults) { d.RemoteMaxRequests = limit })
		readMany(t, hs, data)
		peaks[fmt.Sprint("process cap ", limit)] = peak()
	}
	setDefaults(t, func(d *kvik.Defaults) { d.RemoteMaxRequests = 0 })
	readMany(t, []*kvik.RemoteHandle{open(kvik.WithMaxRequests(2))}, data)
	peaks["handle cap 2"] = peak()
	if peaks["process cap 0"] <= 3 || peaks["process cap 3"] > 3 || peaks["process cap 3"] < 2 || peaks["handle cap 2"] > 2 {
		t.Fatalf("peak requests in flight: %v", peaks)
	}
	if _, err := kvik.OpenHTTP(context.Background(), srv.URL+"/obj", kvik.WithMaxRequests(-1)); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("WithMaxRequests(-1): %v", err)
	}
	if _, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.RemoteMaxRequests = -1 }); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("RemoteMaxRequests -1: %v", err)
	}
}

// TestRemoteWebHDFSUsername reads a WebHDFS file whose namenode wants
// user.name=alice: from WebHDFSUsername (KVIKIO_WEBHDFS_USERNAME) when the
// URL names no user, from the URL when both do, and not at all without.
func TestRemoteWebHDFSUsername(t *testing.T) {
	want := randomBytes(rand.New(rand.NewPCG(76, 77)), 5000)
	srv, _ := webhdfs(t, map[string][]byte{"/f.bin": want})
	base := srv.URL + "/webhdfs/v1/f.bin"
	for _, c := range []struct {
		url, user string
		ok        bool
	}{
		{base, "alice", true},
		{base + "?user.name=alice", "bob", true},
		{base, "", false},
		{base + "?user.name=bob", "alice", false},
	} {
		setDefaults(t, func(d *kvik.Defaults) { d.WebHDFSUsername = c.user })
		h, err := kvik.OpenWebHDFS(context.Background(), c.url)
		if (err == nil) != c.ok {
			t.Fatalf("%s with default user %q: %v", c.url, c.user, err)
		}
		if err != nil {
			continue
		}
		got := make([]byte, len(want))
		if n, err := h.ReadAt(got, 0); n != len(got) || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s with default user %q: read %d, %v", c.url, c.user, n, err)
		}
		h.Close()
	}
}
