package kvik_test

import (
	"os"
	"os/exec"
	"testing"
	"unsafe"
)

// runChild re-runs one test of this binary in a new process with extra
// environment variables, for behaviour fixed once per process (library
// loading, environment defaults).
func runChild(t *testing.T, test string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child %s failed: %v\n%s", test, err, out)
	}
}

// unsafePointer returns the address of b's first element.
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
