package cufile

import (
	"runtime"
	"syscall"
	"unsafe"

	"github.com/kvikgo/kvik/internal/dl"
)

// LibraryEnv names the environment variable that, when set, holds the exact
// path of the cuFile library to load instead of searching for
// libcufile.so.0 and libcufile.so.
const LibraryEnv = "KVIK_LIBCUFILE_PATH"

// ErrLibraryNotFound is matched (errors.Is) by every error that reports
// libcufile, or one of its symbols, missing. It is dl.ErrNotFound.
var ErrLibraryNotFound = dl.ErrNotFound

var lib = &dl.Library{Sonames: []string{"libcufile.so.0", "libcufile.so"}, EnvVar: LibraryEnv, What: "cuFile library"}

// Load opens the cuFile library if it is not open yet. Every function in
// this package loads it on demand; Load lets callers test availability up
// front. The error matches ErrLibraryNotFound when the library is missing
// and lists the paths tried. Load does not open the cuFile driver (see
// DriverOpen).
func Load() error {
	_, err := lib.Load()
	return err
}

// LibraryPath returns the path libcufile was loaded from, or "" when it is
// not loaded (Load failed).
func LibraryPath() string { return lib.Path() }

func fn(name string, alt ...string) *dl.Func {
	return &dl.Func{Lib: lib, Name: name, Alt: alt}
}

// The C functions, resolved on first use.
var (
	fnDriverOpen                = fn("cuFileDriverOpen")
	fnDriverClose               = fn("cuFileDriverClose_v2", "cuFileDriverClose")
	fnUseCount                  = fn("cuFileUseCount")
	fnDriverGetProperties       = fn("cuFileDriverGetProperties")
	fnDriverSetPollMode         = fn("cuFileDriverSetPollMode")
	fnDriverSetMaxDirectIOSize  = fn("cuFileDriverSetMaxDirectIOSize")
	fnDriverSetMaxCacheSize     = fn("cuFileDriverSetMaxCacheSize")
	fnDriverSetMaxPinnedMemSize = fn("cuFileDriverSetMaxPinnedMemSize")
	fnGetVersion                = fn("cuFileGetVersion")

	fnHandleRegister   = fn("cuFileHandleRegister")
	fnHandleDeregister = fn("cuFileHandleDeregister")
	fnBufRegister      = fn("cuFileBufRegister")
	fnBufDeregister    = fn("cuFileBufDeregister")
	fnRead             = fn("cuFileRead")
	fnWrite            = fn("cuFileWrite")

	fnStreamRegister   = fn("cuFileStreamRegister")
	fnStreamDeregister = fn("cuFileStreamDeregister")
	fnReadAsync        = fn("cuFileReadAsync")
	fnWriteAsync       = fn("cuFileWriteAsync")

	fnBatchIOSetUp     = fn("cuFileBatchIOSetUp")
	fnBatchIOSubmit    = fn("cuFileBatchIOSubmit")
	fnBatchIOGetStatus = fn("cuFileBatchIOGetStatus")
	fnBatchIOCancel    = fn("cuFileBatchIOCancel")
	fnBatchIODestroy   = fn("cuFileBatchIODestroy")

	fnGetParameterSizeT              = fn("cuFileGetParameterSizeT")
	fnSetParameterSizeT              = fn("cuFileSetParameterSizeT")
	fnGetParameterBool               = fn("cuFileGetParameterBool")
	fnSetParameterBool               = fn("cuFileSetParameterBool")
	fnGetParameterString             = fn("cuFileGetParameterString")
	fnSetParameterString             = fn("cuFileSetParameterString")
	fnGetParameterMinMaxValue        = fn("cuFileGetParameterMinMaxValue")
	fnSetParameterPosixPoolSlabArray = fn("cuFileSetParameterPosixPoolSlabArray")
	fnGetParameterPosixPoolSlabArray = fn("cuFileGetParameterPosixPoolSlabArray")
	fnGetBARSizeInKB                 = fn("cuFileGetBARSizeInKB")
	fnSetStatsLevel                  = fn("cuFileSetStatsLevel")
	fnGetStatsLevel                  = fn("cuFileGetStatsLevel")
	fnStatsStart                     = fn("cuFileStatsStart")
	fnStatsStop                      = fn("cuFileStatsStop")
	fnStatsReset                     = fn("cuFileStatsReset")
	fnGetStatsL1                     = fn("cuFileGetStatsL1")
)

// requiredSymbols are the symbols KvikIO needs from libcufile; each inner
// list holds alternatives, any one of which will do.
var requiredSymbols = [][]string{
	{"cuFileDriverOpen"},
	{"cuFileDriverClose_v2", "cuFileDriverClose"},
	{"cuFileDriverGetProperties"},
	{"cuFileDriverSetPollMode"},
	{"cuFileDriverSetMaxCacheSize"},
	{"cuFileDriverSetMaxPinnedMemSize"},
	{"cuFileHandleRegister"},
	{"cuFileHandleDeregister"},
	{"cuFileRead"},
	{"cuFileWrite"},
	{"cuFileBufRegister"},
	{"cuFileBufDeregister"},
}

// MissingSymbols returns the required symbols (those KvikIO needs:
// cuFileDriverOpen, cuFileDriverClose_v2 or cuFileDriverClose,
// cuFileDriverGetProperties, cuFileDriverSetPollMode,
// cuFileDriverSetMaxCacheSize, cuFileDriverSetMaxPinnedMemSize,
// cuFileHandleRegister, cuFileHandleDeregister, cuFileRead, cuFileWrite,
// cuFileBufRegister, cuFileBufDeregister) that the loaded library lacks. It
// returns nil when all are present, and also when the library cannot be
// loaded: Load reports that.
func MissingSymbols() []string {
	if _, err := lib.Load(); err != nil {
		return nil
	}
	var missing []string
	for _, alts := range requiredSymbols {
		found := false
		for _, name := range alts {
			if _, err := lib.Sym(name); err == nil {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, alts[0])
		}
	}
	return missing
}

// callStatus calls a function returning CUfileError_t and decodes it.
// Pointer arguments must be converted to uintptr in the call expression.
//
//go:uintptrescapes
func callStatus(f *dl.Func, args ...uintptr) error {
	r, err := f.Call(args...)
	if err != nil {
		return err
	}
	return decodeStatus(r)
}

// callVoid calls a function returning void.
//
//go:uintptrescapes
func callVoid(f *dl.Func, args ...uintptr) error {
	_, err := f.Call(args...)
	return err
}

// libc gives access to errno, which purego does not capture on Linux.
var (
	libc          = &dl.Library{Sonames: []string{"libc.so.6"}}
	errnoLocation = &dl.Func{Lib: libc, Name: "__errno_location"}
)

// callSSize calls a function returning ssize_t (cuFileRead, cuFileWrite)
// with no pointer arguments into the Go heap, and reads errno on the same
// OS thread when the result is -1.
func callSSize(f *dl.Func, args ...uintptr) (int64, syscall.Errno, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := f.Call(args...)
	if err != nil {
		return 0, 0, err
	}
	ret := int64(r)
	var errno syscall.Errno
	if ret == -1 {
		if loc, err := errnoLocation.Call(); err == nil && loc != 0 {
			errno = syscall.Errno(**(**int32)(unsafe.Pointer(&loc)))
		}
	}
	return ret, errno, nil
}
