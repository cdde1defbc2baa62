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
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// checkReads compares random ranges of h, unaligned and past the end,
// with want, through ReadAt and PRead.
func checkReads(t *testing.T, rng *rand.Rand, h *kvik.RemoteHandle, want []byte) {
	t.Helper()
	if size, err := h.Size(); err != nil || size != int64(len(want)) {
		t.Fatalf("Size = %d, %v, want %d", size, err, len(want))
	}
	all := make([]byte, len(want))
	if n, err := h.ReadAt(all, 0); n != len(want) || (err != nil && err != io.EOF) || !bytes.Equal(all, want) {
		t.Fatalf("whole ReadAt: %d, %v, equal %v", n, err, bytes.Equal(all, want))
	}
	for range 12 {
		off := rng.Int64N(int64(len(want)) + 10)
		n := rng.IntN(len(want)/2 + 10)
		p := make([]byte, n)
		var got int
		var err error
		if rng.IntN(2) == 0 {
			got, err = h.ReadAt(p, off)
		} else {
			got, err = h.PRead(context.Background(), p, off).Get()
		}
		start := min(off, int64(len(want)))
		wantN := min(n, len(want)-int(start))
		if got != wantN || !bytes.Equal(p[:got], want[start:start+int64(wantN)]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d bytes", n, off, got, err, wantN)
		}
		if (wantN < n) != (err == io.EOF) || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt(%d bytes at %d of %d): error %v", n, off, len(want), err)
		}
	}
}

func TestRemoteS3Read(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 256<<10)
	rng := rand.New(rand.NewPCG(10, 1))
	ctx := context.Background()
	for _, size := range []int{1, 4097, 1<<20 + 13, 3<<20 + rng.IntN(1<<20)} {
		want := randomBytes(rng, size)
		key := fmt.Sprintf("read/obj-%d.bin", size)
		u := v.Put(t, key, want)
		for _, open := range []func() (*kvik.RemoteHandle, error){
			func() (*kvik.RemoteHandle, error) { return kvik.OpenRemote(ctx, u, v.Opts()...) },
			func() (*kvik.RemoteHandle, error) { return kvik.OpenS3(ctx, s3test.Bucket, key, v.Opts()...) },
			func() (*kvik.RemoteHandle, error) {
				return kvik.OpenS3URL(ctx, v.URL+"/"+s3test.Bucket+"/"+key, v.Opts()...)
			},
		} {
			h, err := open()
			if err != nil {
				t.Fatal(err)
			}
			if h.EndpointType() != kvik.RemoteS3 {
				t.Fatalf("endpoint %v, want S3", h.EndpointType())
			}
			checkReads(t, rng, h, want)
			h.Close()
		}
	}
}

func TestRemoteS3FromEnv(t *testing.T) {
	v := s3test.Start(t)
	want := randomBytes(rand.New(rand.NewPCG(2, 2)), 100_003)
	u := v.Put(t, "env/a b+c.bin", want) // needs escaping in the signed path
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.Key)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.Secret)
	t.Setenv("AWS_DEFAULT_REGION", s3test.Region)
	t.Setenv("AWS_ENDPOINT_URL", v.URL)
	h, err := kvik.OpenRemote(context.Background(), strings.Replace(u, " ", "%20", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	checkReads(t, rand.New(rand.NewPCG(3, 3)), h, want)
	// Wrong credentials: S3 refuses (403), public access is refused too.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	_, err = kvik.OpenRemote(context.Background(), u)
	var se *kvik.HTTPStatusError
	if !errors.As(err, &se) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("wrong secret: %v", err)
	}
}

func TestRemoteS3Presigned(t *testing.T) {
	v := s3test.Start(t)
	want := randomBytes(rand.New(rand.NewPCG(4, 4)), 777_777)
	v.Put(t, "presigned.bin", want)
	req, _ := http.NewRequest(http.MethodGet, v.URL+"/"+s3test.Bucket+"/presigned.bin?X-Amz-Expires=600", nil)
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: s3test.Key, SecretAccessKey: s3test.Secret}, req, "UNSIGNED-PAYLOAD", "s3", s3test.Region, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h, err := kvik.OpenRemote(context.Background(), signed)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.EndpointType() != kvik.RemoteS3Presigned || strings.Contains(h.URL(), "Signature") {
		t.Fatalf("endpoint %v, URL %s", h.EndpointType(), h.URL())
	}
	checkReads(t, rand.New(rand.NewPCG(5, 5)), h, want)
}

func TestRemoteS3Missing(t *testing.T) {
	v := s3test.Start(t)
	_, err := kvik.OpenS3(context.Background(), s3test.Bucket, "no/such/key", v.Opts()...)
	var se *kvik.HTTPStatusError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("missing key: %v", err)
	}
	_, err = kvik.OpenS3(context.Background(), s3test.Bucket, "k", kvik.WithS3Endpoint(v.URL), kvik.WithS3Region(s3test.Region), kvik.WithS3Credentials("", "", ""))
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && !errors.Is(err, kvik.ErrNoCredentials) {
		t.Fatalf("no credentials: %v", err)
	}
}

func TestRemoteS3Upload(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	rng := rand.New(rand.NewPCG(6, 6))
	for _, size := range []int{0, 1, 5<<20 - 1, 17<<20 + rng.IntN(1<<20)} {
		want := randomBytes(rng, size)
		key := fmt.Sprintf("up/obj-%d.bin", size)
		if err := kvik.UploadS3(context.Background(), "s3://"+s3test.Bucket+"/"+key, want, v.Opts()...); err != nil {
			t.Fatal(err)
		}
		got, ok := v.Object(key)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("uploaded %d bytes: stored %d, present %v", size, len(got), ok)
		}
	}
}

// TestRemoteS3UploadAborts fails one part through a proxy and checks that
// no object and no multipart upload remain.
func TestRemoteS3UploadAborts(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	target, _ := url.Parse(v.URL)
	var aborts, parts int32
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodPut && q.Get("partNumber") == "3" {
			io.Copy(io.Discard, r.Body)
			http.Error(w, "injected", http.StatusBadRequest)
			return
		}
		<-mu
		if r.Method == http.MethodDelete && q.Get("uploadId") != "" {
			aborts++
		}
		if q.Get("partNumber") != "" {
			parts++
		}
		mu <- struct{}{}
		forward(t, target, w, r)
	}))
	defer proxy.Close()
	want := randomBytes(rand.New(rand.NewPCG(7, 7)), 23<<20)
	opts := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	err := kvik.UploadS3(context.Background(), "s3://"+s3test.Bucket+"/aborted.bin", want, opts...)
	var se *kvik.HTTPStatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadRequest {
		t.Fatalf("upload with a failing part: %v", err)
	}
	<-mu
	if aborts < 1 { // an abort that fails retryably is tried again
		t.Fatalf("%d aborts, want at least 1", aborts)
	}
	mu <- struct{}{}
	if _, ok := v.Object("aborted.bin"); ok {
		t.Fatal("a partial object was left")
	}
	// No upload is left in progress.
	h := listUploads(t, v)
	if strings.Contains(h, "aborted.bin") {
		t.Fatalf("upload still listed: %s", h)
	}
}

// TestRemoteS3UploadCancel cancels an upload while a part is in flight:
// the upload is aborted anyway and no object is left.
func TestRemoteS3UploadCancel(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	target, _ := url.Parse(v.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var aborts atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method == http.MethodPut && q.Get("partNumber") == "2" {
			cancel()
			io.Copy(io.Discard, r.Body) // fails once the client drops the request
			<-r.Context().Done()
			return
		}
		if r.Method == http.MethodDelete && q.Get("uploadId") != "" {
			aborts.Add(1)
		}
		forward(t, target, w, r)
	}))
	defer proxy.Close()
	want := randomBytes(rand.New(rand.NewPCG(8, 7)), 16<<20)
	opts := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	err := kvik.UploadS3(ctx, "s3://"+s3test.Bucket+"/cancelled.bin", want, opts...)
	// An abort that fails retryably (the server still busy with a part)
	// is tried again: what matters is that none is missing and nothing is
	// left behind.
	if !errors.Is(err, context.Canceled) || aborts.Load() < 1 {
		t.Fatalf("cancelled upload: %v, %d aborts", err, aborts.Load())
	}
	_, obj := v.Object("cancelled.bin")
	if ups := listUploads(t, v); obj || strings.Contains(ups, "cancelled.bin") {
		t.Fatalf("a cancelled upload left behind: object %v, uploads %s (%d aborts)", obj, ups, aborts.Load())
	}
}

// forward relays r to target, keeping the Host header the client signed.
func forward(t *testing.T, target *url.URL, w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
	out.Host = r.Host
	resp, err := http.DefaultTransport.RoundTrip(out)
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

// listUploads returns the bucket's ListMultipartUploads document.
func listUploads(t *testing.T, v *s3test.Server) string {
	req, _ := http.NewRequest(http.MethodGet, v.URL+"/"+s3test.Bucket+"?uploads=", nil)
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: s3test.Key, SecretAccessKey: s3test.Secret},
		req, "UNSIGNED-PAYLOAD", "s3", s3test.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "ListMultipartUploadsResult") {
		t.Fatalf("ListMultipartUploads: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

func TestRemoteHTTP(t *testing.T) {
	noLeaks(t)
	smallTasks(t, 64<<10)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 8))
	want := randomBytes(rng, 1<<20+333)
	os.WriteFile(filepath.Join(dir, "f.bin"), want, 0o644)
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	h, err := kvik.OpenRemote(context.Background(), srv.URL+"/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	if h.EndpointType() != kvik.RemoteHTTP {
		t.Fatalf("endpoint %v", h.EndpointType())
	}
	checkReads(t, rng, h, want)
	h.Close()
	if _, err := h.ReadAt(make([]byte, 10), 0); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	// A given size skips the HEAD request.
	h, err = kvik.OpenHTTP(context.Background(), srv.URL+"/f.bin", kvik.WithRemoteSize(1000))
	if err != nil {
		t.Fatalf("given size: %v", err)
	}
	if size, err := h.Size(); err != nil || size != 1000 {
		t.Fatalf("given size: Size = %d, %v", size, err)
	}
	h.Close()
	if _, err := h.Size(); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("Size after Close: %v, want ErrClosed", err)
	}
	if _, err := kvik.OpenRemote(context.Background(), "ftp://x/y"); !errors.Is(err, kvik.ErrUnsupportedURL) || !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("ftp URL: %v", err)
	}
	srv.CloseClientConnections()
}

// webhdfs is a loopback namenode and datanode speaking WebHDFS's
// documented GETFILESTATUS and OPEN (with its redirect to the datanode).
func webhdfs(t *testing.T, files map[string][]byte) (*httptest.Server, *atomic.Int32) {
	var opens atomic.Int32
	data := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/data")]
		var off, n int64
		fmt.Sscan(r.URL.Query().Get("offset"), &off)
		fmt.Sscan(r.URL.Query().Get("length"), &n)
		if !ok || off < 0 || off > int64(len(b)) {
			http.Error(w, `{"RemoteException":{"exception":"FileNotFoundException"}}`, http.StatusNotFound)
			return
		}
		end := min(off+n, int64(len(b)))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(end-off))
		w.Write(b[off:end])
	}))
	t.Cleanup(data.Close)
	name := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := strings.CutPrefix(r.URL.Path, "/webhdfs/v1")
		b, exists := files[path]
		if !ok || !exists || r.URL.Query().Get("user.name") != "alice" {
			http.Error(w, `{"RemoteException":{"exception":"FileNotFoundException"}}`, http.StatusNotFound)
			return
		}
		switch r.URL.Query().Get("op") {
		case "GETFILESTATUS":
			fmt.Fprintf(w, `{"FileStatus":{"accessTime":0,"blockSize":134217728,"length":%d,"type":"FILE","pathSuffix":""}}`, len(b))
		case "OPEN":
			opens.Add(1)
			http.Redirect(w, r, data.URL+"/data"+path+"?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
		default:
			http.Error(w, "bad op", http.StatusBadRequest)
		}
	}))
	t.Cleanup(name.Close)
	return name, &opens
}

func TestRemoteWebHDFS(t *testing.T) {
	smallTasks(t, 100<<10)
	rng := rand.New(rand.NewPCG(9, 9))
	want := randomBytes(rng, 1<<20+99)
	srv, opens := webhdfs(t, map[string][]byte{"/user/alice/x.bin": want})
	u := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/webhdfs/v1/user/alice/x.bin?user.name=alice"
	h, err := kvik.OpenRemote(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.EndpointType() != kvik.RemoteWebHDFS {
		t.Fatalf("endpoint %v", h.EndpointType())
	}
	checkReads(t, rng, h, want)
	if opens.Load() < 11 {
		t.Fatalf("only %d OPEN requests for 1 MiB in 100 KiB tasks", opens.Load())
	}
}

// TestRemoteVariantsRead reads random ranges of objects of random sizes
// through each way of receiving bodies (SetRemoteVariant), with tasks
// larger and smaller than the staging buffers, and compares them with the
// objects' bytes.
func TestRemoteVariantsRead(t *testing.T) {
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(10, 7))
	for _, variant := range []string{"direct", "stage4k", "stage65537+rbuf64k", "stage1m+rcvbuf256k+threads3", "task1m+stage256k"} {
		t.Run(variant, func(t *testing.T) {
			smallTasks(t, 192<<10+rng.IntN(64<<10))
			restore, err := kvik.SetRemoteVariant(variant)
			t.Cleanup(restore)
			if err != nil {
				t.Fatal(err)
			}
			want := randomBytes(rng, 1<<20+rng.IntN(2<<20))
			u := v.Put(t, "variants/"+variant, want)
			h, err := kvik.OpenRemote(context.Background(), u, v.Opts()...)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			checkReads(t, rng, h, want)
		})
	}
	for _, bad := range []string{"stage0", "stagex", "rcvbuf-1", "warp9", "procs", "task0"} {
		if restore, err := kvik.SetRemoteVariant(bad); err == nil {
			t.Errorf("variant %q accepted", bad)
		} else {
			restore()
		}
	}
}
