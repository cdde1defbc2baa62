package kvik_test

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

// versity is a versitygw S3 server on loopback serving the directories
// under dir as buckets.
type versity struct {
	url, dir string
}

const (
	s3Key    = "testkey"
	s3Secret = "testsecret"
	s3Region = "us-east-1"
	s3Bucket = "bkt"
)

// startVersity starts versitygw (KVIK_TEST_VERSITYGW or PATH) for one
// test on a free loopback port, with a fresh directory; the server is
// stopped and the directory removed when the test ends. Without the binary
// the test skips with the reason, except under CI=true, where it fails:
// CI installs it.
func startVersity(t testing.TB) *versity {
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
	if err := os.Mkdir(filepath.Join(dir, s3Bucket), 0o755); err != nil {
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
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s3Key, "ROOT_SECRET_KEY="+s3Secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &versity{url: "http://" + addr, dir: dir}
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not start listening on %s", addr)
		}
	}
}

// opts returns options that reach the server with its credentials.
func (v *versity) opts() []kvik.RemoteOption {
	return []kvik.RemoteOption{kvik.WithS3Credentials(s3Key, s3Secret, ""), kvik.WithS3Region(s3Region), kvik.WithS3Endpoint(v.url)}
}

// put stores data as bucket object key, written straight to the backing
// directory so that reads are checked against bytes kvik did not write.
func (v *versity) put(t testing.TB, key string, data []byte) string {
	t.Helper()
	p := filepath.Join(v.dir, s3Bucket, key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return "s3://" + s3Bucket + "/" + key
}

// object returns the stored object's bytes, or nil and false if absent.
func (v *versity) object(key string) ([]byte, bool) {
	b, err := os.ReadFile(filepath.Join(v.dir, s3Bucket, key))
	return b, err == nil
}

// smallTasks sets a small task size so that reads span many requests.
func smallTasks(t testing.TB, taskSize int) {
	t.Helper()
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = taskSize })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}
