// Package s3test runs versitygw, an S3 server, on loopback for tests of
// any package that reads or writes S3 objects. It is imported by tests
// only.
package s3test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// Credentials and names of every Server.
const (
	Key    = "testkey"
	Secret = "testsecret"
	Region = "us-east-1"
	Bucket = "bkt"
)

// Server is a versitygw server on loopback serving the directories under
// Dir as buckets; Bucket exists.
type Server struct {
	URL, Dir string
	// CAFile (PEM) and CAs hold the self-signed certificate of a server
	// started by StartTLS.
	CAFile string
	CAs    *x509.CertPool
}

// Start starts versitygw (KVIK_TEST_VERSITYGW or PATH) for one test on a
// free loopback port, with a fresh directory; the server is stopped and
// the directory removed when the test ends. Without the binary the test
// skips with the reason, except under CI=true, where it fails: CI
// installs it.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, "http", nil)
}

// StartTLS is Start serving https with a fresh self-signed certificate
// for 127.0.0.1, which s.CAFile and s.CAs hold.
func StartTLS(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key := SelfSigned(t, dir)
	s := start(t, "https", []string{"--cert", cert, "--key", key})
	s.CAFile, s.CAs = cert, ca
	return s
}

func start(t testing.TB, scheme string, args []string) *Server {
	t.Helper()
	bin := os.Getenv("KVIK_TEST_VERSITYGW")
	if bin == "" {
		bin, _ = exec.LookPath("versitygw")
	}
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("S3 tests need versitygw: KVIK_TEST_VERSITYGW unset and none in PATH")
		}
		t.Skip("S3 tests need versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, then set KVIK_TEST_VERSITYGW)")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, Bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	// Ask the kernel for a free port, then hand it to the server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	// --keep-alive: as S3 servers do (versitygw's default closes each
	// connection after one answer, so that no test reused one).
	cmd := exec.Command(bin, append(append([]string{"--port", addr, "--keep-alive"}, args...), "posix", dir)...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+Key, "ROOT_SECRET_KEY="+Secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &Server{URL: scheme + "://" + addr, Dir: dir}
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not start listening on %s: %s", addr, log.String())
		}
	}
}

// Opts returns options that reach the server with its credentials.
func (s *Server) Opts() []kvik.RemoteOption {
	return []kvik.RemoteOption{kvik.WithS3Credentials(Key, Secret, ""), kvik.WithS3Region(Region), kvik.WithS3Endpoint(s.URL)}
}

// Put stores data as object key of Bucket, written straight to the
// backing directory so that reads are checked against bytes kvik did not
// write, and returns its s3:// URL.
func (s *Server) Put(t testing.TB, key string, data []byte) string {
	t.Helper()
	p := filepath.Join(s.Dir, Bucket, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return "s3://" + Bucket + "/" + key
}

// Object returns the stored object's bytes, or nil and false if absent.
func (s *Server) Object(key string) ([]byte, bool) {
	b, err := os.ReadFile(filepath.Join(s.Dir, Bucket, key))
	return b, err == nil
}

// URLOf returns the s3:// URL of object key of Bucket.
func (s *Server) URLOf(key string) string { return "s3://" + Bucket + "/" + key }

// SelfSigned writes a new self-signed CA certificate for 127.0.0.1 and
// localhost, and its key, as PEM files in dir, and returns a pool that
// trusts it with the two files' paths.
func SelfSigned(t testing.TB, dir string) (*x509.CertPool, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "kvik test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{cert, "CERTIFICATE", der}, {keyFile, "EC PRIVATE KEY", kb}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return pool, cert, keyFile
}
