package kvik

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/blockdev"
	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/internal/sched"
)

// FileHandle is an open file for parallel I/O between the file and host
// or device memory: the Go counterpart of kvikio::FileHandle. It keeps a
// buffered descriptor and, where the file system allows, an O_DIRECT one,
// plus a cuFile handle when device I/O goes through cuFile.
//
// A FileHandle is safe for concurrent use. Close waits for operations in
// flight; operations started after Close fail with ErrClosed.
type FileHandle struct {
	name     string
	flags    int
	fd       int
	fdDirect int // -1 when O_DIRECT is not available
	compat   CompatMode
	reason   string
	cuHandle cufile.Handle // 0 unless compat is CompatOff

	devKey func() string
	res    residencyState // for the read policy; see residency.go

	opGate // operations in flight; Close waits for them
}

// Option configures Open and OpenFile.
type Option func(*openOptions)

type openOptions struct {
	compat    CompatMode
	hasCompat bool
}

// WithCompatMode sets the compat mode of one file, overriding the default
// (KVIKIO_COMPAT_MODE).
func WithCompatMode(m CompatMode) Option {
	return func(o *openOptions) { o.compat, o.hasCompat = m, true }
}

// DefaultPerm is the permission Open gives files it creates when perm is 0.
const DefaultPerm fs.FileMode = 0o644

// Open opens the file at path with KvikIO's flags ("r", "r+", "w", "w+";
// see ParseOpenFlags). perm applies when the file is created; 0 means
// DefaultPerm.
func Open(path, flags string, perm fs.FileMode, opts ...Option) (*FileHandle, error) {
	flag, err := ParseOpenFlags(flags)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return OpenFile(path, flag, perm, opts...)
}

// OpenFile opens the file at path with os.O_* flags, like os.OpenFile.
// O_APPEND is refused, since positioned writes cannot honour it; O_DIRECT
// is ignored, since the handle opens its own O_DIRECT descriptor. perm
// applies when the file is created; 0 means DefaultPerm. A directory, FIFO
// or socket fails with ErrNotRegular, naming what it is, without waiting
// for a FIFO's other end; regular files and device nodes open.
func OpenFile(path string, flag int, perm fs.FileMode, opts ...Option) (*FileHandle, error) {
	var o openOptions
	for _, opt := range opts {
		opt(&o)
	}
	f, err := openFile(path, flag, perm, o)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

func openFile(path string, flag int, perm fs.FileMode, o openOptions) (*FileHandle, error) {
	if flag&os.O_APPEND != 0 {
		return nil, fmt.Errorf("%w: O_APPEND cannot be used with positioned I/O", ErrInvalidArgument)
	}
	d, err := GetDefaults()
	if err != nil {
		return nil, err
	}
	mode := d.CompatMode
	if o.hasCompat {
		mode = o.compat
	}
	compat, reason, err := resolveCompat(mode)
	if err != nil {
		return nil, err
	}
	if perm == 0 {
		perm = DefaultPerm
	}
	flag &^= unix.O_DIRECT
	fd, st, err := openKind(path, flag|unix.O_CLOEXEC, uint32(perm.Perm()), regularOrDevice)
	if err != nil {
		return nil, err
	}
	f := &FileHandle{name: path, flags: flag, fd: fd, fdDirect: -1, compat: compat, reason: reason}
	f.initGate()
	f.devKey = sync.OnceValue(func() string {
		dev, err := blockdev.ForFd(f.fd)
		if err != nil {
			return ""
		}
		return dev.Key()
	})
	dfd, derr := openDirect(path, flag, &st)
	if derr == nil {
		f.fdDirect = dfd
	}
	refused := false
	if compat == CompatOff {
		if err := f.registerCuFile(mode, derr); err != nil {
			f.closeFds()
			return nil, err
		}
		refused = f.compat != compat
	}
	f.logOpen(mode, refused, derr)
	return f, nil
}

// openDirect opens path's O_DIRECT descriptor, with flag less those that
// create or truncate, which the first open did. It must reach the file
// of that open, whose stat is st.
func openDirect(path string, flag int, st *unix.Stat_t) (int, error) {
	fd, dst, err := posix.OpenStat(path, (flag&^(os.O_CREATE|os.O_TRUNC|os.O_EXCL))|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if dst.Dev != st.Dev || dst.Ino != st.Ino {
		unix.Close(fd)
		return -1, errors.New("the path was replaced by another file after the first open")
	}
	return fd, nil
}

// logOpen records the compat decision of a handle and why (at LevelWarn
// when cuFile refused the file under auto, at LevelInfo otherwise), and
// whether it has an O_DIRECT descriptor.
func (f *FileHandle) logOpen(requested CompatMode, refused bool, directErr error) {
	level := LevelInfo
	if refused {
		level = LevelWarn
	}
	l := logAt(level)
	if l == nil {
		return
	}
	attrs := []slog.Attr{slog.String("path", f.name), slog.String("requested", requested.String()),
		slog.String("compat_mode", f.compat.String()), slog.String("reason", f.reason), slog.Bool("direct_io", f.fdDirect >= 0)}
	if directErr != nil {
		attrs = append(attrs, slog.String("direct_io_error", directErr.Error()))
	}
	l.LogAttrs(context.Background(), level, "kvik: open", attrs...)
}

// registerCuFile registers the O_DIRECT descriptor with cuFile. Under
// CompatAuto a failure falls back to POSIX I/O, with the reason kept.
func (f *FileHandle) registerCuFile(requested CompatMode, directErr error) error {
	var err error
	if directErr != nil {
		err = fmt.Errorf("O_DIRECT open failed, which cuFile needs: %w", directErr)
	} else {
		f.cuHandle, err = cufile.HandleRegister(f.fdDirect)
	}
	if err == nil {
		return nil
	}
	if requested == CompatOff {
		return fmt.Errorf("%w: %w", ErrCuFileRequired, err)
	}
	f.compat, f.reason = CompatOn, fmt.Sprintf("auto: cuFile refused this file (%v); using POSIX I/O", err)
	return nil
}

func (f *FileHandle) closeFds() error {
	var errs []error
	if f.fdDirect >= 0 {
		errs = append(errs, unix.Close(f.fdDirect))
		f.fdDirect = -1
	}
	errs = append(errs, unix.Close(f.fd))
	f.fd = -1
	return errors.Join(errs...)
}

// Close waits for operations in flight, releases the cuFile handle and
// closes the descriptors. Operations started once Close has begun fail
// with ErrClosed. Closing a closed handle does nothing.
func (f *FileHandle) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closeLocked() {
		return nil
	}
	if f.cuHandle != 0 {
		cufile.HandleDeregister(f.cuHandle)
		f.cuHandle = 0
	}
	if err := f.closeFds(); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// Name returns the path the file was opened with.
func (f *FileHandle) Name() string { return f.name }

// Fd returns the buffered file descriptor, or -1 after Close.
func (f *FileHandle) Fd() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fd
}

// FdDirect returns the O_DIRECT file descriptor, or -1 if the file system
// refused O_DIRECT or the handle is closed.
func (f *FileHandle) FdDirect() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fdDirect
}

// IsDirectIOSupported reports whether the file could be opened with
// O_DIRECT.
func (f *FileHandle) IsDirectIOSupported() bool { return f.FdDirect() >= 0 }

// CompatMode returns the mode the handle resolved to: CompatOff when
// device I/O goes through cuFile, CompatOn when it goes through POSIX I/O.
func (f *FileHandle) CompatMode() CompatMode { return f.compat }

// CompatReason says why the handle resolved to its compat mode.
func (f *FileHandle) CompatReason() string { return f.reason }

// Size returns the file's current size in bytes; a block device's is
// the device's size (its stat says 0).
func (f *FileHandle) Size() (int64, error) {
	if err := f.enter(); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: err}
	}
	defer f.release()
	return f.size()
}

// size is Size for callers inside an operation, which hold the handle
// open already.
func (f *FileHandle) size() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: err}
	}
	n, err := posix.SizeOf(f.fd, &st)
	if err != nil {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: err}
	}
	return n, nil
}

// fsync is fsync(2): every sync of the package goes through it, so that
// tests can count them.
var fsync = unix.Fsync

// Sync commits the file's data and metadata to storage (fsync). Data
// written is durable only after Sync.
func (f *FileHandle) Sync() error {
	if err := f.enter(); err != nil {
		return &fs.PathError{Op: "sync", Path: f.name, Err: err}
	}
	defer f.release()
	if err := fsync(f.fd); err != nil {
		return &fs.PathError{Op: "sync", Path: f.name, Err: err}
	}
	return nil
}

func (f *FileHandle) readable() bool { return f.flags&(os.O_WRONLY|os.O_RDWR) != os.O_WRONLY }
func (f *FileHandle) writable() bool { return f.flags&(os.O_WRONLY|os.O_RDWR) != 0 }

// pool returns the worker pool for this file under settings d.
func (f *FileHandle) pool(d Defaults) *sched.Pool {
	if !d.ThreadPoolPerBlockDevice {
		return poolFor(d, "")
	}
	return poolFor(d, f.devKey())
}

// devicePool returns the pool for the file's operations on device memory
// in ctx.
func (f *FileHandle) devicePool(d Defaults, ctx cuda.Context) *sched.Pool {
	if !d.ThreadPoolPerBlockDevice {
		return devicePoolFor(d, "", ctx)
	}
	return devicePoolFor(d, f.devKey(), ctx)
}
