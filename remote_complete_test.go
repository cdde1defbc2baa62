package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestUploadCompleteAnswers uploads a multipart object through a proxy
// that answers CompleteMultipartUpload itself, with a 200 whose body is
// not the result, for the first `times` attempts (the rest go to the
// server). S3 sends whitespace while it joins the parts, then the result
// or an error document: only CompleteMultipartUploadResult is success,
// an Error is tried again (S3's advice), anything else fails with
// ErrBadResponse (ErrTooLarge for whitespace past the bound) and aborts
// the upload. UploadS3 returned nil for an empty body, an HTML page,
// other XML and an Error after 64 KiB of whitespace (no object existed),
// and aborted on a 200 with an Error.
func TestUploadCompleteAnswers(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	quickRetries(t, time.Minute)
	d, err := kvik.GetDefaults()
	if err != nil {
		t.Fatal(err)
	}
	errorDoc := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message><RequestId>R3Q1D</RequestId><HostId>H0ST1D==</HostId></Error>`
	pad := strings.Repeat(" \n", 32<<10) // 64 KiB
	cases := []struct {
		name  string
		body  string
		times int   // answers from the proxy; 0: every attempt
		want  error // nil: the object is the bytes
	}{
		{"empty", "", 0, kvik.ErrBadResponse},
		{"html", "<!DOCTYPE html>\n<html><head><title>OK</title></head><body>Upload complete</body></html>", 0, kvik.ErrBadResponse},
		{"other XML", `<?xml version="1.0"?><ListBucketResult><Name>bkt</Name></ListBucketResult>`, 0, kvik.ErrBadResponse},
		{"text", "OK", 0, kvik.ErrBadResponse},
		{"not XML", "<<<>>>", 0, kvik.ErrBadResponse},
		{"whitespace past the bound", strings.Repeat(" ", 2<<20) + errorDoc, 0, kvik.ErrTooLarge},
		{"error once", errorDoc, 1, nil},
		{"padded error once", pad + errorDoc, 1, nil},
		{"padded error twice", pad + errorDoc, 2, nil},
		{"error always", errorDoc, 0, &kvik.HTTPStatusError{}},
	}
	target, _ := url.Parse(v.URL)
	rng := rand.New(rand.NewPCG(39, 12))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var completes atomic.Int32
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Query().Get("uploadId") != "" {
					if n := completes.Add(1); c.times == 0 || int(n) <= c.times {
						io.Copy(io.Discard, r.Body)
						w.WriteHeader(http.StatusOK)
						io.WriteString(w, c.body)
						return
					}
				}
				forward(t, target, w, r)
			}))
			defer proxy.Close()
			key := fmt.Sprintf("complete/%d.bin", i)
			want := randomBytes(rng, 2*(5<<20)+1+rng.IntN(1<<20))
			opts := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
			err := kvik.UploadS3(context.Background(), "s3://"+s3test.Bucket+"/"+key, want, opts...)
			got, exists := v.Object(key)
			switch se := (*kvik.HTTPStatusError)(nil); {
			case c.want == nil:
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("UploadS3: %v; the object holds %d of %d bytes (present %v)", err, len(got), len(want), exists)
				}
				if n := int(completes.Load()); n != c.times+1 {
					t.Errorf("%d CompleteMultipartUpload requests, want %d", n, c.times+1)
				}
				return
			case errors.As(c.want, &se):
				if !errors.As(err, &se) || se.Code != http.StatusOK || !strings.Contains(se.Error(), "InternalError") {
					t.Fatalf("UploadS3: %v, want the 200's InternalError", err)
				}
				if n := int(completes.Load()); n != d.HTTPMaxAttempts {
					t.Errorf("%d CompleteMultipartUpload requests, want %d (HTTPMaxAttempts)", n, d.HTTPMaxAttempts)
				}
			case !errors.Is(err, c.want):
				t.Fatalf("UploadS3: %v, want %v", err, c.want)
			}
			if exists {
				t.Error("the object exists after a failed upload")
			}
			if ups := v.Uploads(t); strings.Contains(ups, key) {
				t.Errorf("the upload was not aborted: %s", ups)
			}
			if strings.Contains(err.Error(), "R3Q1D") || strings.Contains(err.Error(), "H0ST1D") {
				t.Errorf("the error quotes the request or host id: %v", err)
			}
		})
	}
}

// TestUploadCompletePadded: a CompleteMultipartUploadResult after 64 KiB
// of whitespace (what S3 sends while it joins many parts) is success.
func TestUploadCompletePadded(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	target, _ := url.Parse(v.URL)
	var padded atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Query().Get("uploadId") == "" {
			forward(t, target, w, r)
			return
		}
		rec := httptest.NewRecorder()
		forward(t, target, rec, r)
		if rec.Code != http.StatusOK {
			t.Errorf("the server answered CompleteMultipartUpload with %d: %s", rec.Code, rec.Body)
		}
		padded.Add(1)
		w.WriteHeader(rec.Code)
		io.WriteString(w, strings.Repeat("\n ", 32<<10))
		w.Write(rec.Body.Bytes())
	}))
	defer proxy.Close()
	want := randomBytes(rand.New(rand.NewPCG(39, 13)), 3*(5<<20)+12345)
	opts := []kvik.RemoteOption{kvik.WithS3Credentials(s3test.Key, s3test.Secret, ""), kvik.WithS3Region(s3test.Region), kvik.WithS3Endpoint(proxy.URL)}
	if err := kvik.UploadS3(context.Background(), "s3://"+s3test.Bucket+"/padded.bin", want, opts...); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Object("padded.bin"); !bytes.Equal(got, want) || padded.Load() != 1 {
		t.Fatalf("the object holds %d of %d bytes after %d padded answers", len(got), len(want), padded.Load())
	}
}
