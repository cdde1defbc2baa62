package kvik_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// tlsServer serves data over https with a self-signed certificate and
// counts the connections made to it; caFile holds the certificate (PEM).
func tlsServer(t *testing.T, data []byte) (srv *httptest.Server, caFile string, conns *atomic.Int32) {
	conns = new(atomic.Int32)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "obj", time.Time{}, bytes.NewReader(data))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile, conns
}

func trusting(c *x509.Certificate) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &tls.Config{RootCAs: pool}
}

// checkUntrusted asserts the error of a server whose certificate is not
// trusted: ErrCertificate, with the x509 error inside, after a single
// connection (no retry can help).
func checkUntrusted(t *testing.T, err error, conns *atomic.Int32) {
	t.Helper()
	var ua x509.UnknownAuthorityError
	var ve *tls.CertificateVerificationError
	if !errors.Is(err, kvik.ErrCertificate) || !errors.As(err, &ua) || !errors.As(err, &ve) {
		t.Fatalf("untrusted server: %v", err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("untrusted server: %d connections, want 1 (no retries)", n)
	}
}

func TestRemoteTLSConfig(t *testing.T) {
	noLeaks(t)
	data := randomBytes(rand.New(rand.NewPCG(30, 1)), 200_000)
	srv, _, conns := tlsServer(t, data)
	ctx := context.Background()

	h, err := kvik.OpenRemote(ctx, srv.URL+"/obj", kvik.WithTLSConfig(trusting(srv.Certificate())))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data)-333)
	if n, err := h.ReadAt(got, 333); err != nil || n != len(got) || !bytes.Equal(got, data[333:]) {
		t.Fatalf("trusted CA: %d, %v", n, err)
	}
	h.Close()

	// The system roots do not hold the test CA, nor does another CA.
	wrong, _, _ := s3test.SelfSigned(t, t.TempDir())
	for name, opts := range map[string][]kvik.RemoteOption{
		"system roots": nil,
		"wrong CA":     {kvik.WithTLSConfig(&tls.Config{RootCAs: wrong})},
	} {
		conns.Store(0)
		_, err := kvik.OpenRemote(ctx, srv.URL+"/obj", opts...)
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v is not a *fs.PathError", name, err)
		}
		checkUntrusted(t, err, conns)
		t.Logf("%s: %v", name, err)
	}
}

// TestRemoteSSLCertFile checks that SSL_CERT_FILE trusts a CA, as Go's
// crypto/x509 promises on Linux. The system pool is loaded once per
// process, so the variable is set in a child.
func TestRemoteSSLCertFile(t *testing.T) {
	if url := os.Getenv("KVIK_TEST_TLS_URL"); url != "" {
		h, err := kvik.OpenRemote(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if n, err := h.ReadAt(make([]byte, 1000), 0); err != nil || n != 1000 {
			t.Fatalf("read with SSL_CERT_FILE: %d, %v", n, err)
		}
		return
	}
	srv, caFile, _ := tlsServer(t, randomBytes(rand.New(rand.NewPCG(31, 1)), 1000))
	runChild(t, "TestRemoteSSLCertFile", "KVIK_TEST_TLS_URL="+srv.URL+"/obj", "SSL_CERT_FILE="+caFile)
}

// TestS3CABundle runs S3 over TLS (versitygw with a self-signed
// certificate): AWS_CA_BUNDLE or WithTLSConfig trust its CA for reads and
// multipart uploads; other URLs ignore AWS_CA_BUNDLE.
func TestS3CABundle(t *testing.T) {
	v := s3test.StartTLS(t)
	ctx := context.Background()
	data := randomBytes(rand.New(rand.NewPCG(32, 1)), 12<<20+77) // three 5 MiB parts
	t.Setenv("AWS_CA_BUNDLE", v.CAFile)
	if err := kvik.UploadS3(ctx, v.URLOf("up"), data, v.Opts()...); err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Object("up"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("upload over TLS stored %d bytes, want %d", len(got), len(data))
	}
	read := func(url string, opts ...kvik.RemoteOption) ([]byte, error) {
		h, err := kvik.OpenRemote(ctx, url, append(v.Opts(), opts...)...)
		if err != nil {
			return nil, err
		}
		defer h.Close()
		got := make([]byte, len(data))
		_, err = h.ReadAt(got, 0)
		return got, err
	}
	if got, err := read(v.URLOf("up")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with AWS_CA_BUNDLE: %v", err)
	}
	// WithTLSConfig wins over the bundle; a wrong CA fails.
	wrong, _, _ := s3test.SelfSigned(t, t.TempDir())
	var ua x509.UnknownAuthorityError
	if _, err := read(v.URLOf("up"), kvik.WithTLSConfig(&tls.Config{RootCAs: wrong})); !errors.Is(err, kvik.ErrCertificate) || !errors.As(err, &ua) {
		t.Fatalf("wrong CA over the bundle: %v", err)
	}
	t.Setenv("AWS_CA_BUNDLE", "")
	if got, err := read(v.URLOf("up"), kvik.WithTLSConfig(&tls.Config{RootCAs: v.CAs})); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with WithTLSConfig: %v", err)
	}
	if _, err := read(v.URLOf("up")); !errors.Is(err, kvik.ErrCertificate) {
		t.Fatalf("read trusting the system roots: %v", err)
	}
	// A missing or empty bundle is an error, not a silent fallback.
	t.Setenv("AWS_CA_BUNDLE", filepath.Join(t.TempDir(), "none.pem"))
	if _, err := read(v.URLOf("up")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing AWS_CA_BUNDLE: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("no certificates"), 0o600)
	t.Setenv("AWS_CA_BUNDLE", empty)
	if err := kvik.UploadS3(ctx, v.URLOf("up2"), data[:10], v.Opts()...); !errors.Is(err, kvik.ErrCertificate) {
		t.Fatalf("empty AWS_CA_BUNDLE: %v", err)
	}

	// A plain https URL is not S3: the bundle does not apply to it.
	srv, caFile, conns := tlsServer(t, data[:100])
	t.Setenv("AWS_CA_BUNDLE", caFile)
	_, err := kvik.OpenRemote(ctx, srv.URL+"/obj")
	checkUntrusted(t, err, conns)
}
