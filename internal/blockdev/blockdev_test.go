package blockdev

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeSysfs builds a small sysfs tree under a temporary directory and points
// sysRoot at it for the duration of the test.
func fakeSysfs(t *testing.T) {
	t.Helper()
	root := t.TempDir()
	mkdir := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, content string) {
		t.Helper()
		mkdir(filepath.Dir(p))
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, p string) {
		t.Helper()
		mkdir(filepath.Dir(p))
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}

	// A SATA disk with one partition.
	sda := "devices/pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda"
	write(sda+"/dev", "8:0\n")
	write(sda+"/queue/rotational", "1\n")
	link("../../../0:0:0:0", sda+"/device")
	write(sda+"/sda1/dev", "8:1\n")
	write(sda+"/sda1/partition", "1\n")
	link("../../"+sda, "dev/block/8:0")
	link("../../"+sda+"/sda1", "dev/block/8:1")

	// An NVMe namespace with a partition, under controller nvme0.
	nvme := "devices/pci0000:00/0000:00:01.0/0000:01:00.0/nvme/nvme0"
	ns := nvme + "/nvme0n1"
	write(ns+"/dev", "259:0\n")
	write(ns+"/queue/rotational", "0\n")
	link("../../nvme0", ns+"/device")
	write(ns+"/nvme0n1p2/dev", "259:2\n")
	write(ns+"/nvme0n1p2/partition", "2\n")
	link("../../"+ns, "dev/block/259:0")
	link("../../"+ns+"/nvme0n1p2", "dev/block/259:2")

	// A multipath NVMe namespace whose device link names its subsystem,
	// deliberately numbered apart from the controller to tell the two
	// sources apart.
	mp := "devices/virtual/nvme-subsystem/nvme-subsys3/nvme2n1"
	write(mp+"/dev", "259:5\n")
	write(mp+"/queue/rotational", "0\n")
	link("../../nvme-subsys3", mp+"/device")
	link("../../"+mp, "dev/block/259:5")

	// A device-mapper device, which has no device link.
	dm := "devices/virtual/block/dm-0"
	write(dm+"/dev", "253:0\n")
	write(dm+"/queue/rotational", "0\n")
	link("../../"+dm, "dev/block/253:0")

	old := sysRoot
	sysRoot = root
	t.Cleanup(func() { sysRoot = old })
}

func TestLookupFakeSysfs(t *testing.T) {
	fakeSysfs(t)
	tests := []struct {
		major, minor uint32
		want         Device
		key          string
	}{
		{8, 0, Device{Major: 8, Minor: 0, Name: "sda", Parent: "sda", Rotational: true}, "sda"},
		{8, 1, Device{Major: 8, Minor: 1, Name: "sda1", Parent: "sda", Rotational: true}, "sda"},
		{259, 0, Device{Major: 259, Minor: 0, Name: "nvme0n1", Parent: "nvme0"}, "nvme0"},
		{259, 2, Device{Major: 259, Minor: 2, Name: "nvme0n1p2", Parent: "nvme0"}, "nvme0"},
		{259, 5, Device{Major: 259, Minor: 5, Name: "nvme2n1", Parent: "nvme2"}, "nvme2"},
		{253, 0, Device{Major: 253, Minor: 0, Name: "dm-0", Parent: "dm-0"}, "dm-0"},
		{0, 45, Device{Major: 0, Minor: 45, Name: "", Parent: "0:45"}, "0:45"},
		{8, 16, Device{Major: 8, Minor: 16, Name: "", Parent: "8:16"}, "8:16"},
	}
	for _, tt := range tests {
		got := lookup(tt.major, tt.minor)
		if got != tt.want {
			t.Errorf("lookup(%d, %d) = %+v, want %+v", tt.major, tt.minor, got, tt.want)
		}
		if k := got.Key(); k != tt.key {
			t.Errorf("lookup(%d, %d).Key() = %q, want %q", tt.major, tt.minor, k, tt.key)
		}
	}
}

func TestLookupNoSysfs(t *testing.T) {
	old := sysRoot
	sysRoot = filepath.Join(t.TempDir(), "missing")
	t.Cleanup(func() { sysRoot = old })

	got := lookup(8, 1)
	want := Device{Major: 8, Minor: 1, Parent: "8:1"}
	if got != want {
		t.Errorf("lookup without sysfs = %+v, want %+v", got, want)
	}
}

func TestKeyZeroParent(t *testing.T) {
	d := Device{Major: 7, Minor: 3}
	if k := d.Key(); k != "7:3" {
		t.Errorf("Key() = %q, want %q", k, "7:3")
	}
}

func TestNVMeController(t *testing.T) {
	tests := []struct {
		name string
		ctrl string
		ok   bool
	}{
		{"nvme0n1", "nvme0", true},
		{"nvme12n34", "nvme12", true},
		{"nvme0", "", false},
		{"nvme0n", "", false},
		{"nvmen1", "", false},
		{"nvme0c1n1", "", false},
		{"nvme0n1p2", "", false},
		{"sda", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		ctrl, ok := nvmeController(tt.name)
		if ctrl != tt.ctrl || ok != tt.ok {
			t.Errorf("nvmeController(%q) = %q, %v, want %q, %v", tt.name, ctrl, ok, tt.ctrl, tt.ok)
		}
	}
}

func TestForPathReal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("kvik"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := ForPath(path)
	if err != nil {
		t.Fatalf("ForPath(%q): %v", path, err)
	}
	if d.Key() == "" {
		t.Errorf("ForPath(%q).Key() is empty", path)
	}
	fstype, _ := FSType(path)
	t.Logf("%s: %+v, key %q, fs %s", path, d, d.Key(), fstype)

	// A device that sysfs lists must resolve to a name.
	num := strconv.FormatUint(uint64(d.Major), 10) + ":" + strconv.FormatUint(uint64(d.Minor), 10)
	if _, err := os.Stat(filepath.Join("/sys/dev/block", num)); err == nil && d.Name == "" {
		t.Errorf("ForPath(%q) = %+v: sysfs lists %s but Name is empty", path, d, num)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dfd, err := ForFd(int(f.Fd()))
	if err != nil {
		t.Fatalf("ForFd: %v", err)
	}
	if dfd != d {
		t.Errorf("ForFd = %+v, ForPath = %+v; want equal", dfd, d)
	}
}

func TestForPathBlockNode(t *testing.T) {
	entries, err := os.ReadDir("/sys/dev/block")
	if err != nil {
		t.Skip("no sysfs:", err)
	}
	for _, e := range entries {
		target, err := filepath.EvalSymlinks(filepath.Join("/sys/dev/block", e.Name()))
		if err != nil {
			continue
		}
		name := filepath.Base(target)
		node := filepath.Join("/dev", name)
		var st unix.Stat_t
		if unix.Stat(node, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
			continue
		}
		d, err := ForPath(node)
		if err != nil {
			t.Fatalf("ForPath(%q): %v", node, err)
		}
		if d.Name != name {
			t.Errorf("ForPath(%q) = %+v, want Name %q", node, d, name)
		}
		return
	}
	t.Skip("no block device node found in /dev")
}

func TestForPathMissing(t *testing.T) {
	_, err := ForPath(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ForPath(missing) error = %v, want fs.ErrNotExist", err)
	}
}

func TestForFdBad(t *testing.T) {
	if _, err := ForFd(-1); !errors.Is(err, unix.EBADF) {
		t.Errorf("ForFd(-1) error = %v, want EBADF", err)
	}
}

func TestFSType(t *testing.T) {
	got, err := FSType(t.TempDir())
	if err != nil || got == "" {
		t.Errorf("FSType(TempDir) = %q, %v", got, err)
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		if got, err := FSType("/proc/self"); got != "proc" || err != nil {
			t.Errorf("FSType(/proc/self) = %q, %v, want proc", got, err)
		}
	}
	if _, err := FSType(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FSType(missing) error = %v, want fs.ErrNotExist", err)
	}
}

func TestFSName(t *testing.T) {
	btrfs := int32(-0x6edc97c2) // 0x9123683e as a signed 32-bit f_type
	tests := []struct {
		magic int64
		want  string
	}{
		{0xef53, "ext4"},
		{0x58465342, "xfs"},
		{0x9123683e, "btrfs"},
		{int64(btrfs), "btrfs"},
		{0x01021994, "tmpfs"},
		{0x794c7630, "overlay"},
		{0x6969, "nfs"},
		{0x65735546, "fuse"},
		{0x2fc12fc1, "zfs"},
		{0x12345678, "0x12345678"},
	}
	for _, tt := range tests {
		if got := fsName(tt.magic); got != tt.want {
			t.Errorf("fsName(%#x) = %q, want %q", tt.magic, got, tt.want)
		}
	}
}

func TestIsWSL(t *testing.T) {
	old := unameRelease
	t.Cleanup(func() { unameRelease = old })
	tests := []struct {
		release string
		want    bool
	}{
		{"5.15.153.1-microsoft-standard-WSL2", true},
		{"4.4.0-19041-Microsoft", true},
		{"6.8.0-45-generic", false},
		{"", false},
	}
	for _, tt := range tests {
		unameRelease = func() string { return tt.release }
		if got := IsWSL(); got != tt.want {
			t.Errorf("IsWSL() with release %q = %v, want %v", tt.release, got, tt.want)
		}
	}
}

func TestUnameRelease(t *testing.T) {
	if unameRelease() == "" {
		t.Error("unameRelease() is empty")
	}
}

func TestForPathTmpfs(t *testing.T) {
	const dir = "/dev/shm"
	if typ, err := FSType(dir); err != nil || typ != "tmpfs" {
		t.Skipf("%s is not tmpfs (%q, %v)", dir, typ, err)
	}
	d, err := ForPath(dir)
	if err != nil {
		t.Fatalf("ForPath(%q): %v", dir, err)
	}
	want := strconv.FormatUint(uint64(d.Major), 10) + ":" + strconv.FormatUint(uint64(d.Minor), 10)
	if d.Major != 0 || d.Name != "" || d.Parent != want || d.Key() != want {
		t.Errorf("ForPath(%q) = %+v, key %q; want major 0, no name, key %q", dir, d, d.Key(), want)
	}
}
