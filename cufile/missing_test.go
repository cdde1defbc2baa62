package cufile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// childEnv marks a test binary re-executed by a test of this file.
const childEnv = "KVIK_CUFILE_TEST_CHILD"

// TestMissingLibrary points LibraryEnv at a path that does not exist and
// checks, in a fresh process (the library loads once per process), that
// Load and every call report ErrLibraryNotFound naming the path.
func TestMissingLibrary(t *testing.T) {
	if os.Getenv(childEnv) == "missing-library" {
		missingLibraryChild(t)
		return
	}
	bad := filepath.Join(t.TempDir(), "no-such-libcufile.so.0")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=missing-library", LibraryEnv+"="+bad)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestMissingLibrary") {
		t.Fatalf("child failed (%v):\n%s", err, out)
	}
}

func missingLibraryChild(t *testing.T) {
	bad := os.Getenv(LibraryEnv)
	err := Load()
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("Load() = %v, want an error matching ErrLibraryNotFound", err)
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("Load() = %q, does not name %s", err, bad)
	}
	if p := LibraryPath(); p != "" {
		t.Errorf("LibraryPath() = %q", p)
	}
	if m := MissingSymbols(); m != nil {
		t.Errorf("MissingSymbols() = %v, want nil", m)
	}
	for name, err := range map[string]error{
		"DriverOpen":  DriverOpen(),
		"DriverClose": DriverClose(),
		"GetVersion":  func() error { _, err := GetVersion(); return err }(),
		"Read":        func() error { _, err := Read(1, 1, 1, 0, 0); return err }(),
		"HandleRegister": func() error {
			_, err := HandleRegister(0)
			return err
		}(),
		"StatsStart": StatsStart(),
	} {
		if !errors.Is(err, ErrLibraryNotFound) {
			t.Errorf("%s() = %v, want an error matching ErrLibraryNotFound", name, err)
		}
	}
}
