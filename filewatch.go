package kvik

import (
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// WatchFile returns a function that reports, with an error wrapping
// ErrFileChanged, whether the local file that r reads was written to
// after WatchFile was called: its size or modification time differs.
// The file format loaders call it before they read a file's header and
// the function once they have read its data, so that a file rewritten in
// place while it was loaded (a checkpoint saved over the one being
// read) is not taken for a whole one. A FileHandle (or any Reader with
// an Fd method) is checked through its descriptor, an MmapHandle through
// its path while that still names the mapped file. The function does
// nothing for a RemoteHandle, whose reads are pinned to one version of
// the object (ErrObjectChanged), nor for other readers.
func WatchFile(r Reader) (check func() error) {
	switch h := r.(type) {
	case interface{ Fd() int }:
		return watch(r.Name(), func(st *unix.Stat_t) error { return unix.Fstat(h.Fd(), st) })
	case *MmapHandle:
		return watch(r.Name(), func(st *unix.Stat_t) error { return unix.Stat(h.name, st) })
	}
	return func() error { return nil }
}

// watch is WatchFile's check for the file that stat describes, named
// name in its error.
func watch(name string, stat func(*unix.Stat_t) error) func() error {
	var was unix.Stat_t
	if stat(&was) != nil {
		return func() error { return nil }
	}
	return func() error {
		var now unix.Stat_t
		if stat(&now) != nil || now.Dev != was.Dev || now.Ino != was.Ino {
			return nil // closed, or the path names another file now: not the one read
		}
		if now.Size == was.Size && now.Mtim == was.Mtim {
			return nil
		}
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes modified %s before the read, %d bytes modified %s after it",
			ErrFileChanged, was.Size, stamp(was.Mtim), now.Size, stamp(now.Mtim))}
	}
}

// stamp formats a file time for WatchFile's errors.
func stamp(t unix.Timespec) string {
	return time.Unix(t.Unix()).UTC().Format(time.RFC3339Nano)
}
