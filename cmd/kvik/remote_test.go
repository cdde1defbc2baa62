package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fileServer serves the directory of path over HTTP on loopback and
// returns the URL of path.
func fileServer(t *testing.T, path string) string {
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(path))))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(path)
}

func TestRemoteCpInfoBench(t *testing.T) {
	src := randomFile(t, 5<<20+17)
	url := fileServer(t, src)
	dst := filepath.Join(t.TempDir(), "dst.bin")
	r := runKvik(t, nil, "cp", url, dst).expect(t, 0)
	if !strings.Contains(r.stdout, "verified") {
		t.Errorf("cp output: %s", r.stdout)
	}
	sameFile(t, src, dst)

	r = runKvik(t, nil, "info", "--json", url).expect(t, 0)
	var info struct {
		Endpoint string `json:"endpoint"`
		Size     int64  `json:"size"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil || info.Endpoint != "HTTP" || info.Size != 5<<20+17 {
		t.Errorf("info --json: %v %+v\n%s", err, info, r.stdout)
	}
	r = runKvik(t, nil, "bench", "--url", url, "--repeats", "1").expect(t, 0)
	if !strings.Contains(r.stdout, "kvik parallel -> host") || !strings.Contains(r.stdout, "one GET stream") {
		t.Errorf("bench --url output: %s", r.stdout)
	}
	runKvik(t, nil, "cp", url, url).expect(t, exitUsage)
	runKvik(t, nil, "cp", url+".missing", dst).expect(t, exitFailure).oneLineError(t, "404")
}

// TestRemoteCpS3 copies a file to versitygw and back with the AWS_*
// variables. Without versitygw it skips, except under CI=true.
func TestRemoteCpS3(t *testing.T) {
	bin := os.Getenv("KVIK_TEST_VERSITYGW")
	if bin == "" {
		bin, _ = exec.LookPath("versitygw")
	}
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs versitygw (KVIK_TEST_VERSITYGW)")
		}
		t.Skip("needs versitygw: set KVIK_TEST_VERSITYGW")
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "bkt"), 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--port", addr, "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY=k", "ROOT_SECRET_KEY=s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("versitygw did not start")
		}
	}
	env := []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_DEFAULT_REGION=us-east-1", "AWS_ENDPOINT_URL=http://" + addr}
	src := randomFile(t, 11<<20+5)
	runKvik(t, env, "cp", src, "s3://bkt/d/x.bin").expect(t, 0)
	sameFile(t, src, filepath.Join(dir, "bkt", "d", "x.bin"))
	dst := filepath.Join(t.TempDir(), "back.bin")
	runKvik(t, env, "cp", "s3://bkt/d/x.bin", dst).expect(t, 0)
	sameFile(t, src, dst)
}
