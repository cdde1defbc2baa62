package zarr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/posix"
	"golang.org/x/sys/unix"
)

// Store holds an array's metadata documents and chunks under string keys
// ("group/array/zarr.json", "group/array/c/0/1"): DirStore (a local
// directory) or RemoteStore (an S3 or HTTP(S) prefix). A missing key is
// reported with an error matching fs.ErrNotExist, and only a missing key:
// readers take it for the fill value, so every other failure must be an
// error of its own. Implementations are safe for concurrent use; ctx
// cancels the I/O a call makes.
type Store interface {
	// Get returns key's whole value: in buf when it fits in cap(buf),
	// else in a new slice.
	Get(ctx context.Context, key string, buf []byte) ([]byte, error)
	// ReadRange fills p with len(p) bytes of key's value at off and
	// returns the value's size. A negative off counts from the end. A
	// range that runs past the end fails with an error wrapping
	// io.ErrUnexpectedEOF (and the size, where known).
	ReadRange(ctx context.Context, key string, off int64, p []byte) (size int64, err error)
	// Set stores value under key, atomically: readers see the old value
	// or the new one, never a torn one.
	Set(ctx context.Context, key string, value []byte) error
	// SetDevice stores size bytes of device memory at buf+devOff under
	// key, atomically.
	SetDevice(ctx context.Context, key string, buf cuda.DevicePtr, size int, devOff int64) error
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys that start with prefix, sorted.
	List(ctx context.Context, prefix string) ([]string, error)
}

// storeConfig is what StoreOptions set, for either kind of store.
type storeConfig struct {
	normalizeKeys bool
	dimSep        string
	maxRequests   int
	wholeShards   bool
	processLocks  bool
	noSync        bool
	maxDocument   int64
	remote        []kvik.RemoteOption
}

// DirStore is a Zarr directory store: each key is a file below a root
// directory, "/" in a key separating directories. Reads of chunk data go
// through kvik FileHandles, into host memory or straight into device
// memory (cuFile where it can be used, else overlapped POSIX reads through
// pinned bounce buffers). Writes go to a temporary name in the same
// directory and are renamed into place, so a reader never sees a torn
// value. It is the counterpart of kvikio.zarr.GDSStore.
//
// A DirStore is safe for concurrent use.
type DirStore struct {
	root string
	storeConfig
}

var _ Store = (*DirStore)(nil)

// StoreOption configures a DirStore or a RemoteStore.
type StoreOption func(*storeConfig) error

// WithNormalizeKeys makes the store lower-case every key (KvikIO's and
// zarr-python's normalize_keys), so that "Foo" and "foo" name one file.
func WithNormalizeKeys(on bool) StoreOption {
	return func(s *storeConfig) error { s.normalizeKeys = on; return nil }
}

// WithDimensionSeparator sets the separator, "." or "/", between chunk
// indices of Zarr v2 arrays whose metadata names none (KvikIO's
// dimension_separator); it is also the default for v2 arrays created in
// the store. The default is ".".
func WithDimensionSeparator(sep string) StoreOption {
	return func(s *storeConfig) error {
		if sep != "." && sep != "/" {
			return fmt.Errorf("%w: dimension separator %q (want \".\" or \"/\")", ErrInvalidMetadata, sep)
		}
		s.dimSep = sep
		return nil
	}
}

// WithMaxDocumentSize caps a store's metadata documents at n bytes
// (default kvik.DefaultMaxDocumentSize, 64 MiB), for reader and writer
// alike: a RemoteStore reads none longer (kvik.WithMaxDocumentSize) and
// Consolidate writes none longer into either kind of store, so that
// what it writes can be read back. n < 1 is an error.
func WithMaxDocumentSize(n int64) StoreOption {
	return func(c *storeConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: a document size of %d bytes", kvik.ErrInvalidArgument, n)
		}
		c.maxDocument = n
		return nil
	}
}

// WithoutSync makes a DirStore's writes skip fsync(2) of each value's
// file and of its directory (kvik.WithoutSync): a write of an array of
// many chunks to a disk then runs at the pace of the page cache, not of
// the disk's flushes, and each chunk is still replaced atomically, but a
// crash of the machine soon after may lose chunks or leave them torn.
// zarr-python never syncs; TensorStore does unless told not to
// (file_io_sync). For arrays that can be written again; it has no effect
// on a RemoteStore or in tmpfs.
func WithoutSync() StoreOption {
	return func(c *storeConfig) error { c.noSync = true; return nil }
}

// MaxDocumentSize returns the cap on the metadata documents Consolidate
// writes (WithMaxDocumentSize, default kvik.DefaultMaxDocumentSize).
func (s *DirStore) MaxDocumentSize() int64 {
	if s.maxDocument > 0 {
		return s.maxDocument
	}
	return kvik.DefaultMaxDocumentSize
}

// NewDirStore opens a directory store at root. Opening creates nothing:
// a root that does not exist is an empty store, whose directory the first
// write creates. A root that exists and is no directory fails with
// syscall.ENOTDIR.
func NewDirStore(root string, opts ...StoreOption) (*DirStore, error) {
	s := &DirStore{root: root}
	if err := s.storeConfig.apply(opts); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: root, Err: syscall.ENOTDIR}
	}
	return s, nil
}

// Root returns the store's directory.
func (s *DirStore) Root() string { return s.root }

func (c *storeConfig) apply(opts []StoreOption) error {
	c.dimSep = "."
	for _, o := range opts {
		if err := o(c); err != nil {
			return err
		}
	}
	return nil
}

// DimensionSeparator returns the store's default v2 dimension separator.
func (c *storeConfig) DimensionSeparator() string { return c.dimSep }

// key checks a key and normalizes it if the store does, rejecting keys
// that would leave the store's root.
func (c *storeConfig) key(key string) (string, error) {
	if c.normalizeKeys {
		key = strings.ToLower(key)
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// checkKey fails with ErrInvalidKey for a key that cannot name a value
// below a store's root: empty, absolute, with a NUL or a backslash, or
// with an empty, "." or ".." segment.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsRune(key, 0) || strings.Contains(key, "\\") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// path maps a key to its file.
func (s *DirStore) path(key string) (string, error) {
	key, err := s.key(key)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Get returns the whole value of key, in buf when it fits in cap(buf).
func (s *DirStore) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	f, err := s.openHost(key)
	if err != nil {
		return nil, err
	}
	defer f.close()
	if f.size > int64(cap(buf)) {
		buf = make([]byte, f.size)
	}
	buf = buf[:f.size]
	if err := f.read(ctx, buf, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadRange reads len(p) bytes of key's value at off (from the end when
// off < 0) into host memory and returns the value's size. A range past
// the end is an error matching io.ErrUnexpectedEOF: partial values are
// never returned silently.
func (s *DirStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int64, error) {
	f, err := s.openHost(key)
	if err != nil {
		return -1, err
	}
	defer f.close()
	if off, err = inRange(key, off, int64(len(p)), f.size); err != nil {
		return f.size, err
	}
	return f.size, f.read(ctx, p, off)
}

// inRange returns the absolute offset of a read of n bytes at off (from
// the end when negative) of a value of size bytes, or an error matching
// io.ErrUnexpectedEOF where the value does not hold it.
func inRange(key string, off, n, size int64) (int64, error) {
	if off < 0 {
		off += size
	}
	if off < 0 || off > size || n > size-off {
		return 0, &fs.PathError{Op: "read", Path: key, Err: fmt.Errorf("range [%d, +%d) of a %d-byte value: %w", off, n, size, io.ErrUnexpectedEOF)}
	}
	return off, nil
}

// valueFile is a value's file opened for reads into host memory: one
// plain descriptor. A kvik FileHandle also opens an O_DIRECT descriptor
// and resolves its compat mode: for chunks of 16 KiB, opening and closing
// handles took a fifth of a read. Reads of more than inlineReadMax bytes
// go through a FileHandle and kvik's pool.
type valueFile struct {
	fd        int
	path, key string // the file's (for a FileHandle) and the value's (for errors)
	size      int64
	dev, ino  uint64 // the file's identity, which a FileHandle must share
}

// openHost opens key's file for reads into host memory. A file that is
// not a regular file fails with kvik.ErrNotRegular: a FIFO would have
// blocked the open (it is opened without blocking, then refused), a
// device node been read without end.
func (s *DirStore) openHost(key string) (*valueFile, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	fd, st, err := posix.OpenKind(p, unix.O_RDONLY|unix.O_CLOEXEC, 0, fs.FileMode.IsRegular, kvik.ErrNotRegular)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return &valueFile{fd: fd, path: p, key: key, size: st.Size, dev: st.Dev, ino: st.Ino}, nil
}

// notRegular returns nil for a stat mode of a regular file, else
// kvik.ErrNotRegular for path, naming what the file is.
func notRegular(path string, mode uint32) error {
	if mode&unix.S_IFMT == unix.S_IFREG {
		return nil
	}
	return &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", kvik.ErrNotRegular, posix.FileKind(posix.StatMode(mode)))}
}

func (f *valueFile) close() { unix.Close(f.fd) }

// read reads len(p) bytes of the value at off: a value that ends first
// is an error matching io.ErrUnexpectedEOF.
func (f *valueFile) read(ctx context.Context, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	var n int
	var err error
	if len(p) <= inlineReadMax {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err = posix.ReadFull(f.fd, p, off)
	} else {
		n, err = f.readPool(ctx, p, off)
	}
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &fs.PathError{Op: "read", Path: f.key, Err: fmt.Errorf("%d of %d bytes at offset %d: %w", n, len(p), off, err)}
}

// readPool reads p at off through a FileHandle of the file, split into
// tasks on kvik's pool. The handle opens the file again through the
// descriptor's /proc link, so that a write that has replaced the path
// since does not matter; where /proc is missing it opens the path, and
// a file replaced since its size was taken fails with
// kvik.ErrFileChanged rather than give the new bytes cut to that size.
func (f *valueFile) readPool(ctx context.Context, p []byte, off int64) (int, error) {
	return f.readPoolVia(ctx, p, off, procFD)
}

// procFD is the /proc link of a descriptor, a format for its number.
const procFD = "/proc/self/fd/%d"

// readPoolVia is readPool with the /proc link's format (tests name one
// that is missing).
func (f *valueFile) readPoolVia(ctx context.Context, p []byte, off int64, proc string) (int, error) {
	h, err := kvik.Open(fmt.Sprintf(proc, f.fd), "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		h, err = kvik.Open(f.path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	}
	if err != nil {
		return 0, err
	}
	defer h.Close()
	var st unix.Stat_t
	if err := unix.Fstat(h.Fd(), &st); err != nil {
		return 0, err
	}
	if st.Dev != f.dev || st.Ino != f.ino {
		return 0, fmt.Errorf("%w: replaced while it was read", kvik.ErrFileChanged)
	}
	return h.PRead(ctx, p, off).Get()
}

// inlineReadMax is the largest read of a value made on the calling
// goroutine, one pread(2) loop, rather than through kvik's thread pool:
// the array's workers already read chunks in parallel, and a hand-off to
// the pool and back per chunk left a fifth of the pool idle (a 1 GiB
// array of 1 MiB chunks read to the GPU at 0.68x a file of its bytes).
// Larger reads keep the pool's split into tasks.
const inlineReadMax = 4 << 20

// ReadRangeDevice reads size bytes of key's value at offset off into
// device memory at buf+devOff, with kvik's device path (cuFile or
// overlapped POSIX reads), and returns the value's size.
func (s *DirStore) ReadRangeDevice(ctx context.Context, key string, off int64, buf cuda.DevicePtr, size int, devOff int64) (int64, error) {
	p, err := s.path(key)
	if err != nil {
		return -1, err
	}
	f, err := kvik.Open(p, "r", 0) // refuses a FIFO, socket or directory
	if err != nil {
		return -1, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(f.Fd(), &st); err != nil {
		return -1, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if err := notRegular(p, st.Mode); err != nil { // a device node
		return -1, err
	}
	vsize := st.Size // a regular file's size: no second fstat through f.Size
	if off, err = inRange(key, off, int64(size), vsize); err != nil {
		return vsize, err
	}
	n, err := f.PReadDevice(ctx, buf, size, off, devOff).Get()
	if n == size && (err == nil || err == io.EOF) {
		return vsize, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return vsize, &fs.PathError{Op: "read", Path: key, Err: fmt.Errorf("%d of %d bytes at offset %d: %w", n, size, off, err)}
}

// Set stores value under key: written whole to a temporary file, synced,
// then renamed over the key, so a crash leaves the old value or the new
// one and never a torn value.
func (s *DirStore) Set(ctx context.Context, key string, value []byte) error {
	return s.setWith(ctx, key, kvik.Piece{Data: value})
}

// SetDevice stores size bytes of device memory at buf+devOff under key,
// atomically as Set does.
func (s *DirStore) SetDevice(ctx context.Context, key string, buf cuda.DevicePtr, size int, devOff int64) error {
	p, err := devicePiece(key, buf, size, devOff)
	if err != nil {
		return err
	}
	return s.setWith(ctx, key, p)
}

// devicePiece checks a SetDevice and returns its device memory as a
// piece for kvik.SaveFile.
func devicePiece(key string, buf cuda.DevicePtr, size int, devOff int64) (kvik.Piece, error) {
	if size < 0 {
		return kvik.Piece{}, &fs.PathError{Op: "write", Path: key, Err: fmt.Errorf("%w: size %d", kvik.ErrInvalidArgument, size)}
	}
	return kvik.Piece{Ptr: buf + cuda.DevicePtr(devOff), Size: int64(size)}, nil
}

func (s *DirStore) setWith(ctx context.Context, key string, piece kvik.Piece) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	var opts []kvik.RemoteOption
	if s.noSync {
		opts = append(opts, kvik.WithoutSync())
	}
	// The value's directory is made when a save finds it missing, not
	// looked for before every save; the retry also covers a directory
	// that a concurrent Delete pruned.
	err = kvik.SaveFile(ctx, p, []kvik.Piece{piece}, opts...)
	if errors.Is(err, fs.ErrNotExist) {
		if err := kvik.MkdirAll(filepath.Dir(p), 0o755, opts...); err != nil {
			return err
		}
		err = kvik.SaveFile(ctx, p, []kvik.Piece{piece}, opts...)
	}
	return err
}

// Delete removes key; deleting a missing key is not an error.
func (s *DirStore) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// prune removes the directories under prefix (a keyPrefix: "" or a path
// and "/") that its keys' deletion left empty, deepest first, with the
// directory prefix names but not the root: a directory whose only entry
// is the lock file of WithProcessLocks goes with it. A directory that
// holds anything else (a concurrent write's temporary file, a new key)
// stays, without an error.
func (s *DirStore) prune(ctx context.Context, prefix string) error {
	top := s.root
	if prefix != "" {
		var err error
		if top, err = s.path(strings.TrimSuffix(prefix, "/")); err != nil {
			return err
		}
	}
	var dirs []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			return nil // gone meanwhile (a concurrent Delete)
		case err != nil:
			return err
		case d.IsDir() && (p != top || prefix != ""):
			dirs = append(dirs, p)
		}
		return ctx.Err()
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- { // a directory's after everything below it
		ents, err := os.ReadDir(dirs[i])
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		if len(ents) == 1 && ents[0].Name() == lockName && ents[0].Type().IsRegular() {
			if err := os.Remove(filepath.Join(dirs[i], lockName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		} else if len(ents) > 0 {
			continue
		}
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			return err
		}
	}
	return nil
}

// List returns the keys that start with prefix, sorted. Temporary files
// of writes in progress and lock files (WithProcessLocks) are left out;
// a root that does not exist has no keys.
func (s *DirStore) List(ctx context.Context, prefix string) ([]string, error) {
	if s.normalizeKeys {
		prefix = strings.ToLower(prefix)
	}
	var keys []string
	// The walk starts at the directory of prefix's last whole segment,
	// not at the root: listing an array of a large store reads only the
	// array's directories. The separator makes a start that is a
	// symbolic link to a directory be walked, as the directory it names.
	start := s.root + string(filepath.Separator)
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		if dir, err := s.path(prefix[:i]); err == nil {
			start = dir + string(filepath.Separator)
		}
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			switch {
			case p == start && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
				return fs.SkipAll // nothing there, or a value, not a directory
			case errors.Is(err, fs.ErrNotExist):
				return nil // removed since its directory was read (a Delete)
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || kvik.IsPendingName(d.Name()) || d.Name() == lockName {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
		return nil
	})
	sort.Strings(keys)
	return keys, err
}
