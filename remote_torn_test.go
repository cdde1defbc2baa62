package kvik_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestPutRefusesStaleTornAttempt: a one-request upload whose first
// attempt was abandoned mid-body must not end up as the object when that
// attempt reaches the server after the retry that succeeded, cut short.
// versitygw stores such a body as it is (as some S3 servers do), so the
// object would be silently torn; kvik sends the body's CRC-32C
// (x-amz-checksum-crc32c), and the server refuses the cut body instead.
// A proxy fails the first attempt with 503, keeps it, and replays it,
// half its body and a closed connection, after the save returned.
func TestPutRefusesStaleTornAttempt(t *testing.T) {
	t.Cleanup(kvik.SetRemoteBackoff(time.Millisecond))
	s := s3test.Start(t)
	target, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var (
		mu    sync.Mutex
		first *http.Request
		body  []byte
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keep := r.Method == http.MethodPut && first == nil
		if keep {
			first = r.Clone(context.Background())
			body, _ = io.ReadAll(r.Body)
		}
		mu.Unlock()
		if keep {
			http.Error(w, "<Error><Code>SlowDown</Code></Error>", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	rng := rand.New(rand.NewPCG(40, 4))
	data := make([]byte, 300_000+rng.IntN(100_000))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	opts := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	if err := kvik.SaveFile(context.Background(), s.URLOf("obj"), []kvik.Piece{{Data: data}}, opts...); err != nil {
		t.Fatal(err)
	}
	if first == nil || !bytes.Equal(body, data) {
		t.Fatal("the proxy kept no first attempt")
	}
	want := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))))
	if got := first.Header.Get("X-Amz-Checksum-Crc32c"); got != want {
		t.Fatalf("x-amz-checksum-crc32c %q, want %q", got, want)
	}

	// The stale attempt, as the client signed it, reaches the server now
	// and breaks off halfway.
	conn, err := net.Dial("tcp", target.Host)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", first.URL.RequestURI(), first.Host, len(body))
	for k, vs := range first.Header {
		if k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			fmt.Fprintf(w, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprint(w, "\r\n")
	w.Write(body[:len(body)/2])
	w.Flush()
	time.Sleep(200 * time.Millisecond)
	conn.Close()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if got, _ := s.Object("obj"); !bytes.Equal(got, data) {
			t.Fatalf("the object is %d bytes of other content after a stale, cut attempt; want the %d bytes saved", len(got), len(data))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPutChecksumHeader: one-request uploads of host memory and of a
// file carry the body's CRC-32C; an empty object carries that of no
// bytes; parts of a multipart upload carry none.
func TestPutChecksumHeader(t *testing.T) {
	opts, got := checksumServer(t)
	rng := rand.New(rand.NewPCG(8, 80))
	data := make([]byte, 1+rng.IntN(200_000))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	ctx := context.Background()
	if err := kvik.SaveFile(ctx, "s3://bkt/mem", []kvik.Piece{{Data: data[:10]}, {Data: data[10:]}}, opts...); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := kvik.UploadFileS3(ctx, "s3://bkt/file", path, opts...); err != nil {
		t.Fatal(err)
	}
	if err := kvik.SaveFile(ctx, "s3://bkt/empty", nil, opts...); err != nil {
		t.Fatal(err)
	}
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = 5 << 20 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	big := make([]byte, 11<<20)
	if err := kvik.UploadS3(ctx, "s3://bkt/big", big, opts...); err != nil {
		t.Fatal(err)
	}
	checkChecksums(t, got, map[string]string{
		"PUT /bkt/mem ": crc32cHeader(data), "PUT /bkt/file ": crc32cHeader(data), "PUT /bkt/empty ": crc32cHeader(nil),
		"PUT /bkt/big 1": "", "PUT /bkt/big 3": "",
	})
}

// TestPutChecksumHeaderDevice: one-request uploads of device memory, alone
// or beside host pieces, carry the CRC-32C of their bytes too (they come
// to host memory first); parts of a multipart device upload do not.
func TestPutChecksumHeaderDevice(t *testing.T) {
	cctx := needGPU(t)
	opts, got := checksumServer(t)
	smallTasks(t, 5<<20)
	rng := rand.New(rand.NewPCG(8, 81))
	ctx := context.Background()
	data := randomBytes(rng, 1+rng.IntN(3<<20))
	head := randomBytes(rng, 1+rng.IntN(5000))
	off := rng.IntN(4096)
	d := devAlloc(t, cctx, off+len(data))
	toDevice(t, cctx, d.Ptr()+cuda.DevicePtr(off), data)
	if err := kvik.UploadS3Device(ctx, "s3://bkt/dev", d.Ptr(), len(data), int64(off), opts...); err != nil {
		t.Fatal(err)
	}
	mixed := []kvik.Piece{{Data: head}, {Ptr: d.Ptr() + cuda.DevicePtr(off), Size: int64(len(data))}}
	if err := kvik.SaveFile(ctx, "s3://bkt/mixed", mixed, opts...); err != nil {
		t.Fatal(err)
	}
	big := randomBytes(rng, 11<<20)
	bd := devAlloc(t, cctx, len(big))
	toDevice(t, cctx, bd.Ptr(), big)
	if err := kvik.UploadS3Device(ctx, "s3://bkt/devbig", bd.Ptr(), len(big), 0, opts...); err != nil {
		t.Fatal(err)
	}
	checkChecksums(t, got, map[string]string{
		"PUT /bkt/dev ": crc32cHeader(data), "PUT /bkt/mixed ": crc32cHeader(append(head, data...)),
		"PUT /bkt/devbig 1": "", "PUT /bkt/devbig 3": "",
	})
}

// checksumServer starts an S3 stand-in that takes PUTs and multipart
// uploads and records each request's x-amz-checksum-crc32c, by "method
// path partNumber"; it returns the options that point uploads at it.
func checksumServer(t *testing.T) ([]kvik.RemoteOption, func(key string) (string, bool)) {
	var mu sync.Mutex
	got := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		got[r.Method+" "+r.URL.Path+" "+r.URL.Query().Get("partNumber")] = r.Header.Get("X-Amz-Checksum-Crc32c")
		mu.Unlock()
		switch {
		case r.URL.Query().Has("uploads"):
			fmt.Fprint(w, "<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>")
		case r.URL.Query().Has("partNumber"):
			w.Header().Set("ETag", `"p"`)
		case r.Method == http.MethodPost && r.URL.Query().Has("uploadId"):
			fmt.Fprint(w, "<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>")
		}
	}))
	t.Cleanup(srv.Close)
	opts := []kvik.RemoteOption{kvik.WithS3Credentials("AKID", "secret", ""), kvik.WithS3Region("us-east-1"), kvik.WithS3Endpoint(srv.URL)}
	return opts, func(key string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		h, ok := got[key]
		return h, ok
	}
}

// crc32cHeader is the x-amz-checksum-crc32c value of b.
func crc32cHeader(b []byte) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))))
}

// checkChecksums compares the recorded checksum headers with want.
func checkChecksums(t *testing.T, got func(string) (string, bool), want map[string]string) {
	t.Helper()
	for key, w := range want {
		if h, ok := got(key); !ok || h != w {
			t.Errorf("%s: checksum %q (sent %v), want %q", key, h, ok, w)
		}
	}
}

// TestUploadFileChangedMidway: a file rewritten while its one-request
// upload is on the wire fails the upload (the server finds the body's
// CRC-32C wrong) instead of storing a mixture of the old and new bytes.
// A proxy rewrites the file's tail when the request arrives, long
// before the client reads that far.
func TestUploadFileChangedMidway(t *testing.T) {
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = 64 << 20; d.HTTPMaxAttempts = 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	s := s3test.Start(t)
	rng := rand.New(rand.NewPCG(9, 90))
	data := make([]byte, 40<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			once.Do(func() {
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err == nil {
					f.WriteAt(bytes.Repeat([]byte{0x5a}, 1<<20), int64(len(data))-1<<20)
					f.Close()
				}
			})
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	opts := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	err = kvik.UploadFileS3(context.Background(), s.URLOf("changed"), path, opts...)
	if err == nil {
		t.Fatal("an upload of a file rewritten midway succeeded")
	}
	if got, ok := s.Object("changed"); ok {
		t.Fatalf("a failed upload stored %d bytes", len(got))
	}
}

// TestUploadFileChangedMultipart: a file written to while its multipart
// upload is under way fails the upload with ErrFileChanged, the upload
// aborted and nothing stored, instead of completing with parts read
// before the write beside parts read after it (which no part's checksum
// could tell). The file is rewritten, at its size, when the first part
// reaches the server.
func TestUploadFileChangedMultipart(t *testing.T) {
	smallTasks(t, 5<<20)
	s := s3test.Start(t)
	rng := rand.New(rand.NewPCG(9, 91))
	data := randomBytes(rng, 3*(5<<20)+rng.IntN(1<<20))
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// A modification time well in the past, so the rewrite's differs
	// whatever the file system's timestamp granularity.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	opts := s.Opts()
	if err := kvik.UploadFileS3(context.Background(), s.URLOf("kept"), path, opts...); err != nil {
		t.Fatalf("upload of an unchanged file: %v", err)
	}
	if got, ok := s.Object("kept"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("unchanged file: stored %d bytes, want its %d", len(got), len(data))
	}
	target, _ := url.Parse(s.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Has("partNumber") {
			once.Do(func() {
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err == nil {
					f.WriteAt(randomBytes(rng, 4096), int64(rng.IntN(len(data)-4096)))
					f.Close()
				}
			})
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	opts = []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	err := kvik.UploadFileS3(context.Background(), s.URLOf("changed"), path, opts...)
	if !errors.Is(err, kvik.ErrFileChanged) {
		t.Fatalf("upload of a file rewritten midway: %v, want ErrFileChanged", err)
	}
	if got, ok := s.Object("changed"); ok {
		t.Fatalf("a failed upload stored %d bytes", len(got))
	}
	if u := s.Uploads(t); strings.Contains(u, "<Upload>") {
		t.Fatalf("the upload was not aborted: %s", u)
	}
}
