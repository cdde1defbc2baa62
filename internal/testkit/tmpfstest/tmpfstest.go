// Package tmpfstest mounts small tmpfs file systems for tests that need
// a really full disk (ENOSPC). It is imported by tests only.
package tmpfstest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size (as mount(8) takes it: "1m") on a new
// directory under t.TempDir and returns the directory; it is unmounted
// before the temporary directory is removed. Where mounting is not
// allowed (not root, no CAP_SYS_ADMIN), the test skips, saying what
// covers the case instead (covered).
func Mount(t *testing.T, size, covered string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): %s", err, covered)
	}
	// Registered after t.TempDir, so it runs before the directory is removed.
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
