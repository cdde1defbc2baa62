package kvik_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
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

var versityOnce struct {
	sync.Once
	v   *versity
	err string
}

// startVersity returns the test binary's versitygw, started on first use
// from KVIK_TEST_VERSITYGW or PATH. Without the binary the test skips with
// the reason, except under CI=true, where it fails: CI installs it.
func startVersity(t testing.TB) *versity {
	t.Helper()
	versityOnce.Do(func() { versityOnce.v, versityOnce.err = launchVersity() })
	if versityOnce.v == nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("S3 tests need versitygw: %s", versityOnce.err)
		}
		t.Skipf("S3 tests need versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, then set KVIK_TEST_VERSITYGW): %s", versityOnce.err)
	}
	return versityOnce.v
}

func launchVersity() (*versity, string) {
	bin := os.Getenv("KVIK_TEST_VERSITYGW")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("versitygw"); err != nil {
			return nil, "versitygw not found in PATH and KVIK_TEST_VERSITYGW unset"
		}
	}
	dir, err := os.MkdirTemp("", "kvik-versitygw-")
	if err != nil {
		return nil, err.Error()
	}
	if err := os.Mkdir(filepath.Join(dir, s3Bucket), 0o755); err != nil {
		return nil, err.Error()
	}
	// Ask the kernel for a free port, then hand it to the server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err.Error()
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--port", addr, "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s3Key, "ROOT_SECRET_KEY="+s3Secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log, _ := os.Create(filepath.Join(os.TempDir(), "kvik-versitygw-"+strconv.Itoa(os.Getpid())+".log"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, "starting " + bin + ": " + err.Error()
	}
	go cmd.Wait() // reaps it if it dies; Pdeathsig ends it with the tests
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return &versity{url: "http://" + addr, dir: dir}, ""
		}
	}
	cmd.Process.Kill()
	return nil, "versitygw did not start listening on " + addr
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

var _ = context.Background
