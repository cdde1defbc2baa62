package kvik

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"syscall"
	"unsafe"

	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/internal/sched"
)

// ReadAt reads len(p) bytes at offset off in parallel tasks. It satisfies
// io.ReaderAt: when n < len(p) the error is non-nil, and io.EOF at end of
// file.
func (f *FileHandle) ReadAt(p []byte, off int64) (int, error) {
	return f.hostOp(context.Background(), opRead, p, off, nil)
}

// WriteAt writes len(p) bytes at offset off in parallel tasks. It satisfies
// io.WriterAt: when n < len(p) the error is non-nil. n counts the bytes
// from off that are known written; later ranges may have reached the file
// too.
func (f *FileHandle) WriteAt(p []byte, off int64) (int, error) {
	return f.hostOp(context.Background(), opWrite, p, off, nil)
}

// Read reads size bytes at fileOffset into buf[:size], in parallel, and
// returns when done (KvikIO's FileHandle.read). A read that reaches end of
// file returns the bytes read and io.EOF.
func (f *FileHandle) Read(buf []byte, size int, fileOffset int64) (int, error) {
	if size < 0 || size > len(buf) {
		return 0, f.pathErr(opRead, fmt.Errorf("%w: size %d for a %d-byte buffer", ErrInvalidArgument, size, len(buf)))
	}
	return f.ReadAt(buf[:size], fileOffset)
}

// Write writes buf[:size] at fileOffset, in parallel, and returns when done
// (KvikIO's FileHandle.write).
func (f *FileHandle) Write(buf []byte, size int, fileOffset int64) (int, error) {
	if size < 0 || size > len(buf) {
		return 0, f.pathErr(opWrite, fmt.Errorf("%w: size %d for a %d-byte buffer", ErrInvalidArgument, size, len(buf)))
	}
	return f.WriteAt(buf[:size], fileOffset)
}

// PRead starts reading len(p) bytes at off and returns at once. p must not
// be touched until the Future completes. Cancelling ctx stops tasks that
// have not started.
func (f *FileHandle) PRead(ctx context.Context, p []byte, off int64) *Future {
	fut := newFuture()
	f.hostOp(ctx, opRead, p, off, fut)
	return fut
}

// PWrite starts writing p at off and returns at once. p must not be
// changed until the Future completes.
func (f *FileHandle) PWrite(ctx context.Context, p []byte, off int64) *Future {
	fut := newFuture()
	f.hostOp(ctx, opWrite, p, off, fut)
	return fut
}

// begin checks an operation and marks it in flight. On success the caller
// must call f.release when the operation completes.
func (f *FileHandle) begin(kind opKind, off int64, size int) (Defaults, error) {
	if err := checkRange(off, size); err != nil {
		return Defaults{}, err
	}
	if kind == opRead && !f.readable() {
		return Defaults{}, ErrNotReadable
	}
	if kind == opWrite && !f.writable() {
		return Defaults{}, ErrNotWritable
	}
	d, _ := GetDefaults() // the handle opened, so the settings are valid
	return d, f.enter()
}

// hostOp runs a host-memory operation. With fut nil it blocks and returns
// the result; otherwise it completes fut and returns at once.
func (f *FileHandle) hostOp(ctx context.Context, kind opKind, p []byte, off int64, fut *Future) (int, error) {
	d, err := f.begin(kind, off, len(p))
	if err != nil {
		return f.fail(kind, err, fut)
	}
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		return f.hostTask(kind, d, p[t.BufOff:t.BufOff+t.Len], t.Off)
	}
	return f.run(ctx, kind, d, f.pool(d), off, len(p), fn, fut, nil)
}

// run splits [off, off+size) into tasks, runs fn on them in pool (or in
// the calling goroutine when pool is nil) and releases the handle when
// they finish, calling after first if it is not nil. With fut nil it
// blocks.
func (f *FileHandle) run(ctx context.Context, kind opKind, d Defaults, pool *sched.Pool, off int64, size int, fn sched.TaskFunc, fut *Future, after func()) (int, error) {
	return f.runTasks(ctx, kind, d, pool, sched.Split(off, size, d.TaskSize), fn, fut, after)
}

// runTasks is run with the tasks given (runOp).
func (f *FileHandle) runTasks(ctx context.Context, kind opKind, d Defaults, pool *sched.Pool, tasks []sched.Task, fn sched.TaskFunc, fut *Future, after func()) (int, error) {
	return runOp(ctx, pool, f.pool(d), tasks, fn, fut, func(n int, err error) (int, error) {
		if after != nil {
			after()
		}
		f.release()
		return n, f.wrapErr(kind, err)
	})
}

// fail reports an operation refused before it started, completing fut
// when there is one.
func (f *FileHandle) fail(kind opKind, err error, fut *Future) (int, error) {
	return failOp(f.pathErr(kind, err), fut)
}

// wrapErr adds the path to an operation's error, leaving io.EOF bare as
// io.ReaderAt callers expect.
func (f *FileHandle) wrapErr(kind opKind, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return f.pathErr(kind, err)
}

func (f *FileHandle) pathErr(kind opKind, err error) error {
	return &fs.PathError{Op: string(kind), Path: f.name, Err: err}
}

// hostTask moves one task's bytes between the file and host memory,
// using O_DIRECT for the page-aligned middle of writes when enabled, and
// for the parts of reads that the read policy sends there.
func (f *FileHandle) hostTask(kind opKind, d Defaults, b []byte, off int64) (int, error) {
	var segs []sched.Segment
	over := false
	if kind == opRead {
		segs = f.planRead(d, off, len(b))
		over = f.overreads(d, segs)
	} else {
		segs = sched.Segments(off, len(b), pageSize, f.fdDirect >= 0 && d.AutoDirectIOWrite)
	}
	done := 0
	for _, s := range segs {
		seg := b[s.BufOff : s.BufOff+s.Len]
		var n int
		var err error
		switch {
		case !s.Direct && kind == opRead && over && isFragment(s):
			n, err = f.overread(seg, s.Off)
		case !s.Direct && kind == opRead:
			n, err = posix.ReadFull(f.fd, seg, s.Off)
		case !s.Direct:
			n, err = posix.WriteFull(f.fd, seg, s.Off)
		case kind == opRead:
			n, err = f.directRead(d, seg, s.Off)
		default:
			n, err = f.directIO(kind, d, seg, s.Off)
		}
		done += n
		if err == io.EOF {
			return done, err
		}
		if err != nil {
			return done, fmt.Errorf("%s of %d bytes at offset %d: %w", kind, len(seg), s.Off+int64(n), err)
		}
	}
	return done, nil
}

// directIO transfers page-aligned b at page-aligned off with O_DIRECT,
// through a bounce buffer when b's address is not page-aligned. If the
// file system rejects the direct transfer (EINVAL), it finishes with
// buffered I/O.
func (f *FileHandle) directIO(kind opKind, d Defaults, b []byte, off int64) (int, error) {
	var n int
	var err error
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(pageSize) == 0 {
		n, err = f.directAligned(kind, b, off)
	} else {
		n, err = f.directBounced(kind, d, b, off)
	}
	if errors.Is(err, syscall.EINVAL) {
		f.logDirectFallback(kind, len(b)-n, off+int64(n), err)
		var m int
		if kind == opRead {
			m, err = posix.ReadFull(f.fd, b[n:], off+int64(n))
		} else {
			m, err = posix.WriteFull(f.fd, b[n:], off+int64(n))
		}
		n += m
	}
	return n, err
}

// logDirectFallback records an O_DIRECT transfer of n bytes at off that
// the file system refused (err), finished with buffered I/O.
func (f *FileHandle) logDirectFallback(kind opKind, n int, off int64, err error) {
	if l := logAt(LevelInfo); l != nil {
		l.LogAttrs(context.Background(), LevelInfo, "kvik: O_DIRECT refused, buffered I/O instead",
			slog.String("path", f.name), slog.String("op", string(kind)), slog.Int64("offset", off),
			slog.Int("size", n), slog.String("error", err.Error()))
	}
}

// maxEINTR bounds consecutive EINTR retries, as internal/posix does.
const maxEINTR = 1 << 10

// directAligned does O_DIRECT I/O from an aligned buffer. A transfer that
// stops short of a page boundary is finished with buffered I/O, which also
// tells a real end of file from a short read.
func (f *FileHandle) directAligned(kind opKind, b []byte, off int64) (int, error) {
	done, eintr := 0, 0
	for done < len(b) {
		var n int
		var err error
		if kind == opRead {
			n, err = posix.Pread(f.fdDirect, b[done:], off+int64(done))
		} else {
			n, err = posix.Pwrite(f.fdDirect, b[done:], off+int64(done))
		}
		if n > 0 {
			done += n
		}
		switch {
		case errors.Is(err, syscall.EINTR) && eintr < maxEINTR:
			eintr++
			continue
		case err != nil:
			return done, err
		case n == 0 && kind == opRead:
			return done, io.EOF
		case n <= 0:
			return done, io.ErrShortWrite
		case done%pageSize != 0 && done < len(b):
			// An unaligned partial transfer cannot continue with O_DIRECT.
			var m int
			if kind == opRead {
				m, err = posix.ReadFull(f.fd, b[done:], off+int64(done))
			} else {
				m, err = posix.WriteFull(f.fd, b[done:], off+int64(done))
			}
			return done + m, err
		}
		eintr = 0
	}
	return done, nil
}

// directBounced does O_DIRECT I/O for an unaligned buffer through a pooled
// page-aligned bounce buffer.
func (f *FileHandle) directBounced(kind opKind, d Defaults, b []byte, off int64) (int, error) {
	bb, err := hostBounce.Get(d.BounceBufferSize)
	if err != nil {
		return 0, err
	}
	defer hostBounce.Put(bb)
	done := 0
	for done < len(b) {
		chunk := bb.Mem[:min(len(bb.Mem), len(b)-done)]
		var n int
		if kind == opRead {
			n, err = f.directAligned(kind, chunk, off+int64(done))
			copy(b[done:], chunk[:n])
		} else {
			copy(chunk, b[done:])
			n, err = f.directAligned(kind, chunk, off+int64(done))
		}
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
