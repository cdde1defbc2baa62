package zarr

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// WithProcessLocks makes the array writes of a DirStore wait for those of
// other processes, not only for those of the process (see
// Array.WriteRegion): each write of a chunk (of a shard, for a sharded
// array) holds an flock(2) on a lock file beside it, ".NAME.kvik-lock",
// from reading the chunk until it is stored, then removes the file. So
// processes on one machine, or on machines that share the directory
// through a file system with flock (NFS), may write disjoint parts of
// one chunk at once without losing any, as zarr-python's
// ProcessSynchronizer allows. Every process writing the array must open
// its store with this option; a file system without locks fails the
// write (ENOLCK or EOPNOTSUPP, in a *fs.PathError). Creating and
// removing the lock file costs each chunk written two metadata updates:
// a write of 256 KiB zstd chunks took 1.06x as long on ext4 (whose
// journal commits them with the chunk's fsync), 1.00-1.02x on tmpfs
// (BenchmarkProcessLocks). It has no effect on a RemoteStore.
func WithProcessLocks() StoreOption {
	return func(c *storeConfig) error { c.processLocks = true; return nil }
}

// lockMark ends the name of every lock file of WithProcessLocks.
const lockMark = ".kvik-lock"

// isLockName reports whether a file name is that of a lock file.
func isLockName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, lockMark)
}

// lockPath returns the lock file of the file at path: ".NAME.kvik-lock"
// beside it, or a digest of NAME where that name would be too long.
func lockPath(path string) string {
	dir, base := filepath.Split(path)
	name := "." + base + lockMark
	if len(name) > 255 {
		sum := sha256.Sum256([]byte(base))
		name = "." + hex.EncodeToString(sum[:16]) + lockMark
	}
	return filepath.Join(dir, name)
}

// Waits between tries of a lock held by another process.
const (
	lockPollMin = 100 * time.Microsecond
	lockPollMax = 10 * time.Millisecond
)

// lockFile takes the cross-process lock of the file at path (an absolute
// path with its links resolved, so that every spelling locks alike) and
// returns its release, or ctx's error while waiting. The lock file is
// created when missing and removed on release: a waiter whose lock is of
// a file removed meanwhile (its holder released it) tries again with the
// file now at the name, so that two holders never hold one name.
func lockFile(ctx context.Context, path string) (release func(), err error) {
	lp := lockPath(path)
	if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
		return nil, err
	}
	wait := lockPollMin
	for {
		fd, err := openLock(lp)
		if err != nil {
			return nil, err
		}
		held, err := flockWait(ctx, fd, lp, &wait)
		if err == nil && held {
			return func() { unix.Unlink(lp); unix.Close(fd) }, nil
		}
		unix.Close(fd)
		if err != nil {
			return nil, err
		}
	}
}

// openLock opens (creating) the lock file lp, refusing anything there
// but a regular file: a FIFO or device planted at the name is never
// waited on.
func openLock(lp string) (int, error) {
	fd, err := unix.Open(lp, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: lp, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &fs.PathError{Op: "stat", Path: lp, Err: err}
	}
	if err := notRegular(lp, st.Mode); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// flockWait takes an exclusive flock on fd, the lock file lp, waiting
// (with backoff from *wait) while another process holds it, and reports
// whether fd is still the file at lp once locked.
func flockWait(ctx context.Context, fd int, lp string, wait *time.Duration) (bool, error) {
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			return false, &fs.PathError{Op: "flock", Path: lp, Err: err}
		}
		t := time.NewTimer(*wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		*wait = min(2**wait, lockPollMax)
	}
	var held, at unix.Stat_t
	if err := unix.Fstat(fd, &held); err != nil {
		return false, &fs.PathError{Op: "stat", Path: lp, Err: err}
	}
	if err := unix.Lstat(lp, &at); err != nil {
		if err == unix.ENOENT {
			return false, nil
		}
		return false, &fs.PathError{Op: "stat", Path: lp, Err: err}
	}
	return held.Dev == at.Dev && held.Ino == at.Ino, nil
}
