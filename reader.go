package kvik

import (
	"context"
	"io"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/remote"
)

// Reader is what every kvik handle offers for reading: a local file
// (FileHandle), a memory mapping (MmapHandle) or a remote object
// (RemoteHandle). File formats read through a Reader, so they never know
// whether their bytes come from a disk, a mapping or S3.
//
// ReadAt has io.ReaderAt semantics; the other methods are those of
// FileHandle. Size reports the size in bytes (a FileHandle's current
// size, the others' size at open) and fails with ErrClosed once the
// handle is closed.
type Reader interface {
	io.ReaderAt
	io.Closer
	// Name is the path or the URL (without its query string) it was
	// opened with.
	Name() string
	Size() (int64, error)
	PRead(ctx context.Context, p []byte, off int64) *Future
	ReadDevice(buf cuda.DevicePtr, size int, fileOffset, devOffset int64) (int, error)
	PReadDevice(ctx context.Context, buf cuda.DevicePtr, size int, fileOffset, devOffset int64) *Future
}

var (
	_ Reader = (*FileHandle)(nil)
	_ Reader = (*MmapHandle)(nil)
	_ Reader = (*RemoteHandle)(nil)
)

// IsURL reports whether OpenReader takes name for a URL: one with a
// scheme that OpenRemote understands (s3, http, https). Anything else is
// a local path.
func IsURL(name string) bool { return remote.IsURL(name) }

// OpenReader opens name for reading: a URL (see IsURL) as a RemoteHandle,
// with opts and the endpoint type detected as OpenRemote does, and
// anything else as a local file, through a FileHandle opened "r" with the
// default settings. ctx bounds the requests that opening a URL makes.
// Callers who want an MmapHandle or other file options open the handle
// themselves: every handle is a Reader.
func OpenReader(ctx context.Context, name string, opts ...RemoteOption) (Reader, error) {
	if IsURL(name) {
		return OpenRemote(ctx, name, opts...)
	}
	return Open(name, "r", 0)
}
