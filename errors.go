package kvik

import (
	"errors"
	"io/fs"

	"github.com/kvikgo/kvik/internal/devmem"
)

// Errors returned (wrapped) by this package; test with errors.Is.
var (
	// ErrInvalidArgument reports a bad argument: a negative offset or size,
	// a size larger than its buffer, an offset+size overflow, a bad flag.
	ErrInvalidArgument = devmem.ErrInvalidArgument
	// ErrClosed reports use of a closed FileHandle. It is fs.ErrClosed, so
	// errors.Is(err, os.ErrClosed) holds too.
	ErrClosed = fs.ErrClosed
	// ErrNotReadable reports a read from a handle opened write-only.
	ErrNotReadable = errors.New("kvik: file not opened for reading")
	// ErrNotWritable reports a write to a handle opened read-only.
	ErrNotWritable = errors.New("kvik: file not opened for writing")
	// ErrBadEnv reports an environment variable with a value that cannot be
	// used; the error names the variable and the value.
	ErrBadEnv = errors.New("kvik: bad environment variable")
	// ErrCuFileRequired reports an operation that needs cuFile (CompatOff,
	// batch I/O) where cuFile cannot be used for the file or the process.
	ErrCuFileRequired = errors.New("kvik: cuFile required but not usable")
	// ErrFileChanged reports a file whose size or modification time
	// changed while kvik read all of it: while a file format's loader
	// read it (WatchFile), or UploadFileS3 sent it in parts (the upload
	// is aborted). What was read may mix its old and new bytes.
	ErrFileChanged = errors.New("kvik: file changed while it was read")
	// ErrNotRegular reports a save (CreatePending, SaveFile, the formats'
	// Save) whose destination exists and is not a regular file, nor a
	// symbolic link to one: a directory, a device node, a FIFO or a
	// socket, which a save would replace with a regular file; a read of
	// a stored value (a Zarr DirStore's) whose file is not a regular
	// file, which could block or never end; and the open of a directory,
	// FIFO or socket by Open, OpenFile, OpenMmap (which takes only
	// regular files and block devices) and the page-cache helpers
	// (PageCacheInfo, DropFilePageCache), which a FIFO's open would have
	// blocked. The error names the path and what it is.
	ErrNotRegular = errors.New("kvik: not a regular file")
)

// ErrNotDeviceMemory reports host, freed or unknown memory passed where
// device memory is required.
var ErrNotDeviceMemory = devmem.ErrNotDeviceMemory
