package blockdev

import (
	"fmt"
	"io/fs"
	"strings"

	"golang.org/x/sys/unix"
)

// Magic numbers that golang.org/x/sys/unix does not define.
const (
	zfsSuperMagic    = 0x2fc12fc1
	gpfsSuperMagic   = 0x47504653
	lustreSuperMagic = 0x0bd00bd0
	beegfsSuperMagic = 0x19830326
	ntfsSuperMagic   = 0x5346544e
	ntfs3SuperMagic  = 0x7366746e
)

// fsNames maps statfs f_type magic numbers to file system names. ext2, ext3
// and ext4 share one magic number and are all reported as "ext4".
var fsNames = map[uint32]string{
	unix.EXT4_SUPER_MAGIC:      "ext4",
	unix.XFS_SUPER_MAGIC:       "xfs",
	unix.BTRFS_SUPER_MAGIC:     "btrfs",
	unix.F2FS_SUPER_MAGIC:      "f2fs",
	unix.BCACHEFS_SUPER_MAGIC:  "bcachefs",
	zfsSuperMagic:              "zfs",
	unix.TMPFS_MAGIC:           "tmpfs",
	unix.RAMFS_MAGIC:           "ramfs",
	unix.HUGETLBFS_MAGIC:       "hugetlbfs",
	unix.OVERLAYFS_SUPER_MAGIC: "overlay",
	unix.SQUASHFS_MAGIC:        "squashfs",
	unix.NFS_SUPER_MAGIC:       "nfs",
	unix.SMB2_SUPER_MAGIC:      "smb2",
	unix.CIFS_SUPER_MAGIC:      "cifs",
	unix.CEPH_SUPER_MAGIC:      "ceph",
	lustreSuperMagic:           "lustre",
	gpfsSuperMagic:             "gpfs",
	beegfsSuperMagic:           "beegfs",
	unix.FUSE_SUPER_MAGIC:      "fuse",
	unix.V9FS_MAGIC:            "9p",
	unix.MSDOS_SUPER_MAGIC:     "vfat",
	unix.EXFAT_SUPER_MAGIC:     "exfat",
	ntfsSuperMagic:             "ntfs",
	ntfs3SuperMagic:            "ntfs3",
	unix.ISOFS_SUPER_MAGIC:     "iso9660",
	unix.UDF_SUPER_MAGIC:       "udf",
	unix.PROC_SUPER_MAGIC:      "proc",
	unix.SYSFS_MAGIC:           "sysfs",
	unix.DEVPTS_SUPER_MAGIC:    "devpts",
	unix.CGROUP2_SUPER_MAGIC:   "cgroup2",
	unix.DEBUGFS_MAGIC:         "debugfs",
	unix.TRACEFS_MAGIC:         "tracefs",
	unix.BPF_FS_MAGIC:          "bpf",
}

// FSType returns the name of the file system that holds path, such as
// "ext4", "xfs", "tmpfs" or "overlay", from the statfs magic number. An
// unknown magic number is returned in hexadecimal, as "0x1234abcd".
func FSType(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: path, Err: err}
	}
	return fsName(int64(st.Type)), nil
}

// fsName names the file system with magic number typ. The field is signed
// on some architectures, so only its low 32 bits are used.
func fsName(typ int64) string {
	magic := uint32(typ)
	if name, ok := fsNames[magic]; ok {
		return name
	}
	return fmt.Sprintf("0x%x", magic)
}

// unameRelease returns the kernel release; tests replace it.
var unameRelease = func() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// IsWSL reports whether the program runs under Windows Subsystem for Linux,
// whose kernel release names Microsoft ("5.15.90.1-microsoft-standard-WSL2").
func IsWSL() bool {
	return strings.Contains(strings.ToLower(unameRelease()), "microsoft")
}
