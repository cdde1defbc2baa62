// Package blockdev finds the block device that holds a file, through the
// file's device number and Linux sysfs, and names the file system it lives
// on. kvik uses it to give each storage device its own worker pool and to
// describe the storage in `kvik info`.
package blockdev

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sysRoot is where sysfs is mounted; tests point it at a fake tree.
var sysRoot = "/sys"

// Device describes the block device that holds a file.
type Device struct {
	// Major and Minor are the device number: st_dev of the file, or
	// st_rdev when the file is itself a block device node.
	Major, Minor uint32

	// Name is the kernel name of the device, such as "sda1", "nvme0n1p2"
	// or "dm-0"; it is empty when the device is not a block device known
	// to sysfs (tmpfs, overlayfs, btrfs subvolumes, NFS, FUSE, ...).
	Name string

	// Parent names the physical device that serves Name: the whole disk
	// for a partition ("sda1" -> "sda"), and the controller for an NVMe
	// namespace or a partition on one ("nvme0n1p2" -> "nvme0"). Devices
	// with no parent, such as "sda" or "dm-0", are their own parent. For a
	// device unknown to sysfs, Parent is the device number, "MAJ:MIN".
	Parent string

	// Rotational reports whether the whole disk says it is rotational
	// (/sys/block/DISK/queue/rotational is 1). It is false when unknown.
	Rotational bool
}

// Key returns the string that identifies the device for worker pool
// selection: Parent when it is known, otherwise "MAJ:MIN". Files on the same
// physical device share a key; files with no block device (tmpfs, overlayfs)
// get one key per file system instance.
func (d Device) Key() string {
	if d.Parent != "" {
		return d.Parent
	}
	return d.devNum()
}

// devNum returns the device number as "MAJ:MIN".
func (d Device) devNum() string {
	return strconv.FormatUint(uint64(d.Major), 10) + ":" + strconv.FormatUint(uint64(d.Minor), 10)
}

// ForFd returns the block device that holds the open file fd.
func ForFd(fd int) (Device, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Device{}, os.NewSyscallError("fstat", err)
	}
	return fromStat(&st), nil
}

// ForPath returns the block device that holds the file at path, following
// symbolic links. If path names a block device node, that device is
// described instead of the file system that holds the node.
func ForPath(path string) (Device, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return Device{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return fromStat(&st), nil
}

// fromStat resolves the device of a stat result.
func fromStat(st *unix.Stat_t) Device {
	dev := uint64(st.Dev)
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		dev = uint64(st.Rdev)
	}
	return lookup(unix.Major(dev), unix.Minor(dev))
}

// lookup describes the device major:minor from sysfs. A device that sysfs
// does not list, or an unreadable sysfs, is not an error: the result then
// carries only the device number.
func lookup(major, minor uint32) Device {
	d := Device{Major: major, Minor: minor}
	dir, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "dev", "block", d.devNum()))
	if err != nil {
		d.Parent = d.devNum()
		return d
	}
	d.Name = filepath.Base(dir)
	disk := dir
	if isFile(filepath.Join(dir, "partition")) {
		disk = filepath.Dir(dir)
	}
	d.Parent = controller(disk)
	d.Rotational = readTrimmed(filepath.Join(disk, "queue", "rotational")) == "1"
	return d
}

// controller returns the name of the device that serves the whole disk at
// sysfs directory disk: the NVMe controller for an NVMe namespace, and the
// disk itself for anything else.
func controller(disk string) string {
	name := filepath.Base(disk)
	ctrl, ok := nvmeController(name)
	if !ok {
		return name
	}
	// A namespace's device link points at its controller. The link of a
	// multipath namespace points at its subsystem instead; fall back to
	// the controller number in the namespace name then.
	if target, err := os.Readlink(filepath.Join(disk, "device")); err == nil {
		if base := filepath.Base(target); isNVMeName(base) {
			return base
		}
	}
	return ctrl
}

// nvmeController splits an NVMe namespace name "nvmeXnY" and returns
// "nvmeX"; ok is false for any other name.
func nvmeController(name string) (ctrl string, ok bool) {
	i := strings.LastIndexByte(name, 'n')
	if i <= 0 || !isNVMeName(name[:i]) || !isDigits(name[i+1:]) {
		return "", false
	}
	return name[:i], true
}

// isNVMeName reports whether name is an NVMe controller name, "nvmeX".
func isNVMeName(name string) bool {
	rest, ok := strings.CutPrefix(name, "nvme")
	return ok && isDigits(rest)
}

// isDigits reports whether s is a non-empty string of decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isFile reports whether path exists and is a regular file.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// readTrimmed returns the content of a small sysfs attribute without
// surrounding white space, or "" if it cannot be read.
func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
