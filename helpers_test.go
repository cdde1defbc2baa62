package kvik_test

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/kvikgo/kvik"
)

// runChild re-runs one test of this binary in a new process with extra
// environment variables, for behaviour fixed once per process (library
// loading, environment defaults). The child dies with this process, and a
// child that hangs is killed after two minutes and fails the test.
func runChild(t *testing.T, test string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.timeout=90s")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s failed: %v\n%s", test, err, out)
	}
}

// unsafePointer returns the address of b's first element.
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// openWithReference opens path twice, read-write: with os.File as the
// reference and with kvik; both are closed when the test ends.
func openWithReference(t testing.TB, path string) (*os.File, *kvik.FileHandle) {
	t.Helper()
	ref, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	f, err := kvik.Open(path, "r+", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return ref, f
}
