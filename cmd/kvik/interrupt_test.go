package main

import (
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// interruptedUpload starts kvik cp of a 4-part file to key through a
// proxy in front of v that holds part 2 and the requests hold picks, and
// waits until part 2 is held. The proxy's URL goes in AWS_ENDPOINT_URL.
func interruptedUpload(t *testing.T, v *s3test.Server, key string, hold func(*http.Request) bool) *kvikRun {
	t.Helper()
	p := v.HoldProxy(t, func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" || hold(r)
	})
	env := []string{"AWS_ACCESS_KEY_ID=" + s3test.Key, "AWS_SECRET_ACCESS_KEY=" + s3test.Secret,
		"AWS_DEFAULT_REGION=" + s3test.Region, "AWS_ENDPOINT_URL=" + p.URL, "KVIKIO_TASK_SIZE=5242880"}
	k := kvikCommand(env, "cp", randomFile(t, 4*(5<<20)+4321), v.URLOf(key))
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.cmd.Process.Kill() })
	select {
	case <-p.Held:
	case <-time.After(30 * time.Second):
		k.cmd.Process.Kill()
		t.Fatalf("no part held after 30 s: %+v", k.result(t, k.cmd.Wait()))
	}
	return k
}

// wait returns the run's result, failing the test if it goes on for more
// than limit.
func (k *kvikRun) wait(t *testing.T, limit time.Duration) result {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- k.cmd.Wait() }()
	select {
	case err := <-done:
		return k.result(t, err)
	case <-time.After(limit):
		k.cmd.Process.Kill()
		t.Fatalf("kvik still running %v after the signal: %+v", limit, k.result(t, <-done))
		return result{}
	}
}

// TestCpUploadInterrupted sends SIGINT, then SIGTERM, to kvik cp while a
// part of its multipart upload is in flight: kvik must abort the upload
// before it exits with 130, so that neither an object nor the parts
// already sent stay on the server. (Its interrupt handler exited at once,
// and the parts stayed.)
func TestCpUploadInterrupted(t *testing.T) {
	v := s3test.Start(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		key := "int/" + strings.ReplaceAll(sig.String(), " ", "-") + ".bin"
		k := interruptedUpload(t, v, key, func(*http.Request) bool { return false })
		if err := k.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		r := k.wait(t, 20*time.Second).expect(t, 130)
		if !strings.Contains(r.stderr, "interrupted") {
			t.Errorf("%v: stderr does not say interrupted: %q", sig, r.stderr)
		}
		if _, ok := v.Object(key); ok {
			t.Errorf("%v: an interrupted upload left the object", sig)
		}
		if ups := v.Uploads(t); strings.Contains(ups, key) {
			t.Errorf("%v: an interrupted upload left its parts: %s", sig, ups)
		}
	}
}

// TestCpUploadInterruptedTwice: a second SIGINT, while the abort of the
// upload is held by the server, exits with 130 at once, not after the
// abort's timeout.
func TestCpUploadInterruptedTwice(t *testing.T) {
	v := s3test.Start(t)
	aborting := make(chan struct{})
	var once sync.Once
	k := interruptedUpload(t, v, "int/twice.bin", func(r *http.Request) bool {
		if r.Method == http.MethodDelete && r.URL.Query().Get("uploadId") != "" {
			once.Do(func() { close(aborting) })
			return true
		}
		return false
	})
	k.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-aborting:
	case <-time.After(20 * time.Second):
		k.cmd.Process.Kill()
		t.Fatalf("no abort after SIGINT: %+v", k.result(t, k.cmd.Wait()))
	}
	k.cmd.Process.Signal(syscall.SIGINT)
	k.wait(t, 5*time.Second).expect(t, 130)
}
