package cuda_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

const (
	childEnv   = "KVIK_CUDA_TEST_MISSING_LIBRARY"
	missingLib = "/nonexistent/kvik-test/libcuda.so.1"
)

// TestMissingLibrary re-runs the test binary with KVIK_LIBCUDA_PATH naming
// a file that does not exist, since the package loads the library only
// once per process.
func TestMissingLibrary(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary:", err)
	}
	cmd := exec.Command(exe, "-test.run=^TestMissingLibraryChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", cuda.LibraryEnv+"="+missingLib)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestMissingLibraryChild") {
		t.Fatalf("child failed (%v):\n%s", err, out)
	}
}

// TestMissingLibraryChild runs only in the process TestMissingLibrary
// starts.
func TestMissingLibraryChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestMissingLibrary")
	}
	err := cuda.Init()
	if !errors.Is(err, cuda.ErrLibraryNotFound) {
		t.Fatalf("Init() = %v, want an error matching ErrLibraryNotFound", err)
	}
	if !strings.Contains(err.Error(), missingLib) {
		t.Errorf("Init() error %q does not name %s", err, missingLib)
	}
	if err2 := cuda.Init(); err2 != err {
		t.Errorf("second Init() = %v, want the cached %v", err2, err)
	}
	if err := cuda.Load(); !errors.Is(err, cuda.ErrLibraryNotFound) {
		t.Errorf("Load() = %v", err)
	}
	if p := cuda.LibraryPath(); p != "" {
		t.Errorf("LibraryPath() = %q, want empty", p)
	}
	if _, err := cuda.DeviceGetCount(); !errors.Is(err, cuda.ErrLibraryNotFound) {
		t.Errorf("DeviceGetCount() error = %v", err)
	}
	if _, err := cuda.MemAlloc(16); !errors.Is(err, cuda.ErrLibraryNotFound) {
		t.Errorf("MemAlloc() error = %v", err)
	}
	if _, err := cuda.EventCreate(cuda.EventBlockingSync); !errors.Is(err, cuda.ErrLibraryNotFound) {
		t.Errorf("EventCreate() error = %v", err)
	}
	// Without a driver, errors are described from the built-in table.
	if got, want := cuda.ErrorInvalidValue.Error(), "CUDA_ERROR_INVALID_VALUE (1): invalid argument"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	t.Logf("Init error: %v", err)
}
