// Package s3test runs versitygw, an S3 server, on loopback for tests of
// any package that reads or writes S3 objects. It is imported by tests
// only.
package s3test

import (
	"bytes"
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
}

// Start starts versitygw (KVIK_TEST_VERSITYGW or PATH) for one test on a
// free loopback port, with a fresh directory; the server is stopped and
// the directory removed when the test ends. Without the binary the test
// skips with the reason, except under CI=true, where it fails: CI
// installs it.
func Start(t testing.TB) *Server {
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
	cmd := exec.Command(bin, "--port", addr, "posix", dir)
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
			return &Server{URL: "http://" + addr, Dir: dir}
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
