package kvik

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
)

// PendingFile is a file being written in place of another: a temporary
// file beside the target that Commit renames over it, so that readers of
// the target see the old contents or the new, never a torn file, and a
// failed write leaves the old file as it was. Its FileHandle methods
// write the temporary file.
type PendingFile struct {
	*FileHandle
	target string
	done   bool
}

var pendingSeq atomic.Uint64

// CreatePending opens a new temporary file in the directory of path for
// writing, with permission perm (DefaultPerm when 0). Call Commit to
// replace path with it, or Abort to remove it; Abort after Commit does
// nothing, so it can be deferred.
func CreatePending(path string, perm fs.FileMode, opts ...Option) (*PendingFile, error) {
	if perm == 0 {
		perm = DefaultPerm
	}
	tmp := pendingName(path)
	f, err := OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm, opts...)
	if err != nil {
		if !errors.Is(err, fs.ErrExist) {
			os.Remove(tmp) // created before a later step of the open failed
		}
		return nil, &fs.PathError{Op: "create", Path: path, Err: pathErrInner(err)}
	}
	return &PendingFile{FileHandle: f, target: path}, nil
}

// pendingMark is in the name of every temporary file of CreatePending.
const pendingMark = ".kvik-tmp-"

// pendingName names a temporary file next to path: hidden, marked with
// the process id and a counter so that concurrent writers never share
// one, and recognisable for clean-up (".name.kvik-tmp-PID-N").
func pendingName(path string) string {
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+pendingMark+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(pendingSeq.Add(1), 10))
}

// IsPendingName reports whether the base name of a file is that of a
// CreatePending temporary file: one a crash may have left behind, which
// listings skip and clean-up may remove.
func IsPendingName(name string) bool {
	return strings.HasPrefix(filepath.Base(name), ".") && strings.Contains(filepath.Base(name), pendingMark)
}

// pathErrInner returns the error a *fs.PathError wraps, so that it can be
// named again after the path the caller knows; other errors as they are.
func pathErrInner(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// Target returns the path that Commit replaces.
func (p *PendingFile) Target() string { return p.target }

// Commit syncs the temporary file, closes it, renames it over the target
// and syncs the directory, so that the new contents are durable under the
// target's name when Commit returns. On any error the temporary file is
// removed and the target is left as it was.
func (p *PendingFile) Commit() error {
	if p.done {
		return &fs.PathError{Op: "commit", Path: p.target, Err: ErrClosed}
	}
	p.done = true
	tmp := p.FileHandle.Name()
	err := p.FileHandle.Sync()
	if cerr := p.FileHandle.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p.target)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(p.target))
}

// Abort closes and removes the temporary file, leaving the target as it
// was. It does nothing after Commit or a first Abort.
func (p *PendingFile) Abort() error {
	if p.done {
		return nil
	}
	p.done = true
	err := p.FileHandle.Close()
	if rerr := os.Remove(p.FileHandle.Name()); err == nil {
		err = rerr
	}
	return err
}

// Close is Abort: a PendingFile is kept only through Commit.
func (p *PendingFile) Close() error { return p.Abort() }

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: a file system that cannot sync directories
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	return nil
}

// Piece is one run of bytes of a file that SaveFile writes: Data in host
// memory or, when Ptr is not 0, Size bytes of device memory at Ptr.
type Piece struct {
	Data []byte
	Ptr  cuda.DevicePtr
	Size int64
}

// Len returns the piece's length in bytes.
func (p Piece) Len() int64 {
	if p.Ptr != 0 {
		return p.Size
	}
	return int64(len(p.Data))
}

// SaveFile writes pieces, one after another, as the whole file or object
// name, never leaving a torn or partial one behind:
//
//   - a local path is written through CreatePending, the pieces in
//     parallel (PWrite, PWriteDevice), then committed: on any error the
//     old file, if any, is left as it was and the temporary file removed;
//   - an s3:// URL or an S3 object's URL (see IsURL) is uploaded as
//     UploadS3 does, with opts: in one PUT or a multipart upload that is
//     aborted on any error, so the object appears whole or not at all.
//
// ctx cancels the writes. The file formats' Save functions write through
// SaveFile.
func SaveFile(ctx context.Context, name string, pieces []Piece, opts ...RemoteOption) error {
	for i, p := range pieces {
		if p.Ptr != 0 && (p.Size < 0 || p.Size > int64(maxInt)) {
			return &fs.PathError{Op: "write", Path: RedactURL(name), Err: fmt.Errorf("%w: piece %d: size %d", ErrInvalidArgument, i, p.Size)}
		}
	}
	if IsURL(name) {
		return savePiecesS3(ctx, name, pieces, opts)
	}
	return savePiecesLocal(ctx, name, pieces)
}

const maxInt = int(^uint(0) >> 1)

func savePiecesLocal(ctx context.Context, path string, pieces []Piece) error {
	f, err := CreatePending(path, 0)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := writePieces(ctx, f.FileHandle, pieces); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: pathErrInner(err)}
	}
	return f.Commit()
}

// writePieces starts every piece's write, then waits for all of them.
func writePieces(ctx context.Context, f *FileHandle, pieces []Piece) error {
	futs := make([]*Future, 0, len(pieces))
	want := make([]int64, 0, len(pieces))
	var off int64
	for _, p := range pieces {
		n := p.Len()
		switch {
		case n == 0:
		case p.Ptr != 0:
			futs = append(futs, f.PWriteDevice(ctx, p.Ptr, int(n), off, 0))
		default:
			futs = append(futs, f.PWrite(ctx, p.Data, off))
		}
		if n != 0 {
			want = append(want, n)
		}
		off += n
	}
	var first error
	for i, fu := range futs {
		n, err := fu.Get()
		if err == nil && int64(n) != want[i] {
			err = &fs.PathError{Op: "write", Path: f.Name(), Err: io.ErrShortWrite}
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func savePiecesS3(ctx context.Context, url string, pieces []Piece, opts []RemoteOption) error {
	devs, err := resolvePieces(pieces)
	if err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: err}
	}
	return uploadPieces(ctx, url, pieces, devs, opts)
}

// piecesReader streams [off, off+n) of the concatenated pieces: host
// pieces from their slices, device pieces through pinned bounce buffers
// (newDeviceBody), which Close returns.
func piecesReader(d Defaults, pieces []Piece, devs []deviceRange, off, n int64) io.ReadCloser {
	var rs []io.Reader
	var cs []io.Closer
	var pos int64
	for i, p := range pieces {
		l := p.Len()
		lo, hi := max(off, pos), min(off+n, pos+l)
		if lo < hi {
			a, b := lo-pos, hi-pos
			if p.Ptr == 0 {
				rs = append(rs, bytes.NewReader(p.Data[a:b]))
			} else {
				db := newDeviceBody(d, devs[i], a, int(b-a))
				rs, cs = append(rs, db), append(cs, db)
			}
		}
		pos += l
	}
	return &multiBody{Reader: io.MultiReader(rs...), closers: cs}
}

// multiBody is a request body made of several readers, closing those
// that hold resources when the transport closes it.
type multiBody struct {
	io.Reader
	closers []io.Closer
}

func (m *multiBody) Close() error {
	for _, c := range m.closers {
		c.Close()
	}
	return nil
}
