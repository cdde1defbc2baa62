package zarr

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

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
	root          string
	normalizeKeys bool
	dimSep        string
}

// StoreOption configures a DirStore.
type StoreOption func(*DirStore) error

// WithNormalizeKeys makes the store lower-case every key (KvikIO's and
// zarr-python's normalize_keys), so that "Foo" and "foo" name one file.
func WithNormalizeKeys(on bool) StoreOption {
	return func(s *DirStore) error { s.normalizeKeys = on; return nil }
}

// WithDimensionSeparator sets the separator, "." or "/", between chunk
// indices of Zarr v2 arrays whose metadata names none (KvikIO's
// dimension_separator); it is also the default for v2 arrays created in
// the store. The default is ".".
func WithDimensionSeparator(sep string) StoreOption {
	return func(s *DirStore) error {
		if sep != "." && sep != "/" {
			return fmt.Errorf("%w: dimension separator %q (want \".\" or \"/\")", ErrInvalidMetadata, sep)
		}
		s.dimSep = sep
		return nil
	}
}

// NewDirStore opens a directory store at root, creating the directory if
// it does not exist.
func NewDirStore(root string, opts ...StoreOption) (*DirStore, error) {
	s := &DirStore{root: root, dimSep: "."}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return s, nil
}

// Root returns the store's directory.
func (s *DirStore) Root() string { return s.root }

// DimensionSeparator returns the store's default v2 dimension separator.
func (s *DirStore) DimensionSeparator() string { return s.dimSep }

// path maps a key to its file, rejecting keys that would leave the root.
func (s *DirStore) path(key string) (string, error) {
	if s.normalizeKeys {
		key = strings.ToLower(key)
	}
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsRune(key, 0) || strings.Contains(key, "\\") {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Get returns the whole value of key.
func (s *DirStore) Get(key string) ([]byte, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Size returns the length of the value of key.
func (s *DirStore) Size(key string) (int64, error) {
	p, err := s.path(key)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Contains reports whether key exists.
func (s *DirStore) Contains(key string) bool {
	_, err := s.Size(key)
	return err == nil
}

// open opens key's file for reading with kvik.
func (s *DirStore) open(key string) (*kvik.FileHandle, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	return kvik.Open(p, "r", 0)
}

// ReadRange reads len(p) bytes of key's value at offset off into host
// memory. A range past the end of the value is an error matching
// io.ErrUnexpectedEOF: partial values are never returned silently.
func (s *DirStore) ReadRange(key string, off int64, p []byte) error {
	f, err := s.open(key)
	if err != nil {
		return err
	}
	defer f.Close()
	return readFull(f, key, p, off)
}

func readFull(f *kvik.FileHandle, key string, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &fs.PathError{Op: "read", Path: key, Err: fmt.Errorf("%d of %d bytes at offset %d: %w", n, len(p), off, err)}
}

// GetRange returns n bytes of key's value from offset off; n < 0 reads to
// the end. A negative off counts from the end (a suffix).
func (s *DirStore) GetRange(key string, off, n int64) ([]byte, error) {
	f, err := s.open(key)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if off < 0 {
		off += size
	}
	if n < 0 {
		n = size - off
	}
	if off < 0 || n < 0 || off > size || n > size-off {
		return nil, &fs.PathError{Op: "read", Path: key, Err: fmt.Errorf("range [%d, +%d) of a %d-byte value: %w", off, n, size, io.ErrUnexpectedEOF)}
	}
	b := make([]byte, n)
	if err := readFull(f, key, b, off); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadRangeDevice reads size bytes of key's value at offset off into
// device memory at buf+devOff, with kvik's device path (cuFile or
// overlapped POSIX reads).
func (s *DirStore) ReadRangeDevice(key string, off int64, buf cuda.DevicePtr, size int, devOff int64) error {
	f, err := s.open(key)
	if err != nil {
		return err
	}
	defer f.Close()
	return readDeviceFull(f, key, off, buf, size, devOff)
}

func readDeviceFull(f *kvik.FileHandle, key string, off int64, buf cuda.DevicePtr, size int, devOff int64) error {
	n, err := f.ReadDevice(buf, size, off, devOff)
	if n == size && (err == nil || err == io.EOF) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &fs.PathError{Op: "read", Path: key, Err: fmt.Errorf("%d of %d bytes at offset %d: %w", n, size, off, err)}
}

// Set stores value under key: written whole to a temporary file, synced,
// then renamed over the key, so a crash leaves the old value or the new
// one and never a torn value.
func (s *DirStore) Set(key string, value []byte) error {
	return s.setWith(key, func(f *kvik.FileHandle) error {
		if len(value) == 0 {
			return nil
		}
		n, err := f.WriteAt(value, 0)
		if err == nil && n != len(value) {
			err = io.ErrShortWrite
		}
		return err
	})
}

// SetDevice stores size bytes of device memory at buf+devOff under key,
// atomically as Set does.
func (s *DirStore) SetDevice(key string, buf cuda.DevicePtr, size int, devOff int64) error {
	return s.setWith(key, func(f *kvik.FileHandle) error {
		n, err := f.WriteDevice(buf, size, 0, devOff)
		if err == nil && n != size {
			err = io.ErrShortWrite
		}
		return err
	})
}

func (s *DirStore) setWith(key string, write func(*kvik.FileHandle) error) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := kvik.CreatePending(p, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f.FileHandle); err != nil {
		return &fs.PathError{Op: "write", Path: key, Err: err}
	}
	return f.Commit()
}

// Delete removes key; deleting a missing key is not an error.
func (s *DirStore) Delete(key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List returns the keys that start with prefix, sorted. Temporary files
// of writes in progress are left out.
func (s *DirStore) List(prefix string) ([]string, error) {
	if s.normalizeKeys {
		prefix = strings.ToLower(prefix)
	}
	var keys []string
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || kvik.IsPendingName(d.Name()) {
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
