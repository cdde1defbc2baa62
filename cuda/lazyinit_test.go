package cuda_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

const lazyChildEnv = "KVIK_CUDA_TEST_LAZY_INIT"

// TestNoExplicitInit re-runs the test binary so that the driver library is
// loaded for the first time by a call other than Init: DeviceGetCount and
// DeviceGet must work without cuda.Init, and Init afterwards must succeed
// and keep succeeding.
func TestNoExplicitInit(t *testing.T) {
	if os.Getenv(lazyChildEnv) != "" {
		t.Skip("in the child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary:", err)
	}
	cmd := exec.Command(exe, "-test.run=^TestNoExplicitInitChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), lazyChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "TestNoExplicitInitChild") {
		t.Fatalf("child failed (%v):\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP: TestNoExplicitInitChild") {
		t.Skipf("child skipped:\n%s", out)
	}
	t.Logf("child:\n%s", out)
}

// TestNoExplicitInitChild runs only in the process TestNoExplicitInit
// starts, where nothing has touched the driver yet.
func TestNoExplicitInitChild(t *testing.T) {
	if os.Getenv(lazyChildEnv) == "" {
		t.Skip("run by TestNoExplicitInit")
	}
	n, err := cuda.DeviceGetCount() // the first call of the process
	if errors.Is(err, cuda.ErrLibraryNotFound) {
		if ierr := cuda.Init(); !errors.Is(ierr, cuda.ErrLibraryNotFound) {
			t.Fatalf("Init() = %v after DeviceGetCount failed with %v", ierr, err)
		}
		t.Skip("no CUDA driver:", err)
	}
	if errors.Is(err, cuda.ErrorNotInitialized) {
		t.Fatalf("DeviceGetCount before Init: %v (the driver was not initialised on load)", err)
	}
	if err != nil {
		// No device (CUDA_ERROR_NO_DEVICE and the like): Init must say the
		// same thing, every time.
		ierr := cuda.Init()
		if ierr == nil || ierr != cuda.Init() {
			t.Fatalf("DeviceGetCount failed with %v, but Init() = %v", err, ierr)
		}
		t.Skip("CUDA driver not usable:", ierr)
	}
	if n == 0 {
		t.Skip("no CUDA device")
	}
	d, err := cuda.DeviceGet(0)
	if err != nil {
		t.Fatalf("DeviceGet(0) before Init: %v", err)
	}
	name, err := d.Name()
	if err != nil || name == "" {
		t.Fatalf("Name() = %q, %v", name, err)
	}
	for i := range 3 {
		if err := cuda.Init(); err != nil {
			t.Fatalf("Init() call %d after lazy initialisation: %v", i+1, err)
		}
	}
	if n2, err := cuda.DeviceGetCount(); err != nil || n2 != n {
		t.Fatalf("DeviceGetCount after Init = %d, %v; before: %d", n2, err, n)
	}
	t.Logf("%d device(s), device 0 is %s, no cuda.Init needed", n, name)
}
