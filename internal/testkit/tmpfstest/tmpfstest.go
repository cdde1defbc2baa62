// Package tmpfstest mounts small file systems (tmpfs, or ext4 on a loop
// device where the test needs fallocate) for tests that need a really
// full disk (ENOSPC). It is imported by tests only.
package tmpfstest

import (
	"os"
	"os/exec"
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

// MountExt4 mounts an ext4 file system of size (as truncate(1) takes it:
// "8M") made in an image file under t.TempDir on a loop device, as
// Mount does: for tests of what fallocate does, which tmpfs is spared.
// Without mkfs.ext4, loop devices or the right to mount, the test skips.
func MountExt4(t *testing.T, size, covered string) string {
	t.Helper()
	tmp := t.TempDir()
	img, dir := filepath.Join(tmp, "ext4.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"truncate", "-s", size, img}, {"mkfs.ext4", "-q", img}, {"mount", "-o", "loop", img, dir}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Skipf("cannot mount an ext4 image here (%s: %v %s): %s", c[0], err, out, covered)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// Fill makes a file at path that takes all but about leave bytes of the
// free space of its file system (fallocate: no bytes written), as a
// file reserved at its full size by a process killed before it wrote
// it does.
func Fill(t *testing.T, path string, leave int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		t.Fatal(err)
	}
	free := st.Bavail
	if os.Geteuid() == 0 {
		free = st.Bfree // root may use the blocks ext4 reserves for it
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(free)*st.Bsize-leave); err != nil {
		t.Fatal(err)
	}
}
