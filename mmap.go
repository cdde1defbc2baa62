package kvik

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/posix"
)

// ErrOutOfRange reports a read of bytes inside the file but outside the
// region an MmapHandle mapped.
var ErrOutOfRange = errors.New("kvik: range outside the mapped region")

// MmapHandle is a read-only, memory-mapped file: the counterpart of
// kvikio::MmapHandle. Reads copy from the mapping in parallel tasks, each
// prefaulting its pages first (MADV_POPULATE_READ) so that page faults
// are taken in one call per task instead of one per page; device reads
// copy through pinned bounce buffers, overlapping the copies out of the
// mapping with those to the GPU.
//
// The mapping covers the region chosen at open (the whole file by
// default); a read outside it fails with ErrOutOfRange. An MmapHandle is
// safe for concurrent use; Close waits for operations in flight and
// unmaps.
type MmapHandle struct {
	name     string
	fileSize int64
	mapOff   int64  // file offset of the region, as asked
	mapSize  int64  // bytes in the region
	mem      []byte // the mapping; starts at the page below mapOff
	memOff   int64  // file offset of mem[0]

	opGate      // mu also guards the registration fields
	readMethods // ReadAt, Read, PRead, ReadDevice, PReadDevice

	// Zero-copy device reads (mmap_register.go): the mapping registered
	// with the driver in regCtx, and the reads using it.
	registered  bool
	regCtx      cuda.Context
	regInflight int
}

// MmapOption configures OpenMmap.
type MmapOption func(*mmapOptions)

type mmapOptions struct {
	size    int64
	hasSize bool
	off     int64
}

// WithMapSize maps size bytes instead of the rest of the file, as KvikIO's
// initial_map_size. size must be positive.
func WithMapSize(size int64) MmapOption {
	return func(o *mmapOptions) { o.size, o.hasSize = size, true }
}

// WithMapOffset starts the mapped region at file offset off, as KvikIO's
// initial_map_offset. It need not be page-aligned.
func WithMapOffset(off int64) MmapOption {
	return func(o *mmapOptions) { o.off = off }
}

// OpenMmap maps the file at path read-only. flags are KvikIO's open flags;
// only "r" (or "rb") is accepted, since an MmapHandle cannot write: other
// flags fail with ErrNotWritable. The region is the whole file unless
// WithMapOffset or WithMapSize narrow it; an empty file maps nothing. A
// file that is neither a regular file nor a block device (a directory, a
// FIFO, a socket, a character device) fails with ErrNotRegular, naming
// what it is.
func OpenMmap(path, flags string, opts ...MmapOption) (*MmapHandle, error) {
	h, err := openMmap(path, flags, opts)
	if err != nil {
		return nil, &fs.PathError{Op: "mmap", Path: path, Err: err}
	}
	return h, nil
}

func openMmap(path, flags string, opts []MmapOption) (*MmapHandle, error) {
	flag, err := ParseOpenFlags(flags)
	if err != nil {
		return nil, err
	}
	if flag != os.O_RDONLY {
		return nil, fmt.Errorf("%w: MmapHandle is read-only (flags %q)", ErrNotWritable, flags)
	}
	var o mmapOptions
	for _, opt := range opts {
		opt(&o)
	}
	fd, st, err := openKind(path, unix.O_RDONLY|unix.O_CLOEXEC, 0, regularOrBlock)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd) // the mapping outlives the descriptor
	size, err := posix.SizeOf(fd, &st)
	if err != nil {
		return nil, err
	}
	h := &MmapHandle{name: path, fileSize: size, mapOff: o.off}
	h.initGate()
	h.readMethods = readMethods{h}
	if err := h.setRegion(o); err != nil {
		return nil, err
	}
	if h.mapSize == 0 {
		return h, nil
	}
	h.memOff = alignDown(h.mapOff, int64(pageSize))
	h.mem, err = unix.Mmap(fd, h.memOff, int(h.mapOff+h.mapSize-h.memOff), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// regularOrBlock takes the files that can be mapped: regular files and
// block devices.
func regularOrBlock(mode fs.FileMode) bool { return mode.IsRegular() || mode.Type() == fs.ModeDevice }

// setRegion checks the region asked for against the file.
func (h *MmapHandle) setRegion(o mmapOptions) error {
	switch {
	case o.off < 0 || (o.off > 0 && o.off >= h.fileSize):
		return fmt.Errorf("%w: map offset %d for a %d-byte file", ErrInvalidArgument, o.off, h.fileSize)
	case !o.hasSize:
		h.mapSize = h.fileSize - o.off
	case o.size <= 0 || o.size > h.fileSize-o.off:
		return fmt.Errorf("%w: map size %d at offset %d for a %d-byte file", ErrInvalidArgument, o.size, o.off, h.fileSize)
	default:
		h.mapSize = o.size
	}
	return nil
}

// Name returns the path the file was opened with.
func (h *MmapHandle) Name() string { return h.name }

// Size returns the file's size when it was opened; it fails with
// ErrClosed once the handle is closed.
func (h *MmapHandle) Size() (int64, error) {
	if h.Closed() {
		return 0, &fs.PathError{Op: "stat", Path: h.name, Err: ErrClosed}
	}
	return h.fileSize, nil
}

// MapOffset returns the file offset where the mapped region starts.
func (h *MmapHandle) MapOffset() int64 { return h.mapOff }

// MapSize returns the size of the mapped region in bytes.
func (h *MmapHandle) MapSize() int64 { return h.mapSize }

// Close waits for operations in flight and unmaps the file. Operations
// started once Close has begun fail with ErrClosed. Closing a closed
// handle does nothing.
func (h *MmapHandle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closeLocked() || h.mem == nil {
		return nil
	}
	if err := h.unregisterLocked(); err != nil {
		return err // leave it mapped: unmapping registered memory is undefined
	}
	err := unix.Munmap(h.mem)
	h.mem = nil
	if err != nil {
		return &fs.PathError{Op: "munmap", Path: h.name, Err: err}
	}
	return nil
}

// begin checks a read of size bytes at off, marks it in flight and
// returns the bytes it will move (clamped at end of file; eof says so).
func (h *MmapHandle) begin(off int64, size int) (Defaults, int, bool, error) {
	if err := checkRange(off, size); err != nil {
		return Defaults{}, 0, false, err
	}
	n, eof := clampRead(off, size, h.fileSize)
	if n > 0 && (off < h.mapOff || off+int64(n) > h.mapOff+h.mapSize) {
		return Defaults{}, 0, false, fmt.Errorf("%w: %d bytes at offset %d, mapped [%d, %d)",
			ErrOutOfRange, n, off, h.mapOff, h.mapOff+h.mapSize)
	}
	if err := h.enter(); err != nil {
		return Defaults{}, 0, false, err
	}
	d, _ := GetDefaults()
	return d, n, eof, nil
}

func (h *MmapHandle) fetcher(Defaults) fetchFunc {
	return func(_ context.Context, p []byte, off int64) (int, error) { return h.copyOut(p, off) }
}

func (h *MmapHandle) pathErr(err error) error {
	return &fs.PathError{Op: "read", Path: h.name, Err: err}
}

// copyOut copies the mapped bytes at file offset off into p, prefaulting
// them first. A page that cannot be read (the file was truncated after it
// was mapped) is an error, not a crash.
func (h *MmapHandle) copyOut(p []byte, off int64) (n int, err error) {
	if len(p) == 0 {
		return 0, nil
	}
	i := off - h.memOff
	src := h.mem[i : i+int64(len(p))]
	if err := populateRead(h.mem[alignDown(i, int64(pageSize)) : i+int64(len(p))]); err != nil {
		return 0, fmt.Errorf("prefault of %d bytes at offset %d: %w", len(p), off, err)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("%w: fault reading the mapping at offset %d (file truncated?): %v", io.ErrUnexpectedEOF, off, r)
		}
	}()
	return copy(p, src), nil
}
